//! Shared by the scenarios: a local control plane with the chart installed, waits on EtcdCluster
//! status, concurrent clients whose history is checked (linearizable, no acknowledged write
//! lost), and what the backup and restore scenarios share: the S3 store in a Pod, keys written
//! with their revisions, on-demand EtcdBackups.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod certs;
pub mod netns;
pub mod prometheus;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
pub use e2e_harness::LocalKube;
pub use e2e_harness::kv_workload::{KvWorkload, WorkloadConfig, WorkloadReport};
use etcd_api::{BackupArtifact, BackupPhase, ClusterPhase, EtcdBackup, EtcdCluster};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
pub use test_support::{KubeClients, KubePair};

/// Namespace the chart is installed in.
pub const OPERATOR_NAMESPACE: &str = "etcd-operator";
/// Namespace the scenarios' etcd clusters live in.
pub const NS: &str = "db";

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The operator binaries the chart runs; localkube maps the chart's image to the workspace's
/// build of them, next to the localkube binary.
const OPERATOR_BINARIES: &[&str] = &[
    "etcd-cluster-operator",
    "etcd-backup-operator",
    "etcd-restore-operator",
];

fn check_binaries(localkube: &Path) {
    for bin in OPERATOR_BINARIES {
        check_operator_binary(localkube, bin);
    }
}

/// Fails, naming the build command, when an operator binary the chart runs is not built next to
/// `localkube`.
pub fn check_operator_binary(localkube: &Path, bin: &str) {
    let path = localkube.parent().unwrap().join(bin);
    assert!(
        path.exists(),
        "{} is missing: the scenarios run the workspace's operator binaries; build them with \
         `cargo build --workspace` (cargo nextest run --workspace does)",
        path.display()
    );
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
        Env::start_with_values(&[]).await
    }

    /// [`Env::start`] with more `helm install` arguments (e.g. operator flags through
    /// `clusterOperator.extraArgs`).
    pub async fn start_with_values(extra: &[&str]) -> Env {
        let env = Env::start_without_chart().await;
        env.helm_install(extra);
        env.kubectl(&["create", "namespace", NS]);
        env
    }

    /// A local control plane only: the scenario installs the chart its own way.
    pub async fn start_without_chart() -> Env {
        let binary = e2e_harness::localkube_binary().expect("localkube is built");
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
        Env { lk, kc, client }
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
        let mut out = self.member_connectivity();
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

    /// What the etcd members logged about their peers and membership changes, newest last:
    /// why a member refused a reconfiguration ("rejecting member remove ... not connected to
    /// all peers") and the peer streams that came and went. First in the diagnostics, since CI
    /// shows only the beginning of a long failure message.
    fn member_connectivity(&self) -> String {
        // With a learner's snapshot and publish: a learner that never catches up (a full
        // `make chaos` once had one behind a member limited to 2.7 Mbit/s for 240 s) shows
        // whether its snapshot was sent, received and applied.
        const PATTERNS: [&str; 9] = [
            "rejecting member",
            "peer became",
            "lost TCP streaming",
            "established TCP streaming",
            "failed to dial",
            "database snapshot",
            "local member to cluster through raft",
            "applied snapshot",
            "promote",
        ];
        let args = [
            "logs",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/name=etcd",
            "--prefix",
            "--tail",
            "2000",
            "--max-log-requests",
            "20",
        ];
        let text = self
            .lk
            .kubectl(&self.kc, &args)
            .unwrap_or_else(|e| e.to_string());
        let mut lines: Vec<&str> = text
            .lines()
            .filter(|l| PATTERNS.iter().any(|p| l.contains(p)))
            .collect();
        // kubectl gives one Pod after another: in time order across the members.
        let ts = |l: &&str| l.split("\"ts\":\"").nth(1).map(|t| t.to_owned());
        lines.sort_by_key(ts);
        let tail = &lines[lines.len().saturating_sub(40)..];
        // Members find each other by the DNS names the headless Service's EndpointSlices give
        // them; the EndpointSlice controller backs off exponentially while its cache is stale.
        let manager_log = self.lk.state_dir().join("logs/kube-controller-manager.log");
        let slices = std::fs::read_to_string(&manager_log)
            .unwrap_or_else(|e| format!("endpoint slices: {}: {e}", manager_log.display()));
        let slice_lines: Vec<&str> = slices
            .lines()
            .filter(|l| l.contains("endpoint slices") || l.contains("EndpointSlice informer"))
            .collect();
        let slice_tail = &slice_lines[slice_lines.len().saturating_sub(8)..];
        format!(
            "----- etcd members' peer connectivity (the last {} of {} such lines)\n{}\n\
             ----- kube-controller-manager on EndpointSlices (the last {} of {})\n{}\n",
            tail.len(),
            lines.len(),
            tail.join("\n"),
            slice_tail.len(),
            slice_lines.len(),
            slice_tail.join("\n")
        )
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

    /// Waits until the events about `name` (as [`Env::events_for`] gives them) satisfy
    /// `check`, and returns them. An operator writes its status before it publishes the events
    /// of the same pass, so a status just seen says nothing about its event: read the event
    /// with this, never once right after a `wait_status`.
    pub async fn wait_events(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let events = self.events_for(name).await;
            if check(&events) {
                return events;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "{name}: no event {what} after {timeout:?}; its events:\n{}\n{}",
                    events.join("\n"),
                    self.diagnostics()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The ClusterIP URL of the cluster's client Service (the host reaches ClusterIPs through
    /// localkube's proxy).
    pub async fn client_url(&self, name: &str) -> String {
        let services: Api<Service> = Api::namespaced(self.client.clone(), NS);
        let svc = services.get(&format!("{name}-client")).await.unwrap();
        format!("http://{}:2379", svc.spec.unwrap().cluster_ip.unwrap())
    }
}

/// Concurrent clients through the client Service (e2e-harness's `kv_workload`): puts, gets and
/// compare-and-swap transactions on a few keys, every operation recorded with its invocation
/// and response times and its outcome (ok, failed, unknown). At the end the history must be
/// linearizable and every acknowledged write explained by the final values.
pub struct Workload(KvWorkload);

/// How long a read of every key may keep failing (a member restarting behind the Service).
const READ_PATIENCE: Duration = Duration::from_secs(60);

impl Workload {
    pub fn start(url: String) -> Workload {
        Workload::start_tls(url, None)
    }

    /// Clients of an `https://` client URL, with `tls`.
    pub fn start_tls(url: String, tls: Option<etcd_client::TlsOptions>) -> Workload {
        Workload(KvWorkload::start(vec![url], tls, WorkloadConfig::default()))
    }

    /// [`Workload::start_tls`] on keys under `key_prefix` (they must be absent: the checker
    /// starts from empty registers).
    pub fn start_prefixed(
        url: String,
        tls: Option<etcd_client::TlsOptions>,
        key_prefix: &str,
    ) -> Workload {
        let config = WorkloadConfig {
            key_prefix: key_prefix.to_owned(),
            ..WorkloadConfig::default()
        };
        Workload(KvWorkload::start(vec![url], tls, config))
    }

    /// Stops the clients, reads every key and checks the history, without asserting: the
    /// caller reports the verdict (a table row) and fails at the end.
    pub async fn finish(self) -> WorkloadReport {
        self.0.finish(READ_PATIENCE).await
    }

    /// Writes acknowledged so far.
    pub fn acknowledged(&self) -> usize {
        self.0.counts().acknowledged_writes
    }

    /// Reads every key now, linearizably, through the client Service; the reads join the
    /// history, so the final check covers them. Returns the writes acknowledged so far.
    pub async fn check(&self) -> usize {
        self.0.read_all(READ_PATIENCE).await.acknowledged_writes
    }

    /// Stops the clients, reads every key, prints the one-line summary, and asserts the history
    /// is linearizable with no acknowledged write lost.
    pub async fn stop(self) -> WorkloadReport {
        let report = self.0.finish(READ_PATIENCE).await;
        eprintln!("{report}");
        report.assert_ok();
        report
    }
}

/// Whether the scenario runs on the real node (`LOCALKUBE_NODE=kubelet`, e2e/README.md "Real
/// node"): the upstream kubelet, containers on their own root filesystems from the images of
/// `make node-images`.
pub fn on_real_node() -> bool {
    std::env::var("LOCALKUBE_NODE").is_ok_and(|n| n == "kubelet")
}

/// The SeaweedFS image of `make node-images` (e2e/realnode/build-images.sh): the tools' `weed`.
const SEAWEEDFS_IMAGE: &str = "localkube.io/seaweedfs:tools";

/// An EtcdCluster manifest, with the operator's default Pod security (non-root, fsGroup 65532;
/// on the real node localkube applies the fsGroup to the claims' host-path volumes, as a CSI
/// driver's volumes get it: e2e/README.md "Real node").
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

// ---------------------------------------------------------------------------------------------
// S3, keys and backups: shared by the backup and restore scenarios.

/// The bucket the scenarios' backups go to (created from the host by [`s3_from_host`]).
pub const BUCKET: &str = "etcd-backups";
/// The S3 Service as Pods reach it, through cluster DNS.
pub const S3_ENDPOINT: &str = "http://s3.db.svc.cluster.local:8333";
/// The credentials Secret ([`start_s3`] creates it; weed without an S3 config accepts any).
pub const S3_SECRET: &str = "etcd-backup-s3";
/// Generous for a 2-core machine shared with other scenarios.
const S3_STEP: Duration = Duration::from_secs(180);

/// Applies the S3 Pod and Service and the credentials Secret; [`s3_from_host`] waits for them.
pub fn start_s3(env: &Env) {
    let manifests = if on_real_node() {
        s3_manifests("/usr/local/bin/weed", s3_port_base(env))
            .replace("image: busybox", &format!("image: {SEAWEEDFS_IMAGE}"))
    } else {
        let weed = test_support::Tools::from_env().weed().unwrap();
        s3_manifests(&weed.display().to_string(), s3_port_base(env))
    };
    env.apply(&manifests)
        .unwrap_or_else(|e| panic!("applying the S3 Pod: {e}"));
    env.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {S3_SECRET}}}\nstringData:\n  \
         AWS_ACCESS_KEY_ID: e2e-access\n  AWS_SECRET_ACCESS_KEY: e2e-secret\n"
    ))
    .unwrap();
}

/// The first of five ports this instance's S3 Pod listens on, unique on the machine: weed finds
/// its servers' local gRPC sockets by port in the host's /tmp (`/tmp/seaweedfs-<server>-grpc-
/// <port + 10000>.sock`, not configurable), which every Pod shares here, so two S3 Pods on the same
/// ports answer for each other. The local control plane's network index is unique per instance.
fn s3_port_base(env: &Env) -> u16 {
    let network: serde_json::Value = serde_json::from_str(&env.lk.network().unwrap()).unwrap();
    let index = network["index"].as_u64().unwrap();
    30000 + u16::try_from(index % 200).unwrap() * 10
}

/// The SeaweedFS Pod (the host's `weed` through the busybox image, data in an emptyDir) and its
/// Service (port 8333 whatever the Pod's ports). Explicit ports and socket paths: a Pod sees the
/// host's filesystem, so weed's sockets under /tmp would clash with other weed servers on the
/// machine (see [`s3_port_base`]).
pub fn s3_manifests(weed: &str, base: u16) -> String {
    let (master, volume, filer, admin, s3) = (base, base + 1, base + 2, base + 3, base + 4);
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: s3
  labels: {{app: s3}}
spec:
  containers:
    - name: weed
      image: busybox
      command: ["{weed}"]
      args:
        - mini
        - -dir=/data
        - -ip=$(POD_IP)
        - -ip.bind=0.0.0.0
        - -master.port={master}
        - -volume.port={volume}
        - -filer.port={filer}
        - -s3.port={s3}
        - -admin.port={admin}
        - -master.telemetry=false
        - -admin.ui=false
        - -webdav=false
        - -s3.port.iceberg=0
        - -s3.port.lance=0
        - -filer.localSocket=/data/filer.sock
        - -s3.localSocket=/data/s3.sock
      env:
        - name: POD_IP
          valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
      ports: [{{name: s3, containerPort: {s3}}}]
      readinessProbe:
        tcpSocket: {{port: {s3}}}
        periodSeconds: 1
      volumeMounts: [{{name: data, mountPath: /data}}]
  volumes: [{{name: data, emptyDir: {{}}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: s3}}
spec:
  selector: {{app: s3}}
  ports: [{{name: s3, port: 8333, targetPort: {s3}}}]
"#
    )
}

/// An on-demand EtcdBackup of `cluster` as examples/backup.yaml writes one.
pub fn on_demand_backup(name: &str, cluster: &str, prefix: &str, secret: &str) -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdBackup\nmetadata: {{name: {name}}}\n\
         spec:\n  clusterName: {cluster}\n  s3:\n    bucket: {BUCKET}\n    prefix: {prefix}\n    \
         endpoint: {S3_ENDPOINT}\n    region: us-east-1\n    forcePathStyle: true\n    \
         credentialsSecretRef: {{name: {secret}}}\n  timeoutSeconds: 120\n"
    )
}

/// Waits for the S3 Pod to be Ready and creates the bucket from the host through the Service's
/// ClusterIP (localkube's proxy). Returns that client.
pub async fn s3_from_host(env: &Env) -> aws_sdk_s3::Client {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + S3_STEP;
    loop {
        let ready = pods.get_opt("s3").await.ok().flatten().is_some_and(|p| {
            p.status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        });
        if ready {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            fail(env, "the S3 Pod is not Ready");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let endpoint = s3_endpoint(env).await;
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "e2e-access",
            "e2e-secret",
            None,
            None,
            "e2e",
        ))
        .endpoint_url(&endpoint)
        .force_path_style(true)
        .build();
    let s3 = aws_sdk_s3::Client::from_conf(config);
    // The S3 port opens before the filer behind it serves: retry until the bucket is made.
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        match s3.create_bucket().bucket(BUCKET).send().await {
            Ok(_) => return s3,
            // An earlier attempt made it but its answer was lost (a timeout under load).
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_bucket_already_owned_by_you()) =>
            {
                return s3;
            }
            Err(e) => last = aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    fail(
        env,
        &format!("creating bucket {BUCKET} through {endpoint}: {last}"),
    )
}

/// Keys written by [`write_keys`], each acknowledged by etcd.
pub struct Written {
    /// Key → value.
    pub keys: BTreeMap<String, String>,
    /// Key → the revision in the header of the put's response (the last attempt's, when a put
    /// was retried).
    pub revisions: BTreeMap<String, i64>,
    /// The cluster's revision once every key was acknowledged.
    pub revision: i64,
}

/// Writes `keys` through the cluster's client Service, one after another. A put that fails (the
/// connection through the proxy dropped) is retried on a new connection: the same key and
/// value, so a retry of a put that did apply changes nothing that is checked.
pub async fn write_keys(
    env: &Env,
    cluster: &str,
    keys: impl IntoIterator<Item = (String, String)>,
) -> Written {
    let url = env.client_url(cluster).await;
    write_keys_at(env, &url, None, keys).await
}

/// [`write_keys`] through `url`, with `tls` for an `https://` one.
pub async fn write_keys_at(
    env: &Env,
    url: &str,
    tls: Option<etcd_client::TlsOptions>,
    keys: impl IntoIterator<Item = (String, String)>,
) -> Written {
    let deadline = tokio::time::Instant::now() + S3_STEP;
    let mut client: Option<etcd_client::Client> = None;
    let mut written = Written {
        keys: BTreeMap::new(),
        revisions: BTreeMap::new(),
        revision: 0,
    };
    let mut last = String::new();
    for (key, value) in keys {
        loop {
            if tokio::time::Instant::now() > deadline {
                fail(env, &format!("writing {key} through {url}: {last}"));
            }
            if client.is_none() {
                let mut options = etcd_client::ConnectOptions::new()
                    .with_connect_timeout(Duration::from_secs(2))
                    .with_timeout(Duration::from_secs(5));
                if let Some(tls) = &tls {
                    options = options.with_tls(tls.clone());
                }
                match etcd_client::Client::connect([url], Some(options)).await {
                    Ok(c) => client = Some(c),
                    Err(e) => last = e.to_string(),
                }
            }
            if let Some(c) = client.as_mut() {
                match c.put(key.as_str(), value.as_str(), None).await {
                    Ok(put) => {
                        let revision = put.header().unwrap().revision();
                        written.revision = revision;
                        written.revisions.insert(key.clone(), revision);
                        break;
                    }
                    Err(e) => {
                        last = e.to_string();
                        client = None;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        written.keys.insert(key, value);
    }
    written
}

/// Waits until the EtcdBackup is Succeeded or Failed.
pub async fn wait_backup_finished(env: &Env, name: &str) -> EtcdBackup {
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + S3_STEP;
    loop {
        if let Ok(b) = backups.get(name).await
            && b.status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(BackupPhase::is_finished)
        {
            return b;
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!("EtcdBackup {name} did not finish within {S3_STEP:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The object key of an artifact of `cluster` under `prefix`:
/// `<prefix><cluster>/<time>-rev<n>-<uid>.db`.
pub fn object_key(artifact: &BackupArtifact, prefix: &str, cluster: &str) -> String {
    let key = artifact
        .uri
        .strip_prefix(&format!("s3://{BUCKET}/"))
        .unwrap_or_else(|| panic!("{} is not in {BUCKET}", artifact.uri));
    assert!(
        key.starts_with(&format!("{prefix}{cluster}/")) && key.ends_with(".db"),
        "{key}"
    );
    key.to_owned()
}

pub async fn get_object(s3: &aws_sdk_s3::Client, key: &str) -> Vec<u8> {
    let object = s3
        .get_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {key}: {}", aws_sdk_s3::error::DisplayErrorContext(&e)));
    object.body.collect().await.unwrap().into_bytes().to_vec()
}

pub async fn put_object(s3: &aws_sdk_s3::Client, key: &str, bytes: Vec<u8>) {
    s3.put_object()
        .bucket(BUCKET)
        .key(key)
        .body(bytes.into())
        .send()
        .await
        .unwrap_or_else(|e| panic!("PUT {key}: {}", aws_sdk_s3::error::DisplayErrorContext(&e)));
}

pub async fn list_keys(
    s3: &aws_sdk_s3::Client,
    prefix: &str,
) -> std::collections::BTreeSet<String> {
    let listed = s3
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix(prefix)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "LIST {prefix}: {}",
                aws_sdk_s3::error::DisplayErrorContext(&e)
            )
        });
    listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

/// The multipart uploads begun under `prefix` and neither completed nor aborted, as
/// `key (upload id)`.
pub async fn pending_uploads(s3: &aws_sdk_s3::Client, prefix: &str) -> Vec<String> {
    let listed = s3
        .list_multipart_uploads()
        .bucket(BUCKET)
        .prefix(prefix)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "LIST uploads {prefix}: {}",
                aws_sdk_s3::error::DisplayErrorContext(&e)
            )
        });
    listed
        .uploads()
        .iter()
        .map(|u| {
            format!(
                "{} ({})",
                u.key().unwrap_or_default(),
                u.upload_id().unwrap_or_default()
            )
        })
        .collect()
}

/// Panics with `what` and everything a human would look at: the common diagnostics, the
/// EtcdBackups and EtcdRestores, the backup and restore operators' logs, the CronJob's Jobs and
/// their Pods' logs, the logs of the etcd Pods (init containers too), the S3 Pod.
pub fn fail(env: &Env, what: &str) -> ! {
    let mut out = env.diagnostics();
    for args in [
        vec!["get", "etcdbackups", "-n", NS, "-o", "yaml"],
        vec!["get", "etcdrestores", "-n", NS, "-o", "yaml"],
        vec!["get", "pvc", "-n", NS, "--show-labels"],
        vec![
            "get",
            "cronjobs,jobs,pods",
            "-n",
            OPERATOR_NAMESPACE,
            "-o",
            "wide",
        ],
        vec![
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            "app.kubernetes.io/component=backup-operator",
            "--tail",
            "100",
        ],
        vec![
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            "app.kubernetes.io/component=restore-operator",
            "--tail",
            "150",
        ],
        vec![
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            "app.kubernetes.io/component=scheduled-backup",
            "--prefix",
            "--tail",
            "40",
        ],
        vec![
            "logs",
            "-n",
            NS,
            "-l",
            "etcd.operator.rs/cluster",
            "--all-containers",
            "--prefix",
            "--tail",
            "30",
        ],
        vec!["logs", "-n", NS, "s3", "--tail", "30"],
    ] {
        let text = env.try_kubectl(&args).unwrap_or_else(|e| e);
        out.push_str(&format!("----- kubectl {}\n{text}\n", args.join(" ")));
    }
    panic!("{what}\n{out}");
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The S3 Service's ClusterIP URL (the host reaches ClusterIPs through localkube's proxy).
pub async fn s3_endpoint(env: &Env) -> String {
    let services: Api<Service> = Api::namespaced(env.client.clone(), NS);
    let ip = services
        .get("s3")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    format!("http://{ip}:8333")
}

/// The kubelet reports the Pod Ready.
pub fn pod_is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until Pod `name` was re-created (a UID other than `old_uid`) and is Ready. After a
/// deletion the cluster's status can still read Available from before it, so this comes first.
pub async fn wait_pod_replaced(env: &Env, name: &str, old_uid: Option<String>, timeout: Duration) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let pod = pods.get_opt(name).await.unwrap();
        if pod
            .as_ref()
            .is_some_and(|p| p.metadata.uid != old_uid && pod_is_ready(p))
        {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!("Pod {name} not replaced and Ready within {timeout:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until each PVC of `names` is gone (deleted and released by its Pod).
pub async fn wait_pvcs_gone(env: &Env, names: &[&str]) {
    const PVC_GONE: Duration = Duration::from_secs(240);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + PVC_GONE;
    for name in names {
        while pvcs.get_opt(name).await.unwrap().is_some() {
            if tokio::time::Instant::now() > deadline {
                fail(
                    env,
                    &format!("PVC {name} is still there {PVC_GONE:?} after its deletion"),
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The cluster operator reports the loss: not Available, and phase QuorumLost or Degraded with
/// reason QuorumLost or ClusterLost (operators/cluster/src/status.rs).
pub fn quorum_loss_reported(c: &EtcdCluster) -> bool {
    let Some(s) = &c.status else { return false };
    let unavailable = s
        .conditions
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "False");
    let lost = s.phase == Some(ClusterPhase::QuorumLost)
        || s.conditions.iter().any(|c| {
            c.type_ == "Degraded"
                && c.status == "True"
                && (c.reason == "QuorumLost" || c.reason == "ClusterLost")
        });
    unavailable && lost
}

impl Env {
    /// Whether the process `pid` (its parent `ppid`) is one of this instance's containers: our
    /// node agent's are localkube's children; the kubelet's are runc's, in the instance's node
    /// cgroup `localkube-<index>/kubepods` (e2e/localkube/src/realnode.rs).
    pub fn runs_container_process(&self, pid: u32, ppid: &str) -> bool {
        if on_real_node() {
            let network: serde_json::Value =
                serde_json::from_str(&self.lk.network().unwrap()).unwrap();
            let pods_cgroup = format!("/localkube-{}/kubepods", network["index"]);
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|c| c.lines().any(|l| l.contains(&pods_cgroup)))
        } else {
            ppid == self.lk.pid().to_string()
        }
    }
}

/// The chart's securityContext as the kernel sees it on each running operator process (children
/// of this instance's localkube, or in its real node's cgroup): uid and gid 65532, no capabilities, `no_new_privs`, and a
/// read-only root in its mount namespace. `values.yaml` says what the chart asks for; this
/// checks what the operators got.
pub fn assert_operators_confined(env: &Env) {
    let mut seen = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(program)
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        if !(name.starts_with("etcd-")
            && name.ends_with("-operator")
            && env.runs_container_process(pid, &field("PPid:")))
        {
            continue;
        }
        let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        let root_options = mountinfo
            .lines()
            .find(|l| l.split(' ').nth(4) == Some("/"))
            .and_then(|l| l.split(' ').nth(5))
            .unwrap_or_default()
            .to_owned();
        let got = [
            field("Uid:"),
            field("Gid:"),
            field("CapEff:"),
            field("NoNewPrivs:"),
            root_options
                .split(',')
                .next()
                .unwrap_or_default()
                .to_owned(),
        ];
        let want = [
            "65532 65532 65532 65532",
            "65532 65532 65532 65532",
            "0000000000000000",
            "1",
            "ro",
        ];
        assert_eq!(
            got, want,
            "operator process {pid} ({name}): uid, gid, CapEff, NoNewPrivs, /"
        );
        *seen.entry(name).or_insert(0) += 1;
    }
    let names: Vec<&str> = seen.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "etcd-backup-operator",
            "etcd-cluster-operator",
            "etcd-restore-operator"
        ],
        "the chart's operators, each confined: {seen:?}"
    );
}

/// A local control plane with the chart installed, failing early when the restore operator is
/// not built or not installed by the chart (the restore scenario and bench start so).
pub async fn start_with_restore_operator() -> Env {
    start_with_restore_operator_and(&[]).await
}

/// [`start_with_restore_operator`] with more `helm install` arguments.
pub async fn start_with_restore_operator_and(values: &[&str]) -> Env {
    let binary = e2e_harness::localkube_binary().expect("localkube is built");
    check_operator_binary(&binary, "etcd-restore-operator");
    let env = Env::start_with_values(values).await;
    let pods = env.kubectl(&[
        "get",
        "pods",
        "-n",
        OPERATOR_NAMESPACE,
        "-l",
        "app.kubernetes.io/component=restore-operator",
        "-o",
        "name",
    ]);
    if pods.trim().is_empty() {
        fail(
            &env,
            "the chart installed no restore operator (restoreOperator.enabled)",
        );
    }
    env
}

/// What the benches wait for: the operator's status says Available, `size` members all healthy
/// voters and all Ready, with the spec's generation seen.
pub fn status_shows_healthy_voters(c: &etcd_api::EtcdCluster, size: usize) -> bool {
    let Some(status) = c.status.as_ref() else {
        return false;
    };
    let available = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "True");
    let healthy_voters = status
        .members
        .iter()
        .filter(|m| !m.learner && m.healthy)
        .count();
    available
        && healthy_voters == size
        && status.members.len() == size
        && status.ready_members as usize == size
        && status.observed_generation == c.metadata.generation
}

/// What a member Pod listens on for peers and clients, from its etcd flags: the schemes of
/// `--listen-peer-urls` and `--listen-client-urls` (e.g. `["http", "https"]`).
pub fn listen_schemes(pod: &Pod) -> (Vec<String>, Vec<String>) {
    let args = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default();
    let schemes = |flag: &str| -> Vec<String> {
        args.iter()
            .find_map(|a| a.strip_prefix(flag))
            .map(|v| {
                v.split(',')
                    .filter_map(|u| u.split_once("://").map(|(s, _)| s.to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    (
        schemes("--listen-peer-urls="),
        schemes("--listen-client-urls="),
    )
}
