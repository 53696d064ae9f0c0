//! The chart's monitoring: metrics Services, ServiceMonitor, PodMonitor, PrometheusRule and the
//! Grafana dashboard as both helm majors render them; the alert rules checked and unit-tested by
//! the real promtool; and every query of the rules and the dashboard naming only series that
//! exist — the operators' (`files/series/*.txt`, checked against their registries by the
//! operators' own tests) or a real etcd's, scraped from its `--listen-metrics-urls` port.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use test_support::addr::PortLease;
use test_support::monitoring::{alert_queries, dashboard_queries, metric_names};
use test_support::{EtcdVersion, KubeClients, KubePair, Tools};

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/etcd-operator")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The objects of a `helm template` output, as JSON values.
fn rendered_objects(output: &str) -> Vec<serde_json::Value> {
    output
        .split("\n---")
        .filter(|doc| doc.contains("kind:"))
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect()
}

fn of_kind<'a>(objects: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

const EVERYTHING_ON: [&str; 8] = [
    "--set",
    "metrics.serviceMonitor.enabled=true",
    "--set",
    "metrics.podMonitor.enabled=true",
    "--set",
    "metrics.prometheusRule.enabled=true",
    "--set",
    "metrics.dashboard.enabled=true",
];

#[test]
fn metrics_services_select_each_operator_and_the_monitors_are_off_by_default() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let objects = rendered_objects(
            &clients
                .run_helm(&["template", "etcd-operator", chart, "-n", "ops"])
                .unwrap(),
        );
        for kind in [
            "ServiceMonitor",
            "PodMonitor",
            "PrometheusRule",
            "ConfigMap",
        ] {
            assert!(
                of_kind(&objects, kind).is_empty(),
                "helm {}: {kind} rendered by default",
                pair.helm_minor()
            );
        }
        let services = of_kind(&objects, "Service");
        let deployments = of_kind(&objects, "Deployment");
        assert_eq!(
            services.len(),
            3,
            "one metrics Service per operator: {services:?}"
        );
        for service in services {
            let name = service["metadata"]["name"].as_str().unwrap();
            assert!(name.ends_with("-metrics"), "{name}");
            assert_eq!(service["metadata"]["namespace"], "ops");
            assert_eq!(
                service["metadata"]["labels"]["app.kubernetes.io/part-of"],
                "etcd-operator"
            );
            let port = &service["spec"]["ports"][0];
            assert_eq!(port["name"], "metrics");
            assert_eq!(port["targetPort"], "probes");
            // Exactly its own Deployment's Pods, and that Deployment serves the target port.
            let selector = service["spec"]["selector"].as_object().unwrap();
            let selected: Vec<_> = deployments
                .iter()
                .filter(|d| {
                    let labels = &d["spec"]["template"]["metadata"]["labels"];
                    selector.iter().all(|(k, v)| &labels[k] == v)
                })
                .collect();
            assert_eq!(selected.len(), 1, "{name} selects {selected:?}");
            assert_eq!(
                format!(
                    "{}-metrics",
                    selected[0]["metadata"]["name"].as_str().unwrap()
                ),
                name
            );
            let ports = &selected[0]["spec"]["template"]["spec"]["containers"][0]["ports"];
            assert!(
                ports
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "probes" && p["containerPort"] == 8080),
                "{ports}"
            );
        }

        let without = rendered_objects(
            &clients
                .run_helm(&[
                    "template",
                    "etcd-operator",
                    chart,
                    "--set",
                    "metrics.service.enabled=false",
                    "--set",
                    "backupOperator.enabled=false",
                ])
                .unwrap(),
        );
        assert!(of_kind(&without, "Service").is_empty());
    }
}

#[test]
fn monitors_rules_and_dashboard_render_from_the_files_promtool_tests() {
    let chart = chart_dir();
    let chart_path = chart.to_str().unwrap();
    let alerts: serde_json::Value =
        serde_saphyr::from_str(&read(&chart.join("files/alerts.yaml"))).unwrap();
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(&chart.join("files/dashboard.json"))).unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let mut lint = vec!["lint", "--strict", chart_path];
        lint.extend_from_slice(&EVERYTHING_ON);
        let linted = clients.run_helm(&lint).unwrap();
        assert!(
            linted.contains("0 chart(s) failed"),
            "helm {}: {linted}",
            pair.helm_minor()
        );

        let mut args = vec![
            "template",
            "etcd-operator",
            chart_path,
            "-n",
            "ops",
            "--set",
            "metrics.podMonitor.namespaces={db,prod}",
            "--set",
            "metrics.serviceMonitor.labels.release=kps",
            "--set",
            "metrics.dashboard.namespace=grafana",
        ];
        args.extend_from_slice(&EVERYTHING_ON);
        let objects = rendered_objects(&clients.run_helm(&args).unwrap());
        let helm = pair.helm_minor();

        let monitors = of_kind(&objects, "ServiceMonitor");
        assert_eq!(monitors.len(), 1, "helm {helm}");
        let monitor = monitors[0];
        assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(monitor["metadata"]["labels"]["release"], "kps");
        // job="etcd-operator", as the alert rules expect.
        assert_eq!(monitor["spec"]["jobLabel"], "app.kubernetes.io/part-of");
        assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
        assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
        // The operators' series carry the EtcdCluster's own `namespace` label: without
        // honorLabels the target's (the operator's namespace) would win and the scraped one
        // become `exported_namespace` (seen by the restore scenario's real Prometheus).
        assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true);
        let wanted = monitor["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap();
        let scraped: Vec<_> = of_kind(&objects, "Service")
            .into_iter()
            .filter(|s| wanted.iter().all(|(k, v)| &s["metadata"]["labels"][k] == v))
            .collect();
        assert_eq!(
            scraped.len(),
            3,
            "helm {helm}: the ServiceMonitor selects {scraped:?}"
        );
        for service in scraped {
            assert_eq!(
                service["metadata"]["labels"]["app.kubernetes.io/part-of"],
                "etcd-operator"
            );
        }

        let pod_monitors = of_kind(&objects, "PodMonitor");
        assert_eq!(pod_monitors.len(), 1, "helm {helm}");
        let pods = &pod_monitors[0]["spec"];
        assert_eq!(
            pods["namespaceSelector"]["matchNames"],
            serde_json::json!(["db", "prod"])
        );
        assert_eq!(
            pods["selector"]["matchExpressions"][0],
            serde_json::json!({"key": "etcd.operator.rs/cluster", "operator": "Exists"})
        );
        let endpoint = &pods["podMetricsEndpoints"][0];
        // The member Pod's container port name (crates/etcd-member build.rs).
        assert_eq!(endpoint["port"], "metrics");
        assert!(
            endpoint["relabelings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["targetLabel"] == "etcd_cluster"
                    && r["sourceLabels"]
                        == serde_json::json!([
                            "__meta_kubernetes_pod_label_etcd_operator_rs_cluster"
                        ])),
            "{endpoint}"
        );

        let rules = of_kind(&objects, "PrometheusRule");
        assert_eq!(rules.len(), 1, "helm {helm}");
        // The very groups promtool tests, with their {{ $labels }} templates untouched by helm.
        assert_eq!(rules[0]["spec"]["groups"], alerts["groups"], "helm {helm}");

        let maps = of_kind(&objects, "ConfigMap");
        assert_eq!(maps.len(), 1, "helm {helm}");
        assert_eq!(maps[0]["metadata"]["namespace"], "grafana");
        assert_eq!(maps[0]["metadata"]["labels"]["grafana_dashboard"], "1");
        let shipped: serde_json::Value =
            serde_json::from_str(maps[0]["data"]["etcd-operator.json"].as_str().unwrap()).unwrap();
        assert_eq!(shipped, dashboard, "helm {helm}");
    }
}

fn promtool() -> PathBuf {
    Tools::from_env()
        .promtool()
        .unwrap_or_else(|missing| panic!("{missing}"))
}

#[test]
fn promtool_checks_the_rules_and_every_alert_has_a_passing_unit_test() {
    let files = chart_dir().join("files");
    let run = |args: &[&str]| {
        let out = Command::new(promtool())
            .args(args)
            .current_dir(&files)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
        text
    };
    let checked = run(&["check", "rules", "alerts.yaml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = run(&["test", "rules", "alerts.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");

    // Every alert has a case where it fires (exp_alerts not empty) and one where it stays silent.
    let alerts: serde_json::Value =
        serde_saphyr::from_str(&read(&files.join("alerts.yaml"))).unwrap();
    let tests: serde_json::Value =
        serde_saphyr::from_str(&read(&files.join("alerts.test.yaml"))).unwrap();
    let cases: Vec<&serde_json::Value> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .collect();
    let names: Vec<&str> = alerts["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str())
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        let of_alert = cases.iter().filter(|c| c["alertname"] == name);
        let (firing, silent): (Vec<&&serde_json::Value>, Vec<_>) =
            of_alert.partition(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()));
        assert!(!firing.is_empty(), "{name} is never tested firing");
        assert!(!silent.is_empty(), "{name} is never tested silent");
        for case in firing {
            for alert in case["exp_alerts"].as_array().unwrap() {
                let summary = alert["exp_annotations"]["summary"]
                    .as_str()
                    .unwrap_or_default();
                let description = alert["exp_annotations"]["description"]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    !summary.is_empty() && !description.is_empty(),
                    "{name}: {alert}"
                );
            }
        }
    }
}

/// Every query of the alert rules and the dashboard (test_support::monitoring).
fn queries() -> Vec<(String, String)> {
    let mut out = alert_queries();
    out.extend(dashboard_queries());
    out
}

/// The series the three operators expose, from the lists their tests keep in step.
fn operator_series() -> BTreeSet<String> {
    let dir = chart_dir().join("files/series");
    ["cluster", "backup", "restore"]
        .iter()
        .flat_map(|op| {
            read(&dir.join(format!("{op}-operator.txt")))
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// An etcd serving its metrics on a separate URL, killed on drop.
struct MetricsEtcd {
    child: Child,
    _dir: tempfile::TempDir,
    _ports: PortLease,
    metrics_port: u16,
}

impl Drop for MetricsEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_etcd(version: EtcdVersion) -> MetricsEtcd {
    let binary = Tools::from_env()
        .etcd(version)
        .unwrap_or_else(|missing| panic!("{missing}"));
    let ports = PortLease::claim(3, &[]).unwrap();
    let (client, peer, metrics) = (
        ports.port(0).unwrap(),
        ports.port(1).unwrap(),
        ports.port(2).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(binary)
        .args([
            "--name=m0".to_owned(),
            format!("--data-dir={}", dir.path().join("data").display()),
            format!("--listen-client-urls=http://127.0.0.1:{client}"),
            format!("--advertise-client-urls=http://127.0.0.1:{client}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-cluster=m0=http://127.0.0.1:{peer}"),
            // The flag the cluster operator gives every member (build.rs), on another port.
            format!("--listen-metrics-urls=http://127.0.0.1:{metrics}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    MetricsEtcd {
        child,
        _dir: dir,
        _ports: ports,
        metrics_port: metrics,
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    // HTTP/1.0: the answer is not chunked.
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    (head.split(' ').nth(1) == Some("200")).then(|| body.to_owned())
}

/// The series names in a Prometheus text exposition.
fn exposed_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_query_names_a_series_the_operators_or_a_real_etcd_serve() {
    let operators = operator_series();
    let queries = queries();
    assert!(queries.len() > 20, "{queries:?}");
    let mut etcd_names = BTreeSet::new();
    for (what, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{what}: no series in {expr:?}");
        for name in names {
            if name.starts_with("etcd_operator_") {
                assert!(
                    operators.contains(&name),
                    "{what}: {name} is not exposed by any operator (files/series/*.txt)"
                );
            } else if name != "up" {
                // up is Prometheus' own per target.
                etcd_names.insert(name);
            }
        }
    }
    // Members run 3.4 (upgrade source) and 3.5: both must serve what the rules and panels use.
    for version in EtcdVersion::ALL {
        let etcd = start_etcd(version);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut served = BTreeSet::new();
        loop {
            // The leader and database gauges appear once the single member has elected itself;
            // a histogram only once it has observed something (the backend's first commit, a
            // moment later): read until every name is there or the deadline says which is not.
            if let Some(text) = http_get(etcd.metrics_port, "/metrics")
                && text.contains("etcd_server_has_leader 1")
            {
                served = exposed_names(&text);
                if etcd_names.is_subset(&served) {
                    break;
                }
            }
            if Instant::now() > deadline {
                assert!(
                    !served.is_empty(),
                    "etcd {version} serves no metrics on --listen-metrics-urls"
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        for name in &etcd_names {
            assert!(
                served.contains(name),
                "etcd {version} does not serve {name}, used by the rules or the dashboard"
            );
        }
    }
}
