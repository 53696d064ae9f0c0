//! What the restore operator tells Prometheus. No I/O.
//!
//! EtcdRestores are rare and kept by hand, so they are labelled `namespace` and `name` (plus
//! `cluster`, the EtcdCluster rebuilt, on the phase series):
//!
//! - `etcd_operator_restore_phase{namespace,name,cluster,phase}` — 1 for the current phase, 0 for
//!   the other three (`Pending`, `Running`, `Succeeded`, `Failed`)
//! - `etcd_operator_restore_start_timestamp_seconds{namespace,name}` — `status.startTime`
//! - `etcd_operator_restore_duration_seconds{namespace,name}` — from the start to the completion,
//!   or to the last reconcile while it runs
//!
//! A deleted EtcdRestore's series are removed.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use etcd_api::{EtcdRestore, RestorePhase};
use jiff::Timestamp;
use kube::ResourceExt;
use operator_runtime::ReconcileMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::plan::Step;

/// The action kind counted in `etcd_operator_actions_total{controller="restore"}` for a step
/// taken; `None` for nothing done.
pub fn step_kind(step: &Step) -> Option<&'static str> {
    Some(match step {
        Step::Done | Step::Wait(_) => return None,
        Step::Fail(_) => "RestoreFailed",
        Step::MarkFailed => "RestoreMarkedFailed",
        Step::Start { .. } => "RestoreStarted",
        Step::CreateCluster => "ClusterCreated",
        Step::Hold => "ClusterHeld",
        Step::DeleteOldPod { .. } => "OldPodDeleted",
        Step::RetainPvc { .. } => "PvcRetained",
        Step::CreateSeedPvc => "SeedPvcCreated",
        Step::CreateSeedPod => "SeedPodCreated",
        Step::RecordSeed { .. } => "SeedRecorded",
        Step::HandOver => "HandedOver",
        Step::AdmitSeed => "SeedAdmitted",
        Step::Release => "ClusterReleased",
        Step::Succeed => "RestoreSucceeded",
        Step::DeleteSeedPod => "SeedPodDeleted",
        Step::DeleteSeedPvc => "SeedPvcDeleted",
        Step::AddFinalizer => "FinalizerAdded",
        Step::RemoveFinalizer => "FinalizerRemoved",
    })
}

/// Every phase, each always exported (0 or 1).
pub const PHASES: [(RestorePhase, &str); 4] = [
    (RestorePhase::Pending, "Pending"),
    (RestorePhase::Running, "Running"),
    (RestorePhase::Succeeded, "Succeeded"),
    (RestorePhase::Failed, "Failed"),
];

/// `namespace` and `name` of an EtcdRestore.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct RestoreLabels {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl RestoreLabels {
    /// The labels of `restore`.
    pub fn of(restore: &EtcdRestore) -> RestoreLabels {
        RestoreLabels {
            namespace: restore.namespace().unwrap_or_default(),
            name: restore.name_any(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    namespace: String,
    name: String,
    cluster: String,
    phase: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Everything the restore operator exposes.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Reconciles, errors by reason, actions (`controller="restore"`).
    pub reconciles: ReconcileMetrics,
    phase: Family<PhaseLabels, Gauge>,
    start: Family<RestoreLabels, FloatGauge>,
    duration: Family<RestoreLabels, FloatGauge>,
    /// The cluster label each restore was exported with (to remove its series).
    clusters: Arc<Mutex<HashMap<RestoreLabels, String>>>,
}

fn seconds(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> f64 {
    t.0.as_millisecond() as f64 / 1000.0
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            reconciles: {
                let reconciles = ReconcileMetrics::register(registry, "restore");
                reconciles.expect_reasons(crate::controller::ReconcileError::REASONS);
                reconciles
            },
            phase: Family::default(),
            start: Family::default(),
            duration: Family::default(),
            clusters: Arc::default(),
        };
        let registry = registry.sub_registry_with_prefix("restore");
        registry.register(
            "phase",
            "1 for the EtcdRestore's current phase, 0 for the others",
            m.phase.clone(),
        );
        registry.register(
            "start_timestamp_seconds",
            "When the EtcdRestore started (Unix seconds)",
            m.start.clone(),
        );
        registry.register(
            "duration_seconds",
            "How long the EtcdRestore ran: to its completion, or so far while it runs",
            m.duration.clone(),
        );
        m
    }

    fn phase_labels(labels: &RestoreLabels, cluster: &str, phase: &str) -> PhaseLabels {
        PhaseLabels {
            namespace: labels.namespace.clone(),
            name: labels.name.clone(),
            cluster: cluster.to_owned(),
            phase: phase.to_owned(),
        }
    }

    /// Sets the restore's series from its status, `now` being the time of the observation.
    pub fn observe(&self, restore: &EtcdRestore, now: Timestamp) {
        let labels = RestoreLabels::of(restore);
        let cluster = restore.spec.cluster_name.clone();
        let status = restore.status.clone().unwrap_or_default();
        let current = status.phase.unwrap_or(RestorePhase::Pending);
        for (phase, name) in PHASES {
            self.phase
                .get_or_create(&Self::phase_labels(&labels, &cluster, name))
                .set(i64::from(phase == current));
        }
        if let Some(start) = status.start_time.as_ref() {
            let start = seconds(start);
            self.start.get_or_create(&labels).set(start);
            let end = match status.completion_time.as_ref() {
                Some(end) => seconds(end),
                None if current.is_finished() => start,
                None => now.as_millisecond() as f64 / 1000.0,
            };
            self.duration
                .get_or_create(&labels)
                .set((end - start).max(0.0));
        }
        self.clusters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(labels, cluster);
    }

    /// Removes the series of every restore `exists` says is gone.
    pub fn retain(&self, exists: impl Fn(&RestoreLabels) -> bool) {
        let mut clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        let gone: Vec<RestoreLabels> = clusters.keys().filter(|l| !exists(l)).cloned().collect();
        for labels in gone {
            if let Some(cluster) = clusters.remove(&labels) {
                for (_, phase) in PHASES {
                    self.phase
                        .remove(&Self::phase_labels(&labels, &cluster, phase));
                }
            }
            self.start.remove(&labels);
            self.duration.remove(&labels);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use operator_runtime::metrics::{new_registry, render};

    fn restore(name: &str, status: serde_json::Value) -> EtcdRestore {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "etcd.operator.rs/v1alpha1",
            "kind": "EtcdRestore",
            "metadata": {"name": name, "namespace": "db"},
            "spec": {"clusterName": "main", "source": {"backupRef": {"name": "b1"}}},
            "status": status,
        }))
        .unwrap()
    }

    fn value(text: &str, series: &str) -> Option<String> {
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .map(|l| l[series.len() + 1..].to_owned())
    }

    #[test]
    fn phase_start_and_duration_render_and_go_with_the_restore() {
        let mut registry = new_registry();
        let metrics = Metrics::register(&mut registry);
        let now: Timestamp = "2026-11-25T10:05:00Z".parse().unwrap();
        metrics.observe(
            &restore(
                "r1",
                serde_json::json!({"phase": "Running", "startTime": "2026-11-25T10:00:00Z"}),
            ),
            now,
        );
        metrics.observe(
            &restore(
                "r2",
                serde_json::json!({"phase": "Succeeded", "startTime": "2026-11-25T09:00:00Z",
                                   "completionTime": "2026-11-25T09:01:30Z"}),
            ),
            now,
        );
        metrics.observe(&restore("r3", serde_json::json!({})), now);
        let text = render(&registry);
        let r1 = "namespace=\"db\",name=\"r1\"";
        for (series, expected) in [
            (
                format!("etcd_operator_restore_phase{{{r1},cluster=\"main\",phase=\"Running\"}}"),
                "1",
            ),
            (
                format!("etcd_operator_restore_phase{{{r1},cluster=\"main\",phase=\"Pending\"}}"),
                "0",
            ),
            (format!("etcd_operator_restore_duration_seconds{{{r1}}}"), "300.0"),
            (
                "etcd_operator_restore_duration_seconds{namespace=\"db\",name=\"r2\"}".to_owned(),
                "90.0",
            ),
            (
                "etcd_operator_restore_phase{namespace=\"db\",name=\"r3\",cluster=\"main\",phase=\"Pending\"}"
                    .to_owned(),
                "1",
            ),
        ] {
            assert_eq!(value(&text, &series).as_deref(), Some(expected), "{series} in\n{text}");
        }
        // Not started: no start time, no duration.
        assert!(
            !text.contains("start_timestamp_seconds{namespace=\"db\",name=\"r3\"}"),
            "{text}"
        );

        metrics.retain(|l| l.name == "r2");
        let text = render(&registry);
        assert!(
            !text.contains("name=\"r1\"") && !text.contains("name=\"r3\""),
            "{text}"
        );
        assert!(text.contains("name=\"r2\""), "{text}");
    }

    #[test]
    fn the_chart_lists_every_series_this_operator_exposes() {
        let mut registry = new_registry();
        let metrics = Metrics::register(&mut registry);
        // A series in every family (the exposition leaves empty families out).
        metrics
            .reconciles
            .reconciled(std::time::Duration::from_millis(1), Some("Failed"));
        metrics.reconciles.action("RestoreStarted");
        metrics.observe(
            &restore(
                "r1",
                serde_json::json!({"phase": "Running", "startTime": "2026-11-25T10:00:00Z"}),
            ),
            Timestamp::now(),
        );
        let list = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../charts/etcd-operator/files/series/restore-operator.txt");
        if let Err(stale) = operator_runtime::metrics::check_series_list(&registry, &list) {
            panic!("{stale}");
        }
    }
}
