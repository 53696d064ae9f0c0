#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Provisioning, binding, reclaiming and the protection finalizers of PersistentVolumes.

mod common;

use std::time::Duration;

use common::{api_server, eventually, obj};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

fn claim(name: &str, class: Option<&str>, finalizers: &[&str]) -> PersistentVolumeClaim {
    obj(json!({
        "metadata": { "name": name, "finalizers": finalizers },
        "spec": {
            "storageClassName": class,
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": "1Gi" } },
        },
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_bind_to_provisioned_volumes_and_are_reclaimed() {
    let (_lk, client) = api_server().await;
    let dir = tempfile::tempdir().unwrap();
    tokio::spawn(localkube_core_controllers::run_volumes(
        client.clone(),
        "localkube".into(),
        dir.path().to_path_buf(),
    ));
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let retain: StorageClass = obj(json!({
        "metadata": { "name": "keep" },
        "provisioner": "localkube.io/host-path",
        "reclaimPolicy": "Retain",
    }));
    classes
        .create(&PostParams::default(), &retain)
        .await
        .unwrap();

    // no class: the default class, a new volume with a directory, both sides bound
    let data = claims
        .create(&PostParams::default(), &claim("data", None, &[]))
        .await
        .unwrap();
    let uid = data.metadata.uid.clone().unwrap();
    let pv_name = format!("pvc-{uid}");
    let pvc = eventually("claim bound", WAIT, || async {
        let c = claims.get("data").await.unwrap();
        if c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") {
            Ok(c)
        } else {
            Err(format!("{:?}", c.status))
        }
    })
    .await;
    let spec = pvc.spec.clone().unwrap();
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(spec.volume_name.as_deref(), Some(pv_name.as_str()));
    let ann = pvc.metadata.annotations.clone().unwrap();
    assert_eq!(ann["pv.kubernetes.io/bind-completed"], "yes");
    assert_eq!(ann["pv.kubernetes.io/bound-by-controller"], "yes");
    assert_eq!(
        ann["volume.kubernetes.io/storage-provisioner"],
        "localkube.io/host-path"
    );
    let status = pvc.status.clone().unwrap();
    assert_eq!(status.capacity.unwrap()["storage"].0, "1Gi");
    assert_eq!(status.access_modes, Some(vec!["ReadWriteOnce".to_string()]));

    let pv = volumes.get(&pv_name).await.unwrap();
    assert_eq!(pv.status.unwrap().phase.as_deref(), Some("Bound"));
    let pv_spec = pv.spec.unwrap();
    let path = dir.path().join(&pv_name);
    assert_eq!(pv_spec.host_path.unwrap().path, path.to_string_lossy());
    assert!(path.is_dir());
    assert_eq!(pv_spec.capacity.unwrap()["storage"].0, "1Gi");
    assert_eq!(
        pv_spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    let claim_ref = pv_spec.claim_ref.unwrap();
    assert_eq!(
        (claim_ref.name.as_deref(), claim_ref.uid.as_deref()),
        (Some("data"), Some(uid.as_str()))
    );
    assert!(claim_ref.resource_version.is_some());
    assert_eq!(
        pv.metadata.annotations.unwrap()["pv.kubernetes.io/provisioned-by"],
        "localkube.io/host-path"
    );

    // a missing class: Pending with a Warning event
    claims
        .create(&PostParams::default(), &claim("lost", Some("x"), &[]))
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let ev = eventually("ProvisioningFailed event", WAIT, || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("ProvisioningFailed")
                    && e.involved_object.name.as_deref() == Some("lost")
            })
            .ok_or_else(|| "no event".to_string())
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert_eq!(
        ev.message.as_deref(),
        Some("storageclass.storage.k8s.io \"x\" not found")
    );
    let lost = claims.get("lost").await.unwrap();
    assert_ne!(lost.status.and_then(|s| s.phase).as_deref(), Some("Bound"));

    // pvc-protection: a claim in use by a pod stays until the pod is gone
    let kept = claims
        .create(
            &PostParams::default(),
            &claim("kept", Some("keep"), &["kubernetes.io/pvc-protection"]),
        )
        .await
        .unwrap();
    let kept_pv = format!("pvc-{}", kept.metadata.uid.unwrap());
    let pod: Pod = obj(json!({
        "metadata": { "name": "user" },
        "spec": {
            "containers": [{ "name": "c", "image": "busybox" }],
            "volumes": [{ "name": "v", "persistentVolumeClaim": { "claimName": "kept" } }],
        },
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually("kept bound", WAIT, || async {
        let pv = volumes
            .get_opt(&kept_pv)
            .await
            .unwrap()
            .ok_or("no volume")?;
        if pv.status.and_then(|s| s.phase).as_deref() == Some("Bound") {
            Ok(())
        } else {
            Err("not bound".to_string())
        }
    })
    .await;
    claims.delete("kept", &Default::default()).await.unwrap();
    // the controller sees the deletion (it sets nothing, so wait for the watch to deliver it
    // through a no-op) and must keep the finalizer while the pod exists
    tokio::time::sleep(Duration::from_secs(1)).await;
    let still = claims.get("kept").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    assert_eq!(
        still.metadata.finalizers,
        Some(vec!["kubernetes.io/pvc-protection".to_string()])
    );
    pods.delete("user", &Default::default()).await.unwrap();
    eventually("kept claim gone", WAIT, || async {
        match claims.get_opt("kept").await.unwrap() {
            None => Ok(()),
            Some(c) => Err(format!("{:?}", c.metadata.finalizers)),
        }
    })
    .await;
    // Retain: the volume is Released, its directory kept
    eventually("kept volume Released", WAIT, || async {
        let pv = volumes.get(&kept_pv).await.unwrap();
        if pv.status.and_then(|s| s.phase).as_deref() == Some("Released") {
            Ok(())
        } else {
            Err("not released".to_string())
        }
    })
    .await;
    assert!(dir.path().join(&kept_pv).is_dir());

    // Delete: the claim goes, its directory and volume go
    claims.delete("data", &Default::default()).await.unwrap();
    eventually("volume reclaimed", WAIT, || async {
        match volumes.get_opt(&pv_name).await.unwrap() {
            None => Ok(()),
            Some(pv) => Err(format!("{:?}", pv.status)),
        }
    })
    .await;
    assert!(!path.exists());
}
