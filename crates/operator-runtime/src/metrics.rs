//! Prometheus metrics every operator exposes, and the text exposition the probe server serves on
//! `GET /metrics`. No I/O: families are registered once at start-up, updated by the controllers
//! and rendered on each scrape.
//!
//! Every name starts with [`PREFIX`] (`etcd_operator_`). Label sets are bounded: a controller
//! name, an error's PascalCase `reason()`, an action kind — never a member ID, a key or a
//! message. Per-object families (in the operators' own `metrics` modules) are labelled by
//! namespace and name only, and their series are removed when the object goes.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The prefix of every metric name the operators expose.
pub const PREFIX: &str = "etcd_operator";

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A registry whose metric names start with `etcd_operator_`.
pub fn new_registry() -> Registry {
    Registry::with_prefix(PREFIX)
}

/// The OpenMetrics text of every family in `registry` (what `GET /metrics` answers).
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoding error would be a bug in a label set.
    if let Err(error) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::warn!(%error, "encoding the metrics failed");
    }
    out
}

/// The sample names a query can use, sorted: a gauge's name, a counter's `_total`, a
/// histogram's `_bucket`, `_sum` and `_count` — for every family that holds at least one series
/// (the encoder leaves empty families out, so record a sample in each first). The operators'
/// tests compare them with the chart's `files/series/*.txt`, which the dashboard and alert tests
/// check their queries against.
pub fn series_names(registry: &Registry) -> Vec<String> {
    let mut names: Vec<String> = render(registry)
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .flat_map(|rest| {
            let mut parts = rest.split(' ');
            let name = parts.next().unwrap_or_default();
            let suffixes: &[&str] = match parts.next() {
                Some("counter") => &["_total"],
                Some("histogram") => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            suffixes
                .iter()
                .map(|suffix| format!("{name}{suffix}"))
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    names
}

/// Compares [`series_names`] with the list in `path` (one name a line, `#` comments), with a
/// message saying how to update the file.
pub fn check_series_list(registry: &Registry, path: &std::path::Path) -> Result<(), String> {
    let exposed = series_names(registry);
    let listed: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    if listed == exposed {
        Ok(())
    } else {
        Err(format!(
            "{} is stale; it must list exactly, sorted:\n{}",
            path.display(),
            exposed.join("\n")
        ))
    }
}

/// Labels of the per-controller families.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// `cluster`, `backup` or `restore`.
    pub controller: String,
}

/// Labels of a reconcile's outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `cluster`, `backup` or `restore`.
    pub controller: String,
    /// `success` or `error`.
    pub result: String,
}

/// Labels of a failure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// `cluster`, `backup` or `restore`.
    pub controller: String,
    /// The error's PascalCase `reason()`.
    pub reason: String,
}

/// Labels of an action taken.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `cluster`, `backup` or `restore`.
    pub controller: String,
    /// What was done, PascalCase (`MemberAdded`, `PodRestarted`, `BackupStarted`...).
    pub action: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    // 5 ms .. ~41 s: a reconcile is an API list plus a few etcd calls with 5 s timeouts.
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// Reconcile and action counters of one controller:
///
/// - `etcd_operator_reconciles_total{controller,result}`
/// - `etcd_operator_reconcile_duration_seconds{controller}` (histogram)
/// - `etcd_operator_reconcile_errors_total{controller,reason}`
/// - `etcd_operator_actions_total{controller,action}`
/// - `etcd_operator_controller_info{controller,version}` (1; the binary's version)
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    controller: &'static str,
    reconciles: Family<ResultLabels, Counter>,
    duration: HistogramFamily<ControllerLabels>,
    errors: Family<ErrorLabels, Counter>,
    actions: Family<ActionLabels, Counter>,
}

/// Labels of `etcd_operator_controller_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    controller: String,
    version: String,
}

impl ReconcileMetrics {
    /// Registers the families for `controller` (`cluster`, `backup` or `restore`).
    pub fn register(registry: &mut Registry, controller: &'static str) -> ReconcileMetrics {
        let metrics = ReconcileMetrics {
            controller,
            reconciles: Family::default(),
            duration: Family::new_with_constructor(reconcile_histogram),
            errors: Family::default(),
            actions: Family::default(),
        };
        let info = Family::<InfoLabels, Gauge>::default();
        info.get_or_create(&InfoLabels {
            controller: controller.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        })
        .set(1);
        registry.register(
            "controller_info",
            "The operator binary's version (always 1)",
            info,
        );
        registry.register(
            "reconciles",
            "Reconciles run, by outcome",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "How long a reconcile took",
            metrics.duration.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles and failed steps, by the error's reason",
            metrics.errors.clone(),
        );
        registry.register(
            "actions",
            "Changes the operator made, by kind",
            metrics.actions.clone(),
        );
        // Series that exist from the start, so `rate()` and alerts see a zero, not nothing.
        for result in ["success", "error"] {
            drop(metrics.reconciles.get_or_create(&ResultLabels {
                controller: controller.to_owned(),
                result: result.to_owned(),
            }));
        }
        metrics
    }

    /// Creates `etcd_operator_reconcile_errors_total{reason}` at 0 for every reason this
    /// controller's reconcile can fail with. A counter born at its first failure hides that
    /// failure from `increase()` and `rate()` (there is no earlier sample to compare with), and
    /// the dashboard's errors panel would have no series at all while everything is fine.
    pub fn expect_reasons(&self, reasons: &[&str]) {
        for reason in reasons {
            drop(self.errors.get_or_create(&ErrorLabels {
                controller: self.controller.to_owned(),
                reason: (*reason).to_owned(),
            }));
        }
    }

    /// Records one reconcile: its duration and, when it failed, the error's `reason()`.
    pub fn reconciled(&self, elapsed: Duration, failure: Option<&str>) {
        self.duration
            .get_or_create(&ControllerLabels {
                controller: self.controller.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
        let result = if failure.is_some() {
            "error"
        } else {
            "success"
        };
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: self.controller.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        if let Some(reason) = failure {
            self.error(reason);
        }
    }

    /// Counts a failure by its `reason()` (a failed step that did not fail the reconcile too).
    pub fn error(&self, reason: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller: self.controller.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts an action the operator took (PascalCase kind).
    pub fn action(&self, action: &str) {
        self.actions
            .get_or_create(&ActionLabels {
                controller: self.controller.to_owned(),
                action: action.to_owned(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_families_render_with_bounded_labels() {
        let mut registry = new_registry();
        let metrics = ReconcileMetrics::register(&mut registry, "cluster");
        let before = render(&registry);
        // Both outcomes are zero before the first reconcile.
        assert!(
            before.contains(
                "etcd_operator_reconciles_total{controller=\"cluster\",result=\"success\"} 0\n"
            ),
            "{before}"
        );
        assert!(
            before.contains(
                "etcd_operator_reconciles_total{controller=\"cluster\",result=\"error\"} 0\n"
            ),
            "{before}"
        );
        assert!(
            before.contains(&format!(
                "etcd_operator_controller_info{{controller=\"cluster\",version=\"{}\"}} 1\n",
                env!("CARGO_PKG_VERSION")
            )),
            "{before}"
        );

        metrics.reconciled(Duration::from_millis(250), None);
        metrics.reconciled(Duration::from_millis(500), Some("EtcdUnreachable"));
        metrics.action("MemberAdded");
        metrics.action("MemberAdded");
        let text = render(&registry);
        for line in [
            "# TYPE etcd_operator_reconciles counter\n",
            "etcd_operator_reconciles_total{controller=\"cluster\",result=\"success\"} 1\n",
            "etcd_operator_reconciles_total{controller=\"cluster\",result=\"error\"} 1\n",
            "# TYPE etcd_operator_reconcile_duration_seconds histogram\n",
            "etcd_operator_reconcile_duration_seconds_count{controller=\"cluster\"} 2\n",
            "etcd_operator_reconcile_duration_seconds_sum{controller=\"cluster\"} 0.75\n",
            "etcd_operator_reconcile_duration_seconds_bucket{le=\"0.32\",controller=\"cluster\"} 1\n",
            "etcd_operator_reconcile_duration_seconds_bucket{le=\"0.64\",controller=\"cluster\"} 2\n",
            "etcd_operator_reconcile_errors_total{controller=\"cluster\",reason=\"EtcdUnreachable\"} 1\n",
            "etcd_operator_actions_total{controller=\"cluster\",action=\"MemberAdded\"} 2\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn expected_reasons_exist_at_zero_before_any_failure() {
        let mut registry = new_registry();
        let metrics = ReconcileMetrics::register(&mut registry, "backup");
        metrics.expect_reasons(&["StatusWriteFailed", "IncompleteObject"]);
        let text = render(&registry);
        for reason in ["StatusWriteFailed", "IncompleteObject"] {
            let line = format!(
                "etcd_operator_reconcile_errors_total{{controller=\"backup\",reason=\"{reason}\"}} 0\n"
            );
            assert!(text.contains(&line), "missing {line:?} in\n{text}");
        }
        // The first failure counts from 0: increase() sees it.
        metrics.reconciled(Duration::from_millis(1), Some("StatusWriteFailed"));
        assert!(
            render(&registry).contains(
                "etcd_operator_reconcile_errors_total{controller=\"backup\",reason=\"StatusWriteFailed\"} 1\n"
            )
        );
    }

    #[test]
    fn series_names_expand_counters_and_histograms() {
        let mut registry = new_registry();
        let metrics = ReconcileMetrics::register(&mut registry, "cluster");
        metrics.reconciled(Duration::from_millis(1), Some("Failed"));
        metrics.action("MemberAdded");
        assert_eq!(
            series_names(&registry),
            [
                "etcd_operator_actions_total",
                "etcd_operator_controller_info",
                "etcd_operator_reconcile_duration_seconds_bucket",
                "etcd_operator_reconcile_duration_seconds_count",
                "etcd_operator_reconcile_duration_seconds_sum",
                "etcd_operator_reconcile_errors_total",
                "etcd_operator_reconciles_total",
            ]
        );
    }
}
