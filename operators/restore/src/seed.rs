//! Preparing the seed member's data directory from a snapshot in S3: the init container of the
//! restore's seed Pod runs [`prepare_seed`] (through `etcd-restore-operator prepare-seed`), so the
//! snapshot's bytes go from S3 to the seed's volume without passing through the operator.
//!
//! Does I/O (S3, the filesystem, the `etcdutl` process). The decisions are pure functions below
//! ([`staging`], [`restore_args`], [`check_sha256`], [`parse_snapshot_status`]), unit-tested.
//!
//! Steps, and why in this order:
//! 1. `data-dir/member` exists → [`SeedOutcome::AlreadyPrepared`], nothing touched: an init
//!    container runs again after every Pod restart, and etcd may have written since.
//! 2. The object is streamed to a file in `work-dir` (bounded memory), hashed whole and checked
//!    against etcd's trailer on the way ([`TrailerVerifier`]), on a thread beside the network
//!    read; hashed first, then those same bytes written.
//! 3. The whole object's SHA-256 must equal the recorded one, then the trailer must verify.
//! 4. `etcdutl snapshot status` (the restored revision), `etcdutl snapshot restore` into a staging
//!    directory INSIDE `data-dir` (same filesystem even when `data-dir` is itself a mount point),
//!    then `staging/member` is renamed to `data-dir/member`: that rename is the commit point, so
//!    a crash at any step leaves either no `member/` (the next run starts over, clearing the
//!    leftovers it finds under fixed names) or a complete one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use etcd_snapshot::s3::S3ErrorKind;
use etcd_snapshot::{TrailerVerifier, VerifyError};

/// How long the download may go without receiving a byte before it is given up.
pub const READ_STALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Name of the staging directory etcdutl restores into, inside the data directory.
pub const STAGING_DIR_NAME: &str = ".seed-restore";

/// Everything the seed preparation needs (the `prepare-seed` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedSpec {
    /// Bucket of the snapshot object.
    pub bucket: String,
    /// Key of the snapshot object.
    pub key: String,
    /// Endpoint URL of an S3-compatible store; `None` for AWS.
    pub endpoint: Option<String>,
    /// Region to sign for.
    pub region: String,
    /// Path-style bucket addressing.
    pub force_path_style: bool,
    /// Recorded lowercase hex SHA-256 of the whole object (DB + trailer). Without one only
    /// etcd's own trailer is checked (an S3 source given without `sha256`).
    pub sha256: Option<String>,
    /// `--name` of the seed member.
    pub name: String,
    /// `--initial-cluster`, `NAME=PEERURL`.
    pub initial_cluster: String,
    /// `--initial-advertise-peer-urls`.
    pub initial_advertise_peer_urls: String,
    /// `--initial-cluster-token` (a new one: the restored cluster is a new cluster).
    pub initial_cluster_token: String,
    /// etcd's data directory to prepare.
    pub data_dir: PathBuf,
    /// The `etcdutl` binary.
    pub etcdutl: PathBuf,
    /// Where the download goes; `None`: the data directory's parent (the same volume).
    pub work_dir: Option<PathBuf>,
}

impl SeedSpec {
    /// `s3://bucket/key`.
    pub fn uri(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }
}

/// What [`prepare_seed`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeedOutcome {
    /// The data directory already held `member/`: left as it was.
    AlreadyPrepared,
    /// The snapshot was verified and restored into the data directory.
    Restored(SnapshotInfo),
}

/// The restored snapshot, as checked and as `etcdutl snapshot status` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// etcd revision of the snapshot (the EtcdRestore's `status.restoredRevision`).
    pub revision: i64,
    /// etcd's KV hash of the snapshot.
    pub hash: u64,
    /// Keys in the snapshot's backend (all buckets, as etcdutl counts them).
    pub total_keys: u64,
    /// Size of the object downloaded (DB + trailer).
    pub size_bytes: u64,
    /// Its SHA-256, lowercase hex (equal to the recorded one).
    pub sha256: String,
}

/// Why the seed could not be prepared. In every case `data-dir/member` was not created and the
/// downloaded file was removed (unless [`SeedError::Io`] says removing it failed).
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// `--sha256` is not 64 hex digits.
    #[error("invalid --sha256 {value:?}: expected 64 hex digits")]
    InvalidChecksum {
        /// What was given.
        value: String,
    },
    /// The object does not exist.
    #[error("snapshot object {uri} not found: {detail}")]
    ObjectNotFound {
        /// `s3://bucket/key`.
        uri: String,
        /// The S3 error.
        detail: String,
    },
    /// The bucket does not exist.
    #[error("S3 bucket {bucket:?} does not exist: {detail}")]
    BucketNotFound {
        /// The bucket.
        bucket: String,
        /// The S3 error.
        detail: String,
    },
    /// S3 refused the credentials.
    #[error("S3 rejected the credentials reading {uri}: {detail}")]
    CredentialsRejected {
        /// `s3://bucket/key`.
        uri: String,
        /// The S3 error.
        detail: String,
    },
    /// S3 could not be reached, failed (5xx) or stalled.
    #[error("S3 unavailable reading {uri}: {detail}")]
    S3Unavailable {
        /// `s3://bucket/key`.
        uri: String,
        /// The error.
        detail: String,
    },
    /// Any other S3 failure.
    #[error("reading {uri} failed: {detail}")]
    DownloadFailed {
        /// `s3://bucket/key`.
        uri: String,
        /// The error.
        detail: String,
    },
    /// The object is not the recorded artifact.
    #[error(
        "snapshot {uri} checksum mismatch: the recorded SHA-256 is {expected}, the object ({size_bytes} bytes) hashes to {actual}"
    )]
    ChecksumMismatch {
        /// `s3://bucket/key`.
        uri: String,
        /// The recorded SHA-256.
        expected: String,
        /// The downloaded object's SHA-256.
        actual: String,
        /// Bytes downloaded.
        size_bytes: u64,
    },
    /// etcd's SHA-256 trailer does not match the DB bytes (or there is none).
    #[error("snapshot {uri} is not a valid etcd snapshot: {source}")]
    TrailerInvalid {
        /// `s3://bucket/key`.
        uri: String,
        /// What the verifier found.
        source: VerifyError,
    },
    /// `etcdutl snapshot status` or `etcdutl snapshot restore` failed.
    #[error("etcdutl {step} failed: {detail}")]
    RestoreFailed {
        /// `snapshot status` or `snapshot restore`.
        step: &'static str,
        /// Exit status and the end of its output.
        detail: String,
    },
    /// A filesystem operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl SeedError {
    /// PascalCase reason for the EtcdRestore's status and events.
    pub fn reason(&self) -> &'static str {
        match self {
            SeedError::InvalidChecksum { .. } => "InvalidChecksum",
            SeedError::ObjectNotFound { .. } => "ObjectNotFound",
            SeedError::BucketNotFound { .. } => "BucketNotFound",
            SeedError::CredentialsRejected { .. } => "CredentialsRejected",
            SeedError::S3Unavailable { .. } => "S3Unavailable",
            SeedError::DownloadFailed { .. } => "DownloadFailed",
            SeedError::ChecksumMismatch { .. } => "ChecksumMismatch",
            SeedError::TrailerInvalid { .. } => "TrailerInvalid",
            SeedError::RestoreFailed { .. } => "RestoreFailed",
            SeedError::Io { .. } => "Io",
        }
    }
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SeedError {
    let path = path.to_owned();
    move |source| SeedError::Io {
        action,
        path,
        source,
    }
}

/// Where the preparation puts its intermediate files (pure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staging {
    /// The downloaded snapshot.
    pub download: PathBuf,
    /// The directory etcdutl restores into.
    pub restore_dir: PathBuf,
}

/// The line `prepare-seed` prints on stdout after a restore: the operator reads the restored
/// revision from the init container's log (pure).
pub fn restored_line(revision: i64) -> String {
    format!("{RESTORED_PREFIX}{revision}")
}

/// The line `prepare-seed` prints on stderr when it fails: the operator reads the reason from the
/// init container's log, so the EtcdRestore's status names the cause (pure).
pub fn failure_line(error: &SeedError) -> String {
    format!("{FAILED_PREFIX}{}): {error}", error.reason())
}

const RESTORED_PREFIX: &str = "prepare-seed: restored revision ";
const FAILED_PREFIX: &str = "prepare-seed failed (";

/// What a seed init container's log says about its outcome (pure): the last report line wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeedReport {
    /// Restored at this revision.
    Restored(i64),
    /// Failed with this reason (a [`SeedError::reason`]) and message.
    Failed {
        /// PascalCase reason.
        reason: String,
        /// The error message.
        message: String,
    },
}

/// Finds the last report line in a log (pure).
pub fn parse_report(log: &str) -> Option<SeedReport> {
    log.lines().rev().find_map(|line| {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(RESTORED_PREFIX) {
            return rest.trim().parse().ok().map(SeedReport::Restored);
        }
        let rest = line.strip_prefix(FAILED_PREFIX)?;
        let (reason, message) = rest.split_once("): ")?;
        Some(SeedReport::Failed {
            reason: reason.to_owned(),
            message: message.to_owned(),
        })
    })
}

/// Whether a failure reason is final: trying again reads the same object with the same
/// credentials and fails the same way. The others (S3 unavailable, a disk error) may pass.
pub fn is_permanent(reason: &str) -> bool {
    matches!(
        reason,
        "InvalidChecksum"
            | "ObjectNotFound"
            | "BucketNotFound"
            | "CredentialsRejected"
            | "ChecksumMismatch"
            | "TrailerInvalid"
    )
}

/// The fixed (so that a rerun finds and clears a crashed run's leftovers) staging paths for
/// `spec`: the download in `work-dir` (default: the data directory's parent, i.e. its volume),
/// named after the data directory; the restore directory inside the data directory.
pub fn staging(spec: &SeedSpec) -> Staging {
    // A relative data directory's parent is `""`: the current directory. `/` has no parent.
    let work_dir = spec
        .work_dir
        .clone()
        .unwrap_or_else(|| match spec.data_dir.parent() {
            Some(parent) if parent.as_os_str().is_empty() => PathBuf::from("."),
            Some(parent) => parent.to_path_buf(),
            None => spec.data_dir.clone(),
        });
    let mut name = OsString::from(".");
    name.push(spec.data_dir.file_name().unwrap_or_else(|| "data".as_ref()));
    name.push(".seed-download.db");
    Staging {
        download: work_dir.join(name),
        restore_dir: spec.data_dir.join(STAGING_DIR_NAME),
    }
}

/// The arguments of `etcdutl snapshot restore` (pure). `--skip-hash-check`: etcd's SHA-256
/// trailer was already verified over the same bytes as they were downloaded (a download whose
/// trailer does not verify is never restored, [`check_sha256`]), so etcdutl's second pass over
/// the whole file is skipped (it took a third of the restore's time).
pub fn restore_args(spec: &SeedSpec, snapshot: &Path, restore_dir: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "snapshot".into(),
        "restore".into(),
        snapshot.into(),
        "--skip-hash-check".into(),
    ];
    for (flag, value) in [
        ("--name", &spec.name),
        ("--initial-cluster", &spec.initial_cluster),
        ("--initial-cluster-token", &spec.initial_cluster_token),
        (
            "--initial-advertise-peer-urls",
            &spec.initial_advertise_peer_urls,
        ),
    ] {
        args.push(flag.into());
        args.push(value.into());
    }
    args.push("--data-dir".into());
    args.push(restore_dir.into());
    args
}

/// The recorded checksum, normalised to lowercase; refuses anything but 64 hex digits (pure).
pub fn normalise_sha256(value: &str) -> Result<String, SeedError> {
    if value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(value.to_ascii_lowercase())
    } else {
        Err(SeedError::InvalidChecksum {
            value: value.to_owned(),
        })
    }
}

/// The download against the recorded checksum (when there is one), then against etcd's trailer
/// (pure). The recorded checksum comes first: an object that is not the artifact is reported as
/// such even if its trailer is broken too.
pub fn check_sha256(
    uri: &str,
    expected: Option<&str>,
    verified: Result<etcd_snapshot::Verified, VerifyError>,
    actual: &str,
    size_bytes: u64,
) -> Result<etcd_snapshot::Verified, SeedError> {
    if let Some(expected) = expected
        && !actual.eq_ignore_ascii_case(expected)
    {
        return Err(SeedError::ChecksumMismatch {
            uri: uri.to_owned(),
            expected: expected.to_owned(),
            actual: actual.to_owned(),
            size_bytes,
        });
    }
    verified.map_err(|source| SeedError::TrailerInvalid {
        uri: uri.to_owned(),
        source,
    })
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson {
    hash: u64,
    revision: i64,
    total_key: u64,
}

/// Parses `etcdutl snapshot status -w json` output, e.g.
/// `{"hash":3004748009,"revision":2,"totalKey":7,"totalSize":20480}` (pure).
pub fn parse_snapshot_status(stdout: &str) -> Result<(i64, u64, u64), SeedError> {
    let s: StatusJson =
        serde_json::from_str(stdout.trim()).map_err(|e| SeedError::RestoreFailed {
            step: "snapshot status",
            detail: format!("unexpected output {:?}: {e}", stdout.trim()),
        })?;
    Ok((s.revision, s.hash, s.total_key))
}

/// An S3 client for `spec`: in the seed Pod, the AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
/// (/ AWS_SESSION_TOKEN) variables set from the credentials Secret, read as the backup reads
/// that Secret (trimmed: `echo key | base64` leaves a newline the SDK would sign with); without
/// them the ambient AWS credential chain (web identity, instance profile).
pub async fn s3_client(spec: &SeedSpec) -> aws_sdk_s3::Client {
    let endpoint = etcd_snapshot::s3::S3Endpoint {
        endpoint: spec.endpoint.as_deref(),
        region: &spec.region,
        force_path_style: spec.force_path_style,
    };
    let from_secret =
        etcd_snapshot::credentials::credentials_from_env(|key| std::env::var(key).ok());
    etcd_snapshot::s3::client(endpoint, from_secret.as_ref()).await
}

/// Maps an SDK error to a [`SeedError`] ([`etcd_snapshot::s3::classify`] judges it).
fn classify<E>(spec: &SeedSpec, err: SdkError<E>) -> SeedError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let uri = spec.uri();
    let (kind, detail) = etcd_snapshot::s3::classify(&err);
    match kind {
        S3ErrorKind::Unavailable => SeedError::S3Unavailable { uri, detail },
        S3ErrorKind::ObjectNotFound => SeedError::ObjectNotFound { uri, detail },
        S3ErrorKind::BucketNotFound => SeedError::BucketNotFound {
            bucket: spec.bucket.clone(),
            detail,
        },
        S3ErrorKind::CredentialsRejected => SeedError::CredentialsRejected { uri, detail },
        S3ErrorKind::Other => SeedError::DownloadFailed { uri, detail },
    }
}

/// Prepares `spec.data_dir` from the snapshot object; see the module docs.
pub async fn prepare_seed(
    spec: &SeedSpec,
    s3: &aws_sdk_s3::Client,
) -> Result<SeedOutcome, SeedError> {
    let expected = spec.sha256.as_deref().map(normalise_sha256).transpose()?;
    let member = spec.data_dir.join("member");
    if tokio::fs::try_exists(&member)
        .await
        .map_err(io("checking", &member))?
    {
        return Ok(SeedOutcome::AlreadyPrepared);
    }
    let paths = staging(spec);
    let result = restore(spec, s3, expected.as_deref(), &paths).await;
    // Whatever happened, the download is not needed any more; a failed restore's staging
    // directory neither (the data directory is left as it was found, plus at most an empty dir).
    let removed = remove_file_if_present(&paths.download).await;
    let cleared = remove_dir_if_present(&paths.restore_dir).await;
    let info = result?;
    removed?;
    cleared?;
    Ok(SeedOutcome::Restored(info))
}

async fn restore(
    spec: &SeedSpec,
    s3: &aws_sdk_s3::Client,
    expected: Option<&str>,
    paths: &Staging,
) -> Result<SnapshotInfo, SeedError> {
    let uri = spec.uri();
    let started = std::time::Instant::now();
    let downloaded = download(spec, s3, &paths.download).await?;
    let size_bytes = downloaded.bytes_seen();
    step_done("downloaded and hashed", started, Some(size_bytes));
    let verified = downloaded.finish();
    let actual = match &verified {
        Ok(v) => v.object_sha256_hex(),
        Err(_) => String::new(),
    };
    // A failed trailer check does not give the whole hash; hash the file again only then.
    let actual = if actual.is_empty() {
        hash_file(&paths.download).await?
    } else {
        actual
    };
    check_sha256(&uri, expected, verified, &actual, size_bytes)?;

    create_private_dir(&spec.data_dir).await?;
    // A crashed earlier run may have left a staging directory; etcdutl refuses an existing one.
    remove_dir_if_present(&paths.restore_dir).await?;
    // Both only read the verified download, so they run side by side: the status's full read of
    // the database hides behind the restore's copy of it (one after the other, the status added
    // ~25% to the two). Nothing is committed before both succeed (the rename below).
    let (status, restored) = tokio::join!(
        run_etcdutl(
            &spec.etcdutl,
            "snapshot status",
            [
                "snapshot".into(),
                "status".into(),
                "-w".into(),
                "json".into(),
                paths.download.clone().into_os_string(),
            ],
        ),
        run_etcdutl(
            &spec.etcdutl,
            "snapshot restore",
            restore_args(spec, &paths.download, &paths.restore_dir),
        ),
    );
    let (revision, hash, total_keys) = parse_snapshot_status(&status?)?;
    restored?;
    step_done("etcdutl snapshot status and restore", started, None);
    let staged_member = paths.restore_dir.join("member");
    let member = spec.data_dir.join("member");
    tokio::fs::rename(&staged_member, &member)
        .await
        .map_err(io("moving the restored member directory to", &member))?;
    sync_dir(&spec.data_dir).await?;
    Ok(SnapshotInfo {
        revision,
        hash,
        total_keys,
        size_bytes,
        sha256: actual,
    })
}

/// One log line per step of the preparation, with the time since `started` (and the rate, for
/// the download), so the init container's log shows where a slow restore spends its time.
fn step_done(step: &'static str, started: std::time::Instant, bytes: Option<u64>) {
    let seconds = started.elapsed().as_secs_f64();
    match bytes {
        Some(bytes) => tracing::info!(
            step,
            seconds,
            bytes,
            mb_per_second = bytes as f64 / 1e6 / seconds.max(1e-3),
            "seed preparation step done"
        ),
        None => tracing::info!(step, seconds, "seed preparation step done"),
    }
}

/// Chunks received and waiting for the hashing and writing thread. The SDK's chunks are at most
/// a few hundred KiB, so this bounds the download's buffers whatever the object's size
/// (measured: peak RSS 44 MiB against 37 MiB with no queue; 32 chunks: 59 MiB, no faster).
const CHUNKS_QUEUED: usize = 8;

/// Streams the object into `file`, feeding the verifier.
///
/// The network is read on the async runtime while one blocking thread hashes each chunk, then
/// writes exactly those bytes: before, hashing and writing ran inline between reads and the
/// download's time was their sum (1.26 GB behind a veth and a userspace proxy, dev build: 2.50 s
/// = 0.80 waiting for S3 + 0.72 hashing + 0.55 writing + 0.43 syncing). The scratch file is not
/// fsynced: it is read back through the page cache by etcdutl in this same run and removed after
/// it, and a crash at any point starts over from S3 (the staging paths are cleared); what must be
/// durable is the restored member directory, which etcdutl syncs and `sync_dir` commits.
///
/// Logs where the time went ("snapshot downloaded"), so a slow seed in a cluster says what to look
/// at. One GET on purpose: parallel ranged GETs measured slower here (`git log`, issue 24).
async fn download(
    spec: &SeedSpec,
    s3: &aws_sdk_s3::Client,
    file: &Path,
) -> Result<TrailerVerifier, SeedError> {
    use std::io::Write;
    let object = s3
        .get_object()
        .bucket(&spec.bucket)
        .key(&spec.key)
        .send()
        .await
        .map_err(|e| classify(spec, e))?;
    let mut body = object.body;
    let mut out = tokio::fs::File::create(file)
        .await
        .map_err(io("creating", file))?
        .into_std()
        .await;
    let started = std::time::Instant::now();
    let (to_writer, mut chunks) = tokio::sync::mpsc::channel::<bytes::Bytes>(CHUNKS_QUEUED);
    let path = file.to_owned();
    let writer = tokio::task::spawn_blocking(move || {
        let mut verifier = TrailerVerifier::new();
        let (mut hashing, mut writing) = (Duration::ZERO, Duration::ZERO);
        while let Some(chunk) = chunks.blocking_recv() {
            let at = std::time::Instant::now();
            verifier.update(&chunk);
            hashing += at.elapsed();
            let at = std::time::Instant::now();
            out.write_all(&chunk).map_err(io("writing", &path))?;
            writing += at.elapsed();
        }
        Ok::<_, SeedError>((verifier, hashing, writing))
    });
    let mut received: u64 = 0;
    let mut count: u64 = 0;
    let read = async {
        loop {
            let next = tokio::time::timeout(READ_STALL_TIMEOUT, body.next())
                .await
                .map_err(|_| SeedError::S3Unavailable {
                    uri: spec.uri(),
                    detail: format!("no data for {READ_STALL_TIMEOUT:?} after {received} bytes"),
                })?;
            match next {
                None => return Ok(()),
                Some(Ok(chunk)) => {
                    received += chunk.len() as u64;
                    count += 1;
                    // The writer only stops early on an error, which its result reports.
                    if to_writer.send(chunk).await.is_err() {
                        return Ok(());
                    }
                }
                Some(Err(e)) => {
                    return Err(SeedError::S3Unavailable {
                        uri: spec.uri(),
                        detail: format!(
                            "download broke after {received} bytes: {}",
                            DisplayErrorContext(&e)
                        ),
                    });
                }
            }
        }
    }
    .await;
    drop(to_writer);
    let written = writer
        .await
        .map_err(|e| io("writing", file)(std::io::Error::other(e)))?;
    read?;
    let (verifier, hashing, writing) = written?;
    tracing::info!(
        bytes = verifier.bytes_seen(),
        chunks = count,
        seconds = started.elapsed().as_secs_f64(),
        hashing_seconds = hashing.as_secs_f64(),
        writing_seconds = writing.as_secs_f64(),
        "snapshot downloaded"
    );
    Ok(verifier)
}

/// SHA-256 of a whole file, lowercase hex.
async fn hash_file(path: &Path) -> Result<String, SeedError> {
    use sha2::{Digest, Sha256};
    use tokio::io::AsyncReadExt;
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(io("reading", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).await.map_err(io("reading", path))?;
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
    }
    Ok(etcd_snapshot::verify::hex(&hasher.finalize()))
}

async fn run_etcdutl<I>(etcdutl: &Path, step: &'static str, args: I) -> Result<String, SeedError>
where
    I: IntoIterator<Item = OsString>,
{
    let output = tokio::process::Command::new(etcdutl)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| SeedError::RestoreFailed {
            step,
            detail: format!("cannot run {}: {e}", etcdutl.display()),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(SeedError::RestoreFailed {
            step,
            detail: format!("{}: {}", output.status, tail.join(" | ")),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

async fn create_private_dir(dir: &Path) -> Result<(), SeedError> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(io("creating", dir))?;
    // etcd wants its data directory readable by itself only.
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .await
        .map_err(io("setting permissions of", dir))
}

async fn sync_dir(dir: &Path) -> Result<(), SeedError> {
    // The rename is durable only once the directory holding it is synced.
    let handle = tokio::fs::File::open(dir)
        .await
        .map_err(io("opening", dir))?;
    handle.sync_all().await.map_err(io("syncing", dir))
}

async fn remove_file_if_present(path: &Path) -> Result<(), SeedError> {
    match tokio::fs::remove_file(path).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", path)(e)),
        _ => Ok(()),
    }
}

async fn remove_dir_if_present(path: &Path) -> Result<(), SeedError> {
    match tokio::fs::remove_dir_all(path).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SeedSpec {
        SeedSpec {
            bucket: "backups".into(),
            key: "prod/main/20261122T101500Z-rev42-uid.db".into(),
            endpoint: None,
            region: "us-east-1".into(),
            force_path_style: false,
            sha256: Some("ab".repeat(32)),
            name: "main-seed".into(),
            initial_cluster: "main-seed=http://main-seed.main:2380".into(),
            initial_advertise_peer_urls: "http://main-seed.main:2380".into(),
            initial_cluster_token: "main-restore-uid".into(),
            data_dir: "/var/lib/etcd/data".into(),
            etcdutl: "/usr/local/bin/etcdutl".into(),
            work_dir: None,
        }
    }

    #[test]
    fn staging_paths() {
        let cases: [(&str, Option<&str>, &str, &str); 4] = [
            (
                "/var/lib/etcd/data",
                None,
                "/var/lib/etcd/.data.seed-download.db",
                "/var/lib/etcd/data/.seed-restore",
            ),
            (
                "/var/lib/etcd/data",
                Some("/scratch"),
                "/scratch/.data.seed-download.db",
                "/var/lib/etcd/data/.seed-restore",
            ),
            (
                "data",
                None,
                "./.data.seed-download.db",
                "data/.seed-restore",
            ),
            ("/", None, "/.data.seed-download.db", "/.seed-restore"),
        ];
        for (data_dir, work_dir, download, restore_dir) in cases {
            let s = SeedSpec {
                data_dir: data_dir.into(),
                work_dir: work_dir.map(PathBuf::from),
                ..spec()
            };
            assert_eq!(
                staging(&s),
                Staging {
                    download: download.into(),
                    restore_dir: restore_dir.into()
                },
                "{data_dir} {work_dir:?}"
            );
        }
    }

    #[test]
    fn etcdutl_restore_arguments() {
        let args = restore_args(
            &spec(),
            Path::new("/var/lib/etcd/.data.seed-download.db"),
            Path::new("/var/lib/etcd/data/.seed-restore"),
        );
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "snapshot",
                "restore",
                "/var/lib/etcd/.data.seed-download.db",
                "--skip-hash-check",
                "--name",
                "main-seed",
                "--initial-cluster",
                "main-seed=http://main-seed.main:2380",
                "--initial-cluster-token",
                "main-restore-uid",
                "--initial-advertise-peer-urls",
                "http://main-seed.main:2380",
                "--data-dir",
                "/var/lib/etcd/data/.seed-restore",
            ]
        );
    }

    #[test]
    fn sha256_flag_is_validated_and_lowercased() {
        let upper = "AB".repeat(32);
        assert_eq!(normalise_sha256(&upper).unwrap(), "ab".repeat(32));
        for bad in ["", "ab", &"ab".repeat(33), &"zz".repeat(32)] {
            let e = normalise_sha256(bad).unwrap_err();
            assert_eq!(e.reason(), "InvalidChecksum", "{bad}");
            assert!(e.to_string().contains("64 hex digits"), "{e}");
        }
    }

    #[test]
    fn checksum_before_trailer() {
        let uri = "s3://b/k";
        let good = etcd_snapshot::Verified {
            db_sha256: [1; 32],
            object_sha256: [2; 32],
            size_bytes: 100,
        };
        let broken = || VerifyError::TruncatedSnapshot { size_bytes: 10 };
        let recorded = "02".repeat(32);
        // Matching checksum and trailer.
        assert_eq!(
            check_sha256(uri, Some(&recorded), Ok(good), &recorded, 100).unwrap(),
            good
        );
        // Another object: the checksum is reported, whatever the trailer says.
        for verified in [Ok(good), Err(broken())] {
            let e =
                check_sha256(uri, Some(&recorded), verified, &"03".repeat(32), 100).unwrap_err();
            assert_eq!(e.reason(), "ChecksumMismatch");
            let msg = e.to_string();
            assert!(
                msg.contains(&recorded) && msg.contains(&"03".repeat(32)),
                "{msg}"
            );
            assert!(msg.contains(uri), "{msg}");
        }
        // The recorded object itself has a broken trailer.
        let e = check_sha256(uri, Some(&recorded), Err(broken()), &recorded, 10).unwrap_err();
        assert_eq!(e.reason(), "TrailerInvalid");
        assert!(e.to_string().contains("truncated snapshot"), "{e}");
        // No recorded checksum (an S3 source without sha256): only the trailer decides.
        assert_eq!(
            check_sha256(uri, None, Ok(good), &"03".repeat(32), 100).unwrap(),
            good
        );
        let e = check_sha256(uri, None, Err(broken()), &recorded, 10).unwrap_err();
        assert_eq!(e.reason(), "TrailerInvalid");
    }

    #[test]
    fn report_lines_round_trip_and_the_last_one_wins() {
        assert_eq!(
            parse_report(&restored_line(4711)),
            Some(SeedReport::Restored(4711))
        );
        let error = SeedError::ChecksumMismatch {
            uri: "s3://b/k".into(),
            expected: "0".repeat(64),
            actual: "1".repeat(64),
            size_bytes: 9,
        };
        let log = format!(
            "{{\"level\":\"INFO\"}}\n{}\nsome trailing noise\n",
            failure_line(&error)
        );
        let Some(SeedReport::Failed { reason, message }) = parse_report(&log) else {
            panic!("no failure report in {log}");
        };
        assert_eq!(reason, "ChecksumMismatch");
        assert!(message.contains("s3://b/k"), "{message}");
        assert!(is_permanent(&reason));
        assert!(!is_permanent("S3Unavailable"));
        // A container that failed, then succeeded on a later attempt: the later line wins.
        let log = format!("{}\n{}\n", failure_line(&error), restored_line(7));
        assert_eq!(parse_report(&log), Some(SeedReport::Restored(7)));
        assert_eq!(parse_report("nothing here"), None);
    }

    #[test]
    fn snapshot_status_output() {
        assert_eq!(
            parse_snapshot_status(
                "{\"hash\":3004748009,\"revision\":2,\"totalKey\":7,\"totalSize\":20480}\n"
            )
            .unwrap(),
            (2, 3_004_748_009, 7)
        );
        let e = parse_snapshot_status("hash revision\n").unwrap_err();
        assert_eq!(e.reason(), "RestoreFailed");
        assert!(e.to_string().contains("snapshot status"), "{e}");
    }

    #[test]
    fn reasons_and_messages() {
        let io_err = SeedError::Io {
            action: "removing",
            path: "/x/y".into(),
            source: std::io::Error::other("busy"),
        };
        assert_eq!(io_err.reason(), "Io");
        assert_eq!(io_err.to_string(), "removing /x/y: busy");
        let e = SeedError::ObjectNotFound {
            uri: spec().uri(),
            detail: "NoSuchKey".into(),
        };
        assert_eq!(e.reason(), "ObjectNotFound");
        assert!(
            e.to_string().starts_with(
                "snapshot object s3://backups/prod/main/20261122T101500Z-rev42-uid.db not found"
            ),
            "{e}"
        );
        let e = SeedError::RestoreFailed {
            step: "snapshot restore",
            detail: "exit status: 1".into(),
        };
        assert_eq!(
            e.to_string(),
            "etcdutl snapshot restore failed: exit status: 1"
        );
    }
}
