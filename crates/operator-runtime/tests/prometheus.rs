//! A real Prometheus (Debian's) scrapes the probe server's `/metrics`: the OpenMetrics text the
//! operators serve is accepted as it is, the samples arrive with their labels, and the chart's
//! alert rules load and evaluate against it without error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use operator_runtime::metrics::{ReconcileMetrics, new_registry};
use operator_runtime::{ProbeServer, Readiness};
use test_support::Tools;
use test_support::addr::PortLease;

struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET on 127.0.0.1:`port`; the body of a 200 answer.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    // HTTP/1.0: the answer is not chunked, and says HTTP/1.0 or HTTP/1.1.
    (head.split(' ').nth(1) == Some("200")).then(|| body.to_owned())
}

/// Polls a Prometheus API query until `accept` takes its `data`, or panics after 60 s.
fn wait_for(
    prometheus: &mut Prometheus,
    path: &str,
    accept: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    loop {
        if let Some(status) = prometheus.child.try_wait().unwrap() {
            panic!("prometheus exited: {status}");
        }
        if let Some(body) = http_get(prometheus.port, path) {
            let value: serde_json::Value = serde_json::from_str(&body).unwrap();
            if accept(&value["data"]) {
                return value["data"].clone();
            }
            last = Some(value);
        }
        assert!(
            Instant::now() < deadline,
            "{path}: never as expected; last answer {last:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn alerts_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/etcd-operator/files/alerts.yaml")
}

#[test]
fn a_real_prometheus_scrapes_the_metrics_and_evaluates_the_alert_rules() {
    let binary = Tools::from_env()
        .prometheus()
        .unwrap_or_else(|missing| panic!("{missing}"));

    // The operator side: the probe server with a registry holding one reconcile of each kind,
    // on its own runtime while this thread polls Prometheus.
    let mut registry = new_registry();
    let reconciles = ReconcileMetrics::register(&mut registry, "cluster");
    reconciles.reconciled(Duration::from_millis(40), None);
    reconciles.reconciled(Duration::from_millis(90), Some("EtcdUnreachable"));
    reconciles.action("MemberAdded");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ProbeServer::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let target = server.local_addr().unwrap();
    runtime.spawn(server.serve_with_metrics(Readiness::new(), Some(Arc::new(registry))));

    // Prometheus, scraping it every second as job="etcd-operator" (what the ServiceMonitor sets),
    // with the chart's rules.
    let ports = PortLease::claim(1, &[]).unwrap();
    let port = ports.port(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: [{rules:?}]\n\
             scrape_configs:\n\
             - job_name: etcd-operator\n\
             \x20 static_configs: [{{targets: [\"{target}\"]}}]\n",
            rules = alerts_file().display().to_string(),
        ),
    )
    .unwrap();
    let child = Command::new(binary)
        .args([
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.path().join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut prometheus = Prometheus {
        child,
        port,
        _dir: dir,
    };

    let targets = wait_for(&mut prometheus, "/api/v1/targets", |data| {
        data["activeTargets"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["health"] == "up"))
    });
    let target = &targets["activeTargets"][0];
    assert_eq!(target["labels"]["job"], "etcd-operator", "{target}");
    assert_eq!(target["lastError"], "", "{target}");

    let errors = wait_for(
        &mut prometheus,
        "/api/v1/query?query=etcd_operator_reconcile_errors_total",
        |data| data["result"].as_array().is_some_and(|r| !r.is_empty()),
    );
    let sample = &errors["result"][0];
    assert_eq!(sample["metric"]["controller"], "cluster", "{sample}");
    assert_eq!(sample["metric"]["reason"], "EtcdUnreachable", "{sample}");
    assert_eq!(sample["value"][1], "1", "{sample}");
    let histogram = wait_for(
        &mut prometheus,
        "/api/v1/query?query=etcd_operator_reconcile_duration_seconds_count",
        |data| data["result"].as_array().is_some_and(|r| !r.is_empty()),
    );
    assert_eq!(histogram["result"][0]["value"][1], "2", "{histogram}");

    // Every rule loaded and evaluated without error against live data.
    let rules = wait_for(&mut prometheus, "/api/v1/rules", |data| {
        data["groups"].as_array().is_some_and(|groups| {
            !groups.is_empty()
                && groups.iter().all(|g| {
                    g["rules"].as_array().unwrap().iter().all(|r| {
                        r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z"
                    })
                })
        })
    });
    let names: Vec<&str> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(names.contains(&"EtcdClusterQuorumLost"), "{names:?}");
    assert!(names.contains(&"EtcdOperatorDown"), "{names:?}");
}
