//! The I/O of one backup: resolve the EtcdBackup's references in Kubernetes ([`resolve`]), then
//! probe the members, pick one ([`crate::select`]) and stream its snapshot into S3
//! ([`execute`]). [`execute`] needs no Kubernetes at all, so it is tested against real etcd and
//! S3 alone.
//!
//! Bounded in time: `spec.timeoutSeconds` (default 1800) covers everything from the first probe
//! to the completed upload. At the deadline (or on shutdown) the snapshot source fails, which
//! makes `stream_to_s3` abort the multipart upload and return; if it is stuck in an S3 request
//! instead, it is dropped [`CANCEL_GRACE`] later, and dropping it aborts the upload in the
//! background (see `etcd_snapshot::upload`). Either way no object is left behind.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::time::{Duration, SystemTime};

use etcd_api::{BackupArtifact, EtcdBackup, EtcdCluster, S3Destination};
use etcd_snapshot::{DEFAULT_PART_SIZE, SnapshotKey, UploadError, snapshot_stream, stream_to_s3};
use futures_util::{Stream, StreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::credentials::{CredentialsError, S3Credentials, credentials_from_secret};
use crate::select::{MemberAnswer, MemberProbe, NoReachableMember, endpoints_of, select_member};

/// How long one member gets to answer its status request (connect included).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the snapshot stream may take to start.
pub const SNAPSHOT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// After the deadline or shutdown, how long the upload gets to abort by itself before it is
/// dropped (and aborted in the background).
pub const CANCEL_GRACE: Duration = Duration::from_secs(30);
/// After that drop, how long the run's upload gets to be aborted, awaited, before the outcome is
/// left open ([`BackupError::AbortUnconfirmed`]): as long as an upload retries its own abort.
pub const ABANDONED_ABORT_TIMEOUT: Duration = etcd_snapshot::upload::ABORT_PATIENCE;
/// Label naming the cluster an EtcdBackup belongs to (set by `create-backup`).
pub const CLUSTER_LABEL: &str = "etcd.operator.rs/cluster";

/// Everything a backup needs, resolved: no Kubernetes from here on.
#[derive(Clone, Debug)]
pub struct BackupJob {
    /// Cluster name in the object key.
    pub cluster: String,
    /// The EtcdBackup's UID (unique part of the key).
    pub uid: String,
    /// `namespace/name` of the EtcdBackup (object metadata, messages).
    pub backup: String,
    /// Client URLs to choose the member from.
    pub endpoints: Vec<String>,
    /// TLS to `https://` client URLs (a TLS EtcdCluster's operator client Secret).
    pub tls: Option<etcd_admin::ClientTls>,
    /// The destination.
    pub s3: S3Target,
    /// Deadline for the whole backup.
    pub timeout: Duration,
}

/// An S3 destination with its credentials.
#[derive(Clone, Debug)]
pub struct S3Target {
    /// Bucket.
    pub bucket: String,
    /// Key prefix ("" for none).
    pub prefix: String,
    /// Endpoint URL of an S3-compatible store; `None` for AWS.
    pub endpoint: Option<String>,
    /// Region to sign for.
    pub region: String,
    /// Path-style addressing.
    pub force_path_style: bool,
    /// Static credentials; `None` uses the ambient AWS credential chain.
    pub credentials: Option<S3Credentials>,
    /// Where the credentials come from, for messages: `Secret db/s3` or the ambient chain.
    pub credentials_source: String,
}

/// Why a backup failed. [`BackupError::reason`] is the status reason and event reason.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The EtcdBackup names an EtcdCluster that does not exist.
    #[error("EtcdCluster {namespace}/{name} not found")]
    ClusterNotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The spec names no endpoints (the CRD's rules should have refused it).
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The credentials Secret is missing or incomplete.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// A Kubernetes read failed.
    #[error("reading {what}: {source}")]
    Kubernetes {
        /// What was read.
        what: String,
        /// The API error.
        source: Box<kube::Error>,
    },
    /// No member qualified (all unreachable, unhealthy, or none known).
    #[error("{source}")]
    NoReachableMember {
        /// Every endpoint and why it was passed over.
        #[from]
        source: NoReachableMember,
    },
    /// The chosen member did not start the snapshot.
    #[error("starting the snapshot on {endpoint}: {detail}")]
    SnapshotFailed {
        /// The member's client URL.
        endpoint: String,
        /// The error.
        detail: String,
    },
    /// The upload failed; nothing was stored.
    #[error("{uri}: {source}{hint}")]
    Upload {
        /// The object it was going to be.
        uri: String,
        /// What failed.
        source: UploadError,
        /// Extra context (which credentials were rejected).
        hint: String,
    },
    /// `spec.timeoutSeconds` passed; the upload was aborted.
    #[error(
        "the backup did not finish within {seconds} s (spec.timeoutSeconds); the upload was aborted and no object was stored"
    )]
    Timeout {
        /// The timeout.
        seconds: u64,
    },
    /// The operator shut down during the backup; the upload was aborted.
    #[error(
        "the operator shut down during the backup; the upload was aborted and no object was stored"
    )]
    Interrupted,
    /// The run was given up while S3 held one of its requests (the deadline or a shutdown,
    /// then [`CANCEL_GRACE`]), and aborting its multipart upload got no answer either: the
    /// upload may still be pending. Not an outcome: the backup is checked again like an
    /// interrupted run (see [`BackupError::completion_unknown`]).
    #[error(
        "the backup stopped ({stopped}) while S3 held one of its requests, and aborting its \
         multipart upload failed ({detail}): it may still be pending"
    )]
    AbortUnconfirmed {
        /// The reason of the stop: `Timeout` or `Interrupted`.
        stopped: &'static str,
        /// Why the abort is not confirmed.
        detail: String,
    },
}

impl BackupError {
    /// What S3 holds is not known yet, so this is not a failure to report (see
    /// `status::completion_unknown`): the upload's completion may have been applied and S3 did
    /// not answer the read-back, or an abandoned upload's abort got no answer
    /// ([`BackupError::AbortUnconfirmed`]).
    pub fn completion_unknown(&self) -> bool {
        match self {
            BackupError::Upload { source, .. } => {
                matches!(source.root(), UploadError::CompletionUnknown { .. })
            }
            BackupError::AbortUnconfirmed { .. } => true,
            _ => false,
        }
    }

    /// PascalCase reason for status and events.
    pub fn reason(&self) -> &'static str {
        match self {
            BackupError::ClusterNotFound { .. } => "ClusterNotFound",
            BackupError::InvalidSpec(_) => "InvalidSpec",
            BackupError::Credentials(e) => e.reason(),
            BackupError::Kubernetes { .. } => "KubernetesApiError",
            BackupError::NoReachableMember { .. } => "NoReachableMember",
            BackupError::SnapshotFailed { .. } => "SnapshotFailed",
            BackupError::Upload { source, .. } => source.reason(),
            BackupError::Timeout { .. } => "Timeout",
            BackupError::Interrupted => "Interrupted",
            BackupError::AbortUnconfirmed { .. } => "AbortUnconfirmed",
        }
    }
}

/// Why the snapshot source was cut short by us (not by etcd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Stopped {
    #[error("deadline reached")]
    Deadline,
    #[error("operator shutting down")]
    Shutdown,
}

/// The cluster part of the backup's object keys: `spec.clusterName`; for an external cluster
/// (`spec.endpoints`) the label `create-backup` sets, else the backup's own name.
pub fn key_cluster(backup: &EtcdBackup) -> String {
    if let Some(cluster) = &backup.spec.cluster_name {
        return cluster.clone();
    }
    backup
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CLUSTER_LABEL))
        .cloned()
        .unwrap_or_else(|| backup.metadata.name.clone().unwrap_or_default())
}

/// Reads what `backup` refers to: the EtcdCluster (for endpoints) and the credentials Secret.
pub async fn resolve(client: &kube::Client, backup: &EtcdBackup) -> Result<BackupJob, BackupError> {
    let namespace = backup.metadata.namespace.clone().unwrap_or_default();
    let name = backup.metadata.name.clone().unwrap_or_default();
    let spec = &backup.spec;
    let (cluster, endpoints, tls) = match (&spec.cluster_name, &spec.endpoints) {
        (Some(cluster_name), _) => {
            let api: Api<EtcdCluster> = Api::namespaced(client.clone(), &namespace);
            let cluster = api
                .get_opt(cluster_name)
                .await
                .map_err(|e| BackupError::Kubernetes {
                    what: format!("EtcdCluster {namespace}/{cluster_name}"),
                    source: Box::new(e),
                })?
                .ok_or_else(|| BackupError::ClusterNotFound {
                    namespace: namespace.clone(),
                    name: cluster_name.clone(),
                })?;
            let endpoints = cluster
                .status
                .as_ref()
                .map(endpoints_of)
                .unwrap_or_default();
            if endpoints.is_empty() {
                return Err(NoReachableMember {
                    rejected: vec![(
                        format!("EtcdCluster {namespace}/{cluster_name}"),
                        "its status lists no healthy member with a client URL and no clientEndpoint"
                            .to_owned(),
                    )],
                }
                .into());
            }
            let tls = cluster_tls(client, &namespace, &cluster).await?;
            (cluster_name.clone(), endpoints, tls)
        }
        (None, Some(endpoints)) if !endpoints.is_empty() => {
            let tls = match &spec.tls_secret_ref {
                Some(secret) => Some(endpoints_tls(client, &namespace, &secret.name).await?),
                None => None,
            };
            (key_cluster(backup), endpoints.clone(), tls)
        }
        _ => {
            return Err(BackupError::InvalidSpec(
                "exactly one of spec.clusterName and spec.endpoints must be set".to_owned(),
            ));
        }
    };
    let s3 = resolve_s3(client, &namespace, &spec.s3).await?;
    let seconds = spec
        .timeout_seconds
        .unwrap_or(etcd_api::backup::DEFAULT_BACKUP_TIMEOUT_SECONDS);
    Ok(BackupJob {
        cluster,
        uid: backup.metadata.uid.clone().unwrap_or_default(),
        backup: format!("{namespace}/{name}"),
        endpoints,
        tls,
        s3,
        timeout: Duration::from_secs(u64::try_from(seconds).unwrap_or(1)),
    })
}

/// `spec.tlsSecretRef` of an `endpoints` backup: `ca.crt`, and `tls.crt`/`tls.key` if present.
async fn endpoints_tls(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<etcd_admin::ClientTls, BackupError> {
    let data = secret_data(client, namespace, name).await?;
    let present = data.contains_key("tls.crt") || data.contains_key("tls.key");
    etcd_admin::ClientTls::from_secret_data(&data, present).map_err(|e| {
        BackupError::InvalidSpec(format!("spec.tlsSecretRef: Secret {namespace}/{name} {e}"))
    })
}

async fn secret_data(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, BackupError> {
    let what = format!("TLS Secret {namespace}/{name}");
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let found = api
        .get_opt(name)
        .await
        .map_err(|e| BackupError::Kubernetes {
            what: what.clone(),
            source: Box::new(e),
        })?
        .ok_or_else(|| BackupError::InvalidSpec(format!("{what} does not exist")))?;
    Ok(found
        .data
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.0))
        .collect())
}

/// How to reach a TLS cluster's client port: the Secret the cluster names for the operators
/// (see [`EtcdCluster::operator_client_secret`]); `None` for plain HTTP.
async fn cluster_tls(
    client: &kube::Client,
    namespace: &str,
    cluster: &EtcdCluster,
) -> Result<Option<etcd_admin::ClientTls>, BackupError> {
    let Some(secret) = cluster.operator_client_secret() else {
        return Ok(None);
    };
    let data = secret_data(client, namespace, &secret.name).await?;
    etcd_admin::ClientTls::from_secret_data(&data, secret.present_certificate)
        .map(Some)
        .map_err(|e| {
            BackupError::InvalidSpec(format!("TLS Secret {namespace}/{} {e}", secret.name))
        })
}

/// The S3 destination of an EtcdBackup in `namespace`, with the credentials from its Secret.
pub async fn resolve_s3(
    client: &kube::Client,
    namespace: &str,
    destination: &S3Destination,
) -> Result<S3Target, BackupError> {
    let connection = &destination.connection;
    let (credentials, credentials_source) = match &connection.credentials_secret_ref {
        Some(secret_ref) => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let secret = api
                .get_opt(&secret_ref.name)
                .await
                .map_err(|e| BackupError::Kubernetes {
                    what: format!("Secret {namespace}/{}", secret_ref.name),
                    source: Box::new(e),
                })?
                .ok_or_else(|| CredentialsError::SecretNotFound {
                    namespace: namespace.to_owned(),
                    secret: secret_ref.name.clone(),
                })?;
            (
                Some(credentials_from_secret(namespace, &secret)?),
                format!("Secret {namespace}/{}", secret_ref.name),
            )
        }
        None => (None, "the ambient AWS credential chain".to_owned()),
    };
    Ok(S3Target {
        bucket: connection.bucket.clone(),
        prefix: destination.prefix.clone().unwrap_or_default(),
        endpoint: connection.endpoint.clone(),
        region: connection.region_or_default().to_owned(),
        force_path_style: connection.force_path_style,
        credentials,
        credentials_source,
    })
}

/// An S3 client for `target`. With static credentials nothing is read from the environment;
/// without, the ambient AWS chain (env, profile, web identity/IRSA, instance metadata) is used.
pub async fn s3_client(target: &S3Target) -> aws_sdk_s3::Client {
    let endpoint = etcd_snapshot::s3::S3Endpoint {
        endpoint: target.endpoint.as_deref(),
        region: &target.region,
        force_path_style: target.force_path_style,
    };
    etcd_snapshot::s3::client(endpoint, target.credentials.as_ref()).await
}

/// Asks one member for its status (through `etcd_admin`, bounded by [`PROBE_TIMEOUT`]).
pub async fn probe_member(
    endpoint: &str,
    tls: Option<&etcd_admin::ClientTls>,
) -> Result<MemberProbe, String> {
    etcd_admin::member_status_tls(endpoint, PROBE_TIMEOUT, tls)
        .await
        .map_err(|e| e.to_string())
}

/// Probes every endpoint concurrently.
pub async fn probe_members(
    endpoints: &[String],
    tls: Option<&etcd_admin::ClientTls>,
) -> Vec<MemberAnswer> {
    futures_util::future::join_all(endpoints.iter().map(|endpoint| async move {
        MemberAnswer {
            endpoint: endpoint.clone(),
            probe: probe_member(endpoint, tls).await,
        }
    }))
    .await
}

/// Runs `job`: picks the member, streams its snapshot to S3, returns the artifact. Fails with
/// [`BackupError::Timeout`] at `job.timeout` and [`BackupError::Interrupted`] when `shutdown` is
/// cancelled; in every failure no object exists afterwards.
pub async fn execute(
    job: &BackupJob,
    shutdown: &CancellationToken,
) -> Result<BackupArtifact, BackupError> {
    let deadline = Instant::now() + job.timeout;
    let timeout_error = || BackupError::Timeout {
        seconds: job.timeout.as_secs(),
    };
    let hard_stop = async {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline + CANCEL_GRACE) => timeout_error(),
            _ = async { shutdown.cancelled().await; tokio::time::sleep(CANCEL_GRACE).await } => BackupError::Interrupted,
        }
    };
    tokio::select! {
        result = run(job, deadline, shutdown) => result,
        // Dropping `run` aborts an upload in progress in the background; awaited here too.
        error = hard_stop => Err(abort_abandoned_upload(job, error).await),
    }
}

/// `run` was dropped while S3 held one of its requests: its upload's own abort was spawned in
/// the background, behind the parts still in flight, and is lost if this process ends first (a
/// shutdown exits as soon as its backups returned). The error about to be returned says the
/// upload was aborted, and the caller records it as the final outcome, which no later start
/// looks at again; so the run's upload is aborted here as well, and awaited (issue 18: the
/// chaos case `backup.s3_abort_on_drop` left it pending under a Failed backup). Without an
/// answer within [`ABANDONED_ABORT_TIMEOUT`] the outcome stays open
/// ([`BackupError::AbortUnconfirmed`]).
async fn abort_abandoned_upload(job: &BackupJob, stopped: BackupError) -> BackupError {
    let s3 = s3_client(&job.s3).await;
    let aborted = tokio::time::timeout(
        ABANDONED_ABORT_TIMEOUT,
        abort_left_uploads(&s3, &job.s3, &job.cluster, &job.uid),
    )
    .await;
    let detail = match aborted {
        Ok(Ok(keys)) => {
            if !keys.is_empty() {
                tracing::info!(backup = %job.backup, ?keys, "aborted the multipart upload of a run given up");
            }
            return stopped;
        }
        Ok(Err(detail)) => detail,
        Err(_) => format!("no answer within {ABANDONED_ABORT_TIMEOUT:?}"),
    };
    BackupError::AbortUnconfirmed {
        stopped: stopped.reason(),
        detail,
    }
}

async fn run(
    job: &BackupJob,
    deadline: Instant,
    shutdown: &CancellationToken,
) -> Result<BackupArtifact, BackupError> {
    let stopped = |s: Stopped| match s {
        Stopped::Deadline => BackupError::Timeout {
            seconds: job.timeout.as_secs(),
        },
        Stopped::Shutdown => BackupError::Interrupted,
    };
    let started = std::time::Instant::now();
    // Before any upload exists, stop at once.
    let before_upload = async {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => Stopped::Deadline,
            _ = shutdown.cancelled() => Stopped::Shutdown,
        }
    };
    let prepared = tokio::select! {
        prepared = prepare(job) => prepared?,
        s = before_upload => return Err(stopped(s)),
    };
    let Prepared {
        probe,
        endpoint,
        mut client,
        s3,
    } = prepared;
    let snapshot_failed = |detail: String| BackupError::SnapshotFailed {
        endpoint: endpoint.clone(),
        detail,
    };
    let start = tokio::time::timeout(SNAPSHOT_START_TIMEOUT, snapshot_stream(&mut client));
    let source = tokio::select! {
        started = start => started
            .map_err(|_| snapshot_failed(format!("no answer within {SNAPSHOT_START_TIMEOUT:?}")))?
            .map_err(|e| snapshot_failed(e.to_string()))?,
        _ = tokio::time::sleep_until(deadline) => return Err(stopped(Stopped::Deadline)),
        _ = shutdown.cancelled() => return Err(stopped(Stopped::Shutdown)),
    };

    let key = SnapshotKey::new(
        SystemTime::now(),
        u64::try_from(probe.revision).unwrap_or(0),
        job.uid.clone(),
    )
    .object_key(&job.s3.prefix, &job.cluster);
    let uri = format!("s3://{}/{key}", job.s3.bucket);
    let cluster_id = format!("{:x}", probe.cluster_id);
    // The object's SHA-256 is known only at the end, after S3 metadata is fixed: it is recorded
    // in status.artifact.sha256 instead (etcd's own trailer is inside the object).
    let metadata = BTreeMap::from([
        ("etcd-revision".to_owned(), probe.revision.to_string()),
        ("etcd-version".to_owned(), probe.version.clone()),
        ("etcd-cluster-id".to_owned(), cluster_id.clone()),
        ("etcd-member-id".to_owned(), format!("{:x}", probe.id)),
        ("etcd-endpoint".to_owned(), endpoint.clone()),
        ("etcd-backup".to_owned(), job.backup.clone()),
        ("etcd-backup-uid".to_owned(), job.uid.clone()),
    ]);
    let preparing = started.elapsed();
    let guarded = guard(source, deadline, shutdown.clone());
    let artifact = stream_to_s3(
        &s3,
        &job.s3.bucket,
        &key,
        metadata,
        guarded,
        DEFAULT_PART_SIZE,
    )
    .await
    .map_err(|e| {
        if let UploadError::SnapshotStreamFailed { source, .. } = e.root()
            && let Some(s) = source.downcast_ref::<Stopped>()
        {
            return stopped(*s);
        }
        let hint = match e.root() {
            UploadError::CredentialsRejected { .. } => {
                format!(" (credentials from {})", job.s3.credentials_source)
            }
            UploadError::SnapshotStreamFailed { .. } => format!(" (etcd member {endpoint})"),
            _ => String::new(),
        };
        BackupError::Upload {
            uri: uri.clone(),
            source: e,
            hint,
        }
    })?;
    // Which side held the stream back: etcd (waiting for its next chunk) or S3 (every part slot
    // busy), after preparing (member probes, S3 client and checks, the stream's start). Seconds,
    // for a user asking why a backup took as long as it did.
    let timing = artifact.timing;
    tracing::info!(
        uri = %artifact.uri,
        bytes = artifact.size_bytes,
        parts = artifact.parts,
        total_s = started.elapsed().as_secs_f64(),
        preparing_s = preparing.as_secs_f64(),
        waiting_for_etcd_s = timing.waiting_for_source.as_secs_f64(),
        waiting_for_s3_s = timing.waiting_for_s3.as_secs_f64(),
        finishing_s = timing.finishing.as_secs_f64(),
        "snapshot uploaded"
    );
    Ok(BackupArtifact {
        uri: artifact.uri,
        size_bytes: i64::try_from(artifact.size_bytes).unwrap_or(i64::MAX),
        size: etcd_api::human_size(i64::try_from(artifact.size_bytes).unwrap_or(i64::MAX)),
        sha256: artifact.sha256,
        revision: probe.revision,
        etcd_version: probe.version,
        cluster_id,
    })
}

/// What an interrupted run (one the operator found `Running` at its start) left in S3 under the
/// backup's UID. A verified upload is completed before the outcome is written, so a stop between
/// the two leaves a complete object that the status does not record (issue 17, defect 14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeftBehind {
    /// No object carries the backup's UID under `searched` (`s3://bucket/prefix`).
    Nothing {
        /// Where it was looked for.
        searched: String,
    },
    /// The run's object, read back whole and verified against etcd's own SHA-256 trailer: the
    /// artifact the lost status write would have recorded (its revision, version and cluster ID
    /// from the object's metadata, written when the upload began).
    Complete(BackupArtifact),
    /// An object carries the UID but is not a verified snapshot (or lacks the metadata that
    /// names its revision): it is left in place and named, never adopted, never deleted.
    Unusable {
        /// `s3://bucket/key`.
        uri: String,
        /// What is wrong with it.
        why: String,
    },
}

/// Looks for the object an interrupted run of the backup `uid` of `cluster` may have completed:
/// lists `<prefix><cluster>/` for a key whose UID part is `uid` (keys are unique per backup, see
/// [`SnapshotKey`]), reads it back through the [`etcd_snapshot::TrailerVerifier`] and hashes it.
/// An S3 failure is an error (the caller retries): neither "nothing" nor "complete" is claimed
/// without an answer.
pub async fn find_left_behind(
    s3: &aws_sdk_s3::Client,
    target: &S3Target,
    cluster: &str,
    uid: &str,
) -> Result<LeftBehind, String> {
    let prefix = format!("{}{cluster}/", target.prefix);
    let searched = format!("s3://{}/{prefix}", target.bucket);
    let mut found = None;
    let mut pages = s3
        .list_objects_v2()
        .bucket(&target.bucket)
        .prefix(&prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            format!(
                "listing {searched}: {}",
                aws_sdk_s3::error::DisplayErrorContext(e)
            )
        })?;
        found = page
            .contents()
            .iter()
            .filter_map(|o| o.key())
            .find(|key| SnapshotKey::parse(key).is_ok_and(|k| k.uid == uid))
            .map(str::to_owned);
        if found.is_some() {
            break;
        }
    }
    let Some(key) = found else {
        return Ok(LeftBehind::Nothing { searched });
    };
    let uri = format!("s3://{}/{key}", target.bucket);
    let object = s3
        .get_object()
        .bucket(&target.bucket)
        .key(&key)
        .send()
        .await
        .map_err(|e| {
            format!(
                "reading {uri}: {}",
                aws_sdk_s3::error::DisplayErrorContext(e)
            )
        })?;
    let metadata = object.metadata().cloned().unwrap_or_default();
    let mut body = object.body;
    let mut verifier = etcd_snapshot::TrailerVerifier::new();
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| format!("reading {uri}: {e}"))?
    {
        verifier.update(&chunk);
    }
    let verified = match verifier.finish() {
        Ok(verified) => verified,
        Err(e) => {
            return Ok(LeftBehind::Unusable {
                uri,
                why: e.to_string(),
            });
        }
    };
    let field = |name: &str| metadata.get(name).cloned();
    let (Some(revision), Some(etcd_version), Some(cluster_id)) = (
        field("etcd-revision").and_then(|r| r.parse::<i64>().ok()),
        field("etcd-version"),
        field("etcd-cluster-id"),
    ) else {
        return Ok(LeftBehind::Unusable {
            uri,
            why: "its metadata lacks etcd-revision, etcd-version or etcd-cluster-id".to_owned(),
        });
    };
    if field("etcd-backup-uid").is_some_and(|u| u != uid) {
        return Ok(LeftBehind::Unusable {
            uri,
            why: "its metadata names another backup UID".to_owned(),
        });
    }
    Ok(LeftBehind::Complete(BackupArtifact {
        uri,
        size_bytes: i64::try_from(verified.size_bytes).unwrap_or(i64::MAX),
        size: etcd_api::human_size(i64::try_from(verified.size_bytes).unwrap_or(i64::MAX)),
        sha256: verified.object_sha256_hex(),
        revision,
        etcd_version,
        cluster_id,
    }))
}

/// Aborts the multipart uploads an interrupted run of the backup `uid` of `cluster` began under
/// `<prefix><cluster>/` and neither completed nor aborted: the process ended mid-upload, so the
/// abort that a failed or dropped upload sends never ran, and the parts would stay billed and
/// listed until a lifecycle rule (if the bucket has one) removed them. Returns the keys whose
/// uploads were aborted.
///
/// Only uploads whose key carries `uid` are touched: keys are unique per backup
/// ([`SnapshotKey`]), so another backup's upload in progress is never aborted. An upload
/// already gone (`NoSuchUpload`: completed or aborted meanwhile) is not an error. Any other S3
/// failure is (the caller retries): the backup is not reported Failed while its upload may
/// still be pending.
pub async fn abort_left_uploads(
    s3: &aws_sdk_s3::Client,
    target: &S3Target,
    cluster: &str,
    uid: &str,
) -> Result<Vec<String>, String> {
    use aws_sdk_s3::error::ProvideErrorMetadata;
    let prefix = format!("{}{cluster}/", target.prefix);
    let mut aborted = Vec::new();
    let (mut key_marker, mut upload_id_marker) = (None, None);
    loop {
        let page = s3
            .list_multipart_uploads()
            .bucket(&target.bucket)
            .prefix(&prefix)
            .set_key_marker(key_marker.take())
            .set_upload_id_marker(upload_id_marker.take())
            .send()
            .await
            .map_err(|e| {
                format!(
                    "listing the multipart uploads under s3://{}/{prefix}: {}",
                    target.bucket,
                    aws_sdk_s3::error::DisplayErrorContext(e)
                )
            })?;
        for upload in page.uploads() {
            let (Some(key), Some(upload_id)) = (upload.key(), upload.upload_id()) else {
                continue;
            };
            if !SnapshotKey::parse(key).is_ok_and(|k| k.uid == uid) {
                continue;
            }
            let result = failpoint::around(
                "backup.s3_abort_interrupted",
                s3.abort_multipart_upload()
                    .bucket(&target.bucket)
                    .key(key)
                    .upload_id(upload_id)
                    .send(),
            )
            .await;
            match result {
                Ok(_) => aborted.push(key.to_owned()),
                Err(e) if e.code() == Some("NoSuchUpload") => {}
                Err(e) => {
                    return Err(format!(
                        "aborting the upload {upload_id} of s3://{}/{key}: {}",
                        target.bucket,
                        aws_sdk_s3::error::DisplayErrorContext(e)
                    ));
                }
            }
        }
        if page.is_truncated() != Some(true) {
            break;
        }
        key_marker = page.next_key_marker().map(str::to_owned);
        upload_id_marker = page.next_upload_id_marker().map(str::to_owned);
        if key_marker.is_none() && upload_id_marker.is_none() {
            break;
        }
    }
    Ok(aborted)
}

/// The member chosen, connected.
struct Prepared {
    probe: MemberProbe,
    endpoint: String,
    client: etcd_client::Client,
    s3: aws_sdk_s3::Client,
}

async fn prepare(job: &BackupJob) -> Result<Prepared, BackupError> {
    let (answers, s3) = tokio::join!(
        probe_members(&job.endpoints, job.tls.as_ref()),
        s3_client(&job.s3)
    );
    let selected = select_member(&answers)?;
    // No per-request timeout on this client: it would cut a long snapshot stream.
    let mut options = etcd_client::ConnectOptions::new().with_connect_timeout(PROBE_TIMEOUT);
    if let Some(tls) = &job.tls {
        options = options.with_tls(tls.options());
    }
    let client = etcd_client::Client::connect([selected.endpoint.as_str()], Some(options))
        .await
        .map_err(|e| BackupError::SnapshotFailed {
            endpoint: selected.endpoint.clone(),
            detail: e.to_string(),
        })?;
    Ok(Prepared {
        probe: selected.probe,
        endpoint: selected.endpoint,
        client,
        s3,
    })
}

/// `source`, failing with [`Stopped`] at `deadline` or when `shutdown` is cancelled, so that
/// `stream_to_s3` aborts its upload and returns.
fn guard<S, B>(
    source: S,
    deadline: Instant,
    shutdown: CancellationToken,
) -> impl Stream<Item = Result<B, Box<dyn StdError + Send + Sync>>>
where
    S: Stream<Item = Result<B, etcd_client::Error>>,
{
    stream::unfold((Box::pin(source), false), move |(mut source, done)| {
        let shutdown = shutdown.clone();
        async move {
            if done {
                return None;
            }
            let stop = |s: Stopped| -> Box<dyn StdError + Send + Sync> { Box::new(s) };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => Some((Err(stop(Stopped::Shutdown)), (source, true))),
                _ = tokio::time::sleep_until(deadline) => Some((Err(stop(Stopped::Deadline)), (source, true))),
                item = source.next() => match item {
                    None => None,
                    Some(Ok(chunk)) => Some((Ok(chunk), (source, false))),
                    Some(Err(e)) => Some((Err(Box::new(e) as Box<dyn StdError + Send + Sync>), (source, true))),
                },
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run given up whose upload's abort got no answer is not reported Failed ("the upload was
    /// aborted"): the backup stays Running and is checked again like an interrupted run.
    #[test]
    fn an_unconfirmed_abort_leaves_the_outcome_open() {
        let unconfirmed = BackupError::AbortUnconfirmed {
            stopped: "Timeout",
            detail: "no answer within 20s".to_owned(),
        };
        assert!(unconfirmed.completion_unknown());
        assert_eq!(unconfirmed.reason(), "AbortUnconfirmed");
        assert!(unconfirmed.to_string().contains("may still be pending"));
        assert!(!BackupError::Timeout { seconds: 10 }.completion_unknown());
        assert!(!BackupError::Interrupted.completion_unknown());
    }
}
