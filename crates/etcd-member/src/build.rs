//! The Kubernetes objects of a cluster, built from the EtcdCluster alone. Pure: no client calls.
//!
//! ```text
//!   EtcdCluster ──▶ peer Service <cluster>           headless, DNS <member>.<cluster>.<ns>.svc
//!               ──▶ client Service <cluster>-client  ClusterIP, port 2379
//!               ──▶ PodDisruptionBudget <cluster>    minAvailable = quorum(spec.size)
//!               ──▶ per member: Pod <member> + PVC <member> (data at DATA_MOUNT)
//! ```
//!
//! Every builder is deterministic (maps are `BTreeMap`s, lists in a fixed order), so an unchanged
//! spec builds byte-identical objects and a server-side apply of them is a no-op.
//!
//! Which objects the garbage collector may delete with the EtcdCluster is decided here, by the
//! owner references: Pods, Services and the PodDisruptionBudget always; PVCs only under
//! `reclaimPolicy: Delete` (see [`member_pvc`]).

use std::collections::BTreeMap;

use etcd_api::validation::EtcdVersion;
use etcd_api::{EtcdCluster, EtcdClusterSpec, ReclaimPolicy};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, HTTPGetAction, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, Pod, PodReadinessGate,
    PodSecurityContext, PodSpec, Probe, SeccompProfile, Secret, SecretVolumeSource,
    SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use crate::naming::{
    CLIENT_PORT, ClusterName, METRICS_PORT, PEER_PORT, SWITCH_CLIENT_TLS_PORT, SWITCH_PEER_TLS_PORT,
};
use crate::plan;
pub use crate::plan::tls_switch::{Listen, Listeners};

#[cfg(test)]
mod tests;

/// Field manager of everything this operator applies (objects and status).
pub const FIELD_MANAGER: &str = "etcd-cluster-operator";
/// Where a member's PVC is mounted. etcd's `--data-dir` is [`DATA_DIR`], a subdirectory that
/// etcd creates itself: a fresh volume's root may hold `lost+found`, which etcd would refuse as
/// a non-empty data directory.
pub const DATA_MOUNT: &str = "/var/lib/etcd";
/// etcd's `--data-dir`, on the member's PVC.
pub const DATA_DIR: &str = "/var/lib/etcd/data";
/// The etcd binary in the etcd image.
pub const ETCD_BINARY: &str = "/usr/local/bin/etcd";
/// Name of the etcd container in member Pods.
pub const CONTAINER_NAME: &str = "etcd";
/// Name of the data volume in member Pods.
pub const DATA_VOLUME: &str = "data";
/// Seconds a member Pod gets between SIGTERM and SIGKILL. etcd exits at once when it has
/// quorum, but a member of a cluster without quorum takes about 10 s (etcd-facts.md); 30 s
/// lets it close its WAL cleanly in every case.
pub const TERMINATION_GRACE_SECONDS: i64 = 30;

/// Where the peer certificate Secret is mounted (`tls.crt`, `tls.key`, `ca.crt`).
pub const PEER_TLS_DIR: &str = "/etc/etcd/tls/peer";
/// Where the client-port certificate Secret is mounted.
pub const CLIENT_TLS_DIR: &str = "/etc/etcd/tls/client";
/// Volume of [`PEER_TLS_DIR`].
pub const PEER_TLS_VOLUME: &str = "peer-tls";
/// Volume of [`CLIENT_TLS_DIR`].
pub const CLIENT_TLS_VOLUME: &str = "client-tls";

/// Label: the EtcdCluster an object belongs to.
pub const LABEL_CLUSTER: &str = "etcd.operator.rs/cluster";
/// Label: the member a Pod or PVC belongs to.
pub const LABEL_MEMBER: &str = "etcd.operator.rs/member";
/// Annotation on member Pods: the etcd version the Pod was created to run (for humans; the
/// image says the same).
pub const ANNOTATION_VERSION: &str = "etcd.operator.rs/version";
/// Annotation on member Pods: [`config_hash`] of the spec the Pod was built from. The planner
/// rolls members whose Pod carries another hash (or none: built by an older operator) one at a
/// time, so a change of `spec.pod` or `spec.etcdOptions` reaches the running members.
pub const ANNOTATION_CONFIG_HASH: &str = "etcd.operator.rs/config-hash";
/// Annotation on member Pods of TLS clusters: [`member_tls_hash`] of the certificate Secrets
/// the Pod mounted when it was created. etcd reads its trusted CA file only at start (measured
/// on 3.5 and 3.6; it re-reads its own certificate per handshake), and a node may refresh a
/// Secret volume late or never: a member whose Secrets changed since (a renewal, a CA rotation
/// step, a Secret you provide updated) is rolled like a configuration change, one at a time.
pub const ANNOTATION_TLS_HASH: &str = "etcd.operator.rs/tls-hash";
/// On a member PVC: the etcd version its Pod runs, with `--snapshot-count=1`, to take a v2
/// snapshot before the member moves to etcd 3.6 (see [`crate::state::PvcState`]). Also on that
/// Pod (value `"true"`).
pub const ANNOTATION_SNAPSHOT_BEFORE_UPGRADE: &str = "etcd.operator.rs/snapshot-before-upgrade";
/// On a member PVC: a v2 snapshot was taken after the last v2 request etcd 3.4 left in the WAL;
/// the member may run etcd 3.6.
pub const ANNOTATION_V2_WAL_CLEAN: &str = "etcd.operator.rs/v2-wal-clean";
/// Revision of what this builder makes of the spec. Bump it when [`member_pod`] changes the Pod
/// of an unchanged spec in a way running members should get (a new flag, security settings):
/// the hash changes and every member is rolled once, quorum-safely. Not for cosmetic changes:
/// each bump restarts every member of every cluster.
///
/// 2: members run non-root with the `restricted` Pod Security defaults
/// ([`pod_security_context`], [`container_security_context`]); members built at revision 1 ran
/// as root with default capabilities and are rolled onto it.
///
/// 3: members carry the readiness gate [`SERVING_CONDITION`], which the operator closes while it
/// defragments the member (its client traffic drained); members built at revision 2 are rolled
/// onto it.
pub const POD_TEMPLATE_REVISION: u32 = 3;
/// The Pod condition of member Pods' readiness gate (`spec.readinessGates`): the operator sets
/// it `False` while it defragments the member, so the Pod is not Ready and the client Service
/// stops routing to it, and `True` otherwise (a new Pod is opened by the next reconcile; until
/// then it is not Ready, as it is until its readiness probe passes).
pub const SERVING_CONDITION: &str = "etcd.operator.rs/serving";
/// The user and group members run as (and the `fsGroup` of their volumes) unless
/// `spec.pod.securityContext` says otherwise: distroless' `nonroot`, the user etcd's own images
/// are built for; any non-zero uid works, etcd needs no file of its image but its binary.
pub const MEMBER_UID: i64 = 65532;
/// `app.kubernetes.io/managed-by` value of our objects.
pub const MANAGED_BY: &str = "etcd-cluster-operator";

/// Why an object cannot be built.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum BuildError {
    /// The EtcdCluster has no name (never the case for an object read from the API).
    #[error("the EtcdCluster has no metadata.name")]
    MissingName,
    /// The EtcdCluster has no namespace: objects cannot be placed next to it.
    #[error("EtcdCluster {cluster} has no metadata.namespace")]
    MissingNamespace {
        /// Cluster name.
        cluster: String,
    },
    /// The EtcdCluster has no UID: owner references and the cluster token need it.
    #[error("EtcdCluster {cluster} has no metadata.uid")]
    MissingUid {
        /// Cluster name.
        cluster: String,
    },
    /// The `--initial-cluster` list lacks the member itself at its own peer URL; etcd would
    /// refuse to start ("couldn't find local name in the initial cluster").
    #[error("--initial-cluster of member {member} does not list {member}={peer_url}")]
    MemberNotInInitialCluster {
        /// Member name.
        member: String,
        /// The peer URL the member advertises.
        peer_url: String,
    },
}

impl BuildError {
    /// PascalCase reason for events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            BuildError::MissingName => "MissingName",
            BuildError::MissingNamespace { .. } => "MissingNamespace",
            BuildError::MissingUid { .. } => "MissingUid",
            BuildError::MemberNotInInitialCluster { .. } => "MemberNotInInitialCluster",
        }
    }
}

/// The identity an owned object needs: namespace, name and UID of the EtcdCluster.
struct Owner<'a> {
    name: ClusterName,
    uid: &'a str,
}

fn owner(cluster: &EtcdCluster) -> Result<Owner<'_>, BuildError> {
    let name = cluster_name(cluster)?;
    let uid = cluster
        .metadata
        .uid
        .as_deref()
        .ok_or_else(|| BuildError::MissingUid {
            cluster: name.name.clone(),
        })?;
    Ok(Owner { name, uid })
}

impl Owner<'_> {
    /// Makes the EtcdCluster the controller of the object: the garbage collector deletes the
    /// object with it, and `kubectl describe` shows who manages it.
    fn reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: etcd_api::API_VERSION.to_owned(),
            kind: "EtcdCluster".to_owned(),
            name: self.name.name.clone(),
            uid: self.uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// See [`cluster_token`].
    fn token(&self) -> String {
        format!("{}-{}", self.name.name, self.uid)
    }

    fn meta(&self, name: String, labels: BTreeMap<String, String>, owned: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.name.namespace.clone()),
            labels: Some(labels),
            owner_references: owned.then(|| vec![self.reference()]),
            ..ObjectMeta::default()
        }
    }
}

/// Namespace and name of the EtcdCluster.
pub fn cluster_name(cluster: &EtcdCluster) -> Result<ClusterName, BuildError> {
    let name = cluster
        .metadata
        .name
        .as_deref()
        .ok_or(BuildError::MissingName)?;
    let namespace =
        cluster
            .metadata
            .namespace
            .as_deref()
            .ok_or_else(|| BuildError::MissingNamespace {
                cluster: name.to_owned(),
            })?;
    Ok(ClusterName::new(namespace, name).with_tls(cluster.peer_tls(), cluster.client_tls()))
}

fn name_of(cluster: &EtcdCluster) -> &str {
    cluster.metadata.name.as_deref().unwrap_or_default()
}

/// Labels of every object of the cluster (Kubernetes' recommended labels plus ours).
pub fn cluster_labels(cluster: &EtcdCluster) -> BTreeMap<String, String> {
    let name = name_of(cluster);
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "etcd".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), name.to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGED_BY.to_owned(),
        ),
        (LABEL_CLUSTER.to_owned(), name.to_owned()),
    ])
}

/// Labels of a member's Pod and PVC: the cluster's plus the member's name.
pub fn member_labels(cluster: &EtcdCluster, member: &str) -> BTreeMap<String, String> {
    let mut labels = cluster_labels(cluster);
    labels.insert(LABEL_MEMBER.to_owned(), member.to_owned());
    labels
}

/// Label selector (`k=v,k=v`) that lists this cluster's Pods and PVCs: the same labels the
/// Services and the PodDisruptionBudget select on, so what the operator lists is what they serve.
pub fn selector(cluster: &EtcdCluster) -> String {
    cluster_labels(cluster)
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The `--initial-cluster-token` of the cluster's founding members: `<name>-<uid>`.
///
/// Fresh per EtcdCluster object and stable across reconciles. etcd derives the cluster ID from
/// the token, so a cluster deleted and recreated under the same name gets a new cluster ID, and
/// members left over from the old one (say, from retained PVCs) cannot talk to the new one.
pub fn cluster_token(cluster: &EtcdCluster) -> Result<String, BuildError> {
    Ok(owner(cluster)?.token())
}

/// `--initial-cluster-state` of a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialState {
    /// The seed of a new cluster.
    New,
    /// A member joining (or restarting in) an existing cluster.
    Existing,
}

impl InitialState {
    fn as_flag(self) -> &'static str {
        match self {
            InitialState::New => "new",
            InitialState::Existing => "existing",
        }
    }
}

/// What a member Pod is built from, beyond the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberPod<'a> {
    /// Member name (also the Pod's and PVC's name).
    pub member: &'a str,
    /// etcd version to run.
    pub version: EtcdVersion,
    /// `name=peerURL` pairs for `--initial-cluster`, in the order given; must contain the member.
    pub initial_cluster: &'a [(String, String)],
    /// `--initial-cluster-state`.
    pub state: InitialState,
    /// The largest backend database a member of the cluster reported (bytes; 0 when none
    /// answered). The quota derived from the volume size is never set below it, with headroom:
    /// see [`default_quota_for`].
    pub largest_db_bytes: u64,
    /// Start with `--snapshot-count=1` to take a v2 snapshot before an upgrade to etcd 3.6
    /// ([`crate::plan::Action::SnapshotBeforeUpgrade`]); marked with
    /// [`ANNOTATION_SNAPSHOT_BEFORE_UPGRADE`].
    pub snapshot_before_upgrade: bool,
}

/// The Pod of one member.
///
/// etcd ignores the `--initial-*` flags once its data directory exists, so a Pod built for a
/// joining member also restarts it safely later on the same PVC.
pub fn member_pod(cluster: &EtcdCluster, pod: &MemberPod) -> Result<Pod, BuildError> {
    member_pod_listening(cluster, pod, spec_listeners(cluster))
}

/// What a member of a cluster created as the spec says listens on: `https://` on each side
/// `spec.tls` covers, `http://` on the others. A switch from plaintext builds its Pods with
/// [`member_pod_listening`] instead ([`crate::plan::tls_switch::desired_listen`]).
pub fn spec_listeners(cluster: &EtcdCluster) -> Listeners {
    let side = |tls: bool| if tls { Listen::Https } else { Listen::Http };
    Listeners {
        peer: side(cluster.peer_tls()),
        client: side(cluster.client_tls()),
    }
}

/// As [`member_pod`], listening on `listen` (a step of a switch from plaintext to TLS). The
/// member advertises the peer URL its entry in `initial_cluster` gives (the one etcd's member
/// list holds: `http://…:2380`, or `https://…:2382` once its URL was moved), which must be one
/// of this member's URLs.
pub fn member_pod_listening(
    cluster: &EtcdCluster,
    pod: &MemberPod,
    listen: Listeners,
) -> Result<Pod, BuildError> {
    let owner = owner(cluster)?;
    let names = &owner.name;
    let expected = names.peer_url(pod.member);
    let own_peer_url = pod
        .initial_cluster
        .iter()
        .find(|(name, url)| {
            name == pod.member
                && (*url == expected
                    || names.member_of_peer_url(url).as_deref() == Some(pod.member))
        })
        .map(|(_, url)| url.clone())
        .ok_or_else(|| BuildError::MemberNotInInitialCluster {
            member: pod.member.to_owned(),
            peer_url: expected,
        })?;
    let spec = &cluster.spec;
    let policy = spec.pod.clone().unwrap_or_default();

    // User labels first, ours over them: the selectors depend on ours.
    let mut labels = policy.labels;
    labels.extend(member_labels(cluster, pod.member));
    let mut annotations = policy.annotations;
    annotations.insert(ANNOTATION_VERSION.to_owned(), pod.version.to_string());
    // Ours over a user's annotation of the same key: a user value would never match the
    // planner's and roll the members forever.
    annotations.insert(ANNOTATION_CONFIG_HASH.to_owned(), config_hash(spec));
    if pod.snapshot_before_upgrade {
        annotations.insert(
            ANNOTATION_SNAPSHOT_BEFORE_UPGRADE.to_owned(),
            "true".to_owned(),
        );
    }
    let mut meta = owner.meta(pod.member.to_owned(), labels, true);
    meta.annotations = Some(annotations);

    let tls_volumes = member_tls_volumes(cluster, pod.member);
    let container = Container {
        name: CONTAINER_NAME.to_owned(),
        image: Some(format!("{}:v{}", spec.repository, pod.version)),
        command: Some(vec![ETCD_BINARY.to_owned()]),
        args: Some(etcd_args(cluster, pod, &owner, &own_peer_url, listen)),
        ports: Some(container_ports(listen, &own_peer_url)),
        volume_mounts: Some(volume_mounts(&tls_volumes)),
        // Ready = answers /health: has a leader, serves a read, no alarm but NOSPACE. Not-ready
        // members drop out of the client Service; the headless peer Service still publishes them.
        // NOSPACE is excluded because etcd lists every alarm on every member: plain /health
        // failed on all of them and emptied the client Service, while they still serve reads and
        // deletes (which is how space is freed). etcd 3.4.23 and 3.5.1 both answer 200 to
        // /health?exclude=NOSPACE under a NOSPACE alarm (measured); CORRUPT still fails it. A learner
        // answers /health too (measured on 3.5.1), so between its start and its promotion (the
        // planner promotes it as soon as it answers) the client Service may send it requests it
        // refuses ("rpc not supported for learner").
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/health?exclude=NOSPACE".to_owned()),
                // With client TLS (maybe requiring client certificates, which the kubelet has
                // none of), the metrics port serves the same /health over plain HTTP.
                port: IntOrString::Int(i32::from(if cluster.client_tls() {
                    METRICS_PORT
                } else {
                    CLIENT_PORT
                })),
                scheme: Some("HTTP".to_owned()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(5),
            failure_threshold: Some(3),
            // etcd's /health waits up to a second for its read; a busy node adds to that.
            timeout_seconds: Some(3),
            ..Probe::default()
        }),
        // No liveness probe, on purpose: /health fails on every member while quorum is lost,
        // and a liveness probe would then kill all members again and again, turning a recoverable
        // outage into a longer one.
        liveness_probe: None,
        resources: policy.resources,
        security_context: Some(container_security_context(
            policy.container_security_context.as_ref(),
        )),
        ..Container::default()
    };

    let pod_spec = PodSpec {
        // hostname + subdomain give the member the DNS name its peer URL uses.
        hostname: Some(pod.member.to_owned()),
        subdomain: Some(names.name.clone()),
        containers: vec![container],
        volumes: Some(volumes(pod.member, &tls_volumes)),
        restart_policy: Some("Always".to_owned()),
        termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
        // etcd reads every `ETCD_*` environment variable as a flag; Service links would inject
        // `ETCD_SERVICE_HOST` and friends for a Service named `etcd`.
        enable_service_links: Some(false),
        // etcd never talks to the Kubernetes API.
        automount_service_account_token: Some(false),
        node_selector: (!policy.node_selector.is_empty()).then_some(policy.node_selector),
        affinity: policy.affinity,
        tolerations: (!policy.tolerations.is_empty()).then_some(policy.tolerations),
        priority_class_name: policy.priority_class_name,
        security_context: Some(pod_security_context(policy.security_context.as_ref())),
        // Ready needs the probe and this gate: the operator drains a member it defragments.
        readiness_gates: Some(vec![PodReadinessGate {
            condition_type: SERVING_CONDITION.to_owned(),
        }]),
        ..PodSpec::default()
    };
    Ok(Pod {
        metadata: meta,
        spec: Some(pod_spec),
        status: None,
    })
}

/// The Pod security context of member Pods: the `restricted` Pod Security level's
/// requirements (non-root, RuntimeDefault seccomp) and an `fsGroup` that makes the data volume
/// writable by [`MEMBER_UID`], with the fields of `spec.pod.securityContext` over them.
/// `OnRootMismatch`: the kubelet walks the whole volume (a large database) only when its root
/// does not have the group yet, i.e. once, when a member that ran as root is rolled.
pub fn pod_security_context(user: Option<&PodSecurityContext>) -> PodSecurityContext {
    let defaults = PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(MEMBER_UID),
        run_as_group: Some(MEMBER_UID),
        fs_group: Some(MEMBER_UID),
        fs_group_change_policy: Some("OnRootMismatch".to_owned()),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..PodSecurityContext::default()
    };
    overlay(defaults, user)
}

/// The etcd container's security context: no privilege escalation, every capability dropped,
/// a read-only root filesystem (etcd writes to its data volume only), with the fields of
/// `spec.pod.containerSecurityContext` over them.
pub fn container_security_context(user: Option<&SecurityContext>) -> SecurityContext {
    let defaults = SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        ..SecurityContext::default()
    };
    overlay(defaults, user)
}

/// `defaults` with every field `user` sets replacing it, recursively for nested objects (as a
/// JSON merge patch: `capabilities: {add: [NET_BIND_SERVICE]}` keeps `drop: [ALL]`; lists are
/// replaced whole). Both are Kubernetes types whose JSON round-trips, so the fallback (the
/// user's value alone) is never taken in practice.
fn overlay<T>(defaults: T, user: Option<&T>) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned + Clone,
{
    let Some(user) = user else {
        return defaults;
    };
    let merged = serde_json::to_value(&defaults).and_then(|mut base| {
        let patch = serde_json::to_value(user)?;
        merge_json(&mut base, patch);
        serde_json::from_value(base)
    });
    merged.unwrap_or_else(|_| user.clone())
}

fn merge_json(base: &mut serde_json::Value, patch: serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(base), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                match base.get_mut(&key) {
                    Some(existing) => merge_json(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, patch) => *base = patch,
    }
}

/// The certificate Secrets a member mounts: (volume, mount path, Secret name), peer first. An
/// operator-managed side mounts the member's own `<member>-tls`. On the client side a Secret
/// you provide is mounted as is and cert-manager's as the member's `<member>-client-tls`; on
/// the peer side both are mounted through the operator's copy `<member>-peer-mounted`
/// ([`etcd_api::tls::mounted_peer_secret_name`], `plan::ca_overlap`).
pub fn member_tls_volumes(
    cluster: &EtcdCluster,
    member: &str,
) -> Vec<(&'static str, &'static str, String)> {
    use etcd_api::tls::{
        Side, cert_manager_member_secret_name, member_secret_name, mounted_peer_secret_name,
        peer_copied,
    };
    let Some(tls) = &cluster.spec.tls else {
        return vec![];
    };
    let mut volumes = Vec::new();
    if tls.peer.is_some() {
        // A peer certificate the operator does not issue is mounted through the operator's
        // copy of it (`plan::ca_overlap`): a source moved to a new CA in one step would
        // otherwise reach the running member through the kubelet's volume refresh.
        let name = if peer_copied(tls) {
            mounted_peer_secret_name(member)
        } else {
            member_secret_name(member)
        };
        volumes.push((PEER_TLS_VOLUME, PEER_TLS_DIR, name));
    }
    if let Some(client) = &tls.client {
        let name = match (&client.secret_ref, client.cert_manager.is_some()) {
            (Some(reference), _) => reference.name.clone(),
            (None, true) => cert_manager_member_secret_name(member, Side::Client),
            (None, false) => member_secret_name(member),
        };
        volumes.push((CLIENT_TLS_VOLUME, CLIENT_TLS_DIR, name));
    }
    volumes
}

/// A short, stable digest of a Secret's data (sorted keys and values).
pub fn secret_digest(data: &BTreeMap<String, Vec<u8>>) -> String {
    let mut hasher = Sha256::new();
    for (key, value) in data {
        hasher.update((key.len() as u64).to_be_bytes());
        hasher.update(key.as_bytes());
        hasher.update((value.len() as u64).to_be_bytes());
        hasher.update(value);
    }
    short_hex(&hasher.finalize())
}

/// The digest of the certificate Secrets `member` mounts ([`member_tls_volumes`]), from
/// `digests` ([`secret_digest`] by Secret name); `None` without TLS or while one of them is
/// unknown (not read yet, or missing). Recorded on the Pod as [`ANNOTATION_TLS_HASH`].
pub fn member_tls_hash(
    cluster: &EtcdCluster,
    member: &str,
    digests: &BTreeMap<String, String>,
) -> Option<String> {
    let volumes = member_tls_volumes(cluster, member);
    if volumes.is_empty() {
        return None;
    }
    let mut hasher = Sha256::new();
    for (volume, _, secret) in volumes {
        hasher.update(volume.as_bytes());
        // A mounted copy may hold the same bytes as the source a Pod built before copies
        // existed mounts directly: the hash differs anyway, so that Pod is rolled onto its copy
        // once. Other hashes are unchanged (no roll of operator-managed members).
        if secret == etcd_api::tls::mounted_peer_secret_name(member) {
            hasher.update(b"@mounted");
        }
        hasher.update(b"=");
        hasher.update(digests.get(&secret)?.as_bytes());
        hasher.update(b";");
    }
    Some(short_hex(&hasher.finalize()))
}

fn short_hex(digest: &[u8]) -> String {
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn volume_mounts(tls: &[(&'static str, &'static str, String)]) -> Vec<VolumeMount> {
    let mut mounts = vec![VolumeMount {
        name: DATA_VOLUME.to_owned(),
        mount_path: DATA_MOUNT.to_owned(),
        ..VolumeMount::default()
    }];
    mounts.extend(tls.iter().map(|(volume, dir, _)| VolumeMount {
        name: (*volume).to_owned(),
        mount_path: (*dir).to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    }));
    mounts
}

fn volumes(member: &str, tls: &[(&'static str, &'static str, String)]) -> Vec<Volume> {
    let mut volumes = vec![Volume {
        name: DATA_VOLUME.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: member.to_owned(),
            read_only: None,
        }),
        ..Volume::default()
    }];
    volumes.extend(tls.iter().map(|(volume, _, secret)| Volume {
        name: (*volume).to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.clone()),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }));
    volumes
}

/// Metadata of an object the EtcdCluster controls (in its namespace, its labels, owned by it):
/// for objects built outside this module (cert-manager Certificates).
pub fn owned_meta(cluster: &EtcdCluster, name: &str) -> Result<ObjectMeta, BuildError> {
    Ok(owner(cluster)?.meta(name.to_owned(), cluster_labels(cluster), true))
}

/// A certificate and its private key, PEM: what the cluster operator issues and
/// [`tls_secret`] stores.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    /// PEM certificate.
    pub cert_pem: String,
    /// PEM private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").finish_non_exhaustive()
    }
}

/// A `kubernetes.io/tls` Secret the operator manages for the cluster (its CA, a member's
/// certificate, the operators' client certificate), owned by the EtcdCluster so it goes with it.
pub fn tls_secret(
    cluster: &EtcdCluster,
    name: &str,
    issued: &Issued,
    ca_pem: Option<&str>,
) -> Result<Secret, BuildError> {
    use etcd_api::tls::secret_keys::{CA, CERT, KEY};
    let owner = owner(cluster)?;
    let mut data = BTreeMap::from([
        (
            CERT.to_owned(),
            ByteString(issued.cert_pem.clone().into_bytes()),
        ),
        (
            KEY.to_owned(),
            ByteString(issued.key_pem.clone().into_bytes()),
        ),
    ]);
    if let Some(ca) = ca_pem {
        data.insert(CA.to_owned(), ByteString(ca.as_bytes().to_vec()));
    }
    Ok(Secret {
        metadata: owner.meta(name.to_owned(), cluster_labels(cluster), true),
        type_: Some(etcd_api::tls::SECRET_TYPE_TLS.to_owned()),
        data: Some(data),
        ..Secret::default()
    })
}

/// The strategic merge patch of a member Pod's status that sets its serving condition
/// ([`SERVING_CONDITION`]): Pod conditions merge by type, so the kubelet's own stay. `now` is
/// the transition time, serialized as Kubernetes writes times.
pub fn serving_patch(serving: bool, now: &serde_json::Value) -> serde_json::Value {
    let (status, reason, message) = if serving {
        // Set on new Pods too, before they run: it says the operator holds nothing back, not
        // that etcd answers (the readiness probe says that).
        (
            "True",
            "NotDrained",
            "the operator does not hold this member out of the client Service; it is in it once \
             its readiness probe passes",
        )
    } else {
        (
            "False",
            "Defragmenting",
            "drained from the client Service while the operator defragments its database",
        )
    };
    serde_json::json!({"status": {"conditions": [{
        "type": SERVING_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }]}})
}

/// A short, stable digest of everything in `spec` that shapes a member Pod, but the version
/// (upgrades roll it, see the planner) and `spec.size` (scaling adds and removes members): the
/// repository, `spec.pod`, `spec.etcdOptions`, the quota derived from `spec.storage.size` when
/// none is set, and [`POD_TEMPLATE_REVISION`]. A member Pod records it in
/// [`ANNOTATION_CONFIG_HASH`]; a Pod with another is rolled.
///
/// Stable across processes and releases: SHA-256 of a JSON document whose maps are `BTreeMap`s
/// (sorted keys), never Rust's `Hash`, whose output may change between compiler versions and
/// would roll every member after an operator upgrade. A field read by [`member_pod`] or
/// `etcd_args` from the spec must be added here, or changing it would not roll the members.
pub fn config_hash(spec: &EtcdClusterSpec) -> String {
    let explicit_quota = spec
        .etcd_options
        .as_ref()
        .and_then(|o| o.quota_backend_bytes);
    let derived_quota = explicit_quota
        .is_none()
        .then(|| default_quota_bytes(&spec.storage.size.0).map(|q| q.to_string()))
        .flatten();
    let shaping = serde_json::json!({
        "templateRevision": POD_TEMPLATE_REVISION,
        "repository": spec.repository,
        "pod": spec.pod.clone().unwrap_or_default(),
        "etcdOptions": spec.etcd_options.clone().unwrap_or_default(),
        "derivedQuotaBackendBytes": derived_quota,
    });
    short_hex(&Sha256::digest(shaping.to_string().as_bytes()))
}

fn container_port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: i32::from(port),
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

/// The port of a URL (`scheme://host:port`), if it names one.
fn port_of(url: &str) -> Option<u16> {
    url.rsplit_once(':')?.1.parse().ok()
}

/// The container ports: those the member listens on, and metrics.
fn container_ports(listen: Listeners, own_peer_url: &str) -> Vec<ContainerPort> {
    let mut ports = vec![container_port("client", CLIENT_PORT)];
    if listen.client.serves_switch_client_port() {
        ports.push(container_port("client-tls", SWITCH_CLIENT_TLS_PORT));
    }
    let tls_peer_port = port_of(own_peer_url).unwrap_or(PEER_PORT);
    match listen.peer {
        Listen::Http => ports.push(container_port("peer", PEER_PORT)),
        Listen::Dual => {
            ports.push(container_port("peer", PEER_PORT));
            ports.push(container_port("peer-tls", SWITCH_PEER_TLS_PORT));
        }
        // The peer side is never built with the client-only `HttpsWithSwitchPort`.
        Listen::Https | Listen::HttpsWithSwitchPort => {
            ports.push(container_port("peer", tls_peer_port))
        }
    }
    // Named so that a PodMonitor selects it by name (the chart's `podMonitor`). A Pod's spec
    // is immutable and the planner never compares it with this builder's output, so existing
    // members keep running as they are: only Pods created from now on (new members, restarts,
    // upgrades) serve it.
    ports.push(container_port("metrics", METRICS_PORT));
    ports
}

/// `--listen-peer-urls`: `https://` on the port of the member's own peer URL once it listens on
/// TLS alone (2382 after a switch from plaintext, 2380 for a cluster created with TLS).
fn listen_peer_urls(listen: Listen, own_peer_url: &str) -> String {
    match listen {
        Listen::Http => format!("http://0.0.0.0:{PEER_PORT}"),
        Listen::Dual => {
            format!("http://0.0.0.0:{PEER_PORT},https://0.0.0.0:{SWITCH_PEER_TLS_PORT}")
        }
        Listen::Https | Listen::HttpsWithSwitchPort => format!(
            "https://0.0.0.0:{}",
            port_of(own_peer_url).unwrap_or(PEER_PORT)
        ),
    }
}

/// `--listen-client-urls` and `--advertise-client-urls` (plain first while dual, so that what
/// etcd's member list shows first still works for plaintext clients; 2379 first after a switch,
/// the port a cluster created with TLS serves).
fn client_urls(listen: Listen, host: &str) -> (String, String) {
    match listen {
        Listen::Http => (
            format!("http://0.0.0.0:{CLIENT_PORT}"),
            format!("http://{host}:{CLIENT_PORT}"),
        ),
        Listen::Dual => (
            format!("http://0.0.0.0:{CLIENT_PORT},https://0.0.0.0:{SWITCH_CLIENT_TLS_PORT}"),
            format!("http://{host}:{CLIENT_PORT},https://{host}:{SWITCH_CLIENT_TLS_PORT}"),
        ),
        Listen::Https => (
            format!("https://0.0.0.0:{CLIENT_PORT}"),
            format!("https://{host}:{CLIENT_PORT}"),
        ),
        Listen::HttpsWithSwitchPort => (
            format!("https://0.0.0.0:{CLIENT_PORT},https://0.0.0.0:{SWITCH_CLIENT_TLS_PORT}"),
            format!("https://{host}:{CLIENT_PORT},https://{host}:{SWITCH_CLIENT_TLS_PORT}"),
        ),
    }
}

/// etcd's flags for a member, one `--flag=value` token each.
fn etcd_args(
    cluster: &EtcdCluster,
    pod: &MemberPod,
    owner: &Owner,
    own_peer_url: &str,
    listen: Listeners,
) -> Vec<String> {
    let names = &owner.name;
    let initial_cluster = pod
        .initial_cluster
        .iter()
        .map(|(name, url)| format!("{name}={url}"))
        .collect::<Vec<_>>()
        .join(",");
    let (listen_client, advertise_client) =
        client_urls(listen.client, &names.member_host(pod.member));
    let mut args = vec![
        format!("--name={}", pod.member),
        format!("--data-dir={DATA_DIR}"),
        format!(
            "--listen-peer-urls={}",
            listen_peer_urls(listen.peer, own_peer_url)
        ),
        format!("--listen-client-urls={listen_client}"),
        format!("--listen-metrics-urls=http://0.0.0.0:{METRICS_PORT}"),
        format!("--initial-advertise-peer-urls={own_peer_url}"),
        format!("--advertise-client-urls={advertise_client}"),
        format!("--initial-cluster={initial_cluster}"),
        format!("--initial-cluster-state={}", pod.state.as_flag()),
        format!("--initial-cluster-token={}", owner.token()),
    ];
    if let Some(tls) = &cluster.spec.tls {
        // Certificate flags only for a side that serves TLS: during a switch from plaintext a
        // side still plain keeps exactly the flags it had.
        if let Some(peer) = tls.peer.as_ref().filter(|_| listen.peer != Listen::Http) {
            args.extend([
                format!("--peer-cert-file={PEER_TLS_DIR}/tls.crt"),
                format!("--peer-key-file={PEER_TLS_DIR}/tls.key"),
                format!("--peer-trusted-ca-file={PEER_TLS_DIR}/ca.crt"),
            ]);
            if peer.client_cert_auth {
                args.push("--peer-client-cert-auth".to_owned());
            }
        }
        if let Some(client) = tls
            .client
            .as_ref()
            .filter(|_| listen.client != Listen::Http)
        {
            args.extend([
                format!("--cert-file={CLIENT_TLS_DIR}/tls.crt"),
                format!("--key-file={CLIENT_TLS_DIR}/tls.key"),
                format!("--trusted-ca-file={CLIENT_TLS_DIR}/ca.crt"),
            ]);
            if client.client_cert_auth {
                args.push("--client-cert-auth".to_owned());
            }
        }
    }
    let explicit_quota = cluster
        .spec
        .etcd_options
        .as_ref()
        .and_then(|o| o.quota_backend_bytes);
    if explicit_quota.is_none()
        && let Some(quota) = default_quota_for(&cluster.spec.storage.size.0, pod.largest_db_bytes)
    {
        args.push(format!("--quota-backend-bytes={quota}"));
    }
    if pod.snapshot_before_upgrade {
        // One v2 snapshot as soon as it applies an entry (the next Pod, on the next minor, is
        // built without it). Replaces spec.etcdOptions.snapshotCount, skipped below.
        args.push("--snapshot-count=1".to_owned());
    }
    if let Some(options) = &cluster.spec.etcd_options {
        let snapshot_count = options
            .snapshot_count
            .filter(|_| !pod.snapshot_before_upgrade);
        let optional = [
            (
                "quota-backend-bytes",
                options.quota_backend_bytes.map(|v| v.to_string()),
            ),
            (
                "auto-compaction-mode",
                options.auto_compaction_mode.map(|m| m.as_flag().to_owned()),
            ),
            (
                "auto-compaction-retention",
                options.auto_compaction_retention.clone(),
            ),
            ("snapshot-count", snapshot_count.map(|v| v.to_string())),
            (
                "heartbeat-interval",
                options.heartbeat_interval_ms.map(|v| v.to_string()),
            ),
            (
                "election-timeout",
                options.election_timeout_ms.map(|v| v.to_string()),
            ),
        ];
        args.extend(
            optional
                .into_iter()
                .filter_map(|(flag, value)| value.map(|value| format!("--{flag}={value}"))),
        );
    }
    args
}

/// The backend quota for a volume of `volume` (a quantity) when the spec sets none. etcd's own
/// default (2 GiB) is larger than our default volume (1Gi): the disk would fill before etcd's
/// NOSPACE guard trips, and a full disk is far worse than the alarm (issue 17). The volume also
/// holds the WAL (etcd keeps 5 segments of 64 MB; 384 MiB with margin), and the database must
/// fit twice in the rest: a snapshot received from the leader, or a defragmentation, writes a
/// full second copy. At least a quarter of the volume, at most etcd's suggested maximum (8 GiB).
/// `None` when the size does not parse (the planner refuses such a spec).
pub fn default_quota_bytes(volume: &str) -> Option<u128> {
    const MIB: u128 = 1024 * 1024;
    const WAL: u128 = 384 * MIB;
    const MAX: u128 = 8 * 1024 * MIB;
    let bytes = etcd_api::validation::quantity_to_bytes(volume)?;
    let headroom = bytes.saturating_sub(WAL) / 2;
    Some(headroom.max(bytes / 4).min(MAX))
}

/// The quota a member Pod gets when the spec sets none: [`default_quota_bytes`] of the volume,
/// but never below the largest database a member already holds plus a quarter. Pods of clusters
/// that ran before the quota was derived (etcd's own 2 GiB applied), or whose database grew
/// past it, are re-created (restart, upgrade, a new member receiving the leader's snapshot)
/// with this flag; a quota below the current database would raise NOSPACE at once and stop
/// every write (issue 17). Known limit: when no member answers (a restart during an outage),
/// the database size is unknown and only the volume counts.
pub fn default_quota_for(volume: &str, largest_db_bytes: u64) -> Option<u128> {
    let derived = default_quota_bytes(volume)?;
    let floor = u128::from(largest_db_bytes) + u128::from(largest_db_bytes) / 4;
    Some(derived.max(floor))
}

/// The PVC of one member: its etcd data directory.
///
/// It carries the EtcdCluster as owner only under `reclaimPolicy: Delete`. With `Retain` (the
/// default) the data must outlive the EtcdCluster object: deleting the object, by mistake or by
/// uninstalling whatever created it, must not let the garbage collector destroy every member's
/// data. PVC specs are immutable (but for growing the request), so an executor that wants a
/// policy change to reach existing PVCs server-side applies this object again: under
/// [`FIELD_MANAGER`] that adds or drops the owner reference.
pub fn member_pvc(
    cluster: &EtcdCluster,
    member: &str,
) -> Result<PersistentVolumeClaim, BuildError> {
    let owner = owner(cluster)?;
    let storage = &cluster.spec.storage;
    let owned = storage.reclaim_policy == ReclaimPolicy::Delete;
    Ok(PersistentVolumeClaim {
        metadata: owner.meta(member.to_owned(), member_labels(cluster, member), owned),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    storage.size.clone(),
                )])),
                limits: None,
            }),
            // Unset: the cluster's default StorageClass applies.
            storage_class_name: storage.storage_class_name.clone(),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

fn service_port(name: &str, port: u16) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port: i32::from(port),
        target_port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}

/// The headless peer Service, named like the cluster: it gives each member the DNS name
/// `<member>.<cluster>.<namespace>.svc` that its peer URL uses.
///
/// It publishes not-ready Pods: a member is not ready until it has a leader, and it cannot get
/// one before its peers resolve its name (and it theirs).
pub fn peer_service(cluster: &EtcdCluster) -> Result<Service, BuildError> {
    let owner = owner(cluster)?;
    Ok(Service {
        metadata: owner.meta(owner.name.name.clone(), cluster_labels(cluster), true),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            ports: Some(vec![
                service_port("peer", PEER_PORT),
                service_port("client", CLIENT_PORT),
            ]),
            selector: Some(cluster_labels(cluster)),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

/// The client Service's ports: 2379, and `client-tls` 2378 when `switch_port` (members of a
/// cluster switched from plaintext serve `https://` clients there, during the switch and after
/// it; plan/tls_switch.rs). A cluster created with TLS never listens on 2378, so its Service
/// does not publish it.
fn client_service_ports(switch_port: bool) -> Vec<ServicePort> {
    let mut ports = vec![service_port("client", CLIENT_PORT)];
    if switch_port {
        ports.push(service_port("client-tls", SWITCH_CLIENT_TLS_PORT));
    }
    ports
}

/// The client Service `<cluster>-client`: one stable address that reaches ready members only.
/// `switch_port`: publish 2378 too ([`crate::plan::serves_switch_client_port`]).
pub fn client_service(cluster: &EtcdCluster, switch_port: bool) -> Result<Service, BuildError> {
    let owner = owner(cluster)?;
    Ok(Service {
        metadata: owner.meta(
            owner.name.client_service_name(),
            cluster_labels(cluster),
            true,
        ),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            ports: Some(client_service_ports(switch_port)),
            selector: Some(cluster_labels(cluster)),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

/// The PodDisruptionBudget named like the cluster: voluntary evictions (node drains) may take
/// members only while a quorum of the `voters` in etcd's member list stays ready. A one-member cluster therefore
/// blocks drains: evicting its only member is an outage the user must choose deliberately.
pub fn pod_disruption_budget(
    cluster: &EtcdCluster,
    voters: usize,
) -> Result<PodDisruptionBudget, BuildError> {
    let owner = owner(cluster)?;
    // A quorum of the voters that exist, not of spec.size: while 5 shrink to 3 one member at a
    // time, the five still running need three up (issue 17).
    let min_available = i32::try_from(plan::quorum(voters)).unwrap_or(i32::MAX);
    Ok(PodDisruptionBudget {
        metadata: owner.meta(owner.name.name.clone(), cluster_labels(cluster), true),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(min_available)),
            selector: Some(LabelSelector {
                match_labels: Some(cluster_labels(cluster)),
                match_expressions: None,
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    })
}

/// The member a Pod belongs to, from its member label; `None` for a Pod that is not a member
/// Pod of this cluster (another cluster's, or a label that is not one of our member names).
pub fn member_of_pod(cluster: &EtcdCluster, pod: &Pod) -> Option<String> {
    let labels = pod.metadata.labels.as_ref()?;
    if labels.get(LABEL_CLUSTER).map(String::as_str) != Some(name_of(cluster)) {
        return None;
    }
    let member = labels.get(LABEL_MEMBER)?;
    let names = ClusterName::new("", name_of(cluster));
    names.ordinal_of(member).map(|_| member.clone())
}
