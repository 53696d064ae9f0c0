//! `EtcdCluster`: an etcd cluster whose membership the cluster operator manages.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodSecurityContext, ResourceRequirements, SecurityContext, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// The image repository used when `spec.repository` is not set; the image is
/// `<repository>:v<version>`.
pub const DEFAULT_REPOSITORY: &str = "gcr.io/etcd-development/etcd";
/// The PVC size used when `spec.storage.size` is not set.
pub const DEFAULT_STORAGE_SIZE: &str = "1Gi";
/// Longest EtcdCluster name: member Pods, PVCs and Services are named `<cluster>-<suffix>` and
/// must stay DNS labels (63 characters); `-client` and member suffixes need the other 13.
pub const MAX_CLUSTER_NAME_LENGTH: usize = 50;
/// etcd's own default heartbeat interval, used by the CEL rule that relates it to the election
/// timeout when only one of the two is set.
pub const ETCD_DEFAULT_HEARTBEAT_MS: i32 = 100;
/// etcd's own default election timeout.
pub const ETCD_DEFAULT_ELECTION_TIMEOUT_MS: i32 = 1000;

/// An etcd cluster of `size` members, each a Pod with its own PersistentVolumeClaim.
///
/// The operator seeds one member, then adds the others one at a time (as learners, promoted once
/// caught up), replaces dead members, scales and upgrades one member at a time, and never takes
/// an action that would leave the cluster without quorum.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "etcd.operator.rs",
    version = "v1alpha1",
    kind = "EtcdCluster",
    plural = "etcdclusters",
    shortname = "etcd",
    namespaced,
    status = "EtcdClusterStatus",
    derive = "PartialEq",
    doc = "An etcd cluster managed by the etcd cluster operator.",
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size", description = "Desired number of members"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyMembers", description = "Healthy voting members"),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.currentVersion", description = "etcd version the members run"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Available", type_ = "string", json_path = ".status.conditions[?(@.type==\"Available\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".status.clientEndpoint", description = "Client URL of the cluster (the client Service)", priority = 1),
    validation = kube::core::Rule::new(
        "self.metadata.name.size() <= 50 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"
    ).message(
        "metadata.name must be a DNS label of at most 50 characters (lowercase letters, digits and '-', starting with a letter): member Pods, PVCs and Services are named after it"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new(
    "!has(oldSelf.tls) || (has(self.tls) && self.tls == oldSelf.tls)"
).message("spec.tls cannot be removed or changed once set: a running plaintext cluster is switched to TLS by setting it, never back to plain HTTP (operator-managed certificates are renewed by themselves; rotate the CA with the annotation etcd.operator.rs/rotate-ca; update a Secret you provide in place)"))]
pub struct EtcdClusterSpec {
    /// Number of voting members, 1 to 7. Odd sizes tolerate the most failures for their cost:
    /// a cluster of N keeps quorum while more than N/2 members are healthy.
    #[schemars(range(min = 1, max = 7))]
    pub size: i32,

    /// etcd version to run, `MAJOR.MINOR.PATCH` without a `v`; default `3.6.16`. Supported
    /// minors: 3.4 (to upgrade from), 3.5 (3.5.3 or later: 3.5.0-3.5.2 are refused for a data
    /// consistency bug fixed in 3.5.3), 3.6 and 3.7. Changing it rolls the members one at a time,
    /// followers first; a minor upgrade starts once etcd's cluster version has reached the
    /// current minor. Downgrades and skipped minor versions (3.5 to 3.7) are refused.
    #[serde(default = "default_version")]
    #[schemars(regex(pattern = r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$"))]
    pub version: String,

    /// Image repository of etcd; the image is `<repository>:v<version>`.
    #[serde(default = "default_repository")]
    #[schemars(length(min = 1, max = 512))]
    pub repository: String,

    /// Stop all actions on this cluster (no member is added, removed or restarted). Status keeps
    /// being reported.
    #[serde(default)]
    pub paused: bool,

    /// Each member's PersistentVolumeClaim.
    #[serde(default)]
    pub storage: StorageSpec,

    /// Scheduling and metadata for member Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodPolicy>,

    /// etcd server flags the operator passes to every member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_options: Option<EtcdOptions>,

    /// TLS of peer and client traffic, each side configured separately (unset: plain HTTP).
    /// Certificates come from Secrets you provide, from cert-manager (`certManager`), or, by
    /// default, from a CA the operator keeps per cluster. Setting it on a running plaintext
    /// cluster switches it to TLS member by member, quorum-gated, with no write lost: each
    /// member first listens on both schemes (peers `https://` on port 2382 next to `http://` on
    /// 2380, clients `https://` on 2378 next to `http://` on 2379), its peer URL moves to
    /// `https://…:2382`, then the plaintext peer listeners go. Plaintext clients keep working on
    /// 2379 until the EtcdCluster carries the annotation
    /// `etcd.operator.rs/drop-plaintext-clients: "true"`: then each member rolls once more to
    /// serve `https://` alone, on 2379 and still on 2378 (clients that moved there keep
    /// working). Once set, it cannot be removed or changed.
    /// Certificates change without it: operator-managed ones are renewed with a third of their
    /// lifetime left, the annotation `etcd.operator.rs/rotate-ca` rotates the operator-managed
    /// CA, and a Secret you provide can be updated in place; each change rolls the members one
    /// at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::TlsSpec>,

    /// Database maintenance: defragmentation when the fragmented space is worth it, and what
    /// the operator may do to clear a NOSPACE alarm. Unset: no scheduled defragmentation; a
    /// NOSPACE alarm is still cleared by defragmenting every member and disarming it, without
    /// compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<MaintenanceSpec>,

    /// The NetworkPolicy the operator keeps in front of the members: peer traffic only from
    /// members, client traffic from labelled Pods (`etcd.operator.rs/client-of: <cluster>`),
    /// the operators and `clients`. Unset: the operator's default (on for TLS clusters with the
    /// chart's defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<crate::network::NetworkPolicySpec>,

    /// Scheduled backups of this cluster: the operator keeps a CronJob in the cluster's
    /// namespace (`<cluster>-backups`, cut short with a hash for names over 44 characters;
    /// owned by the EtcdCluster, with its own ServiceAccount,
    /// Role and RoleBinding of the same name) that creates an EtcdBackup on the schedule and
    /// applies the retention, as the chart's `scheduledBackup` CronJob does. Removing it
    /// removes the CronJob and its ServiceAccount, Role and RoleBinding; EtcdBackups and their
    /// S3 objects stay. Run one at once with `kubectl create job --from=cronjob/<cluster>-backups
    /// <name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<ScheduledBackupSpec>,
}

/// The CEL rule on `spec.backup.schedule` and `spec.maintenance.defrag.schedule`: five cron
/// fields (numbers, names, ranges, lists, steps, `*`, `?`) or one of the CronJob's macros. The
/// values' ranges are checked by [`crate::cron::Schedule::parse`] when the operator reads the
/// spec; a value out of range is reported naming the field.
pub const CRON_SCHEDULE_RULE: &str = r"self.matches(r'^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|((\*|\?|[0-9]{1,2}(-[0-9]{1,2})?|[A-Za-z]{3}(-[A-Za-z]{3})?)(/[0-9]{1,2})?(,(\*|\?|[0-9]{1,2}(-[0-9]{1,2})?|[A-Za-z]{3}(-[A-Za-z]{3})?)(/[0-9]{1,2})?)*)( +((\*|\?|[0-9]{1,2}(-[0-9]{1,2})?|[A-Za-z]{3}(-[A-Za-z]{3})?)(/[0-9]{1,2})?(,(\*|\?|[0-9]{1,2}(-[0-9]{1,2})?|[A-Za-z]{3}(-[A-Za-z]{3})?)(/[0-9]{1,2})?)*)){4})$')";

/// The message of [`CRON_SCHEDULE_RULE`] on `spec.backup.schedule`.
pub const BACKUP_SCHEDULE_MESSAGE: &str = "spec.backup.schedule must be a cron schedule: five fields (minute hour day-of-month month day-of-week) of numbers, ranges, lists, steps or *, e.g. \"0 */6 * * *\", or one of @hourly, @daily, @weekly, @monthly, @yearly";

/// A per-cluster backup schedule (`spec.backup`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledBackupSpec {
    /// When to back up, in cron syntax (`minute hour day-of-month month day-of-week`, e.g.
    /// `0 */6 * * *`), in the controller manager's time zone (usually UTC). A run still going
    /// when the next is due is not doubled up.
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = kube::core::Rule::new(CRON_SCHEDULE_RULE).message(BACKUP_SCHEDULE_MESSAGE))]
    pub schedule: String,

    /// Where the snapshots go: the same fields as an EtcdBackup's `spec.s3`. The credentials
    /// Secret is read by the backup operator (and, with `deleteObjects`, by the CronJob).
    pub s3: crate::S3Destination,

    /// Keep this many Succeeded scheduled backups of the cluster (ordered by snapshot time,
    /// then revision); older ones are deleted after each run. Failed ones do not count. 0
    /// (default) keeps all. Scheduled backups of this cluster made by the chart's
    /// `scheduledBackup` CronJob count too (both label theirs `etcd.operator.rs/scheduled`).
    #[serde(default)]
    #[schemars(range(min = 0, max = 10000))]
    pub retain: i32,

    /// With `retain`: also delete the S3 objects of the backups retention deletes.
    #[serde(default)]
    pub delete_objects: bool,

    /// `spec.timeoutSeconds` of each backup (default 1800): the upload is aborted after this
    /// long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 86400))]
    pub timeout_seconds: Option<i64>,

    /// Start no new run (the CronJob's `suspend`); a run already going finishes.
    #[serde(default)]
    pub suspend: bool,
}

/// Database maintenance of the members.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceSpec {
    /// Defragment a member when its database holds enough free (fragmented) space: one member
    /// at a time, followers first and the leader last, only while every member is healthy and
    /// the others keep quorum. A member does not serve while it defragments (seconds per GiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defrag: Option<DefragSpec>,

    /// On a NOSPACE alarm, compact the key space to the current revision first (drops the
    /// history of every key: watchers and reads at older revisions fail), so that the
    /// defragmentation that follows frees the space old revisions held. Default false: only
    /// defragmentation (which frees what etcd's own auto-compaction already released) and the
    /// disarm. etcd's `autoCompaction*` options stay the normal way to bound history.
    #[serde(default)]
    pub compact_on_no_space: bool,
}

/// When a member is worth defragmenting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefragSpec {
    /// Minimum share of the database file that is free space, in percent (default 50): a
    /// member whose `dbSize - dbSizeInUse` is at least this share of `dbSize` is defragmented.
    #[serde(default = "default_defrag_percent")]
    #[schemars(range(min = 1, max = 100))]
    pub threshold_percent: i32,

    /// Minimum free space in bytes (default 64 MiB): smaller databases are not worth the pause.
    #[serde(default = "default_defrag_min_bytes")]
    #[schemars(range(min = 0))]
    pub min_fragmented_bytes: i64,

    /// Defragment only in maintenance windows: each starts when this cron schedule fires
    /// (`minute hour day-of-month month day-of-week`, UTC, e.g. `0 2 * * *` nightly at 02:00)
    /// and lasts `windowMinutes`. Unset: whenever the threshold is passed. A NOSPACE alarm is
    /// cleared at once, in a window or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = kube::core::Rule::new(CRON_SCHEDULE_RULE).message(DEFRAG_SCHEDULE_MESSAGE))]
    pub schedule: Option<String>,

    /// Length of each window of `schedule`, in minutes (default 60). A defragmentation started
    /// in a window finishes after it closes; no other starts.
    #[serde(default = "default_defrag_window_minutes")]
    #[schemars(range(min = 1, max = 10080))]
    pub window_minutes: i32,
}

/// The message of [`CRON_SCHEDULE_RULE`] on `spec.maintenance.defrag.schedule`.
pub const DEFRAG_SCHEDULE_MESSAGE: &str = "spec.maintenance.defrag.schedule must be a cron schedule: five fields (minute hour day-of-month month day-of-week) of numbers, ranges, lists, steps or *, e.g. \"0 2 * * *\", or one of @hourly, @daily, @weekly, @monthly, @yearly";

impl Default for DefragSpec {
    fn default() -> Self {
        Self {
            threshold_percent: default_defrag_percent(),
            min_fragmented_bytes: default_defrag_min_bytes(),
            schedule: None,
            window_minutes: default_defrag_window_minutes(),
        }
    }
}

fn default_defrag_window_minutes() -> i32 {
    60
}

fn default_defrag_percent() -> i32 {
    50
}

fn default_defrag_min_bytes() -> i64 {
    64 * 1024 * 1024
}

fn default_version() -> String {
    crate::validation::DEFAULT_VERSION.to_owned()
}

fn default_repository() -> String {
    DEFAULT_REPOSITORY.to_owned()
}

impl EtcdClusterSpec {
    /// The spec a manifest naming only `size` and `version` gets: every other field at the
    /// default the schema fills in. Tests and benches start from it and set what they vary, so a
    /// new field is added in one place.
    pub fn new(size: i32, version: impl Into<String>) -> Self {
        Self {
            size,
            version: version.into(),
            repository: default_repository(),
            paused: false,
            storage: StorageSpec::default(),
            pod: None,
            etcd_options: None,
            tls: None,
            maintenance: None,
            network_policy: None,
            backup: None,
        }
    }
}

/// Storage of each member.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new(
    "has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)"
).message("storageClassName is immutable: existing members' volumes cannot move to another class"))]
pub struct StorageSpec {
    /// Size of each member's PersistentVolumeClaim (a quantity such as `8Gi`). Without
    /// `etcdOptions.quotaBackendBytes` the backend quota is derived from it: (size - 384 MiB for
    /// the WAL) / 2, at least a quarter of it, at most 8 GiB (320 MiB for 1Gi), so the database
    /// and a second copy of it (a snapshot from the leader, a defragmentation) always fit.
    #[serde(default = "default_storage_size")]
    pub size: Quantity,

    /// StorageClass of the claims; unset uses the cluster's default class. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,

    /// What happens to a member's PVC when the member is removed by a scale-down or the cluster is
    /// deleted: `Retain` (default) keeps it, `Delete` deletes it once the member was cleanly
    /// removed from etcd.
    #[serde(default)]
    pub reclaim_policy: ReclaimPolicy,
}

impl Default for StorageSpec {
    fn default() -> Self {
        Self {
            size: default_storage_size(),
            storage_class_name: None,
            reclaim_policy: ReclaimPolicy::default(),
        }
    }
}

fn default_storage_size() -> Quantity {
    Quantity(DEFAULT_STORAGE_SIZE.to_owned())
}

/// What to do with a member's PVC once the member is gone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReclaimPolicy {
    /// Keep the PVC (and the data on it).
    #[default]
    Retain,
    /// Delete the PVC after the member was cleanly removed from the cluster.
    Delete,
}

/// Metadata and scheduling of member Pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodPolicy {
    /// Extra labels on member Pods (the operator's own labels win on conflict).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,

    /// Extra annotations on member Pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,

    /// Resources of the etcd container. etcd holds its raft log in memory until a snapshot:
    /// request memory for a few times the database size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Node selector of member Pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Affinity of member Pods (e.g. anti-affinity to spread members over nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Tolerations of member Pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// PriorityClass of member Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub priority_class_name: Option<String>,

    /// Pod security context of member Pods, over the operator's defaults: each field you set
    /// replaces the default of that field, fields you leave unset keep it. Defaults (which the
    /// `restricted` Pod Security level accepts): `runAsNonRoot: true`, `runAsUser`,
    /// `runAsGroup` and `fsGroup` 65532 (so the data volume is writable by etcd),
    /// `fsGroupChangePolicy: OnRootMismatch`, `seccompProfile: {type: RuntimeDefault}`. A
    /// volume whose storage ignores `fsGroup` (hostPath, some local provisioners) must be
    /// writable by that user, or set `runAsUser: 0` and `runAsNonRoot: false` to run as root.
    /// Changing it rolls the members one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,

    /// Security context of the etcd container, over the operator's defaults (each field you
    /// set replaces that default): `allowPrivilegeEscalation: false`,
    /// `readOnlyRootFilesystem: true` (etcd writes only to its data volume) and
    /// `capabilities: {drop: [ALL]}`. Changing it rolls the members one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
}

/// etcd server options. Unset fields keep etcd's defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new(
    "(has(self.electionTimeoutMs) ? self.electionTimeoutMs : 1000) >= 5 * (has(self.heartbeatIntervalMs) ? self.heartbeatIntervalMs : 100)"
).message("electionTimeoutMs must be at least 5 times heartbeatIntervalMs (etcd's defaults are 1000 and 100)"))]
pub struct EtcdOptions {
    /// Backend database size quota in bytes (`--quota-backend-bytes`). Default: derived from
    /// `storage.size` (see there), not etcd's own 2 GiB, which a small volume cannot hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 8589934592_i64))]
    pub quota_backend_bytes: Option<i64>,

    /// Auto-compaction mode (`--auto-compaction-mode`): `Periodic` or `Revision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_compaction_mode: Option<AutoCompactionMode>,

    /// Auto-compaction retention (`--auto-compaction-retention`): a duration such as `1h` or
    /// `30m` for `Periodic`, a number of revisions for `Revision`. `0` disables it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"))]
    pub auto_compaction_retention: Option<String>,

    /// Committed transactions between two raft snapshots (`--snapshot-count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub snapshot_count: Option<i64>,

    /// Heartbeat interval in milliseconds (`--heartbeat-interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub heartbeat_interval_ms: Option<i32>,

    /// Election timeout in milliseconds (`--election-timeout`), at least 5 × the heartbeat
    /// interval; etcd refuses more than 50000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 50000))]
    pub election_timeout_ms: Option<i32>,
}

/// etcd's `--auto-compaction-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AutoCompactionMode {
    /// Keep a time window of history (`periodic`).
    Periodic,
    /// Keep a number of revisions of history (`revision`).
    Revision,
}

impl AutoCompactionMode {
    /// The value of etcd's flag.
    pub fn as_flag(self) -> &'static str {
        match self {
            AutoCompactionMode::Periodic => "periodic",
            AutoCompactionMode::Revision => "revision",
        }
    }
}

/// What the operator observed of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// One-word summary; the conditions carry the detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClusterPhase>,

    /// `Available` (quorum held and every member healthy), `Progressing` (scaling, upgrading or
    /// restoring, with the reason) and `Degraded` (which member is unhealthy and why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// Healthy voting members.
    #[serde(default)]
    pub ready_members: i32,

    /// Every member etcd reports, and every member Pod that is not (yet) one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub members: Vec<MemberStatus>,

    /// The version every member runs, once they all run the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<String>,

    /// etcd's cluster ID, in hexadecimal as etcdctl prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "clusterID")]
    pub cluster_id: Option<String>,

    /// Client URL of the cluster's client Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_endpoint: Option<String>,
}

/// One-word state of an EtcdCluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ClusterPhase {
    /// The seed member is being created.
    Creating,
    /// Every member is healthy at the desired size and version.
    Running,
    /// Members are being added or removed.
    Scaling,
    /// Members are being moved to a new version.
    Upgrading,
    /// Quorum holds but a member is unhealthy or being replaced.
    Degraded,
    /// Fewer than a majority of members are healthy: the operator does nothing destructive and
    /// waits for the members to come back or for an EtcdRestore.
    QuorumLost,
    /// An EtcdRestore is rebuilding the cluster.
    Restoring,
    /// `spec.paused` is set.
    Paused,
    /// The spec cannot be acted on; the Degraded condition names the field.
    Invalid,
}

/// One etcd member.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// Member name (also its Pod's name).
    pub name: String,
    /// etcd member ID in hexadecimal, once the member is known to etcd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Peer URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "peerURL")]
    pub peer_url: Option<String>,
    /// Client URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "clientURL")]
    pub client_url: Option<String>,
    /// etcd server version the member reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The member answered its status request and is not reporting alarms.
    #[serde(default)]
    pub healthy: bool,
    /// The member is a non-voting learner.
    #[serde(default)]
    pub learner: bool,
    /// The member is the raft leader.
    #[serde(default)]
    pub leader: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_is_the_spec_of_a_manifest_naming_only_size_and_version() {
        let from_manifest: EtcdClusterSpec =
            serde_json::from_value(serde_json::json!({"size": 3, "version": "3.5.35"})).unwrap();
        assert_eq!(EtcdClusterSpec::new(3, "3.5.35"), from_manifest);
    }
}
