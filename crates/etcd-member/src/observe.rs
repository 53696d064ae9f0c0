//! The reads of one cluster's observation (I/O): its member Pods and PVCs and the
//! StorageClasses of volumes to grow from the API, etcd's own answers (member list from a member
//! in quorum, each member's status, the cluster version, v2 snapshots before an upgrade), and the
//! operators' client certificate. What was read is turned into [`Observed`] by the pure
//! functions of `convert` (re-exported here), unit-tested without a cluster.
//!
//! Which endpoints are asked: the client URL of every member Pod and of every member the last
//! status listed. etcd is asked through the members' DNS names (the headless peer Service
//! publishes not-ready addresses), so the operator sees what the members see.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_admin::ClusterView;
use etcd_api::EtcdCluster;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::build;
#[cfg(doc)]
use crate::state::Observed;

mod convert;

pub use convert::{
    Compactions, KubeObservation, RETAINED_BY_RESTORE_LABEL, UnhealthySince, belongs_to,
    classes_to_ask, client_tls_of, cluster_name, cluster_version_urls, endpoints_to_ask,
    joining_member_metrics_urls, known_members, kube_observation, last_known_members,
    last_known_version, lowest_cluster_version, operator_speaks_tls, own_raft_caught_up,
    pod_listeners, pod_ready, predates, record_raft_progress, serving_gate, starting_endpoints,
    to_observed, unasked_client_urls, v2_snapshot_urls,
};

/// A failed observation step.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The EtcdCluster has no namespace (it is a namespaced kind: a bug elsewhere).
    #[error("EtcdCluster {0} has no namespace")]
    NoNamespace(String),
    /// Listing the cluster's Pods or PVCs failed.
    #[error("listing the {kind}s of {cluster}: {source}")]
    List {
        /// Pod or PersistentVolumeClaim.
        kind: &'static str,
        /// namespace/name of the cluster.
        cluster: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the StorageClass of PVCs to grow failed.
    #[error("reading StorageClass {class} (to grow the member volumes): {source}")]
    StorageClass {
        /// The class.
        class: String,
        /// The API error.
        source: kube::Error,
    },
}

impl ObserveError {
    /// PascalCase cause, for metrics and events.
    pub fn reason(&self) -> &'static str {
        match self {
            ObserveError::NoNamespace(_) => "NoNamespace",
            ObserveError::List { .. } => "ListFailed",
            ObserveError::StorageClass { .. } => "StorageClassReadFailed",
        }
    }
}

/// Lists the cluster's Pods and PVCs by its labels.
pub async fn observe_kube(
    client: &kube::Client,
    cluster: &EtcdCluster,
) -> Result<KubeObservation, ObserveError> {
    let namespace = cluster
        .namespace()
        .ok_or_else(|| ObserveError::NoNamespace(cluster.name_any()))?;
    let id = format!("{namespace}/{}", cluster.name_any());
    let params = ListParams::default().labels(&build::selector(cluster));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    let pods = pods
        .list(&params)
        .await
        .map_err(|source| ObserveError::List {
            kind: "Pod",
            cluster: id.clone(),
            source,
        })?;
    let pvcs = pvcs
        .list(&params)
        .await
        .map_err(|source| ObserveError::List {
            kind: "PersistentVolumeClaim",
            cluster: id.clone(),
            source,
        })?;
    observation_of(client, cluster, pods.items, pvcs.items).await
}

/// The observation from the cluster's Pods and PVCs, listed or from a watch's store: reads
/// the StorageClasses [`classes_to_ask`] names (only when a PVC is smaller than the spec), then
/// [`kube_observation`].
pub async fn observation_of(
    client: &kube::Client,
    cluster: &EtcdCluster,
    pods: Vec<Pod>,
    pvcs: Vec<PersistentVolumeClaim>,
) -> Result<KubeObservation, ObserveError> {
    let mut expandable_classes = BTreeMap::new();
    for class in classes_to_ask(cluster, &pvcs) {
        let classes: Api<StorageClass> = Api::all(client.clone());
        let found = classes
            .get_opt(&class)
            .await
            .map_err(|source| ObserveError::StorageClass {
                class: class.clone(),
                source,
            })?;
        expandable_classes.insert(class, found.and_then(|c| c.allow_volume_expansion));
    }
    Ok(kube_observation(pods, pvcs, &expandable_classes))
}

/// Reading the operators' client certificate of a TLS cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    /// The API call failed.
    #[error("get Secret {name}: {source}")]
    Get {
        /// namespace/name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The Secret is missing or unusable.
    #[error("Secret {name} {problems}")]
    Unusable {
        /// namespace/name.
        name: String,
        /// What is wrong.
        problems: String,
    },
}

/// How an operator other than the cluster's (restore) reaches the cluster's client port: read
/// from the Secret the cluster names for the operators, without checking or creating anything
/// (the cluster operator issues it). `Ok(None)` for plain HTTP; an error when TLS is on but the
/// Secret cannot be read, so the caller does not mistake members it cannot reach for members
/// that are down.
pub async fn operator_client_tls(
    client: &kube::Client,
    cluster: &EtcdCluster,
) -> Result<Option<etcd_admin::ClientTls>, ClientTlsError> {
    let Some(operator) = cluster.operator_client_secret() else {
        return Ok(None);
    };
    let namespace = cluster.namespace().unwrap_or_default();
    let name = format!("{namespace}/{}", operator.name);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = secrets
        .get_opt(&operator.name)
        .await
        .map_err(|source| ClientTlsError::Get {
            name: name.clone(),
            source,
        })?
        .ok_or_else(|| ClientTlsError::Unusable {
            name: name.clone(),
            problems: "does not exist".into(),
        })?;
    client_tls_of(&secret, operator.present_certificate)
        .map(Some)
        .map_err(|problems| ClientTlsError::Unusable { name, problems })
}

/// Asks etcd: the member list from a member in quorum and every member's status, through the
/// clients `pool` keeps for `scope` (the cluster's UID: a cluster recreated under the same name
/// never reuses the old one's connections). The `starting` endpoints ([`starting_endpoints`])
/// are waited for only briefly (`etcd_admin::observe_pooled`).
pub async fn observe_etcd(
    (pool, scope): (&etcd_admin::ClientPool, &str),
    endpoints: &[String],
    starting: &[String],
    timeout: Duration,
    tls: Option<&etcd_admin::ClientTls>,
) -> ClusterView {
    etcd_admin::observe_pooled(pool, scope, endpoints, starting, timeout, tls).await
}

/// How long each member gets to answer `GET /metrics` in [`observe_v2_snapshots`]. etcd answers
/// it without raft (some 100-200 KiB); a member slower than this is stuck or going away, and
/// waiting the whole etcd timeout (5 s by default) for it only delays the pass. A read that
/// misses it is left out like one that failed (the planner waits, and the next pass asks again).
pub const METRICS_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// For each Pod built to take a v2 snapshot before an upgrade (see
/// [`crate::state::PvcState::snapshot_before_upgrade`]): whether its etcd saved one since it
/// started, from the member's metrics. Only those Pods are asked ([`v2_snapshot_urls`]), all at
/// once, each for at most [`METRICS_READ_TIMEOUT`] (or `timeout` if shorter); an unanswered
/// question leaves `false` (the planner waits).
pub async fn observe_v2_snapshots(
    observed: &mut crate::state::Observed,
    timeout: Duration,
    tls: Option<&etcd_admin::ClientTls>,
) {
    let asked = v2_snapshot_urls(observed);
    if asked.is_empty() {
        return;
    }
    let urls: Vec<String> = asked.iter().map(|(_, url)| url.clone()).collect();
    let reads =
        etcd_admin::v2_snapshots_saved_each_tls(&urls, timeout.min(METRICS_READ_TIMEOUT), tls)
            .await;
    record_v2_snapshots(observed, asked.into_iter().map(|(name, _)| name).zip(reads));
}

/// Records each member's answer to [`observe_v2_snapshots`]: a member that saved a v2 snapshot
/// since its etcd started; a failed read changes nothing (`false` stays: the planner waits).
fn record_v2_snapshots(
    observed: &mut crate::state::Observed,
    reads: impl IntoIterator<Item = (String, Result<u64, etcd_admin::AdminError>)>,
) {
    for (name, read) in reads {
        match read {
            Ok(saved) => {
                if let Some(pod) = observed.pods.get_mut(&name) {
                    pod.v2_snapshot_saved = saved > 0;
                }
            }
            Err(error) => tracing::debug!(%error, member = %name, "v2 snapshots not read"),
        }
    }
}

/// Each member that did not answer Status and whose etcd just started
/// ([`joining_member_metrics_urls`]) asked on its metrics port whether raft has it caught up
/// ([`record_raft_progress`]), all at once, each for at most [`METRICS_READ_TIMEOUT`] (or
/// `timeout` if shorter). Only for seconds after a member starts: one that lost etcd's publish
/// race stays silent once caught up (`crate::state::PodState::raft_caught_up`).
pub async fn observe_joining_members(observed: &mut crate::state::Observed, timeout: Duration) {
    let asked = joining_member_metrics_urls(observed);
    if asked.is_empty() {
        return;
    }
    let urls: Vec<String> = asked.iter().map(|(_, _, url)| url.clone()).collect();
    let reads = etcd_admin::raft_progress_each(&urls, timeout.min(METRICS_READ_TIMEOUT)).await;
    record_raft_progress(
        observed,
        asked.into_iter().map(|(name, id, _)| (name, id)).zip(
            reads
                .into_iter()
                .map(|read| read.map_err(|e| e.to_string())),
        ),
    );
}

/// How long each member gets to answer `GET /version` in [`observe_cluster_version`]. It is
/// asked only of members that answered Status in the same pass, and etcd answers it without
/// raft in milliseconds: a member slower than this is stuck or going away, and waiting the
/// whole etcd timeout (5 s by default) for it only delays the pass. A read that misses it is
/// left out like one that failed.
pub const VERSION_READ_TIMEOUT: Duration = Duration::from_secs(1);

/// etcd's cluster version (`MAJOR.MINOR`), asked of every member that answered Status
/// ([`cluster_version_urls`]) all at once, each for at most [`VERSION_READ_TIMEOUT`] (or
/// `timeout` if shorter); the answers are read by [`lowest_cluster_version`].
pub async fn observe_cluster_version(
    view: &ClusterView,
    timeout: Duration,
    tls: Option<&etcd_admin::ClientTls>,
) -> Option<(u64, u64)> {
    let urls = cluster_version_urls(view);
    let reads =
        etcd_admin::cluster_versions_tls(&urls, timeout.min(VERSION_READ_TIMEOUT), tls).await;
    let answers: Vec<String> = reads
        .into_iter()
        .filter_map(|read| {
            read.map_err(|error| tracing::debug!(%error, "cluster version not read"))
                .ok()
        })
        .collect();
    lowest_cluster_version(&answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{Build, cluster, name};

    /// Each answer lands on its own member's Pod: a snapshot saved sets it, none saved (the Pod
    /// restarted since) clears it, a read that failed or timed out changes nothing, and an
    /// answer for a Pod that is gone is dropped.
    #[test]
    fn each_v2_snapshot_answer_lands_on_its_own_pod() {
        let mut observed = cluster(3, "3.5.35").pods(&[0, 1, 2]);
        if let Some(pod) = observed.pods.get_mut(&name(2)) {
            pod.v2_snapshot_saved = true;
        }
        let failed = || {
            Err(etcd_admin::AdminError::Incomplete {
                op: "GET http://main-1:2379/metrics".into(),
                detail: "timed out".into(),
            })
        };
        record_v2_snapshots(
            &mut observed,
            [
                (name(0), Ok(1)),
                (name(1), failed()),
                (name(2), Ok(0)),
                (name(7), Ok(3)),
            ],
        );
        let saved = |o| observed.pods.get(&name(o)).map(|p| p.v2_snapshot_saved);
        assert_eq!(saved(0), Some(true));
        assert_eq!(saved(1), Some(false), "unanswered: the planner waits");
        assert_eq!(saved(2), Some(false), "restarted since: none saved");
        assert_eq!(saved(7), None);
        assert!(METRICS_READ_TIMEOUT < Duration::from_secs(5));
    }
}
