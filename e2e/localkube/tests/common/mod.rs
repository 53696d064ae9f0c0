//! Shared by the localkube integration tests: a started localkube and kube-rs clients.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

pub use e2e_harness::LocalKube;
use kube::config::{KubeConfigOptions, Kubeconfig};
pub use test_support::{KubeClients, KubePair};

pub async fn start() -> LocalKube {
    LocalKube::start_with(Path::new(env!("CARGO_BIN_EXE_localkube")))
        .await
        .expect("localkube starts")
}

/// kube-rs over rustls needs one process-wide crypto provider (the graph has two).
fn crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub async fn client(lk: &LocalKube) -> kube::Client {
    crypto();
    let kubeconfig = Kubeconfig::read_from(lk.kubeconfig()).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kube-rs config");
    kube::Client::try_from(config).expect("kube-rs client")
}

pub fn clients(pair: KubePair) -> KubeClients {
    KubeClients::find(pair).expect("kubectl and helm are installed (make deps)")
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The message of a failed kubectl/helm run (the harness error includes stderr).
pub fn failure(result: Result<String, test_support::HarnessError>) -> String {
    match result {
        Ok(out) => panic!("expected the command to fail, it printed: {out}"),
        Err(e) => e.to_string(),
    }
}

/// A control plane with everything: the upstream control plane, node agent, DNS and proxy.
pub async fn start_full() -> LocalKube {
    start().await
}

/// Poll `check` until it returns `Some`, or panic after `timeout` naming what was awaited and
/// the last value seen.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: std::time::Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if std::time::Instant::now() > deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
        }
    }
}

/// `kubectl apply -f -` of `yaml` in namespace `ns`.
pub fn apply(lk: &LocalKube, kc: &KubeClients, ns: &str, yaml: &str) -> String {
    lk.kubectl_stdin(kc, &["apply", "-n", ns], yaml)
        .unwrap_or_else(|e| panic!("kubectl apply failed: {e}"))
}

/// The pod's condition `type` status ("True"/"False"), if present.
pub fn pod_condition(pod: &k8s_openapi::api::core::v1::Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

/// Wait until the namespace's `default` ServiceAccount exists (pods need it, as on Kubernetes).
pub async fn wait_for_default_sa(client: &kube::Client, ns: &str) {
    let sas: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(client.clone(), ns);
    wait_until(
        &format!("ServiceAccount {ns}/default"),
        std::time::Duration::from_secs(30),
        || {
            let sas = sas.clone();
            async move {
                match sas.get_opt("default").await {
                    Ok(Some(_)) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await
}

/// Wait for a pod to be Ready and return it.
pub async fn wait_pod_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    timeout: std::time::Duration,
) -> k8s_openapi::api::core::v1::Pod {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), ns);
    wait_until(&format!("pod {ns}/{name} Ready"), timeout, || {
        let pods = pods.clone();
        async move {
            match pods.get_opt(name).await {
                Ok(Some(p)) if pod_condition(&p, "Ready").as_deref() == Some("True") => Ok(p),
                Ok(Some(p)) => Err(format!("{:?}", p.status)),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await
}
