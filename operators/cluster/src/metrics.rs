//! What the cluster operator tells Prometheus about each EtcdCluster. No I/O: [`sample`] is a
//! pure function of one observation, [`ClusterMetrics::record`] sets the gauges from it, and the
//! probe server renders the registry on `GET /metrics`.
//!
//! Every per-cluster series is labelled `namespace` and `name` only (plus `alarm` or `version`,
//! both small closed sets, or `secret` for the certificates the operator does not renew, whose
//! series go with the Secret); never a member name or ID, so a cluster's series count does not
//! grow with member replacements. [`ClusterMetrics::forget`] removes every series of a cluster
//! that is gone.
//!
//! - `etcd_operator_cluster_desired_voters` — `spec.size`
//! - `etcd_operator_cluster_healthy_voters` — voting members that answer with a leader and no error
//! - `etcd_operator_cluster_voters` — voting members in etcd's member list
//! - `etcd_operator_cluster_learners` — learners in etcd's member list
//! - `etcd_operator_cluster_quorum` — 1 while etcd confirms quorum (a linearizable read
//!   succeeded on a voter this pass, as the status's `QuorumLost` reason means), else 0
//! - `etcd_operator_cluster_bootstrapping` — 1 until the cluster's first member answered (the
//!   quorum gauge is 0 then too, but nothing was lost: the quorum-loss alert leaves these out)
//! - `etcd_operator_cluster_leader_changes_total` — leader changes this process observed
//! - `etcd_operator_cluster_alarms{alarm}` — members reporting the alarm (`NOSPACE`, `CORRUPT`
//!   always present, 0 when clear)
//! - `etcd_operator_cluster_version_info{version}` — 1 for the version the members run
//! - `etcd_operator_cluster_certificate_expiry_timestamp_seconds{secret}` — notAfter (Unix
//!   seconds) of each certificate Secret the operator does not renew (provided, or filled by
//!   cert-manager); `secret` is a Secret name (bounded: the series of a Secret no longer used
//!   is removed)
//! - `etcd_operator_cluster_certificate_near_expiry{secret}` — 1 once that certificate is
//!   within its warning window (`certs::expiry_warning_time`: a sixth of its lifetime, at most
//!   7 days), else 0
//! - `etcd_operator_etcd_dials_total` — connections to etcd members the observations opened
//!   (one per member while the member stays; each reconcile used to open its own)
//! - `etcd_operator_reconcile_step_duration_seconds{step}` — how long each step of a reconcile
//!   pass took ([`PassStep`]: reading the member Pods, asking etcd, the action, the status
//!   write...); with the pass's debug log line (`pass`, [`PassClock`]) it says where a
//!   reconcile's time goes

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use etcd_admin::ClusterView;
use operator_runtime::ReconcileMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::naming::ClusterName;
use crate::plan::{Action, PodReason, RemovalReason};
use crate::state::{Membership, Observed};

/// Everything the cluster operator exposes: the shared reconcile families and the per-cluster
/// ones.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Reconciles, errors by reason, actions by kind (`controller="cluster"`).
    pub reconciles: ReconcileMetrics,
    /// Per-EtcdCluster series.
    pub clusters: ClusterMetrics,
    /// Connections to etcd members opened by the observations (`etcd_operator_etcd_dials_total`).
    pub etcd_dials: Counter,
    /// How long each step of a pass took (`etcd_operator_reconcile_step_duration_seconds`).
    pub steps: Family<StepLabels, Histogram, fn() -> Histogram>,
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let reconciles = ReconcileMetrics::register(registry, "cluster");
        reconciles.expect_reasons(crate::controller::ReconcileError::REASONS);
        let etcd_dials = Counter::default();
        registry.register(
            "etcd_dials",
            "Connections to etcd members the cluster operator's observations opened",
            etcd_dials.clone(),
        );
        let steps: Family<StepLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(step_histogram);
        registry.register(
            "reconcile_step_duration_seconds",
            "How long each step of a cluster operator's reconcile pass took",
            steps.clone(),
        );
        Metrics {
            reconciles,
            clusters: ClusterMetrics::register(registry),
            etcd_dials,
            steps,
        }
    }

    /// Observes every step `clock` timed in the step histogram.
    pub fn record_pass(&self, clock: &PassClock) {
        for (step, took) in &clock.steps {
            self.steps
                .get_or_create(&StepLabels {
                    step: step.name().to_owned(),
                })
                .observe(took.as_secs_f64());
        }
    }
}

/// 1 ms .. ~16 s: a step is an API request, a few etcd calls (5 s timeouts) or nothing.
fn step_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Labels of the step histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    /// [`PassStep::name`].
    pub step: String,
}

/// The steps of one reconcile pass, in the order they run (a closed set: the `step` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PassStep {
    /// The member Pods and PVCs from the watches' stores (no request).
    PodsFromStores,
    /// The member Pods and PVCs listed from the API server.
    PodsListed,
    /// The TLS Secrets read (and issued when missing).
    Tls,
    /// etcd asked: every member's status and the member list from a member in quorum.
    Etcd,
    /// etcd's cluster version (`GET /version` of every member that answered).
    ClusterVersion,
    /// Members' metrics: v2 snapshots before a 3.5 → 3.6 upgrade (only the Pods built to take
    /// one are asked), the raft progress of learners that did not answer.
    MemberMetrics,
    /// The cluster's Services, budget, NetworkPolicy and PVC owners written.
    Objects,
    /// The `spec.backup` schedule.
    BackupSchedule,
    /// The one planned action.
    Action,
    /// The status written (when it changed) and the events published.
    Report,
}

impl PassStep {
    /// Every step, in order.
    pub const ALL: [PassStep; 10] = [
        PassStep::PodsFromStores,
        PassStep::PodsListed,
        PassStep::Tls,
        PassStep::Etcd,
        PassStep::ClusterVersion,
        PassStep::MemberMetrics,
        PassStep::Objects,
        PassStep::BackupSchedule,
        PassStep::Action,
        PassStep::Report,
    ];

    /// The `step` label and the key in the pass's log line.
    pub fn name(self) -> &'static str {
        match self {
            PassStep::PodsFromStores => "pods_from_stores",
            PassStep::PodsListed => "pods_listed",
            PassStep::Tls => "tls",
            PassStep::Etcd => "etcd",
            PassStep::ClusterVersion => "cluster_version",
            PassStep::MemberMetrics => "member_metrics",
            PassStep::Objects => "objects",
            PassStep::BackupSchedule => "backup_schedule",
            PassStep::Action => "action",
            PassStep::Report => "report",
        }
    }
}

/// The time each step of one pass took, measured lap by lap: [`PassClock::lap`] after each step
/// charges the time since the previous lap (or the start) to that step. Displayed as the pass's
/// log line shows it: `etcd=41.2 action=12.0 ...` (milliseconds, steps in the order run).
#[derive(Clone, Debug)]
pub struct PassClock {
    started: Instant,
    last: Instant,
    steps: Vec<(PassStep, Duration)>,
}

impl PassClock {
    /// A clock started now.
    pub fn start() -> PassClock {
        let now = Instant::now();
        PassClock {
            started: now,
            last: now,
            steps: Vec::new(),
        }
    }

    /// `step` just ended: it took the time since the previous lap.
    pub fn lap(&mut self, step: PassStep) {
        let now = Instant::now();
        self.charge(step, now.saturating_duration_since(self.last));
        self.last = now;
    }

    /// Adds `took` to `step` (a step run twice in a pass is one entry).
    pub fn charge(&mut self, step: PassStep, took: Duration) {
        match self.steps.iter_mut().find(|(s, _)| *s == step) {
            Some((_, total)) => *total += took,
            None => self.steps.push((step, took)),
        }
    }

    /// Since the start.
    pub fn total(&self) -> Duration {
        self.started.elapsed()
    }

    /// The steps timed so far, in the order first run.
    pub fn steps(&self) -> &[(PassStep, Duration)] {
        &self.steps
    }
}

impl fmt::Display for PassClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (step, took)) in self.steps.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{}={:.1}", step.name(), took.as_secs_f64() * 1000.0)?;
        }
        Ok(())
    }
}

/// The alarms etcd raises; always exported (0 when clear) so alert rules compare numbers.
pub const KNOWN_ALARMS: [&str; 2] = ["NOSPACE", "CORRUPT"];

/// What one reconcile observed about a cluster, as numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterSample {
    /// `spec.size`.
    pub desired_voters: i64,
    /// Voting members in the member list.
    pub voters: i64,
    /// Voting members that answered healthy.
    pub healthy_voters: i64,
    /// Learners in the member list.
    pub learners: i64,
    /// etcd confirmed quorum: the member list is known, which needs a linearizable read to
    /// succeed on a voter (`etcd-admin`'s observation). Not a majority of `healthy_voters`: a
    /// voter the operator cannot reach, or one that has joined raft but does not serve clients
    /// yet (it publishes itself first), still counts in etcd's quorum; the status reports
    /// those as `MembersUnreachable` / `MemberUnhealthy`, never `QuorumLost`.
    pub quorum: bool,
    /// No member ever answered: the cluster is being created (see [`Observed::bootstrapping`]).
    pub bootstrapping: bool,
    /// The leader's member ID, if a healthy member is the leader.
    pub leader: Option<u64>,
    /// Alarm name → members reporting it.
    pub alarms: BTreeMap<String, i64>,
    /// The lowest version the healthy members run (the cluster's version during a roll).
    pub version: Option<String>,
}

/// The sample of one observation. `view` gives the alarms (etcd reports them as errors in
/// each member's status answer, e.g. `memberID:1 alarm:NOSPACE`).
pub fn sample(observed: &Observed, view: &ClusterView) -> ClusterSample {
    let mut out = ClusterSample {
        desired_voters: i64::from(observed.spec.size.max(0)),
        bootstrapping: observed.bootstrapping(),
        ..ClusterSample::default()
    };
    for alarm in KNOWN_ALARMS {
        out.alarms.insert(alarm.to_owned(), 0);
    }
    for status in view.statuses.values().filter_map(|s| s.as_ref().ok()) {
        for error in &status.errors {
            if let Some(alarm) = alarm_of(error) {
                *out.alarms.entry(alarm).or_default() += 1;
            }
        }
    }
    if let Membership::Known(members) = &observed.membership {
        let count = |f: &dyn Fn(&crate::state::Member) -> bool| {
            i64::try_from(members.iter().filter(|m| f(m)).count()).unwrap_or(i64::MAX)
        };
        out.voters = count(&|m| !m.learner);
        out.learners = count(&|m| m.learner);
        out.healthy_voters = count(&|m| !m.learner && m.healthy());
        out.quorum = out.voters > 0;
        out.leader = members.iter().find(|m| m.leader()).map(|m| m.id);
        out.version = members
            .iter()
            .filter_map(|m| m.version())
            .min()
            .map(|v| v.to_string());
    }
    if out.version.is_none() {
        out.version = observed.last_known_version.map(|v| v.to_string());
    }
    out
}

/// `NOSPACE` from `memberID:1 alarm:NOSPACE` (or `alarm:NOSPACE`); `None` for other errors.
fn alarm_of(error: &str) -> Option<String> {
    let (_, rest) = error.split_once("alarm:")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    // etcd's alarm types are a short closed enum; anything else is not an alarm name and must
    // not become a label value.
    (!name.is_empty() && name.len() <= 16).then(|| name.to_ascii_uppercase())
}

/// The action kind counted in `etcd_operator_actions_total{controller="cluster"}`; `None` for
/// waiting, refusing and converged (nothing was changed).
pub fn action_kind(action: &Action) -> Option<&'static str> {
    Some(match action {
        Action::BootstrapSeed { .. } => "SeedBootstrapped",
        Action::CreateMemberPod {
            reason: PodReason::NewMember,
            ..
        } => "MemberPodCreated",
        Action::CreateMemberPod {
            reason: PodReason::Restart | PodReason::SnapshotBeforeUpgrade,
            ..
        } => "PodRestarted",
        Action::AddLearner { .. } => "MemberAdded",
        Action::PromoteLearner { .. } => "MemberPromoted",
        Action::RemoveMember {
            reason: RemovalReason::ScaleDown,
            ..
        } => "MemberRemoved",
        Action::RemoveMember {
            reason: RemovalReason::Dead,
            ..
        } => "DeadMemberRemoved",
        Action::RemoveMember {
            reason: RemovalReason::LearnerStuck,
            ..
        } => "StuckLearnerRemoved",
        Action::DeletePod { .. } => "PodDeleted",
        Action::UpgradeMember { .. } => "MemberUpgraded",
        Action::RollMember { .. } => "MemberRolled",
        Action::RollForTls { .. } => "MemberRolledForTls",
        Action::UpdatePeerUrl { revert: false, .. } => "PeerUrlUpdated",
        Action::UpdatePeerUrl { revert: true, .. } => "PeerUrlReverted",
        Action::SnapshotBeforeUpgrade { .. } => "SnapshotBeforeUpgrade",
        Action::MarkV2WalClean { .. } => "V2WalClean",
        Action::AdoptPod { .. } => "PodAdopted",
        Action::ExpandVolume { .. } => "VolumeExpanded",
        Action::DefragmentMember { .. } => "MemberDefragmented",
        Action::OpenServingGate { .. } => "ServingGateOpened",
        Action::CompactKeyspace { .. } => "KeyspaceCompacted",
        Action::DisarmNoSpace { .. } => "NoSpaceDisarmed",
        Action::DeletePvc { .. } => "PvcDeleted",
        Action::Wait(_) | Action::Refuse(_) | Action::Converged => return None,
    })
}

/// `namespace` and `name` of an EtcdCluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ClusterLabels {
    /// Namespace of the EtcdCluster.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl From<&ClusterName> for ClusterLabels {
    fn from(c: &ClusterName) -> Self {
        ClusterLabels {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlarmLabels {
    namespace: String,
    name: String,
    alarm: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SecretLabels {
    namespace: String,
    name: String,
    secret: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    namespace: String,
    name: String,
    version: String,
}

/// What is remembered per cluster between reconciles: the leader (to count changes) and the
/// label values set (to remove them when they change or the cluster goes).
#[derive(Debug, Default)]
struct Remembered {
    leader: Option<u64>,
    alarms: Vec<String>,
    version: Option<String>,
    secrets: Vec<String>,
}

/// The per-cluster families.
#[derive(Clone, Debug)]
pub struct ClusterMetrics {
    desired_voters: Family<ClusterLabels, Gauge>,
    voters: Family<ClusterLabels, Gauge>,
    healthy_voters: Family<ClusterLabels, Gauge>,
    learners: Family<ClusterLabels, Gauge>,
    quorum: Family<ClusterLabels, Gauge>,
    bootstrapping: Family<ClusterLabels, Gauge>,
    leader_changes: Family<ClusterLabels, Counter>,
    alarms: Family<AlarmLabels, Gauge>,
    version: Family<VersionLabels, Gauge>,
    certificate_expiry: Family<SecretLabels, Gauge>,
    certificate_near_expiry: Family<SecretLabels, Gauge>,
    remembered: Arc<Mutex<HashMap<ClusterLabels, Remembered>>>,
}

impl ClusterMetrics {
    /// Registers the families.
    pub fn register(registry: &mut Registry) -> ClusterMetrics {
        let m = ClusterMetrics {
            desired_voters: Family::default(),
            voters: Family::default(),
            healthy_voters: Family::default(),
            learners: Family::default(),
            quorum: Family::default(),
            bootstrapping: Family::default(),
            leader_changes: Family::default(),
            alarms: Family::default(),
            version: Family::default(),
            certificate_expiry: Family::default(),
            certificate_near_expiry: Family::default(),
            remembered: Arc::default(),
        };
        let registry = registry.sub_registry_with_prefix("cluster");
        registry.register(
            "desired_voters",
            "Voting members the EtcdCluster asks for (spec.size)",
            m.desired_voters.clone(),
        );
        registry.register(
            "voters",
            "Voting members in etcd's member list",
            m.voters.clone(),
        );
        registry.register(
            "healthy_voters",
            "Voting members that answer with a leader and no alarm",
            m.healthy_voters.clone(),
        );
        registry.register(
            "learners",
            "Learners (non-voting members) in etcd's member list",
            m.learners.clone(),
        );
        registry.register(
            "quorum",
            "1 while etcd confirms quorum (a linearizable read succeeded on a voting member), 0 when quorum is lost or no member in quorum answers",
            m.quorum.clone(),
        );
        registry.register(
            "bootstrapping",
            "1 until the cluster's first member answered (quorum is 0 then, but was never lost), else 0",
            m.bootstrapping.clone(),
        );
        registry.register(
            "leader_changes",
            "Leader changes the operator observed between two reconciles",
            m.leader_changes.clone(),
        );
        registry.register(
            "alarms",
            "Members reporting an active etcd alarm, by alarm type",
            m.alarms.clone(),
        );
        registry.register(
            "version_info",
            "The etcd version the cluster's members run (always 1)",
            m.version.clone(),
        );
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "notAfter (Unix seconds) of a certificate Secret the operator does not renew (provided, or filled by cert-manager)",
            m.certificate_expiry.clone(),
        );
        registry.register(
            "certificate_near_expiry",
            "1 once a certificate the operator does not renew is within a sixth of its lifetime (at most 7 days) of its end, else 0",
            m.certificate_near_expiry.clone(),
        );
        m
    }

    /// Sets the certificate series of a cluster: `(Secret, notAfter Unix seconds, near its
    /// end)` for each certificate the operator does not renew; series of Secrets not listed
    /// any more are removed.
    pub fn record_certificates(&self, cluster: &ClusterName, certificates: &[(String, i64, bool)]) {
        let labels = ClusterLabels::from(cluster);
        let secret_labels = |secret: &str| SecretLabels {
            namespace: labels.namespace.clone(),
            name: labels.name.clone(),
            secret: secret.to_owned(),
        };
        let mut remembered = self.remembered();
        let seen = remembered.entry(labels.clone()).or_default();
        for old in &seen.secrets {
            if !certificates.iter().any(|(secret, _, _)| secret == old) {
                self.certificate_expiry.remove(&secret_labels(old));
                self.certificate_near_expiry.remove(&secret_labels(old));
            }
        }
        for (secret, not_after, near) in certificates {
            self.certificate_expiry
                .get_or_create(&secret_labels(secret))
                .set(*not_after);
            self.certificate_near_expiry
                .get_or_create(&secret_labels(secret))
                .set(i64::from(*near));
        }
        seen.secrets = certificates.iter().map(|(s, _, _)| s.clone()).collect();
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<ClusterLabels, Remembered>> {
        self.remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the cluster's series from one observation.
    pub fn record(&self, cluster: &ClusterName, sample: &ClusterSample) {
        let labels = ClusterLabels::from(cluster);
        self.desired_voters
            .get_or_create(&labels)
            .set(sample.desired_voters);
        self.voters.get_or_create(&labels).set(sample.voters);
        self.healthy_voters
            .get_or_create(&labels)
            .set(sample.healthy_voters);
        self.learners.get_or_create(&labels).set(sample.learners);
        self.quorum
            .get_or_create(&labels)
            .set(i64::from(sample.quorum));
        self.bootstrapping
            .get_or_create(&labels)
            .set(i64::from(sample.bootstrapping));
        let changes = self.leader_changes.get_or_create(&labels);

        let mut remembered = self.remembered();
        let seen = remembered.entry(labels.clone()).or_default();
        if let Some(leader) = sample.leader {
            // A change from one leader to another; the first leader seen is not a change, and
            // an observation without a leader keeps the last one (a new leader after an
            // election counts once).
            if seen.leader.is_some_and(|previous| previous != leader) {
                changes.inc();
            }
            seen.leader = Some(leader);
        }
        let alarm_labels = |alarm: &str| AlarmLabels {
            namespace: labels.namespace.clone(),
            name: labels.name.clone(),
            alarm: alarm.to_owned(),
        };
        for old in &seen.alarms {
            if !sample.alarms.contains_key(old) {
                self.alarms.remove(&alarm_labels(old));
            }
        }
        for (alarm, members) in &sample.alarms {
            self.alarms
                .get_or_create(&alarm_labels(alarm))
                .set(*members);
        }
        seen.alarms = sample.alarms.keys().cloned().collect();
        let version_labels = |version: &str| VersionLabels {
            namespace: labels.namespace.clone(),
            name: labels.name.clone(),
            version: version.to_owned(),
        };
        if seen.version != sample.version {
            if let Some(old) = &seen.version {
                self.version.remove(&version_labels(old));
            }
            seen.version = sample.version.clone();
        }
        if let Some(version) = &sample.version {
            self.version.get_or_create(&version_labels(version)).set(1);
        }
    }

    /// Removes every series of a cluster that is gone (or no longer watched).
    pub fn forget(&self, cluster: &ClusterLabels) {
        for family in [
            &self.desired_voters,
            &self.voters,
            &self.healthy_voters,
            &self.learners,
            &self.quorum,
            &self.bootstrapping,
        ] {
            family.remove(cluster);
        }
        self.leader_changes.remove(cluster);
        if let Some(seen) = self.remembered().remove(cluster) {
            for alarm in seen.alarms {
                self.alarms.remove(&AlarmLabels {
                    namespace: cluster.namespace.clone(),
                    name: cluster.name.clone(),
                    alarm,
                });
            }
            for secret in seen.secrets {
                let secret_labels = SecretLabels {
                    namespace: cluster.namespace.clone(),
                    name: cluster.name.clone(),
                    secret,
                };
                self.certificate_expiry.remove(&secret_labels);
                self.certificate_near_expiry.remove(&secret_labels);
            }
            if let Some(version) = seen.version {
                self.version.remove(&VersionLabels {
                    namespace: cluster.namespace.clone(),
                    name: cluster.name.clone(),
                    version,
                });
            }
        }
    }

    /// Removes the series of every cluster `exists` says is gone.
    pub fn retain(&self, exists: impl Fn(&ClusterLabels) -> bool) {
        let gone: Vec<ClusterLabels> = self
            .remembered()
            .keys()
            .filter(|c| !exists(c))
            .cloned()
            .collect();
        for cluster in gone {
            self.forget(&cluster);
        }
    }
}

#[cfg(test)]
mod tests;
