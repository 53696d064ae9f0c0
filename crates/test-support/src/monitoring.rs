//! The queries the chart's monitoring runs, for the tests that check they name real series: the
//! alert rules' (`files/alerts.yaml`) and the Grafana dashboard's (`files/dashboard.json`), and
//! the metric names in a PromQL expression. Used against the series lists and a real etcd
//! (etcd-api's monitoring test) and against a real Prometheus' scrape of the operators and
//! members on the local control plane (the restore scenario).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The chart's `files/` directory (alerts, their tests, the dashboard, the series lists).
pub fn chart_files() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/etcd-operator/files")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn regex(pattern: &str) -> regex::Regex {
    regex::Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"))
}

/// Metric names in a PromQL expression: identifiers that are not functions, keywords, label
/// names or values, durations, or grouping labels.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let strings = regex(r#""[^"]*""#);
    let matchers = regex(r"\{[^}]*\}");
    let ranges = regex(r"\[[^\]]*\]");
    let grouping = regex(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)");
    let ident = regex(r"[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?");
    let expr = strings.replace_all(expr, "");
    let expr = matchers.replace_all(&expr, " ");
    let expr = ranges.replace_all(&expr, " ");
    let expr = grouping.replace_all(&expr, " ");
    const KEYWORDS: [&str; 6] = ["and", "or", "unless", "bool", "offset", "inf"];
    ident
        .find_iter(&expr)
        .map(|m| m.as_str())
        .filter(|t| !t.ends_with('('))
        .filter(|t| !KEYWORDS.contains(&t.to_ascii_lowercase().as_str()))
        .map(str::to_owned)
        .collect()
}

/// Every `expr` of the alert rules, as (`alert <name>`, expr).
pub fn alert_queries() -> Vec<(String, String)> {
    let alerts: serde_json::Value =
        serde_saphyr::from_str(&read(&chart_files().join("alerts.yaml")))
            .unwrap_or_else(|e| panic!("alerts.yaml: {e}"));
    let mut out = Vec::new();
    for group in alerts["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let expr = rule["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("alerts.yaml: a rule without expr: {rule}"));
            out.push((format!("alert {}", rule["alert"]), expr.to_owned()));
        }
    }
    out
}

/// Every target `expr` of the dashboard's panels (rows included) and the metric of each
/// `label_values(...)` variable, as (`panel "<title>"` or `variable <name>`, expr).
pub fn dashboard_queries() -> Vec<(String, String)> {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(&chart_files().join("dashboard.json")))
            .unwrap_or_else(|e| panic!("dashboard.json: {e}"));
    let mut out = Vec::new();
    let mut panels: Vec<&serde_json::Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    while let Some(panel) = panels.pop() {
        if let Some(inner) = panel["panels"].as_array() {
            panels.extend(inner);
        }
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("dashboard.json: a target without expr: {target}"));
            out.push((format!("panel {}", panel["title"]), expr.to_owned()));
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(query) = variable["query"]["query"].as_str() {
            let inner = query
                .trim_start_matches("label_values(")
                .split(',')
                .next()
                .unwrap_or_default();
            out.push((format!("variable {}", variable["name"]), inner.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_are_found_in_promql() {
        assert_eq!(
            metric_names(
                r#"histogram_quantile(0.99, sum by (le, pod) (rate(etcd_disk_wal_fsync_duration_seconds_bucket{etcd_cluster=~"$cluster"}[5m])))"#
            ),
            BTreeSet::from(["etcd_disk_wal_fsync_duration_seconds_bucket".to_owned()])
        );
        assert_eq!(
            metric_names(
                "a_b > 1800 and on (namespace, name) (c{phase=~\"Pending|Running\"} == 1) or absent(up{job=\"x\"} == 1)"
            ),
            BTreeSet::from(["a_b".to_owned(), "c".to_owned(), "up".to_owned()])
        );
        assert_eq!(
            metric_names("q == 0\nunless on (namespace, name) b == 1"),
            BTreeSet::from(["q".to_owned(), "b".to_owned()])
        );
    }

    #[test]
    fn the_chart_has_alert_and_dashboard_queries() {
        assert!(alert_queries().len() >= 10);
        assert!(dashboard_queries().len() > 10);
    }
}
