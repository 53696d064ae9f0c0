//! The test harness: a private API server (no controllers) and a kube-rs client for it.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

use test_support::LocalKube;

pub async fn api_server() -> (LocalKube, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let lk = LocalKube::start_api_only(
        // The workspace's localkube (built by `cargo nextest run --workspace`), or $LOCALKUBE_BIN.
        &test_support::localkube_binary().expect("the localkube binary"),
    )
    .await
    .unwrap();
    let kc = kube::config::Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    (lk, client)
}

/// Poll `check` until it returns `Some`, or fail after `timeout` with the last observation.
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

pub fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}
