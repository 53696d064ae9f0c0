//! The pure half of the observation: what was read (Pods, PVCs, StorageClasses, etcd's
//! answers, a Secret) turned into [`Observed`] and the other plain values the reconcile plans
//! from. No I/O: the reads are in the parent module. Besides what was read, two memories of
//! this process feed it ([`UnhealthySince`], [`Compactions`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use etcd_admin::{ClusterView, MemberInfo, MemberStatus};
use etcd_api::validation::EtcdVersion;
use etcd_api::{EtcdCluster, EtcdClusterStatus, StorageSpec};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::{Resource, ResourceExt};

use crate::build;
use crate::naming::{CLIENT_PORT, ClusterName, SWITCH_CLIENT_TLS_PORT};
use crate::plan::tls_switch;
use crate::state::{
    DbStats, Member, MemberAlarm, MemberHealth, Membership, Observed, PodState, PvcState,
    publish_window_secs,
};

pub use etcd_api::restore::RETAINED_BY_RESTORE_LABEL;

/// When each member was first seen unhealthy, per cluster UID and member ID: the planner replaces
/// a member only after a grace period, which must survive between reconciles. Lost on restart,
/// which only delays a replacement (state.rs).
#[derive(Default)]
pub struct UnhealthySince(Mutex<HashMap<(String, u64), Instant>>);

impl UnhealthySince {
    /// How long `member` of cluster `uid` has been unhealthy, starting the clock now if it was not.
    fn unhealthy_for(&self, uid: &str, member: u64, now: Instant) -> Duration {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let since = *map.entry((uid.to_owned(), member)).or_insert(now);
        now.saturating_duration_since(since)
    }

    /// Forgets a member that answered.
    fn healthy(&self, uid: &str, member: u64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&(uid.to_owned(), member));
    }

    /// Forgets every member of cluster `uid`: while no member list can be had, nothing tells
    /// whether a member that was down came back, so its grace period starts again once the list
    /// is back (issue 17: it was removed the moment quorum returned). Only delays a removal.
    fn unknown(&self, uid: &str) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|(cluster, _), _| cluster != uid);
    }
}

/// The revision this process last compacted each cluster (by UID) to, so that a NOSPACE alarm
/// whose compaction freed nothing is not compacted again and again. Lost on restart, which
/// costs one more (no-op) compaction.
/// Also the revision at which each member was last defragmented under NOSPACE.
#[derive(Default)]
pub struct Compactions(Mutex<HashMap<String, NoSpaceSteps>>);

/// A cluster's compaction revision and each member's defragmentation revision.
type NoSpaceSteps = (Option<i64>, BTreeMap<String, i64>);

impl Compactions {
    /// Records a compaction of cluster `uid` to `revision`.
    pub fn record(&self, uid: &str, revision: i64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(uid.to_owned()).or_default().0 = Some(revision);
    }

    /// Records a defragmentation of `member` of cluster `uid` under NOSPACE at `revision`.
    pub fn record_defrag(&self, uid: &str, member: &str, revision: i64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(uid.to_owned())
            .or_default()
            .1
            .insert(member.to_owned(), revision);
    }

    /// Fills in what this process did for cluster `uid` (see [`Observed::compacted_revision`]).
    pub fn fill(&self, uid: &str, observed: &mut Observed) {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((compacted, defragmented)) = map.get(uid) {
            observed.compacted_revision = *compacted;
            observed.defragmented_at = defragmented.clone();
        }
    }
}

/// What the API says about a cluster: its member Pods and PVCs.
pub struct KubeObservation {
    /// Member Pods by member name.
    pub pods: BTreeMap<String, Pod>,
    /// Member PVCs by member name.
    pub pvcs: BTreeMap<String, PersistentVolumeClaim>,
    /// `allowVolumeExpansion` of the StorageClasses of PVCs smaller than `spec.storage.size`
    /// (looked up only then: growing the volumes is the only reason to ask); a class that does
    /// not exist is `false`.
    pub expandable_classes: BTreeMap<String, bool>,
}

/// Whether `object` is one of `cluster`'s members' objects: in its namespace, with every one of
/// its labels ([`build::selector`]). For objects from a watch of every member's objects.
pub fn belongs_to<K: Resource>(cluster: &EtcdCluster, object: &K) -> bool {
    let meta = object.meta();
    if meta.namespace != cluster.namespace() {
        return false;
    }
    let Some(labels) = meta.labels.as_ref() else {
        return false;
    };
    build::cluster_labels(cluster)
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value))
}

/// The StorageClasses whose `allowVolumeExpansion` the planner needs: those of PVCs smaller
/// than `spec.storage.size` (growing the volumes is the only reason to ask), each once.
pub fn classes_to_ask(cluster: &EtcdCluster, pvcs: &[PersistentVolumeClaim]) -> Vec<String> {
    let desired = etcd_api::validation::quantity_to_bytes(&cluster.spec.storage.size.0);
    let mut classes: Vec<String> = pvcs
        .iter()
        .filter(|pvc| matches!((requested_bytes(pvc), desired), (Some(r), Some(d)) if r < d))
        .filter_map(|pvc| pvc.spec.as_ref()?.storage_class_name.clone())
        .collect();
    classes.sort();
    classes.dedup();
    classes
}

/// The cluster's Pods and PVCs by member name (their member label, else their name), with the
/// `allowVolumeExpansion` of each class asked (`None`: the class does not exist, which allows
/// nothing).
pub fn kube_observation(
    pods: Vec<Pod>,
    pvcs: Vec<PersistentVolumeClaim>,
    classes: &BTreeMap<String, Option<bool>>,
) -> KubeObservation {
    let by_member = |object_name: String, label: Option<String>| label.unwrap_or(object_name);
    KubeObservation {
        pods: pods
            .into_iter()
            .map(|p| (by_member(p.name_any(), member_label(&p)), p))
            .collect(),
        pvcs: pvcs
            .into_iter()
            .map(|p| (by_member(p.name_any(), member_label(&p)), p))
            .collect(),
        expandable_classes: classes
            .iter()
            .map(|(class, allows)| (class.clone(), *allows == Some(true)))
            .collect(),
    }
}

/// The operators' client TLS from the Secret the cluster names for them (`present_certificate`:
/// whether the operators present the Secret's certificate); the problem as text otherwise.
pub fn client_tls_of(
    secret: &Secret,
    present_certificate: bool,
) -> Result<etcd_admin::ClientTls, String> {
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    etcd_admin::ClientTls::from_secret_data(&data, present_certificate).map_err(|e| e.to_string())
}

/// The members to ask whether they saved a v2 snapshot (Pods built to take one before an
/// upgrade, not terminating, with a client URL in the member list): (member, client URL).
pub fn v2_snapshot_urls(observed: &Observed) -> Vec<(String, String)> {
    let Membership::Known(members) = &observed.membership else {
        return vec![];
    };
    observed
        .pods
        .iter()
        .filter(|(_, pod)| pod.snapshot_before_upgrade && !pod.terminating)
        .filter_map(|(name, _)| {
            let member = members.iter().find(|m| m.name == *name)?;
            Some((name.clone(), member.client_url.clone()?))
        })
        .collect()
}

/// The members to ask for their raft progress on their metrics port
/// (`observe_joining_members`): each listed member that did not answer Status, whose Pod is
/// not being deleted and whose etcd container started within [`Observed::publish_window`] of
/// `observed.wall_clock`, as (Pod name, member ID, metrics URL). Only a member that just
/// started can be silent for etcd's publish race; one silent for longer is not asked (no
/// request for a member cut off by a partition).
pub fn joining_member_metrics_urls(observed: &Observed) -> Vec<(String, u64, String)> {
    let Membership::Known(members) = &observed.membership else {
        return vec![];
    };
    members
        .iter()
        .filter(|m| !m.healthy())
        .filter_map(|m| {
            let name = m.member_name(&observed.cluster)?;
            let pod = observed.pods.get(&name)?;
            (!pod.terminating && observed.within_publish_window(pod))
                .then(|| (name.clone(), m.id, observed.cluster.metrics_url(&name)))
        })
        .collect()
}

/// Records the answers to `observe_joining_members`: a Pod's `raft_caught_up` when its
/// metrics came from the member asked (same `etcd_server_id`, where etcd reports one; a learner
/// if the member list says so, else a voter) and say raft has it caught up. A failed read leaves
/// `false`: the planner waits for the member to answer, as before it could read this.
pub fn record_raft_progress(
    observed: &mut Observed,
    reads: impl IntoIterator<Item = ((String, u64), Result<etcd_admin::RaftProgress, String>)>,
) {
    let learners: Vec<u64> = match &observed.membership {
        Membership::Known(members) => members.iter().filter(|m| m.learner).map(|m| m.id).collect(),
        Membership::Unknown => vec![],
    };
    for ((name, id), read) in reads {
        let caught_up = match read {
            Ok(progress) => {
                let caught_up = own_raft_caught_up(&progress, id, learners.contains(&id));
                tracing::debug!(member = %name, ?progress, caught_up, "raft progress read");
                caught_up
            }
            Err(error) => {
                tracing::debug!(%error, member = %name, "raft progress not read");
                false
            }
        };
        if let Some(pod) = observed.pods.get_mut(&name) {
            pod.raft_caught_up = caught_up;
        }
    }
}

/// `progress`, read on a member's metrics port, came from the member `id` (where etcd reports
/// one) in the role the member list gives it (`learner`), and says raft has it caught up.
pub fn own_raft_caught_up(progress: &etcd_admin::RaftProgress, id: u64, learner: bool) -> bool {
    progress.learner == learner
        && progress.caught_up()
        && progress.member_id.is_none_or(|answered| answered == id)
}

/// The client URLs to ask for the cluster version: every listed member that answered Status.
pub fn cluster_version_urls(view: &ClusterView) -> Vec<String> {
    let Some((_, members)) = &view.membership else {
        return vec![];
    };
    members
        .iter()
        .filter(|m| matches!(view.statuses.get(&m.id), Some(Ok(_))))
        .filter_map(|m| m.client_urls.first().cloned())
        .collect()
}

/// etcd's cluster version (`MAJOR.MINOR`) from the members' answers: the lowest they report.
/// Each member learns it from the leader, so right after a change they may disagree for a
/// moment; the lowest is the safe reading for gating the next minor. `None` when no member
/// reports one (none answers, or `not_decided` right after a start).
pub fn lowest_cluster_version(answers: &[String]) -> Option<(u64, u64)> {
    answers
        .iter()
        .filter_map(|text| etcd_api::validation::parse_cluster_version(text))
        .min()
}

/// A PVC's requested size in bytes.
fn requested_bytes(pvc: &PersistentVolumeClaim) -> Option<u128> {
    let size = pvc
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    etcd_api::validation::quantity_to_bytes(&size.0)
}

fn member_label<K: Resource>(object: &K) -> Option<String> {
    object
        .meta()
        .labels
        .as_ref()?
        .get(build::LABEL_MEMBER)
        .cloned()
}

/// The operators speak TLS to the members' client port: client TLS is on and every member Pod
/// serves `https://` clients. While a running plaintext cluster is switched to TLS, not before
/// every member does (plan/tls_switch.rs); a Pod whose flags do not say is taken as built as
/// the spec says.
pub fn operator_speaks_tls(cluster: &EtcdCluster, kube: &KubeObservation) -> bool {
    cluster.client_tls()
        && kube.pods.values().all(|pod| {
            pod_listeners(pod).is_none_or(|listen| listen.client != tls_switch::Listen::Http)
        })
}

/// The client URLs to ask: every member Pod's and every member the last status listed; in
/// the scheme [`operator_speaks_tls`] gives, on `https://…:2378` for a Pod that serves both
/// schemes during a switch to TLS.
pub fn endpoints_to_ask(cluster: &EtcdCluster, kube: &KubeObservation) -> Vec<String> {
    let mut members: Vec<String> = kube.pods.keys().cloned().collect();
    if let Some(previous) = &cluster.status {
        members.extend(last_known_members(previous));
    }
    members.sort();
    members.dedup();
    members
        .iter()
        .map(|m| client_url_to_ask(cluster, kube, m))
        .collect()
}

/// The client URL [`endpoints_to_ask`] asks `member` on.
fn client_url_to_ask(cluster: &EtcdCluster, kube: &KubeObservation, member: &str) -> String {
    let host = cluster_name(cluster).member_host(member);
    let client = kube
        .pods
        .get(member)
        .and_then(pod_listeners)
        .map(|l| l.client);
    match (operator_speaks_tls(cluster, kube), client) {
        (false, _) => format!("http://{host}:{CLIENT_PORT}"),
        (true, Some(tls_switch::Listen::Dual)) => {
            format!("https://{host}:{SWITCH_CLIENT_TLS_PORT}")
        }
        (true, _) => format!("https://{host}:{CLIENT_PORT}"),
    }
}

/// Of [`endpoints_to_ask`], those of members that may still be starting, which an observation
/// waits for only briefly (`etcd_admin::STARTING_MEMBER_WAIT`) instead of the full etcd
/// timeout: a member Pod whose etcd has not answered a status request since the Pod was
/// created (`answered_at`: when the endpoint last answered, Unix milliseconds, from the
/// operator's client pool), unless the last status lists it as a voter. A known voter always
/// gets the full timeout, however long since it answered: a slow voter must not look
/// unreachable because of a short wait (dead-member replacement and the quorum gate judge
/// voters by their answers). Except a voter whose etcd container started within etcd's publish
/// window ([`publish_window_secs`], `now` in Unix seconds) and that never answered since its
/// Pod was created: a learner just promoted that lost etcd's publish race (etcd-io/etcd#16436)
/// serves no client for up to 7 s, and the restore bench's pass before the next member add
/// waited 3.6-3.8 s on it while the planner needed only its metrics (it is joining, and a
/// learner may be added meanwhile). Within that window a voter is never judged dead (its grace
/// is minutes), and its metrics say whether raft has it caught up. Except while a restore holds the cluster: nothing acts then (the
/// plan waits for the hand-over whatever etcd answers), and the members are the replaced
/// cluster's, which the restore stops, and its seed: every member Pod is waited for briefly.
/// The restore bench showed the pass that asked the old member as the restore stopped it
/// waiting the whole timeout, and the first member add after the hand-over with it. Also,
/// voter or not, a member whose Pod is being deleted or whose etcd container the kubelet
/// reports not running (`going_or_down`), and a member the last status lists without a Pod:
/// their answers decide nothing a short wait could get wrong, and a request to them can hang
/// until the timeout (the repair bench's detection waited 5 s on one).
///
/// A starting member that answers late is not lost: its request goes on in the background and
/// records the answer, so from the next observation on it is no longer starting.
pub fn starting_endpoints(
    cluster: &EtcdCluster,
    kube: &KubeObservation,
    answered_at: impl Fn(&str) -> Option<i64>,
    now: i64,
) -> Vec<String> {
    let restoring = cluster
        .annotations()
        .contains_key(etcd_api::restore::RESTORING_ANNOTATION);
    let window = publish_window_secs(
        cluster
            .spec
            .etcd_options
            .as_ref()
            .and_then(|o| o.election_timeout_ms),
    );
    let may_be_joining =
        |pod: &Pod| etcd_started_at(pod).is_some_and(|started| now - started <= window);
    let voter = |member: &str| {
        !restoring
            && cluster.status.as_ref().is_some_and(|status| {
                status
                    .members
                    .iter()
                    .any(|m| m.name == member && m.id.is_some() && !m.learner)
            })
    };
    let mut starting: Vec<String> = kube
        .pods
        .iter()
        .filter(|(member, pod)| !voter(member) || going_or_down(pod) || may_be_joining(pod))
        .filter_map(|(member, pod)| {
            let url = client_url_to_ask(cluster, kube, member);
            if restoring || going_or_down(pod) {
                return Some(url);
            }
            // The creation time has whole seconds: an answer counts only from the next second
            // on (an answer of the Pod it replaced may fall in the same second).
            let created_ms = pod.metadata.creation_timestamp.as_ref()?.0.as_millisecond();
            let answered_since =
                answered_at(&url).is_some_and(|at| at >= created_ms.saturating_add(1000));
            (!answered_since).then_some(url)
        })
        .collect();
    // Members the last status lists without a Pod (deleted, maybe with its data): their Pod is
    // recreated on their volume whatever they answer (plan rule 1), and without a volume the
    // answer only keeps a member whose data is gone from being removed while it still runs
    // (rule 4: a force-deleted Pod's etcd answers within the brief wait). A request to a
    // deleted Pod's name can hang until the timeout (the name still resolves, or a DNS cache
    // keeps it, to an address nobody answers on): the repair bench's detection waited 5 s.
    if let Some(status) = &cluster.status {
        starting.extend(
            last_known_members(status)
                .iter()
                .filter(|member| !kube.pods.contains_key(*member))
                .map(|member| client_url_to_ask(cluster, kube, member)),
        );
    }
    starting.sort();
    starting.dedup();
    starting
}

/// The Pod is being deleted, or the kubelet reports its etcd container not running (exited,
/// or waiting to start again): a request to it can only fail, hang until the timeout (a deleted
/// Pod's address, whose network goes before the Pod object: the repair bench's detection
/// waited the whole 5 s on it, its container still reported running), or come from an etcd
/// being stopped. A short wait cannot get a member removed that should stay: a Pod being
/// deleted lasts its grace period (30 s), far below the dead-member grace (5 min by default),
/// and a member not Ready per the kubelet is judged by that grace, not by one answer; the
/// quorum gate counting it unhealthy only makes the gate stricter.
fn going_or_down(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() || etcd_container_down(pod)
}

/// When the kubelet reports the Pod's etcd container started running (Unix seconds).
fn etcd_started_at(pod: &Pod) -> Option<i64> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == build::CONTAINER_NAME)?
        .state
        .as_ref()?
        .running
        .as_ref()?
        .started_at
        .as_ref()
        .map(|t| t.0.as_second())
}

/// The kubelet reports the Pod's etcd container exited or waiting to start again.
fn etcd_container_down(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.container_statuses.as_ref())
        .and_then(|statuses| statuses.iter().find(|c| c.name == build::CONTAINER_NAME))
        .and_then(|container| container.state.as_ref())
        .is_some_and(|state| {
            state.running.is_none() && (state.terminated.is_some() || state.waiting.is_some())
        })
}

/// Client URLs of listed members that were not asked: members added by hand (not ours, so no
/// Pod or status entry of ours names them). Without asking them they always look unhealthy and
/// are eventually removed as dead however well they serve.
pub fn unasked_client_urls(asked: &[String], view: &ClusterView) -> Vec<String> {
    let Some((_, members)) = &view.membership else {
        return vec![];
    };
    let mut urls: Vec<String> = members
        .iter()
        .filter(|m| !view.statuses.contains_key(&m.id))
        .filter_map(|m| m.client_urls.first().cloned())
        .filter(|url| !asked.contains(url))
        .collect();
    urls.sort();
    urls.dedup();
    urls
}

/// What a member Pod listens on, from its etcd container's flags.
pub fn pod_listeners(pod: &Pod) -> Option<tls_switch::Listeners> {
    let container = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == build::CONTAINER_NAME)?;
    tls_switch::listeners_of_args(container.args.as_deref()?)
}

/// The cluster's namespace and name.
pub fn cluster_name(cluster: &EtcdCluster) -> ClusterName {
    ClusterName::new(cluster.namespace().unwrap_or_default(), cluster.name_any())
        .with_tls(cluster.peer_tls(), cluster.client_tls())
}

/// Builds the planner's input from the API objects and etcd's answers. Pure but for the clock
/// of unhealthy members (`unhealthy` and `now`).
pub fn to_observed(
    cluster: &EtcdCluster,
    kube: &KubeObservation,
    view: &ClusterView,
    unhealthy: &UnhealthySince,
    now: Instant,
) -> Observed {
    let name = cluster_name(cluster);
    let uid = cluster.uid().unwrap_or_default();
    let previous = cluster.status.clone().unwrap_or_default();
    let alarms = alarms_of(view, &name);
    let membership = match &view.membership {
        None => {
            unhealthy.unknown(&uid);
            Membership::Unknown
        }
        Some((_, members)) => Membership::Known(
            members
                .iter()
                .map(|m| member_from(m, view.statuses.get(&m.id), &uid, unhealthy, now))
                .collect(),
        ),
    };
    Observed {
        cluster: name,
        spec: cluster.spec.clone(),
        restoring: cluster
            .annotations()
            .get(etcd_api::restore::RESTORING_ANNOTATION)
            .cloned(),
        recorded_cluster_id: previous.cluster_id.clone(),
        last_known_members: last_known_members(&previous),
        last_known_version: last_known_version(&previous),
        member_storage: member_storage(&cluster.spec.storage, kube.pvcs.values()),
        membership,
        cluster_id: view.membership.as_ref().map(|(id, _)| *id),
        cluster_version: None,
        pods: kube
            .pods
            .iter()
            .map(|(member, pod)| {
                let state = PodState {
                    terminating: pod.metadata.deletion_timestamp.is_some(),
                    ready: pod_ready(pod),
                    config_hash: pod
                        .annotations()
                        .get(build::ANNOTATION_CONFIG_HASH)
                        .cloned(),
                    tls_hash: pod.annotations().get(build::ANNOTATION_TLS_HASH).cloned(),
                    snapshot_before_upgrade: pod
                        .annotations()
                        .contains_key(build::ANNOTATION_SNAPSHOT_BEFORE_UPGRADE),
                    // Read from the member by the controller (observe_v2_snapshots).
                    v2_snapshot_saved: false,
                    raft_caught_up: false,
                    listen: pod_listeners(pod),
                    tls_switch_reverted: pod
                        .annotations()
                        .get(tls_switch::ANNOTATION_TLS_SWITCH_REVERTED)
                        .is_some_and(|v| v == "true"),
                    serving_gate: serving_gate(pod),
                    etcd_started_at: etcd_started_at(pod),
                };
                (member.clone(), state)
            })
            .collect(),
        pvcs: kube
            .pvcs
            .iter()
            .map(|(member, pvc)| {
                let state = PvcState {
                    retained_by_restore: pvc.labels().contains_key(RETAINED_BY_RESTORE_LABEL),
                    terminating: pvc.metadata.deletion_timestamp.is_some(),
                    predates_cluster: predates(pvc, cluster),
                    snapshot_before_upgrade: pvc
                        .annotations()
                        .get(build::ANNOTATION_SNAPSHOT_BEFORE_UPGRADE)
                        .and_then(|v| EtcdVersion::parse(v)),
                    v2_wal_clean: pvc
                        .annotations()
                        .get(build::ANNOTATION_V2_WAL_CLEAN)
                        .is_some_and(|v| v == "true"),
                    requested_bytes: requested_bytes(pvc),
                    storage_class: pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()),
                    class_allows_expansion: pvc
                        .spec
                        .as_ref()
                        .and_then(|s| s.storage_class_name.as_ref())
                        .and_then(|c| kube.expandable_classes.get(c))
                        .copied()
                        .unwrap_or(false),
                };
                (member.clone(), state)
            })
            .collect(),
        alarms,
        compacted_revision: None,
        defragmented_at: BTreeMap::new(),
        tls_hashes: BTreeMap::new(),
        wall_clock: None,
        drop_plaintext_clients: cluster
            .annotations()
            .get(tls_switch::ANNOTATION_DROP_PLAINTEXT_CLIENTS)
            .is_some_and(|v| v == "true"),
    }
}

/// Names of the members etcd reported in `status` (entries with an ID): what the planner may
/// restart when no member answers. Pods that were not members are listed in status without an
/// ID and are left out, so they are never mistaken for members.
pub fn last_known_members(status: &EtcdClusterStatus) -> Vec<String> {
    status
        .members
        .iter()
        .filter(|m| m.id.is_some())
        .map(|m| m.name.clone())
        .collect()
}

/// `status.currentVersion`, parsed.
pub fn last_known_version(status: &EtcdClusterStatus) -> Option<EtcdVersion> {
    status
        .current_version
        .as_deref()
        .and_then(EtcdVersion::parse)
}

/// Whether `pvc` was created strictly before `cluster` (whole seconds, as the API server stamps
/// them): then it cannot be one this EtcdCluster object created. Unknown timestamps: not.
pub fn predates(pvc: &PersistentVolumeClaim, cluster: &EtcdCluster) -> bool {
    match (
        &pvc.metadata.creation_timestamp,
        &cluster.metadata.creation_timestamp,
    ) {
        (Some(pvc), Some(cluster)) => pvc.0 < cluster.0,
        _ => false,
    }
}

/// The Pod's readiness gate [`build::SERVING_CONDITION`]: `None` without one, else whether
/// its condition is `True` (absent: not yet opened).
pub fn serving_gate(pod: &Pod) -> Option<bool> {
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| {
            gates
                .iter()
                .any(|g| g.condition_type == build::SERVING_CONDITION)
        });
    gated.then(|| condition_true(pod, build::SERVING_CONDITION))
}

/// Whether the kubelet reports the Pod Ready (its readiness probe passes, and its readiness
/// gates are open).
pub fn pod_ready(pod: &Pod) -> bool {
    condition_true(pod, "Ready")
}

/// Whether the Pod's condition `type_` is `True`.
fn condition_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        })
}

/// Every alarm any member reported, once, named by the member that raised it.
fn alarms_of(view: &ClusterView, cluster: &ClusterName) -> Vec<MemberAlarm> {
    let members = view.membership.as_ref().map(|(_, m)| m.as_slice());
    let name_of = |id: u64| {
        let info = members.and_then(|m| m.iter().find(|m| m.id == id));
        info.and_then(|m| {
            m.peer_urls
                .first()
                .and_then(|url| cluster.member_of_peer_url(url))
                .or_else(|| (!m.name.is_empty()).then(|| m.name.clone()))
        })
        .unwrap_or_else(|| format!("{id:x}"))
    };
    let mut alarms: Vec<MemberAlarm> = view
        .statuses
        .values()
        .filter_map(|s| s.as_ref().ok())
        .flat_map(MemberStatus::alarms)
        .map(|a| MemberAlarm {
            member: name_of(a.member_id),
            alarm: a.kind,
        })
        .collect();
    alarms.sort();
    alarms.dedup();
    alarms
}

fn member_from(
    info: &MemberInfo,
    status: Option<&Result<MemberStatus, String>>,
    uid: &str,
    unhealthy: &UnhealthySince,
    now: Instant,
) -> Member {
    let answered = status
        .and_then(|s| s.as_ref().ok())
        .filter(|s| s.healthy())
        .and_then(|s| Some((EtcdVersion::parse(&s.version)?, s.is_leader())));
    let health = match answered {
        Some((version, leader)) => {
            unhealthy.healthy(uid, info.id);
            MemberHealth::Healthy { version, leader }
        }
        None => MemberHealth::Unhealthy {
            unhealthy_for: unhealthy.unhealthy_for(uid, info.id, now),
        },
    };
    let db = status.and_then(|s| s.as_ref().ok()).map(|s| DbStats {
        size: u64::try_from(s.db_size).unwrap_or(0),
        in_use: u64::try_from(s.db_size_in_use).unwrap_or(0),
        quota: u64::try_from(s.db_size_quota).unwrap_or(0),
        revision: s.revision,
    });
    Member {
        id: info.id,
        name: info.name.clone(),
        peer_url: info.peer_urls.first().cloned().unwrap_or_default(),
        client_url: info.client_urls.first().cloned(),
        client_url_on_switch_port: info
            .client_urls
            .iter()
            .any(|url| url.ends_with(&format!(":{SWITCH_CLIENT_TLS_PORT}"))),
        learner: info.learner,
        health,
        db,
    }
}

/// The storage the existing members' PVCs were created with, as far as a change matters: the
/// largest requested size, and the class only when the spec names one and a PVC has another (an
/// unset class is filled in by the cluster's default class, which is not a change).
fn member_storage<'a>(
    desired: &StorageSpec,
    pvcs: impl Iterator<Item = &'a PersistentVolumeClaim>,
) -> Option<StorageSpec> {
    let mut current: Option<StorageSpec> = None;
    for pvc in pvcs {
        let spec = pvc.spec.as_ref();
        let size = spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .cloned();
        let Some(size) = size else { continue };
        let class = spec.and_then(|s| s.storage_class_name.clone());
        let class = match (&desired.storage_class_name, class) {
            (Some(wanted), Some(actual)) if *wanted != actual => Some(actual),
            _ => desired.storage_class_name.clone(),
        };
        let bigger = current.as_ref().is_none_or(|c| {
            etcd_api::validation::quantity_to_bytes(&size.0)
                > etcd_api::validation::quantity_to_bytes(&c.size.0)
        });
        let class_differs = class != desired.storage_class_name;
        if bigger || class_differs {
            current = Some(StorageSpec {
                size,
                storage_class_name: class,
                reclaim_policy: desired.reclaim_policy,
            });
        }
    }
    current
}

/// Every member name of the cluster that has a Pod, a PVC or a place in the last status.
pub fn known_members(cluster: &EtcdCluster, kube: &KubeObservation) -> Vec<String> {
    let mut members: Vec<String> = kube.pods.keys().chain(kube.pvcs.keys()).cloned().collect();
    if let Some(previous) = &cluster.status {
        members.extend(last_known_members(previous));
    }
    members.sort();
    members.dedup();
    members
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pvc(size: &str, class: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: class.map(str::to_owned),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_owned(), Quantity(size.into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn storage(size: &str, class: Option<&str>) -> StorageSpec {
        StorageSpec {
            size: Quantity(size.into()),
            storage_class_name: class.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn member_storage_reports_the_largest_size_and_only_real_class_changes() {
        let none: Vec<PersistentVolumeClaim> = vec![];
        assert_eq!(member_storage(&storage("1Gi", None), none.iter()), None);

        // The default class filled in by admission is not a change.
        let pvcs = [pvc("1Gi", Some("standard")), pvc("2Gi", Some("standard"))];
        assert_eq!(
            member_storage(&storage("4Gi", None), pvcs.iter()),
            Some(storage("2Gi", None))
        );
        // A named class that differs from the PVCs' is reported, so the planner refuses it.
        let pvcs = [pvc("1Gi", Some("fast"))];
        assert_eq!(
            member_storage(&storage("1Gi", Some("slow")), pvcs.iter()),
            Some(storage("1Gi", Some("fast")))
        );
    }

    fn etcd_cluster() -> EtcdCluster {
        let mut cluster = EtcdCluster::new("main", etcd_api::EtcdClusterSpec::new(3, "3.5.1"));
        cluster.metadata.namespace = Some("db".into());
        cluster.metadata.uid = Some("uid-1".into());
        cluster
    }

    /// A watch of every member object holds other clusters' too: a cluster's observation from
    /// it takes exactly the objects a list by its labels would return.
    #[test]
    fn a_cluster_owns_the_objects_with_its_labels_in_its_namespace() {
        let cluster = etcd_cluster();
        let pod = |namespace: &str, labels: BTreeMap<String, String>| Pod {
            metadata: kube::api::ObjectMeta {
                namespace: Some(namespace.into()),
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        };
        let mine = build::member_labels(&cluster, "main-0");
        assert!(belongs_to(&cluster, &pod("db", mine.clone())));
        assert!(
            !belongs_to(&cluster, &pod("other", mine.clone())),
            "same name, other namespace"
        );
        let mut other_cluster = mine.clone();
        other_cluster.insert(build::LABEL_CLUSTER.into(), "main2".into());
        assert!(!belongs_to(&cluster, &pod("db", other_cluster)));
        let mut partial = mine;
        partial.remove("app.kubernetes.io/managed-by");
        assert!(
            !belongs_to(&cluster, &pod("db", partial)),
            "not managed by us"
        );
        assert!(!belongs_to(&cluster, &Pod::default()));
    }

    fn no_objects() -> KubeObservation {
        KubeObservation {
            pods: BTreeMap::new(),
            pvcs: BTreeMap::new(),
            expandable_classes: BTreeMap::new(),
        }
    }

    fn info(id: u64) -> MemberInfo {
        let names = ClusterName::new("db", "main");
        let member = names.member_name(u32::try_from(id).unwrap());
        MemberInfo {
            id,
            name: member.clone(),
            peer_urls: vec![names.peer_url(&member)],
            client_urls: vec![names.client_url(&member)],
            learner: false,
        }
    }

    fn answer(id: u64, leader: u64, errors: &[&str]) -> Result<MemberStatus, String> {
        Ok(MemberStatus {
            id,
            version: "3.5.1".into(),
            leader_id: leader,
            errors: errors.iter().map(|e| (*e).to_owned()).collect(),
            ..MemberStatus::default()
        })
    }

    /// Member 0 answers, member 1 does not.
    fn view_with_one_down() -> ClusterView {
        ClusterView {
            membership: Some((7, vec![info(0), info(1)])),
            statuses: [(0, answer(0, 0, &[])), (1, Err("refused".into()))].into(),
            unreached: BTreeMap::new(),
        }
    }

    fn unhealthy_for(observed: &Observed, id: u64) -> Option<Duration> {
        match &observed.membership {
            Membership::Known(members) => members.iter().find(|m| m.id == id).and_then(|m| match m
                .health
            {
                MemberHealth::Unhealthy { unhealthy_for } => Some(unhealthy_for),
                MemberHealth::Healthy { .. } => None,
            }),
            Membership::Unknown => None,
        }
    }

    /// Issue 17: while no member list can be had (quorum lost), nobody can tell whether a member
    /// that was down before came back meanwhile; its grace period starts again once the list is
    /// back, so it is not removed the moment quorum returns.
    #[test]
    fn the_grace_clock_restarts_after_the_member_list_was_unknown() {
        let (cluster, kube, clock) = (etcd_cluster(), no_objects(), UnhealthySince::default());
        let t0 = Instant::now();
        let observed = to_observed(&cluster, &kube, &view_with_one_down(), &clock, t0);
        assert_eq!(unhealthy_for(&observed, 1), Some(Duration::ZERO));
        let outage = ClusterView {
            membership: None,
            statuses: BTreeMap::new(),
            unreached: BTreeMap::new(),
        };
        let during = t0 + Duration::from_secs(60);
        let observed = to_observed(&cluster, &kube, &outage, &clock, during);
        assert_eq!(observed.membership, Membership::Unknown);
        let back = t0 + Duration::from_secs(900);
        let observed = to_observed(&cluster, &kube, &view_with_one_down(), &clock, back);
        assert_eq!(unhealthy_for(&observed, 1), Some(Duration::ZERO));
    }

    /// Issue 17: a member added by hand is asked through its own client URL, once the member
    /// list names it.
    #[test]
    fn members_added_by_hand_are_asked_too() {
        let mut foreign = info(9);
        foreign.name = "hand-made".into();
        foreign.peer_urls = vec!["http://10.1.2.3:2380".into()];
        foreign.client_urls = vec!["http://10.1.2.3:2379".into()];
        let mut unstarted = info(5);
        unstarted.client_urls.clear();
        let view = ClusterView {
            membership: Some((7, vec![info(0), info(1), foreign, unstarted])),
            ..view_with_one_down()
        };
        let asked = vec![
            ClusterName::new("db", "main").client_url("main-0"),
            ClusterName::new("db", "main").client_url("main-1"),
        ];
        assert_eq!(unasked_client_urls(&asked, &view), ["http://10.1.2.3:2379"]);
    }

    /// A member Pod created at `created` (Unix seconds), without flags (plain HTTP).
    /// A wall clock long after every test Pod's creation and start.
    const LATER: i64 = 1_800_000_000;

    fn pod_created_at(created: i64) -> Pod {
        let at = k8s_openapi::jiff::Timestamp::from_second(created).unwrap();
        Pod {
            metadata: kube::api::ObjectMeta {
                creation_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// `etcd_cluster()` whose last status lists `members` as (name, voter).
    fn with_status_members(members: &[(&str, bool)]) -> EtcdCluster {
        let mut cluster = etcd_cluster();
        cluster.status = Some(EtcdClusterStatus {
            members: members
                .iter()
                .enumerate()
                .map(|(i, (name, voter))| etcd_api::MemberStatus {
                    name: (*name).to_owned(),
                    id: Some(format!("{:x}", i + 1)),
                    learner: !voter,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        cluster
    }

    /// Issue 24 (restore bench): a pass waited the whole etcd timeout on a member still starting
    /// (a learner copying the leader's snapshot). Only Pods whose etcd never answered since the
    /// Pod was created, and that the last status does not list as voters, are waited for
    /// briefly; a known voter keeps the full timeout however long since it answered.
    #[test]
    fn only_members_that_never_answered_since_their_pod_started_are_starting() {
        let url = |m: &str| ClusterName::new("db", "main").client_url(m);
        let created = 1_700_000_000;
        let kube = KubeObservation {
            pods: [
                ("main-0".to_owned(), pod_created_at(created)),
                ("main-1".to_owned(), pod_created_at(created)),
                ("main-2".to_owned(), pod_created_at(created)),
            ]
            .into(),
            ..no_objects()
        };
        // main-0 a voter, main-1 a learner, main-2 not yet a member: none answered yet.
        let cluster = with_status_members(&[("main-0", true), ("main-1", false)]);
        let never = |_: &str| None;
        assert_eq!(
            starting_endpoints(&cluster, &kube, never, LATER),
            [url("main-1"), url("main-2")],
            "a known voter is never starting"
        );
        // The learner answered (well after its Pod's creation): no longer starting.
        let learner_answered = |e: &str| (e == url("main-1")).then_some(created * 1000 + 5_000);
        assert_eq!(
            starting_endpoints(&cluster, &kube, learner_answered, LATER),
            [url("main-2")]
        );
        // An answer from before the Pod's creation (its predecessor's, under the same name,
        // also within the creation second) does not count.
        for before in [created * 1000 - 3_000, created * 1000 + 500] {
            let old_answer = |e: &str| (e == url("main-1")).then_some(before);
            assert_eq!(
                starting_endpoints(&cluster, &kube, old_answer, LATER),
                [url("main-1"), url("main-2")]
            );
        }
        // Before any status (a new cluster's seed), every Pod that never answered is starting.
        assert_eq!(
            starting_endpoints(&etcd_cluster(), &kube, never, LATER),
            [url("main-0"), url("main-1"), url("main-2")]
        );
        // A Pod without a creation time (not one the API server returned) is not starting.
        let no_time = KubeObservation {
            pods: [("main-0".to_owned(), Pod::default())].into(),
            ..no_objects()
        };
        assert!(starting_endpoints(&etcd_cluster(), &no_time, never, LATER).is_empty());
    }

    /// Issue 24 (repair bench): a deleted voter's Pod (the object not yet gone, its container
    /// still reported running) held the pass for the whole etcd timeout. A voter whose Pod is
    /// being deleted, or whose etcd container the kubelet reports not running, is waited for
    /// briefly; running in a Pod that stays, it keeps the full timeout.
    #[test]
    fn a_voter_whose_etcd_container_is_down_is_waited_for_briefly() {
        use k8s_openapi::api::core::v1::{
            ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
            ContainerStatus, PodStatus,
        };
        let url = |m: &str| ClusterName::new("db", "main").client_url(m);
        let with_state = |state: ContainerState| {
            let mut pod = pod_created_at(1_700_000_000);
            pod.status = Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: crate::build::CONTAINER_NAME.to_owned(),
                    state: Some(state),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            });
            pod
        };
        let exited = ContainerState {
            terminated: Some(ContainerStateTerminated::default()),
            ..ContainerState::default()
        };
        let waiting = ContainerState {
            waiting: Some(ContainerStateWaiting::default()),
            ..ContainerState::default()
        };
        let running = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..ContainerState::default()
        };
        let mut deleted = with_state(running.clone());
        deleted.metadata.deletion_timestamp = deleted.metadata.creation_timestamp.clone();
        let kube = KubeObservation {
            pods: [
                ("main-0".to_owned(), with_state(running)),
                ("main-1".to_owned(), with_state(exited)),
                ("main-2".to_owned(), with_state(waiting)),
                ("main-3".to_owned(), deleted),
            ]
            .into(),
            ..no_objects()
        };
        let cluster = with_status_members(&[
            ("main-0", true),
            ("main-1", true),
            ("main-2", true),
            ("main-3", true),
        ]);
        let answered = |_: &str| Some(1_800_000_000_000);
        assert_eq!(
            starting_endpoints(&cluster, &kube, answered, LATER),
            [url("main-1"), url("main-2"), url("main-3")],
            "only the running voter whose Pod stays keeps the full timeout"
        );
    }

    /// Issue 24 (restore bench): the pass before the second member add waited 3.6-3.8 s on the
    /// learner just promoted, which had lost etcd's publish race (caught up in raft, serving no
    /// client for 7 s): a voter in the last status, it got the full timeout. A voter whose etcd
    /// started within the publish window and never answered since its Pod was created is waited
    /// for briefly; once it answered, or past the window, it keeps the full timeout.
    #[test]
    fn a_voter_just_started_that_never_answered_is_waited_for_briefly() {
        use k8s_openapi::api::core::v1::{
            ContainerState, ContainerStateRunning, ContainerStatus, PodStatus,
        };
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let url = |m: &str| ClusterName::new("db", "main").client_url(m);
        let created = 1_700_000_000;
        let started = created + 2;
        let mut pod = pod_created_at(created);
        pod.status = Some(PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: crate::build::CONTAINER_NAME.to_owned(),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(
                            k8s_openapi::jiff::Timestamp::from_second(started).unwrap(),
                        )),
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        });
        let kube = KubeObservation {
            pods: [("main-0".to_owned(), pod)].into(),
            ..no_objects()
        };
        let mut cluster = with_status_members(&[("main-0", true)]);
        let never = |_: &str| None;
        let window = publish_window_secs(None);
        assert_eq!(
            window, 14,
            "5 s + 2 election timeouts of 1 s + 2 s + the bootstrap's 5 s"
        );
        for now in [started, started + 3, started + window] {
            assert_eq!(
                starting_endpoints(&cluster, &kube, never, now),
                [url("main-0")],
                "{} s after its etcd started",
                now - started
            );
        }
        assert!(
            starting_endpoints(&cluster, &kube, never, started + window + 1).is_empty(),
            "past the window a silent voter gets the full timeout"
        );
        let answered = |_: &str| Some((started + 1) * 1000);
        assert!(
            starting_endpoints(&cluster, &kube, answered, started + 3).is_empty(),
            "a voter that answered since its Pod was created gets the full timeout"
        );
        // A longer election timeout makes etcd's publish retry, and so the window, longer.
        cluster.spec.etcd_options = Some(etcd_api::EtcdOptions {
            election_timeout_ms: Some(5000),
            ..Default::default()
        });
        assert_eq!(
            starting_endpoints(&cluster, &kube, never, started + 20),
            [url("main-0")]
        );
    }

    /// Issue 24 (repair bench): detection of a member whose PVC and Pod were deleted took 5.2 s
    /// (1.35 s before): its pass waited the whole etcd timeout on the member's client URL,
    /// whose name still led to the deleted Pod's address. A member the last status lists
    /// without a Pod, voter or not, is waited for briefly: its Pod is recreated on its volume
    /// whatever it answers, and without a volume its answer only keeps a member whose data is
    /// gone from being removed while it still runs (a force-deleted Pod's etcd), which it does
    /// within the brief wait.
    #[test]
    fn members_listed_without_a_pod_are_waited_for_briefly() {
        let url = |m: &str| ClusterName::new("db", "main").client_url(m);
        let kube = KubeObservation {
            pods: [("main-0".to_owned(), pod_created_at(1_700_000_000))].into(),
            ..no_objects()
        };
        let cluster = with_status_members(&[("main-0", true), ("main-1", true), ("main-2", false)]);
        let answered = |_: &str| Some(1_800_000_000_000);
        assert_eq!(
            starting_endpoints(&cluster, &kube, answered, LATER),
            [url("main-1"), url("main-2")],
            "the voter with its Pod keeps the full timeout; the two without a Pod do not"
        );
    }

    /// While a restore holds the cluster nothing acts on etcd's answers, and its members are the
    /// replaced cluster's (stopped by the restore: the restore bench's pass waited the whole
    /// timeout on one going away) and the new seed: every member Pod is waited for briefly,
    /// whether it is a voter in the last status or answered before.
    #[test]
    fn during_a_restore_hold_every_member_pod_is_waited_for_briefly() {
        let url = |m: &str| ClusterName::new("db", "main").client_url(m);
        let kube = KubeObservation {
            pods: [("main-0".to_owned(), pod_created_at(1_700_000_000))].into(),
            ..no_objects()
        };
        let mut cluster = with_status_members(&[("main-0", true), ("main-1", true)]);
        assert_eq!(
            starting_endpoints(&cluster, &kube, |_| None, LATER),
            [url("main-1")],
            "a voter with its Pod is not starting, one without a Pod is"
        );
        cluster.metadata.annotations = Some(
            [(
                etcd_api::restore::RESTORING_ANNOTATION.to_owned(),
                "restore-1".to_owned(),
            )]
            .into(),
        );
        assert_eq!(
            starting_endpoints(&cluster, &kube, |_| None, LATER),
            [url("main-0"), url("main-1")]
        );
        let answered = |_: &str| Some(1_800_000_000_000);
        assert_eq!(
            starting_endpoints(&cluster, &kube, answered, LATER),
            [url("main-0"), url("main-1")]
        );
    }

    /// Issue 17 (defect 5): the kubelet's readiness of a member Pod is observed, as the second
    /// observer of a member's health.
    #[test]
    fn pod_readiness_is_observed() {
        use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
        let pod = |ready: &str| Pod {
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        let kube = KubeObservation {
            pods: [
                ("main-0".to_owned(), pod("True")),
                ("main-1".to_owned(), pod("False")),
                ("main-2".to_owned(), Pod::default()),
            ]
            .into(),
            pvcs: BTreeMap::new(),
            expandable_classes: BTreeMap::new(),
        };
        let clock = UnhealthySince::default();
        let observed = to_observed(
            &etcd_cluster(),
            &kube,
            &view_with_one_down(),
            &clock,
            Instant::now(),
        );
        let ready: Vec<bool> = observed.pods.values().map(|p| p.ready).collect();
        assert_eq!(ready, [true, false, false]);
    }

    /// Issue 17: etcd lists every alarm of the cluster in every member's Status. An alarm is not
    /// ill health: the members stay healthy voters and the alarms are reported with the member
    /// that raised them.
    #[test]
    fn alarms_are_reported_and_leave_members_healthy() {
        let (cluster, kube, clock) = (etcd_cluster(), no_objects(), UnhealthySince::default());
        let nospace = "memberID:1 alarm:NOSPACE";
        let view = ClusterView {
            membership: Some((7, vec![info(0), info(1)])),
            statuses: [(0, answer(0, 0, &[nospace])), (1, answer(1, 0, &[nospace]))].into(),
            unreached: BTreeMap::new(),
        };
        let view = ClusterView {
            statuses: view
                .statuses
                .into_iter()
                .map(|(id, s)| (id, s.map(|s| MemberStatus { leader_id: 1, ..s })))
                .collect(),
            ..view
        };
        let observed = to_observed(&cluster, &kube, &view, &clock, Instant::now());
        let Membership::Known(members) = &observed.membership else {
            panic!("{observed:?}")
        };
        assert!(members.iter().all(Member::healthy), "{members:?}");
        assert_eq!(
            observed.alarms,
            vec![crate::state::MemberAlarm {
                member: "main-1".into(),
                alarm: "NOSPACE".into()
            }]
        );
    }

    #[test]
    fn unhealthy_clock_starts_at_the_first_failure_and_resets_on_an_answer() {
        let clock = UnhealthySince::default();
        let t0 = Instant::now();
        assert_eq!(clock.unhealthy_for("u", 1, t0), Duration::ZERO);
        let later = t0 + Duration::from_secs(30);
        assert_eq!(clock.unhealthy_for("u", 1, later), Duration::from_secs(30));
        assert_eq!(clock.unhealthy_for("other", 1, later), Duration::ZERO);
        clock.healthy("u", 1);
        assert_eq!(clock.unhealthy_for("u", 1, later), Duration::ZERO);
    }

    fn labelled_pvc(member: &str, size: &str, class: Option<&str>) -> PersistentVolumeClaim {
        let mut pvc = pvc(size, class);
        pvc.metadata.name = Some(format!("data-{member}"));
        pvc.metadata.labels = Some([(build::LABEL_MEMBER.to_owned(), member.to_owned())].into());
        pvc
    }

    /// Only the classes of volumes smaller than the spec are asked, each once; what was read
    /// becomes the observation keyed by member, an absent class allowing no expansion.
    #[test]
    fn storage_classes_are_asked_only_for_volumes_to_grow() {
        let mut cluster = etcd_cluster();
        cluster.spec.storage.size = Quantity("2Gi".into());
        let pvcs = vec![
            labelled_pvc("main-0", "1Gi", Some("fast")),
            labelled_pvc("main-1", "1Gi", Some("fast")),
            labelled_pvc("main-2", "2Gi", Some("slow")),
            labelled_pvc("main-3", "1Gi", None),
            labelled_pvc("main-4", "1Gi", Some("gone")),
        ];
        assert_eq!(classes_to_ask(&cluster, &pvcs), ["fast", "gone"]);
        cluster.spec.storage.size = Quantity("1Gi".into());
        assert!(classes_to_ask(&cluster, &pvcs).is_empty(), "none to grow");

        let read = BTreeMap::from([("fast".to_owned(), Some(true)), ("gone".to_owned(), None)]);
        let mut unlabelled = pvc("1Gi", None);
        unlabelled.metadata.name = Some("stray".into());
        let mut all = pvcs.clone();
        all.push(unlabelled);
        let kube = kube_observation(vec![], all, &read);
        assert_eq!(
            kube.pvcs.keys().collect::<Vec<_>>(),
            ["main-0", "main-1", "main-2", "main-3", "main-4", "stray"],
            "by member label, else by name"
        );
        assert_eq!(
            kube.expandable_classes,
            BTreeMap::from([("fast".to_owned(), true), ("gone".to_owned(), false)])
        );
    }

    /// The cluster version is asked only of members that answered, and the lowest answer
    /// counts (members learn it from the leader, one after another).
    #[test]
    fn the_cluster_version_is_the_lowest_answer_of_members_that_answered() {
        let view = view_with_one_down();
        assert_eq!(
            cluster_version_urls(&view),
            [ClusterName::new("db", "main").client_url("main-0")]
        );
        let unknown = ClusterView {
            membership: None,
            ..view_with_one_down()
        };
        assert!(cluster_version_urls(&unknown).is_empty());
        let answers = |texts: &[&str]| texts.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            lowest_cluster_version(&answers(&["3.6.0", "3.5.0"])),
            Some((3, 5))
        );
        assert_eq!(lowest_cluster_version(&answers(&["not_decided"])), None);
        assert_eq!(lowest_cluster_version(&[]), None);
    }

    /// Only Pods built to take a v2 snapshot, not terminating, and listed with a client URL
    /// are asked whether they saved one.
    #[test]
    fn v2_snapshots_are_asked_of_the_pods_built_to_take_one() {
        let mut cluster = etcd_cluster();
        let pods: Vec<Pod> = (0..3)
            .map(|ordinal| {
                let member = format!("main-{ordinal}");
                Pod {
                    metadata: kube::api::ObjectMeta {
                        name: Some(member.clone()),
                        labels: Some([(build::LABEL_MEMBER.to_owned(), member)].into()),
                        annotations: (ordinal != 2).then(|| {
                            [(
                                build::ANNOTATION_SNAPSHOT_BEFORE_UPGRADE.to_owned(),
                                "3.5.35".into(),
                            )]
                            .into()
                        }),
                        deletion_timestamp: (ordinal == 1).then_some(
                            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                            ),
                        ),
                        ..Default::default()
                    },
                    ..Default::default()
                }
            })
            .collect();
        cluster.status = None;
        let kube = kube_observation(pods, vec![], &BTreeMap::new());
        let view = ClusterView {
            membership: Some((7, vec![info(0), info(1), info(2)])),
            statuses: BTreeMap::new(),
            unreached: BTreeMap::new(),
        };
        let observed = to_observed(
            &cluster,
            &kube,
            &view,
            &UnhealthySince::default(),
            Instant::now(),
        );
        assert_eq!(
            v2_snapshot_urls(&observed),
            [(
                "main-0".to_owned(),
                ClusterName::new("db", "main").client_url("main-0")
            )]
        );
        let unknown = to_observed(
            &cluster,
            &kube,
            &ClusterView::default(),
            &UnhealthySince::default(),
            Instant::now(),
        );
        assert!(v2_snapshot_urls(&unknown).is_empty(), "no member list");
    }

    /// Only a member that does not answer, whose etcd started within the publish window and
    /// whose Pod stays is asked; its answer counts only if it comes from that member, as the
    /// learner or voter the member list says it is, and says raft has it caught up.
    #[test]
    fn members_just_started_are_asked_for_their_raft_progress() {
        use crate::fixtures::{Build, V35, cluster, healthy, learner, name, unhealthy};
        let cluster_name = ClusterName::new("db", "main");
        // etcd's request timeout with the default election timeout (5 s + 2 x 1 s), plus 2 s.
        let now = 1_000_000;
        let started = |mut observed: crate::state::Observed, seconds_ago: &[(u32, i64)]| {
            observed.wall_clock = Some(now);
            for (ordinal, ago) in seconds_ago {
                observed
                    .pods
                    .get_mut(&name(*ordinal))
                    .unwrap()
                    .etcd_started_at = Some(now - ago);
            }
            observed
        };
        let members = || {
            cluster(3, V35)
                .members(vec![
                    healthy(0, V35, true),
                    learner(1, false),
                    unhealthy(2, 600),
                ])
                .pods(&[0, 1, 2])
        };
        assert_eq!(members().publish_window(), 14);
        // The silent learner started 3 s ago is asked; the voter silent since its etcd started
        // 10 minutes ago is not (etcd's publish race is over by then), nor the one answering.
        let observed = started(members(), &[(0, 600), (1, 3), (2, 600)]);
        assert_eq!(
            joining_member_metrics_urls(&observed),
            [(name(1), 0xa1, cluster_name.metrics_url(&name(1)))]
        );
        assert_eq!(
            cluster_name.metrics_url(&name(1)),
            "http://main-1.main.db.svc:2381"
        );
        // A silent voter whose etcd just (re)started is asked too.
        assert_eq!(
            joining_member_metrics_urls(&started(members(), &[(1, 3), (2, 9)])).len(),
            2
        );
        // Its etcd not running (no start time), or not known when this was observed: not asked.
        assert!(joining_member_metrics_urls(&started(members(), &[])).is_empty());
        let mut no_clock = observed.clone();
        no_clock.wall_clock = None;
        assert!(joining_member_metrics_urls(&no_clock).is_empty());
        let mut going = observed.clone();
        going.pods.get_mut(&name(1)).unwrap().terminating = true;
        assert!(joining_member_metrics_urls(&going).is_empty());
        let mut podless = observed.clone();
        podless.pods.remove(&name(1));
        assert!(joining_member_metrics_urls(&podless).is_empty());

        let progress = etcd_admin::RaftProgress {
            member_id: Some(0xa1),
            has_leader: true,
            learner: true,
            applied: 6,
            committed: 6,
            applying_snapshot: false,
        };
        let caught_up = |read: Result<etcd_admin::RaftProgress, String>| {
            let mut observed = observed.clone();
            record_raft_progress(&mut observed, [((name(1), 0xa1), read)]);
            observed.pods[&name(1)].raft_caught_up
        };
        assert!(caught_up(Ok(progress)));
        assert!(caught_up(Ok(etcd_admin::RaftProgress {
            member_id: None,
            ..progress
        })));
        // Another member answered on that name, a voter, behind, or no answer: not caught up.
        assert!(!caught_up(Ok(etcd_admin::RaftProgress {
            member_id: Some(0xb2),
            ..progress
        })));
        // main-1 is a learner in the member list: an answer as a voter is not its own.
        assert!(!caught_up(Ok(etcd_admin::RaftProgress {
            learner: false,
            ..progress
        })));
        assert!(!caught_up(Ok(etcd_admin::RaftProgress {
            committed: 6 + etcd_admin::APPLY_GAP_CAUGHT_UP + 1,
            ..progress
        })));
        assert!(!caught_up(Err("connection refused".into())));
    }

    /// A Secret without the operators' certificate is unusable, and says why.
    #[test]
    fn an_operator_secret_without_its_keys_is_unusable() {
        let problems = client_tls_of(&Secret::default(), true).unwrap_err();
        assert!(!problems.is_empty());
    }
}
