//! What the backup operator tells Prometheus. No I/O.
//!
//! Backups come and go (a CronJob makes one every few hours), so their series are labelled by
//! the cluster they back up — `namespace` and `cluster` (`spec.clusterName`, or `endpoints` for a
//! backup of explicit endpoints) — never by the EtcdBackup's name:
//!
//! - `etcd_operator_backup_last_success_timestamp_seconds` — completion time of the newest
//!   Succeeded backup
//! - `etcd_operator_backup_last_duration_seconds` — how long that backup took
//! - `etcd_operator_backup_last_size_bytes` — the size of its snapshot
//! - `etcd_operator_backup_failures_total{reason}` — backups this process recorded as Failed, by
//!   the failure's reason
//!
//! The `last_*` gauges are derived from the EtcdBackups' statuses, which every reconcile reads
//! (also the initial list after a restart), so they survive an operator restart. A cluster's
//! series go when no EtcdBackup of it is left.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use etcd_api::{BackupPhase, EtcdBackup};
use kube::ResourceExt;
use operator_runtime::ReconcileMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `cluster` label of a backup of explicit endpoints.
pub const ENDPOINTS: &str = "endpoints";

/// `namespace` and `cluster` of a backup.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct BackupLabels {
    /// Namespace of the EtcdBackup.
    pub namespace: String,
    /// The EtcdCluster it backs up, or [`ENDPOINTS`].
    pub cluster: String,
}

impl BackupLabels {
    /// The labels of `backup`.
    pub fn of(backup: &EtcdBackup) -> BackupLabels {
        BackupLabels {
            namespace: backup.namespace().unwrap_or_default(),
            cluster: backup
                .spec
                .cluster_name
                .clone()
                .unwrap_or_else(|| ENDPOINTS.to_owned()),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    namespace: String,
    cluster: String,
    reason: String,
}

/// A Succeeded backup, as numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Success {
    /// `completionTime`, seconds since the epoch.
    pub completed_at: f64,
    /// `completionTime - startTime`, seconds.
    pub duration: f64,
    /// `artifact.sizeBytes`.
    pub size_bytes: i64,
}

/// The success a backup's status records, if it Succeeded.
pub fn success_of(backup: &EtcdBackup) -> Option<Success> {
    let status = backup.status.as_ref()?;
    if status.phase != Some(BackupPhase::Succeeded) {
        return None;
    }
    let seconds = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| {
        t.0.as_millisecond() as f64 / 1000.0
    };
    let completed_at = seconds(status.completion_time.as_ref()?);
    let duration = status
        .start_time
        .as_ref()
        .map_or(0.0, |start| (completed_at - seconds(start)).max(0.0));
    Some(Success {
        completed_at,
        duration,
        size_bytes: status.artifact.as_ref().map_or(0, |a| a.size_bytes),
    })
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Everything the backup operator exposes.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Reconciles, errors by reason, actions (`controller="backup"`).
    pub reconciles: ReconcileMetrics,
    last_success: Family<BackupLabels, FloatGauge>,
    last_duration: Family<BackupLabels, FloatGauge>,
    last_size: Family<BackupLabels, Gauge>,
    failures: Family<FailureLabels, Counter>,
    /// The newest success seen per cluster, and the failure reasons counted (to remove them).
    seen: Arc<Mutex<HashMap<BackupLabels, Seen>>>,
}

#[derive(Debug, Default)]
struct Seen {
    newest: Option<f64>,
    reasons: Vec<String>,
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            reconciles: {
                let reconciles = ReconcileMetrics::register(registry, "backup");
                reconciles.expect_reasons(crate::controller::ReconcileError::REASONS);
                reconciles
            },
            last_success: Family::default(),
            last_duration: Family::default(),
            last_size: Family::default(),
            failures: Family::default(),
            seen: Arc::default(),
        };
        let registry = registry.sub_registry_with_prefix("backup");
        registry.register(
            "last_success_timestamp_seconds",
            "Completion time of the cluster's newest Succeeded EtcdBackup (Unix seconds)",
            m.last_success.clone(),
        );
        registry.register(
            "last_duration_seconds",
            "How long the cluster's newest Succeeded EtcdBackup took",
            m.last_duration.clone(),
        );
        registry.register(
            "last_size_bytes",
            "Size of the snapshot of the cluster's newest Succeeded EtcdBackup",
            m.last_size.clone(),
        );
        registry.register(
            "failures",
            "EtcdBackups this operator recorded as Failed, by reason",
            m.failures.clone(),
        );
        m
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<BackupLabels, Seen>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in a backup's status: a success newer than the cluster's newest sets the gauges.
    pub fn observe(&self, backup: &EtcdBackup) {
        let labels = BackupLabels::of(backup);
        let mut seen = self.seen();
        let entry = seen.entry(labels.clone()).or_default();
        let Some(success) = success_of(backup) else {
            return;
        };
        if entry
            .newest
            .is_some_and(|newest| newest >= success.completed_at)
        {
            return;
        }
        entry.newest = Some(success.completed_at);
        self.last_success
            .get_or_create(&labels)
            .set(success.completed_at);
        self.last_duration
            .get_or_create(&labels)
            .set(success.duration);
        self.last_size
            .get_or_create(&labels)
            .set(success.size_bytes);
    }

    /// Counts a backup this process recorded as Failed.
    pub fn failed(&self, backup: &EtcdBackup, reason: &str) {
        let labels = BackupLabels::of(backup);
        let mut seen = self.seen();
        let entry = seen.entry(labels.clone()).or_default();
        if !entry.reasons.iter().any(|r| r == reason) {
            entry.reasons.push(reason.to_owned());
        }
        self.failures
            .get_or_create(&FailureLabels {
                namespace: labels.namespace,
                cluster: labels.cluster,
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Removes the series of every cluster `exists` says has no EtcdBackup left.
    pub fn retain(&self, exists: impl Fn(&BackupLabels) -> bool) {
        let mut seen = self.seen();
        let gone: Vec<BackupLabels> = seen.keys().filter(|l| !exists(l)).cloned().collect();
        for labels in gone {
            self.last_success.remove(&labels);
            self.last_duration.remove(&labels);
            self.last_size.remove(&labels);
            if let Some(entry) = seen.remove(&labels) {
                for reason in entry.reasons {
                    self.failures.remove(&FailureLabels {
                        namespace: labels.namespace.clone(),
                        cluster: labels.cluster.clone(),
                        reason,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use operator_runtime::metrics::{new_registry, render};

    fn backup(name: &str, cluster: Option<&str>, status: serde_json::Value) -> EtcdBackup {
        let mut spec = serde_json::json!({
            "s3": {"bucket": "b", "credentialsSecretRef": {"name": "s"}},
        });
        match cluster {
            Some(c) => spec["clusterName"] = c.into(),
            None => spec["endpoints"] = serde_json::json!(["http://e:2379"]),
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "etcd.operator.rs/v1alpha1",
            "kind": "EtcdBackup",
            "metadata": {"name": name, "namespace": "db", "uid": name},
            "spec": spec,
            "status": status,
        }))
        .unwrap()
    }

    fn succeeded(start: &str, end: &str, size: i64) -> serde_json::Value {
        serde_json::json!({
            "phase": "Succeeded",
            "startTime": start,
            "completionTime": end,
            "artifact": {"uri": "s3://b/k", "sizeBytes": size, "sha256": "00", "revision": 7,
                         "etcdVersion": "3.5.1", "clusterID": "1"},
        })
    }

    fn value(text: &str, series: &str) -> Option<String> {
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .map(|l| l[series.len() + 1..].to_owned())
    }

    #[test]
    fn the_newest_success_per_cluster_sets_the_gauges_in_any_order() {
        let mut registry = new_registry();
        let metrics = Metrics::register(&mut registry);
        let newer = backup(
            "b2",
            Some("main"),
            succeeded("2026-11-25T10:00:00Z", "2026-11-25T10:00:30Z", 4096),
        );
        let older = backup(
            "b1",
            Some("main"),
            succeeded("2026-11-24T10:00:00Z", "2026-11-24T10:02:00Z", 1024),
        );
        let running = backup("b3", Some("main"), serde_json::json!({"phase": "Running"}));
        metrics.observe(&newer);
        metrics.observe(&older);
        metrics.observe(&running);
        metrics.failed(&running, "S3Unreachable");
        metrics.failed(&running, "S3Unreachable");
        metrics.observe(&backup(
            "x",
            None,
            succeeded("2026-11-25T11:00:00Z", "2026-11-25T11:00:01Z", 1),
        ));

        let text = render(&registry);
        let main = "namespace=\"db\",cluster=\"main\"";
        assert_eq!(
            value(
                &text,
                &format!("etcd_operator_backup_last_success_timestamp_seconds{{{main}}}")
            )
            .as_deref(),
            Some("1795600830.0"),
            "{text}"
        );
        assert_eq!(
            value(
                &text,
                &format!("etcd_operator_backup_last_duration_seconds{{{main}}}")
            )
            .as_deref(),
            Some("30.0")
        );
        assert_eq!(
            value(
                &text,
                &format!("etcd_operator_backup_last_size_bytes{{{main}}}")
            )
            .as_deref(),
            Some("4096")
        );
        assert_eq!(
            value(
                &text,
                &format!("etcd_operator_backup_failures_total{{{main},reason=\"S3Unreachable\"}}")
            )
            .as_deref(),
            Some("2")
        );
        assert!(
            text.contains(
                "etcd_operator_backup_last_size_bytes{namespace=\"db\",cluster=\"endpoints\"} 1\n"
            ),
            "{text}"
        );
        // No backup names in any label.
        assert!(!text.contains("b2") && !text.contains("b1"), "{text}");

        // Every EtcdBackup of main deleted: its series go, the other stays.
        metrics.retain(|l| l.cluster == ENDPOINTS);
        let text = render(&registry);
        assert!(!text.contains("cluster=\"main\""), "{text}");
        assert!(text.contains("cluster=\"endpoints\""), "{text}");
    }

    #[test]
    fn the_chart_lists_every_series_this_operator_exposes() {
        let mut registry = new_registry();
        let metrics = Metrics::register(&mut registry);
        // A series in every family (the exposition leaves empty families out).
        metrics
            .reconciles
            .reconciled(std::time::Duration::from_millis(1), Some("Failed"));
        metrics.reconciles.action("BackupStarted");
        let done = backup(
            "b1",
            Some("main"),
            succeeded("2026-11-25T10:00:00Z", "2026-11-25T10:00:30Z", 4096),
        );
        metrics.observe(&done);
        metrics.failed(&done, "Timeout");
        let list = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../charts/etcd-operator/files/series/backup-operator.txt");
        if let Err(stale) = operator_runtime::metrics::check_series_list(&registry, &list) {
            panic!("{stale}");
        }
    }
}
