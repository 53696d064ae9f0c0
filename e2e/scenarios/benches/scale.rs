//! `make bench` (scale part, issue #24): one cluster-operator replica reconciling many
//! one-member EtcdClusters on the local control plane (`SCALE_CLUSTERS`, default 100, fewer
//! when the node's Pod capacity does not hold them: the bench says so).
//!
//! Measures, in order:
//! 1. one cluster alone, apply → Available (the baseline of 2.);
//! 2. the other N-1 applied at once → all N Available (and each cluster's own apply →
//!    Available, p50/p99);
//! 3. steady state, for `SCALE_IDLE_SECS` (default 60; the operator requeues a converged
//!    cluster every 30 s): reconcile duration p50/p99 from the operator's own histogram
//!    (`etcd_operator_reconcile_duration_seconds`, deltas between two scrapes of its /metrics),
//!    the API requests it sent per verb (kube-apiserver's audit log of its ServiceAccount),
//!    its CPU and RSS (from /proc of its process: the node agent runs containers as host
//!    processes);
//! 4. a burst: a label changed on every EtcdCluster at once (one `kubectl label`), until the
//!    operator has run as many reconciles as there are clusters (the label is no spec change, so
//!    this is the cost of an observe → converged round per cluster): the same figures.
//!
//! Prints a table (figure, goal, ratio) and appends the headline figures to `BENCH_RESULTS`
//! (`test_support::bench`). Needs the workspace's binaries built (`make bench` builds them in
//! release, as the image ships them, and points `LOCALKUBE_BIN` at `target/release/localkube`;
//! without it, `target/debug`'s).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use test_support::EtcdVersion;
use test_support::bench::{self, Figure, Part, Unit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The node agent's Pod capacity (`e2e/node`: 110, kubelet's default).
const NODE_PODS: usize = 110;
/// Pods the bench leaves free on the node (a replaced Pod may overlap its predecessor).
const SPARE_PODS: usize = 2;
/// How often the clusters' status is listed while waiting for Available.
const POLL: Duration = Duration::from_millis(500);
/// Longer than this to all Available is a failure, not a figure.
const AVAILABLE_TIMEOUT: Duration = Duration::from_secs(900);
/// Longer than this for the burst's reconciles is reported as is (not a failure).
const BURST_TIMEOUT: Duration = Duration::from_secs(120);
const HISTOGRAM: &str = "etcd_operator_reconcile_duration_seconds";
const RECONCILES: &str = "etcd_operator_reconciles_total";
const CLUSTER_CONTROLLER: &str = "controller=\"cluster\"";

// Goals (issue #24).
const GOAL_P99_STEADY: f64 = 1.0;
const GOAL_RSS_MIB: f64 = 100.0;
/// "Near zero" requests per second per idle cluster, as a number: one request per cluster
/// every 20 s.
const GOAL_IDLE_REQUESTS_PER_CLUSTER: f64 = 0.05;

/// The version every cluster runs.
const VERSION: EtcdVersion = EtcdVersion::V3_6;

#[tokio::main]
async fn main() {
    let version = VERSION.version_string();
    let wanted: usize = env_number("SCALE_CLUSTERS", 100);
    let idle = Duration::from_secs(env_number("SCALE_IDLE_SECS", 60) as u64);
    let setup = Instant::now();
    let env = Env::start().await;
    println!(
        "local control plane up and chart installed in {:.1} s",
        setup.elapsed().as_secs_f64()
    );
    let pods: Api<Pod> = Api::all(env.client.clone());
    let existing = pods.list(&ListParams::default()).await.unwrap().items.len();
    let room = NODE_PODS.saturating_sub(existing + SPARE_PODS);
    let n = wanted.min(room);
    if n < wanted {
        println!(
            "{wanted} clusters wanted; {n} measured: the node holds {NODE_PODS} Pods, {existing} \
             exist (operators, DNS), {SPARE_PODS} kept spare"
        );
    }
    assert!(n >= 2, "room for {n} clusters only");
    let operator = OperatorProcess::find(&env).await;
    println!(
        "cluster operator: Pod {} ({}), pid {:?}",
        operator.pod,
        operator.ip,
        operator.pid()
    );
    let audit = env.lk.state_dir().join("logs/audit.log");

    // 1. One cluster alone.
    let names: Vec<String> = (0..n).map(|i| format!("scale-{i:03}")).collect();
    let start = Instant::now();
    env.apply(&cluster_yaml(&names[0], 1, version)).unwrap();
    let solo = wait_all_available(&env, &names[..1], start).await;
    let solo = solo[0];
    println!("one cluster alone: apply → Available {solo:.2} s");

    // 2. The others at once.
    let manifests: Vec<String> = names[1..]
        .iter()
        .map(|name| cluster_yaml(name, 1, version))
        .collect();
    let (pid_before, restarts_before) = (operator.pid(), operator.restarts(&env).await);
    let cpu_before = OperatorProcess::cpu_seconds(pid_before);
    let start = Instant::now();
    env.apply(&manifests.join("---\n")).unwrap();
    let each = wait_all_available(&env, &names, start).await;
    let all_available = start.elapsed().as_secs_f64();
    let formation_restarts = operator.restarts(&env).await - restarts_before;
    let formation_cpu = if operator.pid() == pid_before {
        format!(
            "{:.1} s",
            OperatorProcess::cpu_seconds(pid_before) - cpu_before
        )
    } else {
        "n/a (restarted)".to_owned()
    };
    let each_summary = quantiles(&each);
    println!(
        "{} more applied at once: all {n} Available after {all_available:.1} s (each: p50 \
         {:.1} s, p99 {:.1} s); operator CPU {formation_cpu}, RSS {:.1} MiB, container \
         restarts {formation_restarts}",
        n - 1,
        each_summary.0,
        each_summary.1,
        operator.rss_mib()
    );

    // 3. Steady state.
    let steady = measure(&env, &operator, &audit, n, Window::Idle(idle)).await;
    // 4. The burst.
    let burst = measure(&env, &operator, &audit, n, Window::Burst).await;

    let figures = report(n, solo, all_available, formation_restarts, &steady, &burst);
    if let Some(path) = bench::record(&figures).expect("recording the figures") {
        println!("\nfigures appended to {}", path.display());
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} is a number")))
        .unwrap_or(default)
}

/// Lists the clusters every [`POLL`] until every one of `names` is Available (condition True,
/// one ready member, the generation seen); returns each one's seconds since `start`.
async fn wait_all_available(env: &Env, names: &[String], start: Instant) -> Vec<f64> {
    let clusters = env.clusters();
    let mut seen: BTreeMap<&str, f64> = BTreeMap::new();
    while seen.len() < names.len() {
        if let Ok(list) = clusters.list(&ListParams::default()).await {
            let at = start.elapsed().as_secs_f64();
            for c in &list.items {
                let name = c.metadata.name.as_deref().unwrap_or_default();
                if let Some(name) = names.iter().find(|n| *n == name)
                    && !seen.contains_key(name.as_str())
                    && available(c)
                {
                    seen.insert(name, at);
                }
            }
        }
        assert!(
            start.elapsed() < AVAILABLE_TIMEOUT,
            "{} of {} Available after {AVAILABLE_TIMEOUT:?}\n{}",
            seen.len(),
            names.len(),
            env.diagnostics()
        );
        tokio::time::sleep(POLL).await;
    }
    seen.into_values().collect()
}

fn available(c: &etcd_api::EtcdCluster) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.ready_members == 1
            && s.observed_generation == c.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
    })
}

/// p50 and p99 of `values` (nearest rank).
fn quantiles(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at =
        |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    (at(0.5), at(0.99))
}

/// The cluster operator's Pod and host process.
struct OperatorProcess {
    pod: String,
    ip: String,
}

impl OperatorProcess {
    /// The running cluster-operator Pod of the chart.
    async fn find(env: &Env) -> OperatorProcess {
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
        let list = pods.list(&ListParams::default()).await.unwrap();
        let pod = list
            .items
            .iter()
            .find(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.contains("-cluster-"))
                    && pod_is_ready(p)
            })
            .expect("a ready cluster-operator Pod");
        let name = pod.metadata.name.clone().unwrap();
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
        OperatorProcess { pod: name, ip }
    }

    /// Its process now: the one whose environment names the Pod (`POD_NAME`, from the chart's
    /// downward API), so another local control plane's operator on the same machine is never
    /// taken for it. A restarted container is a new process.
    fn pid(&self) -> Option<u32> {
        let wanted = format!("POD_NAME={}", self.pod);
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
            .find(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).contains("etcd-cluster-operator")
                    && environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes())
            })
    }

    /// The operator container's restarts so far (its Pod's status).
    async fn restarts(&self, env: &Env) -> i32 {
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
        pods.get(&self.pod)
            .await
            .ok()
            .and_then(|p| p.status)
            .and_then(|s| s.container_statuses)
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum())
    }

    /// User + system CPU seconds of process `pid` so far (`/proc/<pid>/stat`, in clock ticks of
    /// 1/100 s, Linux's USER_HZ); 0 when it is gone.
    fn cpu_seconds(pid: Option<u32>) -> f64 {
        let Some(stat) =
            pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        else {
            return 0.0;
        };
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let ticks = |i: usize| fields[i - 3].parse::<f64>().unwrap();
        (ticks(14) + ticks(15)) / 100.0
    }

    /// A `/proc/<pid>/status` field in MiB (NaN when the process is gone).
    fn status_mib(pid: Option<u32>, field: &str) -> f64 {
        pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(field))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
            .map_or(f64::NAN, |kib| kib / 1024.0)
    }

    fn rss_mib(&self) -> f64 {
        Self::status_mib(self.pid(), "VmRSS:")
    }

    fn peak_rss_mib(&self) -> f64 {
        Self::status_mib(self.pid(), "VmHWM:")
    }

    /// The text of its `GET /metrics` (the chart's `probes` port, reachable at the Pod IP from
    /// the node).
    /// Retried every second for up to 5 minutes while the operator does not answer (a
    /// restarted container in back-off).
    async fn metrics(&self) -> String {
        let start = Instant::now();
        loop {
            match self.try_metrics().await {
                Ok(body) => return body,
                Err(e) if start.elapsed() < Duration::from_secs(300) => {
                    println!("GET /metrics: {e}; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => panic!("GET /metrics: {e}"),
            }
        }
    }

    async fn try_metrics(&self) -> Result<String, String> {
        let mut stream = tokio::net::TcpStream::connect((self.ip.as_str(), 8080))
            .await
            .map_err(|e| e.to_string())?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: operator\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .map_err(|e| e.to_string())?;
        let (head, body) = response.split_once("\r\n\r\n").ok_or("no HTTP head")?;
        if !head.contains(" 200 ") {
            return Err(head.to_owned());
        }
        Ok(body.to_owned())
    }
}

enum Window {
    /// Nothing changes for this long.
    Idle(Duration),
    /// A label changed on every cluster at the start; ends once the operator has run as many
    /// reconciles as there are clusters.
    Burst,
}

/// What one window measured.
struct Measured {
    seconds: f64,
    reconciles: f64,
    p50: Option<f64>,
    p99: Option<f64>,
    /// NaN when the process restarted in the window.
    cpu_seconds: f64,
    /// Container restarts in the window (its metrics then restart from zero too).
    restarts: i32,
    rss_mib: f64,
    peak_rss_mib: f64,
    /// The operator's requests by verb (audit log).
    requests: BTreeMap<String, usize>,
}

impl Measured {
    fn requests_per_second(&self) -> f64 {
        self.requests.values().sum::<usize>() as f64 / self.seconds
    }
}

async fn measure(
    env: &Env,
    operator: &OperatorProcess,
    audit: &Path,
    n: usize,
    window: Window,
) -> Measured {
    let before = operator.metrics().await;
    let reconciles_before = bench::series_sum(&before, RECONCILES, CLUSTER_CONTROLLER);
    let (pid, restarts_before) = (operator.pid(), operator.restarts(env).await);
    let cpu_before = OperatorProcess::cpu_seconds(pid);
    let wall_start = jiff::Timestamp::now();
    let start = Instant::now();
    let mut after = String::new();
    match window {
        Window::Idle(length) => {
            // Sampled every second so the RSS seen is the window's.
            while start.elapsed() < length {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            after = operator.metrics().await;
        }
        Window::Burst => {
            env.kubectl(&[
                "label",
                "etcd",
                "--all",
                "-n",
                NS,
                &format!("bench.etcd.operator.rs/burst={}", wall_start.as_second()),
                "--overwrite",
            ]);
            while start.elapsed() < BURST_TIMEOUT {
                after = operator.metrics().await;
                if bench::series_sum(&after, RECONCILES, CLUSTER_CONTROLLER) - reconciles_before
                    >= n as f64
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let wall_end = jiff::Timestamp::now();
    let delta = bench::buckets_since(
        &bench::histogram_buckets(&after, HISTOGRAM, CLUSTER_CONTROLLER),
        &bench::histogram_buckets(&before, HISTOGRAM, CLUSTER_CONTROLLER),
    );
    Measured {
        seconds,
        reconciles: bench::series_sum(&after, RECONCILES, CLUSTER_CONTROLLER) - reconciles_before,
        p50: bench::histogram_quantile(0.5, &delta),
        p99: bench::histogram_quantile(0.99, &delta),
        cpu_seconds: if operator.pid() == pid {
            OperatorProcess::cpu_seconds(pid) - cpu_before
        } else {
            f64::NAN
        },
        restarts: operator.restarts(env).await - restarts_before,
        rss_mib: operator.rss_mib(),
        peak_rss_mib: operator.peak_rss_mib(),
        requests: operator_requests(audit, wall_start, wall_end),
    }
}

/// The cluster operator's API requests received between `from` and `to`, by verb (and
/// resource), from kube-apiserver's audit log (`Metadata` level, every ServiceAccount's
/// requests; one event per request at `ResponseComplete`, a watch also at `ResponseStarted`).
fn operator_requests(
    audit: &Path,
    from: jiff::Timestamp,
    to: jiff::Timestamp,
) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    let mut by_verb: BTreeMap<String, usize> = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some((account, _)) = e2e_harness::rbac_usage::used_by(&event) else {
            continue;
        };
        if e2e_harness::rbac_usage::operator_of(&account, &["cluster", "backup", "restore"])
            .as_deref()
            != Some("cluster")
        {
            continue;
        }
        let Some(at) = event["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        else {
            continue;
        };
        let id = event["auditID"].as_str().unwrap_or_default().to_owned();
        if at < from || at > to || !seen.insert(id) {
            continue;
        }
        let resource = event["objectRef"]["resource"].as_str().unwrap_or("");
        let sub = event["objectRef"]["subresource"].as_str().unwrap_or("");
        let verb = event["verb"].as_str().unwrap_or("");
        let key = if sub.is_empty() {
            format!("{verb} {resource}")
        } else {
            format!("{verb} {resource}/{sub}")
        };
        *by_verb.entry(key).or_default() += 1;
    }
    by_verb
}

fn report(
    n: usize,
    solo: f64,
    all_available: f64,
    formation_restarts: i32,
    steady: &Measured,
    burst: &Measured,
) -> Vec<Figure> {
    let ms = |x: Option<f64>| x.map_or("n/a".to_owned(), |x| format!("{:.0} ms", x * 1000.0));
    for (what, m) in [("steady state", steady), ("burst", burst)] {
        println!(
            "\n{what}: {:.1} s, {} reconciles, reconcile duration p50 {} p99 {}, CPU {:.2} s \
             ({:.1} % of a core), RSS {:.1} MiB (peak so far {:.1} MiB), {:.2} API requests/s \
             ({:.4} per cluster), operator restarts {}:",
            m.seconds,
            m.reconciles,
            ms(m.p50),
            ms(m.p99),
            m.cpu_seconds,
            100.0 * m.cpu_seconds / m.seconds,
            m.rss_mib,
            m.peak_rss_mib,
            m.requests_per_second(),
            m.requests_per_second() / n as f64,
            m.restarts
        );
        for (verb, count) in &m.requests {
            println!(
                "  {verb:<40} {count:>6}  {:>8.3}/s",
                *count as f64 / m.seconds
            );
        }
    }
    let idle_per_cluster = steady.requests_per_second() / n as f64;
    let peak_rss = steady.peak_rss_mib.max(burst.peak_rss_mib);
    let p99 = |m: &Measured| m.p99.unwrap_or(f64::NAN);
    let figures = vec![
        Figure::new(
            Part::Scale,
            Unit::Seconds,
            (
                &format!("{n} one-member EtcdClusters applied → all Available"),
                all_available,
            ),
            ("one cluster alone, same run", solo),
        ),
        Figure::new(
            Part::Scale,
            Unit::Seconds,
            (
                &format!("reconcile duration p99, steady state, {n} clusters"),
                p99(steady),
            ),
            ("goal", GOAL_P99_STEADY),
        ),
        Figure::new(
            Part::Scale,
            Unit::Seconds,
            (
                &format!("reconcile duration p99, a label changed on all {n}"),
                p99(burst),
            ),
            ("goal (steady)", GOAL_P99_STEADY),
        ),
        Figure::new(
            Part::Scale,
            Unit::Mebibytes,
            (&format!("operator peak RSS, {n} clusters"), peak_rss),
            ("goal", GOAL_RSS_MIB),
        ),
        Figure::new(
            Part::Scale,
            Unit::ObjectsPerSecond,
            (
                &format!("operator API requests/s per idle cluster ({n} clusters)"),
                idle_per_cluster,
            ),
            ("goal (near zero)", GOAL_IDLE_REQUESTS_PER_CLUSTER),
        ),
    ];
    println!("\n| figure | value | goal | ratio |\n|---|---|---|---|");
    for f in &figures {
        println!(
            "| {} | {} {} | {} {} ({}) | {} |",
            f.measured,
            bench::format_number(f.value),
            f.unit,
            bench::format_number(f.baseline),
            f.unit,
            f.baseline_is,
            f.ratio.map_or("n/a".to_owned(), bench::format_number)
        );
    }
    println!(
        "ratio = figure / goal (above 1 misses it); the first row's baseline is one cluster's \
         apply → Available measured alone just before. Operator container restarts: {} while \
         the {n} formed, {} steady, {} in the burst.",
        formation_restarts, steady.restarts, burst.restarts
    );
    figures
}
