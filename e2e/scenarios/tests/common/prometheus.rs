//! A real Prometheus (Debian's, `$ETCD_OPERATOR_TOOLS/prometheus`) on loopback, scraping the
//! local control plane's operators and etcd members the way the chart's ServiceMonitor and
//! PodMonitor do, with the chart's alert rules loaded; the scenarios read it back through its
//! HTTP API.
//!
//! Targets are the Pods' own IPs (the node network `10.244.<N>.0/24` is on a bridge in the
//! host's network namespace): every operator Pod's `probes` port as `job="etcd-operator"`, and
//! every member Pod's (label `etcd.operator.rs/cluster`) `metrics` port as `job="etcd"` with the
//! label copied to `etcd_cluster`, as the PodMonitor relabels it. Members come and go (a restore
//! replaces all of them), so a task rewrites the `file_sd` files from the Pods every second.
//! The operators' job honours the scraped labels, as the chart's ServiceMonitor does
//! (`honorLabels`): their series' `namespace` is the EtcdCluster's, not the operator Pod's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use test_support::Tools;
use test_support::addr::PortLease;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Env, NS, OPERATOR_NAMESPACE};

/// The label of every member Pod; the PodMonitor copies it to `etcd_cluster`.
const CLUSTER_LABEL: &str = "etcd.operator.rs/cluster";
/// Every second, as the alert rules' short `for:` and the scenarios' waits want.
const INTERVAL: &str = "1s";

pub struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
    _port: PortLease,
    targets: tokio::task::JoinHandle<()>,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.targets.abort();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One sample of an instant query: its labels and value.
#[derive(Clone, Debug)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Prometheus {
    /// Starts Prometheus with the chart's rules (`files/alerts.yaml`) and the target writer,
    /// and waits until it answers.
    pub async fn start(env: &Env) -> Prometheus {
        let binary = Tools::from_env()
            .prometheus()
            .unwrap_or_else(|missing| panic!("{missing}"));
        let lease = PortLease::claim(1, &[]).unwrap();
        let port = lease.port(0).unwrap();
        let dir = env.lk.state_dir().join("prometheus");
        std::fs::create_dir_all(&dir).unwrap();
        let alerts = test_support::monitoring::chart_files().join("alerts.yaml");
        let file_sd = |name: &str| {
            format!(
                "  file_sd_configs: [{{files: [{:?}], refresh_interval: {INTERVAL}}}]\n",
                dir.join(name).display().to_string()
            )
        };
        // Empty target lists first: Prometheus reads them at start.
        write_targets(&dir, "operators.json", &Targets::new());
        write_targets(&dir, "members.json", &Targets::new());
        let config = format!(
            "global: {{scrape_interval: {INTERVAL}, scrape_timeout: {INTERVAL}, \
             evaluation_interval: {INTERVAL}}}\n\
             rule_files: [{alerts:?}]\n\
             scrape_configs:\n\
             - job_name: etcd-operator\n\
             \x20 honor_labels: true\n{operators}\
             - job_name: etcd\n{members}",
            alerts = alerts.display().to_string(),
            operators = file_sd("operators.json"),
            members = file_sd("members.json"),
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .args([
                format!("--config.file={}", dir.join("prometheus.yml").display()),
                format!("--storage.tsdb.path={}", dir.join("data").display()),
                format!("--web.listen-address=127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let targets = tokio::spawn(keep_targets(env.client.clone(), dir.clone()));
        let mut prometheus = Prometheus {
            child,
            port,
            dir,
            _port: lease,
            targets,
        };
        prometheus
            .wait_until(
                "Prometheus ready",
                "vector(1)",
                Duration::from_secs(60),
                |s| s.len() == 1,
            )
            .await;
        prometheus
    }

    /// The body of a GET on its API, or why not.
    async fn get(&self, path_and_query: &str) -> Result<serde_json::Value, String> {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| e.to_string())?;
        // HTTP/1.0: the answer is not chunked and ends with the connection.
        let request = format!(
            "GET {path_and_query} HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut response = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
            .await
            .map_err(|_| "no answer in 10 s".to_owned())?
            .map_err(|e| e.to_string())?;
        let response = String::from_utf8_lossy(&response);
        let (head, body) = response
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("not HTTP: {response}"))?;
        let value: serde_json::Value =
            serde_json::from_str(body).map_err(|e| format!("{head}: {e}: {body}"))?;
        if value["status"] != "success" {
            return Err(format!("{head}: {body}"));
        }
        Ok(value["data"].clone())
    }

    /// An instant query (`/api/v1/query`).
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, String> {
        let data = self
            .get(&format!("/api/v1/query?query={}", url_encode(promql)))
            .await?;
        let result = data["result"]
            .as_array()
            .ok_or_else(|| format!("not a vector: {data}"))?;
        Ok(result
            .iter()
            .map(|r| Sample {
                labels: r["metric"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect(),
                value: r["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN),
            })
            .collect())
    }

    /// Polls `promql` until `accept` takes its answer; panics after `timeout` with the last
    /// answer, the targets' health and Prometheus' log.
    pub async fn wait_until(
        &mut self,
        what: &str,
        promql: &str,
        timeout: Duration,
        accept: impl Fn(&[Sample]) -> bool,
    ) -> Vec<Sample> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("prometheus exited: {status}\n{}", self.log_tail());
            }
            let last = match self.query(promql).await {
                Ok(samples) if accept(&samples) => return samples,
                Ok(samples) => format!("{samples:?}"),
                Err(e) => e,
            };
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "Prometheus: {what} not seen after {timeout:?}\nquery {promql}\nlast answer: \
                     {last}\ntargets:\n{}\n{}",
                    self.targets_summary().await,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Every metric name Prometheus has stored (`/api/v1/label/__name__/values`).
    pub async fn metric_names(&self) -> BTreeSet<String> {
        let data = self
            .get("/api/v1/label/__name__/values")
            .await
            .unwrap_or_else(|e| panic!("label values: {e}"));
        data.as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    /// One line per active target: job, instance, pod, health, last error.
    pub async fn targets_summary(&self) -> String {
        match self.get("/api/v1/targets").await {
            Ok(data) => data["activeTargets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    format!(
                        "{} {} {} {} {}",
                        t["labels"]["job"],
                        t["labels"]["instance"],
                        t["labels"]["pod"],
                        t["health"],
                        t["lastError"]
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Err(e) => e,
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "----- prometheus.log (last 20 lines)\n{}",
            lines[lines.len().saturating_sub(20)..].join("\n")
        )
    }
}

/// `file_sd` target groups: one per Pod, `<ip>:<port>` with its labels.
type Targets = Vec<(String, BTreeMap<&'static str, String>)>;

/// Writes a `file_sd` file atomically (Prometheus may read it at any time).
fn write_targets(dir: &Path, name: &str, targets: &[(String, BTreeMap<&'static str, String>)]) {
    let groups: Vec<serde_json::Value> = targets
        .iter()
        .map(|(target, labels)| serde_json::json!({"targets": [target], "labels": labels}))
        .collect();
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, serde_json::to_string(&groups).unwrap()).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// The running Pods of `namespace` matching `selector` that name a container port `port_name`
/// (a CronJob's backup Pod has no probe port), as targets on that port, labelled `namespace`,
/// `pod` and `extra(pod)`.
async fn pod_targets(
    client: &kube::Client,
    namespace: &str,
    selector: Option<&str>,
    port_name: &str,
    extra: impl Fn(&Pod) -> Vec<(&'static str, String)>,
) -> Option<Targets> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut params = ListParams::default();
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let list = pods.list(&params).await.ok()?;
    let mut out = Targets::new();
    for pod in &list.items {
        let Some(status) = &pod.status else { continue };
        let (Some(ip), Some("Running")) = (&status.pod_ip, status.phase.as_deref()) else {
            continue;
        };
        let Some(port) = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(port_name))
            .map(|p| p.container_port)
        else {
            continue;
        };
        let mut labels = BTreeMap::from([
            ("namespace", namespace.to_owned()),
            ("pod", pod.metadata.name.clone().unwrap_or_default()),
        ]);
        labels.extend(extra(pod));
        out.push((format!("{ip}:{port}"), labels));
    }
    out.sort();
    Some(out)
}

/// Rewrites the target files whenever the operator or member Pods change.
async fn keep_targets(client: kube::Client, dir: PathBuf) {
    let mut written: BTreeMap<&str, Targets> = BTreeMap::new();
    loop {
        let operators = pod_targets(&client, OPERATOR_NAMESPACE, None, "probes", |_| vec![]).await;
        let members = pod_targets(&client, NS, Some(CLUSTER_LABEL), "metrics", |pod| {
            let cluster = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CLUSTER_LABEL).cloned())
                .unwrap_or_default();
            vec![("etcd_cluster", cluster)]
        })
        .await;
        for (name, targets) in [("operators.json", operators), ("members.json", members)] {
            if let Some(targets) = targets
                && written.get(name) != Some(&targets)
            {
                write_targets(&dir, name, &targets);
                written.insert(name, targets);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Percent-encodes a query parameter (everything but RFC 3986's unreserved characters).
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
