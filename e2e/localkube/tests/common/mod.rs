//! Shared by the localkube integration tests: a started control plane and kube-rs clients.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
pub use test_support::{KubeClients, KubePair, LocalKube};

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

/// A kube-rs client that authenticates with a bearer token instead of the admin certificate.
pub async fn token_client(lk: &LocalKube, token: &str) -> kube::Client {
    crypto();
    let kubeconfig = Kubeconfig::read_from(lk.kubeconfig()).expect("kubeconfig parses");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("kube-rs config");
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    kube::Client::try_from(config).expect("kube-rs client")
}

pub fn clients(pair: KubePair) -> KubeClients {
    KubeClients::find(pair).expect("kubectl and helm are installed (make deps)")
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project's CRDs as plain YAML (the chart wraps them in a helm `if`).
pub fn project_crds() -> String {
    let dir = workspace().join("charts/etcd-operator/templates/crds");
    let mut out = String::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let body: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("{{"))
            .collect();
        out.push_str("---\n");
        out.push_str(&body.join("\n"));
        out.push('\n');
    }
    out
}

/// The message of a failed kubectl/helm run (the harness error includes stderr).
pub fn failure(result: Result<String, test_support::HarnessError>) -> String {
    match result {
        Ok(out) => panic!("expected the command to fail, it printed: {out}"),
        Err(e) => e.to_string(),
    }
}
