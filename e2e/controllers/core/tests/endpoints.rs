#![allow(clippy::unwrap_used, clippy::expect_used)]
//! EndpointSlices and Endpoints follow pod IPs, readiness and `publishNotReadyAddresses`.

mod common;

use std::time::Duration;

use common::{api_server, eventually, obj};
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

async fn set_pod_status(pods: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    let status = json!({ "status": {
        "phase": "Running", "podIP": ip, "podIPs": [{ "ip": ip }],
        "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

async fn slices_of(api: &Api<EndpointSlice>, svc: &str) -> Vec<EndpointSlice> {
    api.list(&ListParams::default().labels(&format!("kubernetes.io/service-name={svc}")))
        .await
        .unwrap()
        .items
}

/// Watch objects from now on until `done` holds for one; count the writes, failing on a write
/// that left the object's content (everything but metadata bookkeeping) unchanged.
async fn writes_until<K>(
    api: Api<K>,
    config: kube::runtime::watcher::Config,
    listed: tokio::sync::oneshot::Sender<()>,
    done: impl Fn(&K) -> bool,
) -> usize
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + 'static,
{
    use futures_util::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let content = |k: &K| {
        let mut v = serde_json::to_value(k).unwrap();
        let meta = v["metadata"].as_object_mut().unwrap();
        for f in ["resourceVersion", "managedFields", "generation"] {
            meta.remove(f);
        }
        v
    };
    let mut last: std::collections::HashMap<String, serde_json::Value> = Default::default();
    let mut writes = 0;
    let mut listed = Some(listed);
    let mut stream = watcher::watcher(api, config).boxed();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let event = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("no final write")
            .unwrap()
            .unwrap();
        match event {
            Event::InitApply(k) => {
                last.insert(kube::ResourceExt::name_any(&k), content(&k));
            }
            Event::Apply(k) => {
                let c = content(&k);
                let previous = last.insert(kube::ResourceExt::name_any(&k), c.clone());
                assert_ne!(previous.as_ref(), Some(&c), "a write without a change");
                writes += 1;
                if done(&k) {
                    return writes;
                }
            }
            Event::InitDone => {
                if let Some(tx) = listed.take() {
                    let _ = tx.send(());
                }
            }
            _ => {}
        }
    }
}

/// (ip, ready, serving, terminating, hostname) of every endpoint of the Service's slices.
async fn endpoint_summary(
    api: &Api<EndpointSlice>,
    svc: &str,
) -> Vec<(String, bool, bool, bool, Option<String>)> {
    let mut out: Vec<_> = slices_of(api, svc)
        .await
        .iter()
        .flat_map(|s| s.endpoints.clone())
        .map(|e| {
            let c = e.conditions.unwrap_or_default();
            (
                e.addresses[0].clone(),
                c.ready == Some(true),
                c.serving == Some(true),
                c.terminating == Some(true),
                e.hostname,
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_and_endpoints_follow_pods() {
    let (_lk, client) = api_server().await;
    tokio::spawn(localkube_core_controllers::run_endpoints(client.clone()));
    let ns = "default";
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), ns);

    for (name, publish) in [("web", false), ("peers", true)] {
        let svc: Service = obj(json!({
            "metadata": { "name": name, "labels": { "team": "a" } },
            "spec": {
                "selector": { "app": "etcd" },
                "clusterIP": if publish { Some("None") } else { None },
                "publishNotReadyAddresses": publish,
                "ports": [{ "name": "client", "port": 2379, "targetPort": "client" }, { "name": "peer", "port": 2380, "targetPort": 2380 }],
            },
        }));
        services.create(&PostParams::default(), &svc).await.unwrap();
    }
    for (name, ip) in [("etcd-0", "10.244.0.10"), ("etcd-1", "10.244.0.11")] {
        let pod: Pod = obj(json!({
            "metadata": { "name": name, "labels": { "app": "etcd" } },
            "spec": {
                "hostname": name, "subdomain": "peers", "nodeName": "localkube",
                "containers": [{ "name": "etcd", "image": "etcd", "ports": [{ "name": "client", "containerPort": 12379 }] }],
            },
        }));
        pods.create(&PostParams::default(), &pod).await.unwrap();
        set_pod_status(&pods, name, ip, name == "etcd-0").await;
    }

    let want_web = vec![
        ("10.244.0.10".to_string(), true, true, false, None),
        ("10.244.0.11".to_string(), false, false, false, None),
    ];
    eventually("web slice content", WAIT, || async {
        let got = endpoint_summary(&slices, "web").await;
        if got == want_web {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
    let want_peers = vec![
        (
            "10.244.0.10".to_string(),
            true,
            true,
            false,
            Some("etcd-0".to_string()),
        ),
        (
            "10.244.0.11".to_string(),
            true,
            true,
            false,
            Some("etcd-1".to_string()),
        ),
    ];
    eventually("peers slice content", WAIT, || async {
        let got = endpoint_summary(&slices, "peers").await;
        if got == want_peers {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;

    let web = slices_of(&slices, "web").await;
    assert_eq!(web.len(), 1);
    let s = &web[0];
    let name = s.metadata.name.clone().unwrap();
    assert!(
        name.starts_with("web-") && name.len() == "web-".len() + 5,
        "{name}"
    );
    assert_eq!(s.address_type, "IPv4");
    let labels = s.metadata.labels.clone().unwrap();
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(labels["team"], "a");
    let owner = &s.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Service", "web", Some(true))
    );
    let ports: Vec<(Option<String>, Option<i32>, Option<String>)> = s
        .ports
        .clone()
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.port, p.protocol))
        .collect();
    assert_eq!(
        ports,
        vec![
            (Some("client".into()), Some(12379), Some("TCP".into())),
            (Some("peer".into()), Some(2380), Some("TCP".into()))
        ]
    );
    let e = s
        .endpoints
        .iter()
        .find(|e| e.addresses[0] == "10.244.0.10")
        .unwrap();
    assert_eq!(e.node_name.as_deref(), Some("localkube"));
    assert_eq!(
        e.target_ref.as_ref().unwrap().name.as_deref(),
        Some("etcd-0")
    );

    // core/v1 Endpoints: ready and not-ready addresses
    eventually("web Endpoints", WAIT, || async {
        let ep = endpoints
            .get_opt("web")
            .await
            .unwrap()
            .ok_or("no Endpoints")?;
        let subsets = ep.subsets.clone().unwrap_or_default();
        let ips = |v: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>| {
            v.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>()
        };
        let got: Vec<_> = subsets
            .iter()
            .map(|s| (ips(&s.addresses), ips(&s.not_ready_addresses)))
            .collect();
        if got
            == vec![(
                vec!["10.244.0.10".to_string()],
                vec!["10.244.0.11".to_string()],
            )]
        {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;

    // readiness flips: etcd-1 becomes ready; no other slice writes afterwards
    set_pod_status(&pods, "etcd-1", "10.244.0.11", true).await;
    eventually("etcd-1 ready in web", WAIT, || async {
        let got = endpoint_summary(&slices, "web").await;
        if got.iter().all(|e| e.1) {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
    // no write churn: watch the slices and Endpoints while an unrelated pod label changes and
    // then etcd-1 leaves the selector; every write seen must change the content
    let (slices_listed, slices_ready) = tokio::sync::oneshot::channel();
    let (endpoints_listed, endpoints_ready) = tokio::sync::oneshot::channel();
    let slice_writes = tokio::spawn(writes_until(
        slices.clone(),
        kube::runtime::watcher::Config::default().labels("kubernetes.io/service-name=web"),
        slices_listed,
        |s: &EndpointSlice| s.endpoints.len() == 1,
    ));
    let endpoints_writes = tokio::spawn(writes_until(
        endpoints.clone(),
        kube::runtime::watcher::Config::default().fields("metadata.name=web"),
        endpoints_listed,
        |e: &Endpoints| {
            e.metadata.name.as_deref() == Some("web")
                && e.subsets
                    .iter()
                    .flatten()
                    .flat_map(|s| s.addresses.iter().flatten())
                    .count()
                    == 1
        },
    ));
    slices_ready.await.unwrap();
    endpoints_ready.await.unwrap();
    pods.patch(
        "etcd-0",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "x": "y" } } })),
    )
    .await
    .unwrap();
    pods.patch(
        "etcd-1",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "app": "other" } } })),
    )
    .await
    .unwrap();
    let (slice_writes, endpoints_writes) =
        (slice_writes.await.unwrap(), endpoints_writes.await.unwrap());
    assert_eq!(slice_writes, 1, "slice writes");
    assert_eq!(endpoints_writes, 1, "Endpoints writes");
    assert_eq!(endpoint_summary(&slices, "web").await.len(), 1);

    // the Service goes: its Endpoints go too
    services.delete("web", &Default::default()).await.unwrap();
    eventually("web Endpoints deleted", WAIT, || async {
        match endpoints.get_opt("web").await.unwrap() {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
}
