#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `run` as `localkube up` starts it: the controllers cooperate (a Service's slices go with it
//! through the garbage collector; a new namespace gets its defaults; a claim binds).

mod common;

use std::time::Duration;

use common::{api_server, eventually, obj};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, PostParams};
use localkube_core_controllers::CoreOptions;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_controllers_together() {
    let (_lk, client) = api_server().await;
    let dir = tempfile::tempdir().unwrap();
    tokio::spawn(localkube_core_controllers::run(
        client.clone(),
        CoreOptions {
            node_name: "localkube".into(),
            volumes_dir: dir.path().join("volumes"),
            root_ca_pem: "PEM".into(),
        },
    ));

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &obj(json!({ "metadata": { "name": "team" } })),
        )
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    eventually("defaults in team", WAIT, || async {
        let sa = accounts.get_opt("default").await.unwrap();
        let cm = maps.get_opt("kube-root-ca.crt").await.unwrap();
        if sa.is_some() && cm.is_some() {
            Ok(())
        } else {
            Err(format!("sa {} cm {}", sa.is_some(), cm.is_some()))
        }
    })
    .await;

    let services: Api<Service> = Api::namespaced(client.clone(), "team");
    services
        .create(&PostParams::default(), &obj(json!({ "metadata": { "name": "api" }, "spec": { "selector": { "app": "api" }, "ports": [{ "port": 80 }] } })))
        .await
        .unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "team");
    let by_service = ListParams::default().labels("kubernetes.io/service-name=api");
    eventually("placeholder slice", WAIT, || async {
        let n = slices.list(&by_service).await.unwrap().items.len();
        if n == 1 {
            Ok(())
        } else {
            Err(format!("{n} slices"))
        }
    })
    .await;
    services.delete("api", &Default::default()).await.unwrap();
    eventually("slices collected with their Service", WAIT, || async {
        let n = slices.list(&by_service).await.unwrap().items.len();
        if n == 0 {
            Ok(())
        } else {
            Err(format!("{n} slices"))
        }
    })
    .await;

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "team");
    claims
        .create(&PostParams::default(), &obj(json!({
            "metadata": { "name": "data" },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Mi" } } },
        })))
        .await
        .unwrap();
    let bound = eventually("claim bound", WAIT, || async {
        let c = claims.get("data").await.unwrap();
        let phase = c.status.as_ref().and_then(|s| s.phase.clone());
        if phase.as_deref() == Some("Bound") {
            Ok(c)
        } else {
            Err(format!("{phase:?}"))
        }
    })
    .await;
    let volume = bound.spec.unwrap().volume_name.unwrap();
    assert!(dir.path().join("volumes").join(volume).is_dir());
}
