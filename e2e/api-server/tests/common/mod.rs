//! The harness for tests against a real API server: a private localkube (API only, no
//! controllers) and a kube-rs client for it.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

use e2e_harness::LocalKube;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};

pub async fn api_server() -> (LocalKube, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let lk = LocalKube::start_api_only(&e2e_harness::localkube_binary().unwrap())
        .await
        .unwrap();
    let client = kube::Client::try_from(config_of(&lk).await).unwrap();
    (lk, client)
}

/// A client configuration for `lk` (to build another client with its own connections).
pub async fn config_of(lk: &LocalKube) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap()
}

pub async fn create_namespace(client: &kube::Client, name: &str) {
    let api: kube::Api<Namespace> = kube::Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
    }))
    .unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

/// Poll `check` until it returns `Ok`, or fail after `timeout` with the last observation.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if start.elapsed() > timeout => {
                panic!("{what}: not reached within {timeout:?}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Installs the operators' CRDs and waits until EtcdClusters are served in `namespace`.
pub async fn install_crds(client: &kube::Client, namespace: &str) {
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    for crd in etcd_api::crd::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    // Served once a list of the kind works.
    let clusters: kube::Api<etcd_api::EtcdCluster> =
        kube::Api::namespaced(client.clone(), namespace);
    eventually("EtcdCluster served", Duration::from_secs(30), || async {
        clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())
    })
    .await;
}
