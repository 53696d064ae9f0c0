//! Gathers what the planner needs about one EtcdRestore: its source (the EtcdBackup's artifact
//! or an S3 location), the credentials Secret, the EtcdCluster with its member Pods and PVCs
//! (listed as the cluster operator lists them), the seed Pod's init container and etcd's answers.
//! I/O at the edges; the conversions are pure functions below, unit-tested.

use std::time::Duration;

use etcd_api::condition::is_condition_true;
use etcd_api::restore::{RESTORING_ANNOTATION, RETAINED_BY_RESTORE_LABEL};
use etcd_api::{BackupPhase, EtcdBackup, EtcdCluster, EtcdRestore, RestorePhase};
use etcd_member::observe::{KubeObservation, observe_kube};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, Secret};
use kube::api::{Api, LogParams};
use kube::{Resource, ResourceExt};

use crate::build::INIT_CONTAINER;
use crate::plan::{
    ClusterState, Deadline, InitFailure, Observed, Outcome, Progress, Quorum, Refusal, SeedPod,
    SeedState, Snapshot,
};
use crate::seed::{SeedReport, is_permanent, parse_report};
use crate::status::conditions;

/// Failed attempts of the preparing init container after which even a transient failure is
/// final (the kubelet's back-off makes this a few minutes).
pub const MAX_INIT_ATTEMPTS: i32 = 5;

/// What the observation found, beyond the planner's input: the objects the executor needs.
pub struct Observation {
    /// The planner's input.
    pub observed: Observed,
    /// The EtcdCluster, when it exists.
    pub cluster: Option<EtcdCluster>,
}

/// Observes `restore`. API errors other than "not found" are returned (the reconcile retries).
pub async fn observe(
    client: &kube::Client,
    restore: &EtcdRestore,
    etcd_timeout: Duration,
) -> Result<Observation, kube::Error> {
    let namespace = restore.namespace().unwrap_or_default();
    let progress = progress_of(restore);
    let source = resolve_source(client, &namespace, restore).await?;
    let credentials = match &source {
        Ok(snapshot) => check_credentials(client, &namespace, snapshot).await?,
        Err(_) => Ok(()),
    };
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), &namespace);
    let cluster = clusters.get_opt(&restore.spec.cluster_name).await?;
    let target = cluster
        .as_ref()
        .map(|c| c.spec.version.as_str())
        .or_else(|| {
            restore
                .spec
                .cluster_spec
                .as_ref()
                .map(|s| s.version.as_str())
        });
    let source = source.and_then(|snapshot| check_versions(snapshot, target));
    let mut observed = Observed {
        progress,
        force: restore.spec.force,
        can_create_cluster: restore.spec.cluster_spec.is_some(),
        name: restore.name_any(),
        cluster_name: restore.spec.cluster_name.clone(),
        source,
        credentials,
        cluster: None,
        deleting: restore.metadata.deletion_timestamp.is_some(),
        finalizer: restore
            .finalizers()
            .iter()
            .any(|f| f == crate::plan::FINALIZER),
        seed: SeedState::default(),
        retained_volumes: Vec::new(),
        deadline: deadline_of(restore, jiff::Timestamp::now()),
    };
    let Some(found) = &cluster else {
        // Restoring into a new cluster: volumes of an earlier cluster of that name (retained)
        // carry its labels and would meet the new one (issue 17, defect 9).
        if observed.progress.finished.is_none()
            && let Some(would_be) = crate::build::new_cluster(restore, &namespace)
        {
            let kube = observe_kube(client, &would_be).await.map_err(|e| match e {
                etcd_member::observe::ObserveError::List { source, .. } => source,
                other => kube::Error::Service(other.to_string().into()),
            })?;
            observed.retained_volumes = kube.pvcs.keys().cloned().collect();
        }
        return Ok(Observation { observed, cluster });
    };
    let kube = observe_kube(client, found).await.map_err(|e| match e {
        etcd_member::observe::ObserveError::List { source, .. } => source,
        other => kube::Error::Service(other.to_string().into()),
    })?;
    let seed = observed.progress.seed_member.clone();
    let mut state = cluster_state(found, &kube, seed.as_deref());
    // A TLS cluster is asked over TLS: asked in plain HTTP its members would not answer and
    // look like a cluster without quorum. Without its TLS Secret the observation fails instead.
    let tls = etcd_member::observe::operator_client_tls(client, found)
        .await
        .map_err(|e| kube::Error::Service(e.to_string().into()))?;
    // The old members' quorum matters until the hand-over: before the start, and before each
    // step past which two clusters could serve (the planner re-checks it). The seed is not
    // asked: it is a one-member quorum of its own.
    let quorum_matters =
        observed.progress.finished.is_none() && !observed.progress.handed_over && !observed.force;
    if quorum_matters {
        let names = etcd_member::observe::cluster_name(found);
        let seed_url = seed.as_deref().map(|s| names.client_url(s));
        let endpoints: Vec<String> = etcd_member::observe::endpoints_to_ask(found, &kube)
            .into_iter()
            .filter(|url| Some(url) != seed_url.as_ref())
            .collect();
        let view = etcd_admin::observe_tls(&endpoints, etcd_timeout, tls.as_ref()).await;
        state.quorum = judge_quorum(&view, &names, &kube.pods, seed.as_deref());
    }
    if let Some(seed) = &seed {
        observed.seed = seed_state(
            client,
            found,
            &kube,
            seed,
            &observed.name,
            &observed.progress,
            (etcd_timeout, tls.as_ref()),
        )
        .await;
    }
    observed.cluster = Some(state);
    Ok(Observation { observed, cluster })
}

/// What the old members' answers prove about their quorum (pure; see [`Quorum`]). `pods` are
/// the cluster's member Pods (the seed's is skipped). A member is down when it answered without
/// a leader, or did not answer and the kubelet reports its Pod not Ready (the readiness probe
/// is etcd's `/health`, which fails without a leader): two independent observers agree. A
/// member listed in the cluster's status without a Pod cannot serve. Anything else, an
/// unreached Pod the kubelet reports Ready above all, leaves the quorum unknown.
pub fn judge_quorum(
    view: &etcd_admin::ClusterView,
    names: &etcd_member::naming::ClusterName,
    pods: &std::collections::BTreeMap<String, Pod>,
    seed: Option<&str>,
) -> Quorum {
    if view.membership.is_some() {
        return Quorum::Held;
    }
    let mut may_serve = Vec::new();
    for (name, pod) in pods.iter().filter(|(name, _)| Some(name.as_str()) != seed) {
        let url = names.client_url(name);
        let answer = view
            .statuses
            .values()
            .filter_map(|s| s.as_ref().ok())
            .find(|s| s.endpoint == url);
        match answer {
            Some(status) if status.leader_id == 0 => {}
            Some(status) => may_serve.push(format!(
                "{name}: answers with leader {:x} but confirmed no quorum",
                status.leader_id
            )),
            None if etcd_member::observe::pod_ready(pod) => may_serve.push(format!(
                "{name}: unreachable from the operator but Ready per the kubelet"
            )),
            None => {}
        }
    }
    if may_serve.is_empty() {
        Quorum::Lost
    } else {
        Quorum::Unknown(may_serve.join("; "))
    }
}

/// The snapshot if the etcd it came from can seed a cluster of `target` (pure). Unknown or
/// unparsable versions pass: the seed's own start is then the check.
pub fn check_versions(snapshot: Snapshot, target: Option<&str>) -> Result<Snapshot, Refusal> {
    let parse = etcd_api::validation::EtcdVersion::parse;
    let (Some(from), Some(to)) = (
        snapshot.etcd_version.as_deref().and_then(parse),
        target.and_then(parse),
    ) else {
        return Ok(snapshot);
    };
    match etcd_api::validation::check_restore_versions("spec.source.backupRef", from, to) {
        Ok(()) => Ok(snapshot),
        Err(error) => Err(Refusal::new("IncompatibleVersions", error.to_string())),
    }
}

/// The restore's deadline at `now` (pure): `spec.timeoutSeconds` (default
/// [`etcd_api::restore::DEFAULT_RESTORE_TIMEOUT_SECONDS`]) from `status.startTime`, or from its
/// creation while it has not started (a restore waiting to learn the old members' quorum).
pub fn deadline_of(restore: &EtcdRestore, now: jiff::Timestamp) -> Deadline {
    let timeout_seconds = restore
        .spec
        .timeout_seconds
        .unwrap_or(etcd_api::restore::DEFAULT_RESTORE_TIMEOUT_SECONDS);
    let since = restore
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(restore.metadata.creation_timestamp.as_ref());
    let passed = since
        .is_some_and(|since| now.as_second().saturating_sub(since.0.as_second()) > timeout_seconds);
    Deadline {
        timeout_seconds,
        passed,
    }
}

/// The restore's progress from its status (pure).
pub fn progress_of(restore: &EtcdRestore) -> Progress {
    let Some(status) = &restore.status else {
        return Progress::default();
    };
    Progress {
        finished: match status.phase {
            Some(RestorePhase::Succeeded) => Some(Outcome::Succeeded),
            Some(RestorePhase::Failed) => Some(Outcome::Failed),
            _ if is_condition_true(&status.conditions, conditions::FAILED) => {
                Some(Outcome::Failing)
            }
            _ => None,
        },
        seed_member: status.seed_member.clone(),
        restored_revision: status.restored_revision,
        handed_over: is_condition_true(&status.conditions, conditions::HANDED_OVER),
    }
}

/// `spec.source` resolved to an object, its checksum and revision; a refusal names what is
/// wrong.
async fn resolve_source(
    client: &kube::Client,
    namespace: &str,
    restore: &EtcdRestore,
) -> Result<Result<Snapshot, Refusal>, kube::Error> {
    let source = &restore.spec.source;
    if let Some(s3) = &source.s3 {
        return Ok(Ok(Snapshot {
            connection: s3.connection.clone(),
            key: s3.key.clone(),
            sha256: source.sha256.clone(),
            revision: None,
            etcd_version: None,
        }));
    }
    let Some(backup_ref) = &source.backup_ref else {
        return Ok(Err(Refusal::new(
            "InvalidSource",
            "spec.source names neither backupRef nor s3",
        )));
    };
    let backups: Api<EtcdBackup> = Api::namespaced(client.clone(), namespace);
    let backup = backups.get_opt(&backup_ref.name).await?;
    Ok(snapshot_of_backup(
        &backup_ref.name,
        backup.as_ref(),
        source.sha256.as_deref(),
    ))
}

/// The snapshot an EtcdBackup recorded (pure).
pub fn snapshot_of_backup(
    name: &str,
    backup: Option<&EtcdBackup>,
    expected_sha256: Option<&str>,
) -> Result<Snapshot, Refusal> {
    let Some(backup) = backup else {
        return Err(Refusal::new(
            "BackupNotFound",
            format!("spec.source.backupRef: EtcdBackup {name} not found"),
        ));
    };
    let status = backup.status.clone().unwrap_or_default();
    let artifact = match (status.phase, status.artifact) {
        (Some(BackupPhase::Succeeded), Some(artifact)) => artifact,
        (phase, _) => {
            let phase = phase.map_or_else(|| "not started".to_owned(), |p| format!("{p:?}"));
            return Err(Refusal::new(
                "BackupNotSucceeded",
                format!(
                    "spec.source.backupRef: EtcdBackup {name} is {phase}; only a Succeeded \
                     backup has a verified snapshot"
                ),
            ));
        }
    };
    let Some((bucket, key)) = artifact
        .uri
        .strip_prefix("s3://")
        .and_then(|rest| rest.split_once('/'))
    else {
        return Err(Refusal::new(
            "BackupNotSucceeded",
            format!(
                "EtcdBackup {name}: artifact URI {:?} is not s3://bucket/key",
                artifact.uri
            ),
        ));
    };
    if let Some(expected) = expected_sha256
        && !expected.eq_ignore_ascii_case(&artifact.sha256)
    {
        return Err(Refusal::new(
            "ChecksumMismatch",
            format!(
                "spec.source.sha256 {expected} differs from EtcdBackup {name}'s artifact sha256 {}",
                artifact.sha256
            ),
        ));
    }
    let mut connection = backup.spec.s3.connection.clone();
    connection.bucket = bucket.to_owned();
    Ok(Snapshot {
        connection,
        key: key.to_owned(),
        sha256: Some(artifact.sha256),
        revision: Some(artifact.revision),
        etcd_version: Some(artifact.etcd_version),
    })
}

/// The credentials Secret exists and holds both keys (the init container reads them).
async fn check_credentials(
    client: &kube::Client,
    namespace: &str,
    snapshot: &Snapshot,
) -> Result<Result<(), Refusal>, kube::Error> {
    let Some(secret_ref) = &snapshot.connection.credentials_secret_ref else {
        return Ok(Ok(()));
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets.get_opt(&secret_ref.name).await?;
    Ok(credentials_usable(
        namespace,
        &secret_ref.name,
        secret.as_ref(),
    ))
}

/// Whether the Secret can give the seed its credentials (pure): by the rules the backup
/// operator reads it with (`credentials_from_secret`: both keys, non-empty, UTF-8), so a
/// Secret that works for backups works for the restore, and a bad one is refused here, naming
/// the key, instead of failing the seed's download after quorum loss.
pub fn credentials_usable(
    namespace: &str,
    name: &str,
    secret: Option<&Secret>,
) -> Result<(), Refusal> {
    let Some(secret) = secret else {
        return Err(Refusal::new(
            "SecretNotFound",
            format!("S3 credentials Secret {namespace}/{name} not found"),
        ));
    };
    etcd_snapshot::credentials::credentials_from_secret(namespace, secret)
        .map(drop)
        .map_err(|e| Refusal::new(e.reason(), e.to_string()))
}

/// The cluster as the planner sees it (pure; quorum is filled in by the caller).
pub fn cluster_state(
    cluster: &EtcdCluster,
    kube: &KubeObservation,
    seed: Option<&str>,
) -> ClusterState {
    let names = etcd_member::observe::cluster_name(cluster);
    let status = cluster.status.clone().unwrap_or_default();
    let status_members: Vec<String> = status.members.iter().map(|m| m.name.clone()).collect();
    let next_ordinal = kube
        .pods
        .keys()
        .chain(kube.pvcs.keys())
        .chain(status_members.iter())
        .filter_map(|name| names.ordinal_of(name))
        .max()
        .map_or(0, |max| max + 1);
    let not_seed = |name: &&String| Some(name.as_str()) != seed;
    let available = is_condition_true(&status.conditions, etcd_api::condition::types::AVAILABLE);
    let size = cluster.spec.size;
    ClusterState {
        held_by: cluster.annotations().get(RESTORING_ANNOTATION).cloned(),
        quorum: Quorum::default(),
        size,
        available_at_size: available
            && status.ready_members == size
            && status.observed_generation == cluster.meta().generation
            && status.members.len() == usize::try_from(size).unwrap_or(0),
        seed_is_member: seed.is_some_and(|s| status_members.iter().any(|m| m == s)),
        next_ordinal,
        old_pods: kube
            .pods
            .iter()
            .filter(|(name, _)| not_seed(name))
            .map(|(name, pod)| (name.clone(), pod.metadata.deletion_timestamp.is_some()))
            .collect(),
        old_pvcs: kube
            .pvcs
            .iter()
            .filter(|(name, _)| not_seed(name))
            // Retained once labelled and owned by nothing (a label without dropping the owner
            // reference left it to the garbage collector): else it is patched again.
            .map(|(name, pvc)| {
                let owned = pvc
                    .metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|o| !o.is_empty());
                (
                    name.clone(),
                    pvc.labels().contains_key(RETAINED_BY_RESTORE_LABEL) && !owned,
                )
            })
            .collect(),
        // Read from the old Pods' etcd flags while they exist: without `force` they are still
        // there when the seed is built.
        old_pods_serve_switch_port: kube.pods.iter().filter(|(name, _)| not_seed(name)).any(
            |(_, pod)| {
                etcd_member::observe::pod_listeners(pod)
                    .is_some_and(|listen| listen.client.serves_switch_client_port())
            },
        ),
    }
}

async fn seed_state(
    client: &kube::Client,
    cluster: &EtcdCluster,
    kube: &KubeObservation,
    seed: &str,
    restore: &str,
    progress: &Progress,
    (etcd_timeout, tls): (Duration, Option<&etcd_admin::ClientTls>),
) -> SeedState {
    // Objects another EtcdRestore created under the same name are not ours (issue 17).
    // The seed's PVC is ours only with our mark (the cluster operator never recreates it); its
    // Pod also without, once handed over.
    let own = |meta, unmarked_is_ours| crate::build::is_own_seed(meta, restore, unmarked_is_ours);
    let mut state = SeedState {
        pvc: kube
            .pvcs
            .get(seed)
            .is_some_and(|pvc| own(&pvc.metadata, false)),
        foreign_pvc: kube
            .pvcs
            .get(seed)
            .is_some_and(|pvc| !own(&pvc.metadata, false)),
        pod: None,
        serving_revision: None,
    };
    let Some(pod) = kube
        .pods
        .get(seed)
        .filter(|pod| own(&pod.metadata, progress.handed_over))
    else {
        return state;
    };
    let init = init_status(pod);
    let mut seed_pod = SeedPod {
        terminating: pod.metadata.deletion_timestamp.is_some(),
        admitted: crate::build::is_admitted(pod),
        ..SeedPod::default()
    };
    if let Some(init) = init {
        let attempt = InitAttempt::of(init);
        let wants_log = match attempt {
            InitAttempt::Succeeded => progress.restored_revision.is_none(),
            InitAttempt::Failed { .. } => true,
            InitAttempt::Waiting(_) | InitAttempt::Running => false,
        };
        let log = if wants_log {
            init_log(
                client,
                pod,
                matches!(attempt, InitAttempt::Failed { previous: true, .. }),
            )
            .await
        } else {
            String::new()
        };
        apply_attempt(
            &mut seed_pod,
            &attempt,
            parse_report(&log),
            init.restart_count,
        );
    }
    state.pod = Some(seed_pod);
    if pod.metadata.deletion_timestamp.is_none() {
        let names = etcd_member::observe::cluster_name(cluster);
        if let Ok(status) =
            etcd_admin::member_status_tls(&names.client_url(seed), etcd_timeout, tls).await
            && status.healthy()
        {
            state.serving_revision = Some(status.revision);
        }
    }
    state
}

fn init_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == INIT_CONTAINER)
}

/// The preparing init container's last attempt, from its status (pure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitAttempt {
    /// Not started: pulling, or a configuration error (the reason and message).
    Waiting(String),
    /// Running now (and no earlier attempt failed).
    Running,
    /// Exited 0.
    Succeeded,
    /// Exited non-zero; `previous` when that attempt is the last state (a new one started).
    Failed {
        /// Its exit code.
        exit_code: i32,
        /// The failed attempt is the previous one.
        previous: bool,
    },
}

impl InitAttempt {
    /// Reads a container status.
    pub fn of(status: &ContainerStatus) -> InitAttempt {
        let state = status.state.clone().unwrap_or_default();
        if let Some(done) = &state.terminated {
            return if done.exit_code == 0 {
                InitAttempt::Succeeded
            } else {
                InitAttempt::Failed {
                    exit_code: done.exit_code,
                    previous: false,
                }
            };
        }
        if let Some(last) = status
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            && last.exit_code != 0
        {
            return InitAttempt::Failed {
                exit_code: last.exit_code,
                previous: true,
            };
        }
        match &state.waiting {
            Some(waiting) => InitAttempt::Waiting(format!(
                "init container {INIT_CONTAINER}: {}{}",
                waiting.reason.as_deref().unwrap_or("Waiting"),
                waiting
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )),
            None => InitAttempt::Running,
        }
    }
}

/// Fills the seed Pod's view from its init container's attempt and log report (pure).
pub fn apply_attempt(
    pod: &mut SeedPod,
    attempt: &InitAttempt,
    report: Option<SeedReport>,
    restart_count: i32,
) {
    match attempt {
        InitAttempt::Waiting(why) => pod.waiting = Some(why.clone()),
        InitAttempt::Running => {}
        InitAttempt::Succeeded => {
            if let Some(SeedReport::Restored(revision)) = report {
                pod.prepared_revision = Some(revision);
            }
        }
        InitAttempt::Failed { exit_code, .. } => {
            let (reason, message) = match report {
                Some(SeedReport::Failed { reason, message }) => (reason, message),
                _ => (
                    "SeedPreparationFailed".to_owned(),
                    format!("init container {INIT_CONTAINER} exited with code {exit_code}"),
                ),
            };
            pod.init_failure = Some(InitFailure {
                permanent: is_permanent(&reason) || restart_count + 1 >= MAX_INIT_ATTEMPTS,
                reason,
                message,
            });
        }
    }
}

async fn init_log(client: &kube::Client, pod: &Pod, previous: bool) -> String {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let params = LogParams {
        container: Some(INIT_CONTAINER.to_owned()),
        previous,
        tail_lines: Some(50),
        ..LogParams::default()
    };
    match api.logs(&pod.name_any(), &params).await {
        Ok(log) => log,
        Err(error) => {
            tracing::debug!(%error, pod = %pod.name_any(), "reading the seed's init log");
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use etcd_api::{BackupArtifact, EtcdBackupSpec, EtcdBackupStatus, S3Destination};
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStateWaiting,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn backup(phase: BackupPhase) -> EtcdBackup {
        let mut b = EtcdBackup::new(
            "b1",
            EtcdBackupSpec {
                cluster_name: Some("main".into()),
                endpoints: None,
                tls_secret_ref: None,
                s3: S3Destination {
                    connection: etcd_api::S3Connection {
                        bucket: "spec-bucket".into(),
                        endpoint: Some("http://s3:8333".into()),
                        ..Default::default()
                    },
                    prefix: Some("p/".into()),
                },
                timeout_seconds: None,
            },
        );
        b.status = Some(EtcdBackupStatus {
            phase: Some(phase),
            artifact: (phase == BackupPhase::Succeeded).then(|| BackupArtifact {
                uri: "s3://backups/p/main/x.db".into(),
                size_bytes: 10,
                size: "10 B".into(),
                sha256: "ab".repeat(32),
                revision: 40,
                etcd_version: "3.5.35".into(),
                cluster_id: "c".into(),
            }),
            ..Default::default()
        });
        b
    }

    #[test]
    fn the_deadline_counts_from_the_start_or_else_the_creation() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let at = |s: &str| Time(s.parse::<jiff::Timestamp>().unwrap());
        let mut r: EtcdRestore = serde_json::from_value(serde_json::json!({
            "apiVersion": "etcd.operator.rs/v1alpha1", "kind": "EtcdRestore",
            "metadata": {"name": "r1", "namespace": "db",
                         "creationTimestamp": "2026-11-25T10:00:00Z"},
            "spec": {"clusterName": "main", "source": {"backupRef": {"name": "b1"}}},
        }))
        .unwrap();
        let now = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        // Not started: from the creation, with the default timeout.
        let d = deadline_of(&r, now("2026-11-25T10:59:59Z"));
        assert_eq!((d.timeout_seconds, d.passed), (3600, false));
        assert!(deadline_of(&r, now("2026-11-25T11:00:01Z")).passed);
        // Started later: from the start.
        r.status = Some(etcd_api::EtcdRestoreStatus {
            start_time: Some(at("2026-11-25T10:30:00Z")),
            ..Default::default()
        });
        assert!(!deadline_of(&r, now("2026-11-25T11:00:01Z")).passed);
        assert!(deadline_of(&r, now("2026-11-25T11:30:01Z")).passed);
        // spec.timeoutSeconds overrides the default.
        r.spec.timeout_seconds = Some(60);
        let d = deadline_of(&r, now("2026-11-25T10:31:01Z"));
        assert_eq!((d.timeout_seconds, d.passed), (60, true));
        assert!(!deadline_of(&r, now("2026-11-25T10:30:59Z")).passed);
    }

    #[test]
    fn a_backup_gives_its_artifact_or_a_reason() {
        let ok = snapshot_of_backup("b1", Some(&backup(BackupPhase::Succeeded)), None).unwrap();
        assert_eq!(ok.uri(), "s3://backups/p/main/x.db");
        assert_eq!(ok.connection.endpoint.as_deref(), Some("http://s3:8333"));
        assert_eq!(
            (ok.sha256.unwrap(), ok.revision),
            ("ab".repeat(32), Some(40))
        );

        let e = snapshot_of_backup("b1", None, None).unwrap_err();
        assert_eq!(e.reason, "BackupNotFound");
        assert!(e.message.contains("b1"), "{}", e.message);
        let e = snapshot_of_backup("b1", Some(&backup(BackupPhase::Failed)), None).unwrap_err();
        assert_eq!(e.reason, "BackupNotSucceeded");
        assert!(e.message.contains("Failed"), "{}", e.message);
        let other = "cd".repeat(32);
        let e = snapshot_of_backup("b1", Some(&backup(BackupPhase::Succeeded)), Some(&other))
            .unwrap_err();
        assert_eq!(e.reason, "ChecksumMismatch");
        assert!(e.message.contains("spec.source.sha256"), "{}", e.message);
    }

    #[test]
    fn a_snapshot_seeds_only_its_own_or_the_next_minor() {
        let ok = snapshot_of_backup("b1", Some(&backup(BackupPhase::Succeeded)), None).unwrap();
        assert_eq!(ok.etcd_version.as_deref(), Some("3.5.35"));
        for target in [None, Some("3.5.35"), Some("3.6.16"), Some("not a version")] {
            assert_eq!(
                check_versions(ok.clone(), target),
                Ok(ok.clone()),
                "{target:?}"
            );
        }
        for (target, why) in [("3.4.23", "downgrade"), ("3.7.3", "skips a minor version")] {
            let e = check_versions(ok.clone(), Some(target)).unwrap_err();
            assert_eq!(e.reason, "IncompatibleVersions");
            assert!(
                e.message
                    .starts_with("spec.source.backupRef: a snapshot of etcd 3.5.35")
                    && e.message.contains(&format!("into etcd {target}"))
                    && e.message.contains(why),
                "{}",
                e.message
            );
        }
        // A snapshot from an S3 key records no version: the seed's own start is the check.
        let unknown = Snapshot {
            etcd_version: None,
            ..ok
        };
        assert!(check_versions(unknown, Some("3.7.3")).is_ok());
    }

    #[test]
    fn a_secret_needs_both_keys() {
        assert_eq!(
            credentials_usable("db", "s3", None).unwrap_err().reason,
            "SecretNotFound"
        );
        let mut secret = Secret {
            data: Some([("AWS_ACCESS_KEY_ID".to_owned(), ByteString(b"a".to_vec()))].into()),
            ..Default::default()
        };
        let e = credentials_usable("db", "s3", Some(&secret)).unwrap_err();
        assert_eq!(e.reason, "SecretKeyMissing");
        assert!(e.message.contains("AWS_SECRET_ACCESS_KEY"), "{}", e.message);
        secret.data.as_mut().unwrap().insert(
            "AWS_SECRET_ACCESS_KEY".to_owned(),
            ByteString(b"b".to_vec()),
        );
        assert!(credentials_usable("db", "s3", Some(&secret)).is_ok());
    }

    /// The backup operator reads a Secret with `credentials_from_secret`: a key that is empty
    /// or not UTF-8 is refused there. The restore must refuse the same Secret before it builds
    /// a seed whose download would then fail with "credentials rejected" after quorum loss.
    #[test]
    fn a_secret_the_backup_refuses_is_refused_before_the_seed_is_built() {
        let with = |secret_key: &[u8]| Secret {
            metadata: ObjectMeta {
                name: Some("s3".into()),
                ..Default::default()
            },
            data: Some(
                [
                    ("AWS_ACCESS_KEY_ID".to_owned(), ByteString(b"a".to_vec())),
                    (
                        "AWS_SECRET_ACCESS_KEY".to_owned(),
                        ByteString(secret_key.to_vec()),
                    ),
                ]
                .into(),
            ),
            ..Default::default()
        };
        for (bytes, why) in [
            (&b""[..], "empty"),
            (&b"\n"[..], "empty"),
            (&b"\xff"[..], "not UTF-8"),
        ] {
            let e = credentials_usable("db", "s3", Some(&with(bytes))).unwrap_err();
            assert_eq!(e.reason, "SecretKeyInvalid", "{bytes:?}");
            assert!(
                e.message.contains("db/s3")
                    && e.message.contains("AWS_SECRET_ACCESS_KEY")
                    && e.message.contains(why),
                "{}",
                e.message
            );
        }
        assert!(credentials_usable("db", "s3", Some(&with(b"b\n"))).is_ok());
    }

    fn status(
        state: ContainerState,
        last: Option<ContainerState>,
        restarts: i32,
    ) -> ContainerStatus {
        ContainerStatus {
            name: INIT_CONTAINER.into(),
            state: Some(state),
            last_state: last,
            restart_count: restarts,
            ..Default::default()
        }
    }

    fn terminated(code: i32) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn init_attempts_and_their_reports() {
        assert_eq!(
            InitAttempt::of(&status(terminated(0), None, 0)),
            InitAttempt::Succeeded
        );
        assert_eq!(
            InitAttempt::of(&status(waiting("CrashLoopBackOff"), Some(terminated(1)), 1)),
            InitAttempt::Failed {
                exit_code: 1,
                previous: true
            }
        );
        let InitAttempt::Waiting(why) =
            InitAttempt::of(&status(waiting("ImagePullBackOff"), None, 0))
        else {
            panic!()
        };
        assert!(why.contains("ImagePullBackOff"), "{why}");

        let mut pod = SeedPod::default();
        apply_attempt(
            &mut pod,
            &InitAttempt::Succeeded,
            Some(SeedReport::Restored(40)),
            0,
        );
        assert_eq!(pod.prepared_revision, Some(40));

        // A checksum mismatch is final at once; a transient failure only after several attempts.
        let failed = InitAttempt::Failed {
            exit_code: 1,
            previous: false,
        };
        let report = |reason: &str| {
            Some(SeedReport::Failed {
                reason: reason.into(),
                message: "m".into(),
            })
        };
        let mut pod = SeedPod::default();
        apply_attempt(&mut pod, &failed, report("ChecksumMismatch"), 0);
        assert!(pod.init_failure.unwrap().permanent);
        let mut pod = SeedPod::default();
        apply_attempt(&mut pod, &failed, report("S3Unavailable"), 0);
        assert!(!pod.init_failure.unwrap().permanent);
        let mut pod = SeedPod::default();
        apply_attempt(
            &mut pod,
            &failed,
            report("S3Unavailable"),
            MAX_INIT_ATTEMPTS - 1,
        );
        assert!(pod.init_failure.unwrap().permanent);
        // No report in the log (it was lost): the exit code is named.
        let mut pod = SeedPod::default();
        apply_attempt(&mut pod, &failed, None, 0);
        let failure = pod.init_failure.unwrap();
        assert_eq!(failure.reason, "SeedPreparationFailed");
        assert!(failure.message.contains("code 1"), "{}", failure.message);
    }

    /// Issue 17 (defect 13): a PVC labelled retained that still carries an owner reference (an
    /// older operator labelled it without dropping it) is not retained yet: the planner patches
    /// it again, which drops the reference.
    #[test]
    fn a_labelled_pvc_still_owned_is_not_retained_yet() {
        use k8s_openapi::api::core::v1::PersistentVolumeClaim;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let cluster = EtcdCluster::new("main", etcd_api::EtcdClusterSpec::new(3, "3.5.1"));
        let pvc = |owned: bool| {
            let mut pvc = PersistentVolumeClaim::default();
            pvc.metadata.labels =
                Some([(RETAINED_BY_RESTORE_LABEL.to_owned(), "r1".to_owned())].into());
            if owned {
                pvc.metadata.owner_references = Some(vec![OwnerReference {
                    kind: "EtcdCluster".into(),
                    name: "main".into(),
                    ..OwnerReference::default()
                }]);
            }
            pvc
        };
        let kube = etcd_member::observe::KubeObservation {
            pods: std::collections::BTreeMap::new(),
            pvcs: [
                ("main-0".to_owned(), pvc(true)),
                ("main-1".to_owned(), pvc(false)),
            ]
            .into(),
            expandable_classes: std::collections::BTreeMap::new(),
        };
        let state = cluster_state(&cluster, &kube, Some("main-3"));
        assert_eq!(
            state.old_pvcs,
            [("main-0".to_owned(), false), ("main-1".to_owned(), true)].into()
        );
    }
    /// Issue 17, defect 4: an unreachable member is not a dead one. Quorum is lost only when
    /// every old member answered without a leader, or is not Ready per the kubelet too, or has
    /// no Pod.
    #[test]
    fn quorum_is_lost_only_when_every_old_member_is_proven_down() {
        use etcd_admin::{ClusterView, MemberStatus};
        use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
        let names = etcd_member::naming::ClusterName::new("db", "main");
        let pod = |ready: bool| Pod {
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let answered = |member: &str, id: u64, leader_id: u64| {
            (
                id,
                Ok(MemberStatus {
                    endpoint: names.client_url(member),
                    id,
                    leader_id,
                    ..Default::default()
                }),
            )
        };
        // main-0 answers without a leader; main-1 is unreachable and not Ready; main-2 has no
        // Pod at all (it is only in the cluster's status); main-3 is the seed, Ready.
        let mut view = ClusterView {
            membership: None,
            statuses: [answered("main-0", 1, 0)].into(),
            unreached: [(names.client_url("main-1"), "timed out".to_owned())].into(),
        };
        let mut pods: std::collections::BTreeMap<String, Pod> = [
            ("main-0".to_owned(), pod(false)),
            ("main-1".to_owned(), pod(false)),
            ("main-3".to_owned(), pod(true)),
        ]
        .into();
        assert_eq!(
            judge_quorum(&view, &names, &pods, Some("main-3")),
            Quorum::Lost
        );
        // The same, with main-1 Ready per the kubelet: it may serve, the operator just cannot
        // reach it (the defect read this as "no quorum").
        pods.insert("main-1".to_owned(), pod(true));
        let Quorum::Unknown(detail) = judge_quorum(&view, &names, &pods, Some("main-3")) else {
            panic!()
        };
        assert!(
            detail.contains("main-1") && detail.contains("Ready per the kubelet"),
            "{detail}"
        );
        // A member that answers with a leader but could not confirm quorum: unknown too.
        pods.insert("main-1".to_owned(), pod(false));
        view.statuses.extend([answered("main-1", 2, 7)]);
        let Quorum::Unknown(detail) = judge_quorum(&view, &names, &pods, Some("main-3")) else {
            panic!()
        };
        assert!(detail.contains("main-1"), "{detail}");
        // A confirmed member list is quorum, whatever else.
        view.membership = Some((9, vec![]));
        assert_eq!(
            judge_quorum(&view, &names, &pods, Some("main-3")),
            Quorum::Held
        );
    }
}
