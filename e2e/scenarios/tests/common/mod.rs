//! Shared by the scenarios: a local control plane with the chart installed, waits on EtcdCluster
//! status, and a background writer that records every acknowledged write.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_api::EtcdCluster;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
pub use test_support::{KubeClients, KubePair, LocalKube};

/// Namespace the chart is installed in.
pub const OPERATOR_NAMESPACE: &str = "etcd-operator";
/// Namespace the scenarios' etcd clusters live in.
pub const NS: &str = "db";

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The operator binaries the chart runs; localkube maps the chart's image to the workspace's
/// build of them, next to the localkube binary.
const OPERATOR_BINARIES: &[&str] = &["etcd-cluster-operator", "etcd-backup-operator"];

fn check_binaries(localkube: &Path) {
    let dir = localkube.parent().unwrap();
    for bin in OPERATOR_BINARIES {
        assert!(
            dir.join(bin).exists(),
            "{} is missing: the scenarios run the workspace's operator binaries; build them with \
             `cargo build --workspace` (cargo nextest run --workspace does)",
            dir.join(bin).display()
        );
    }
}

pub struct Env {
    pub lk: LocalKube,
    pub kc: KubeClients,
    pub client: kube::Client,
}

impl Env {
    /// A local control plane with the chart installed (`helm install --wait`) and the namespace
    /// for clusters created.
    pub async fn start() -> Env {
        let binary = test_support::localkube_binary().expect("localkube is built");
        check_binaries(&binary);
        let lk = LocalKube::start_with(&binary)
            .await
            .expect("localkube starts");
        let kc = KubeClients::find(KubePair::Current).expect("kubectl and helm (make deps)");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kubeconfig = Kubeconfig::read_from(lk.kubeconfig()).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let env = Env { lk, kc, client };
        env.helm_install(&[]);
        env.kubectl(&["create", "namespace", NS]);
        env
    }

    pub fn helm_install(&self, extra: &[&str]) {
        let chart = workspace().join("charts/etcd-operator");
        let mut args = vec![
            "install",
            "etcd-operator",
            chart.to_str().unwrap(),
            "--namespace",
            OPERATOR_NAMESPACE,
            "--create-namespace",
            "--wait",
            "--timeout",
            "180s",
            "--set",
            "logging.format=text",
        ];
        args.extend_from_slice(extra);
        if let Err(e) = self.lk.helm(&self.kc, &args) {
            panic!("helm install failed: {e}\n{}", self.diagnostics());
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.lk
            .kubectl(&self.kc, args)
            .unwrap_or_else(|e| panic!("kubectl {args:?} failed: {e}"))
    }

    pub fn try_kubectl(&self, args: &[&str]) -> Result<String, String> {
        self.lk.kubectl(&self.kc, args).map_err(|e| e.to_string())
    }

    pub fn apply(&self, yaml: &str) -> Result<String, String> {
        self.lk
            .kubectl_stdin(&self.kc, &["apply", "-n", NS], yaml)
            .map_err(|e| e.to_string())
    }

    pub fn clusters(&self) -> Api<EtcdCluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// What a human would look at when a scenario fails: operator logs, clusters, pods, events.
    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        for args in [
            vec!["get", "etcd,pods,pvc", "-n", NS, "-o", "wide"],
            vec!["get", "etcd", "-n", NS, "-o", "yaml"],
            vec!["get", "events", "-n", NS],
            vec!["get", "pods", "-n", OPERATOR_NAMESPACE, "-o", "wide"],
            vec![
                "logs",
                "-n",
                OPERATOR_NAMESPACE,
                "-l",
                "app.kubernetes.io/component=cluster-operator",
                "--tail",
                "80",
            ],
        ] {
            let text = self
                .lk
                .kubectl(&self.kc, &args)
                .unwrap_or_else(|e| e.to_string());
            out.push_str(&format!("----- kubectl {}\n{text}\n", args.join(" ")));
        }
        out
    }

    /// Waits until the cluster is Available with `size` healthy voters on `version`.
    pub async fn wait_available(&self, name: &str, size: usize, version: &str, timeout: Duration) {
        let clusters = self.clusters();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last = String::new();
        loop {
            if let Ok(c) = clusters.get(name).await {
                let status = c.status.clone().unwrap_or_default();
                let available = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Available" && c.status == "True");
                let voters = status.members.iter().filter(|m| !m.learner).count();
                let healthy = status.members.iter().filter(|m| m.healthy).count();
                let generation_seen = status.observed_generation == c.metadata.generation;
                if available
                    && generation_seen
                    && voters == size
                    && healthy == size
                    && status.ready_members as usize == size
                    && status.current_version.as_deref() == Some(version)
                {
                    return;
                }
                last = serde_json::to_string(&status).unwrap();
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "{name} not Available with {size} members on {version} after {timeout:?}; \
                     last status: {last}\n{}",
                    self.diagnostics()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until the cluster's status satisfies `check`.
    pub async fn wait_status(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&EtcdCluster) -> bool,
    ) -> EtcdCluster {
        let clusters = self.clusters();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Ok(c) = clusters.get(name).await
                && check(&c)
            {
                return c;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "{name}: {what} not seen after {timeout:?}\n{}",
                    self.diagnostics()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Events about an object, as `reason: note` lines (the operators publish events.k8s.io/v1
    /// Events, which `kubectl describe` and `kubectl get events` show).
    pub async fn events_for(&self, name: &str) -> Vec<String> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), NS);
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default()
                )
            })
            .collect()
    }

    /// The ClusterIP URL of the cluster's client Service (the host reaches ClusterIPs through
    /// localkube's proxy).
    pub async fn client_url(&self, name: &str) -> String {
        let services: Api<Service> = Api::namespaced(self.client.clone(), NS);
        let svc = services.get(&format!("{name}-client")).await.unwrap();
        format!("http://{}:2379", svc.spec.unwrap().cluster_ip.unwrap())
    }
}

/// Writes `key-<n>` one after another through the client Service, recording each write etcd
/// acknowledged. Failed writes (quorum briefly unavailable, a member restarting) are retried
/// with the next key; they were never acknowledged, so they may or may not be present.
pub struct Writer {
    acknowledged: Arc<Mutex<BTreeMap<String, String>>>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    url: String,
}

impl Writer {
    pub fn start(url: String) -> Writer {
        let acknowledged = Arc::new(Mutex::new(BTreeMap::new()));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let record = acknowledged.clone();
        let target = url.clone();
        let task = tokio::spawn(async move {
            let mut n = 0u64;
            let mut client: Option<etcd_client::Client> = None;
            while !*stopped.borrow() {
                if client.is_none() {
                    let options = etcd_client::ConnectOptions::new()
                        .with_connect_timeout(Duration::from_secs(2))
                        .with_timeout(Duration::from_secs(5));
                    client = etcd_client::Client::connect([target.as_str()], Some(options))
                        .await
                        .ok();
                }
                if let Some(c) = client.as_mut() {
                    n += 1;
                    let key = format!("writer/{n:08}");
                    let value = format!("value-{n}");
                    match c.put(key.as_str(), value.as_str(), None).await {
                        Ok(_) => {
                            record.lock().unwrap().insert(key, value);
                        }
                        Err(_) => client = None,
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = stopped.changed() => {}
                }
            }
        });
        Writer {
            acknowledged,
            stop,
            task,
            url,
        }
    }

    pub fn acknowledged(&self) -> usize {
        self.acknowledged.lock().unwrap().len()
    }

    /// Every acknowledged write is present with its value (read linearizably through the
    /// client Service). Returns how many were checked.
    pub async fn check(&self) -> usize {
        let expected = self.acknowledged.lock().unwrap().clone();
        let mut client = etcd_client::Client::connect([self.url.as_str()], None)
            .await
            .unwrap();
        let response = client
            .get(
                "writer/",
                Some(etcd_client::GetOptions::new().with_prefix()),
            )
            .await
            .unwrap();
        let present: BTreeMap<String, String> = response
            .kvs()
            .iter()
            .map(|kv| {
                (
                    kv.key_str().unwrap().to_owned(),
                    kv.value_str().unwrap().to_owned(),
                )
            })
            .collect();
        let missing: Vec<&String> = expected
            .iter()
            .filter(|(k, v)| present.get(*k) != Some(*v))
            .map(|(k, _)| k)
            .collect();
        assert!(
            missing.is_empty(),
            "{} of {} acknowledged writes missing, e.g. {:?}",
            missing.len(),
            expected.len(),
            &missing[..missing.len().min(5)]
        );
        expected.len()
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// An EtcdCluster manifest.
pub fn cluster_yaml(name: &str, size: u32, version: &str) -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdCluster\nmetadata: {{name: {name}}}\nspec:\n  size: {size}\n  version: \"{version}\"\n  storage: {{size: 1Gi}}\n"
    )
}

/// Kills a member's etcd process (SIGKILL), as a crash would: found by its `--name` flag and the
/// cluster token (unique to this cluster object) on its command line.
pub fn kill_member_process(member: &str, token_part: &str) -> u32 {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_etcd = args.first().is_some_and(|a| a.ends_with("etcd"));
        let named = args.iter().any(|a| a == &format!("--name={member}"))
            || args.windows(2).any(|w| w[0] == "--name" && w[1] == member);
        let ours = args.iter().any(|a| a.contains(token_part));
        if is_etcd && named && ours {
            let status = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status()
                .unwrap();
            assert!(status.success());
            return pid;
        }
    }
    panic!("no etcd process for member {member} ({token_part})");
}

impl Env {
    /// `helm upgrade --reuse-values --wait` of the installed release with more values (e.g. the
    /// scheduled backup, once what it points at exists).
    pub fn helm_upgrade(&self, extra: &[&str]) {
        let chart = workspace().join("charts/etcd-operator");
        let mut args = vec![
            "upgrade",
            "etcd-operator",
            chart.to_str().unwrap(),
            "--namespace",
            OPERATOR_NAMESPACE,
            "--reuse-values",
            "--wait",
            "--timeout",
            "180s",
        ];
        args.extend_from_slice(extra);
        if let Err(e) = self.lk.helm(&self.kc, &args) {
            panic!("helm upgrade failed: {e}\n{}", self.diagnostics());
        }
    }
}
