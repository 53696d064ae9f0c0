//! Streams a snapshot into an S3 multipart upload, verifying etcd's trailer before completing.
//!
//! - Memory: one part buffer being filled plus at most [`PARTS_IN_FLIGHT`] parts being sent
//!   (≤ (1 + [`PARTS_IN_FLIGHT`]) × `part_size`), reused from part to part; no temporary file.
//!   The hasher reads the same buffers; it is far faster than S3, and were it ever slower, the
//!   at most two parts it has not hashed yet would be the only ones held beyond that bound.
//! - Pipelined: the loop that drains etcd's stream only copies into the part buffer; a full part
//!   goes to S3 and to etcd's trailer check (SHA-256, on a thread of its own) at once.
//! - Never overwrites: a HeadObject before starting refuses an existing key, and the completion is
//!   conditional (`If-None-Match: *`), which closes the race between the check and the completion
//!   on servers that honour it (AWS S3 and SeaweedFS 4.48 both do: see the `tests/upload.rs` test
//!   `object_created_during_upload_is_not_overwritten`).
//! - All-or-nothing: on any failure (source error, verification failure, S3 error, timeout) the
//!   multipart upload is aborted, so no object and no pending upload stay behind. If the returned
//!   future is dropped before it finishes (e.g. the caller's timeout), the abort is spawned onto the
//!   current Tokio runtime.
//! - The object's SHA-256 is known only at the end, while S3 metadata is fixed when the upload is
//!   created, so it is not stored in the object's metadata: it is returned in [`Artifact`] (and
//!   recorded by the operator in `status.artifact.sha256`). Each part also carries a CRC32
//!   checksum that S3 verifies on receipt.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::error::Error as StdError;
use std::pin::pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::task::JoinHandle;

use crate::s3::S3ErrorKind;
use crate::verify::{TrailerVerifier, Verified, VerifyError, hex};

/// Smallest part S3 accepts (except the last one): 5 MiB. Smaller `part_size`s are raised to it.
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;
/// Default part size: 8 MiB. With [`PARTS_IN_FLIGHT`] parts sent at once the buffers stay at
/// 32 MiB, and 10 000 parts still hold 78 GiB, ten times etcd's largest recommended database.
pub const DEFAULT_PART_SIZE: usize = 8 * 1024 * 1024;
/// Parts sent at once while the next one fills. One at a time left the S3 server idle between
/// parts: the backup took 1.44 times as long as `aws s3 cp` of the same file, which sends ten.
/// Largest part S3 accepts: 5 GiB. Larger `part_size`s are lowered to it.
pub const MAX_PART_SIZE: usize = 5 * 1024 * 1024 * 1024;
/// Most parts one multipart upload may have.
pub const MAX_PARTS: i32 = 10_000;
/// See [`DEFAULT_PART_SIZE`].
pub const PARTS_IN_FLIGHT: usize = 3;
/// How long an upload's abort is retried while S3 does not answer (see `Multipart::abort`).
pub const ABORT_PATIENCE: Duration = Duration::from_secs(20);

/// Upper bound for any single S3 request (one part, the completion, the abort). The SDK client's
/// own timeouts, when configured, apply as well.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The uploaded snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// `s3://bucket/key`.
    pub uri: String,
    /// The bucket.
    pub bucket: String,
    /// The object key.
    pub key: String,
    /// Size of the object (DB + 32-byte trailer).
    pub size_bytes: u64,
    /// SHA-256 of the whole object, lowercase hex: what a restore checks its download against.
    pub sha256: String,
    /// SHA-256 of the DB alone (equal to etcd's trailer), lowercase hex.
    pub db_sha256: String,
    /// Number of parts uploaded.
    pub parts: u32,
    /// Where the upload's time went.
    pub timing: UploadTiming,
}

/// Where an upload's time went: a streamed backup is as fast as the slower of its source and
/// S3, and this says which one held it back (the backup operator logs it; `make bench` prints it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UploadTiming {
    /// Waiting for the source's next chunk (etcd's snapshot stream).
    pub waiting_for_source: Duration,
    /// Waiting for S3 to take a part while [`PARTS_IN_FLIGHT`] were being sent.
    pub waiting_for_s3: Duration,
    /// From the end of the source to the completed upload: the last parts and the completion
    /// (a wait for the last part's turn counts in `waiting_for_s3` as well).
    pub finishing: Duration,
}

/// Why an upload failed. Whatever the cause, no object was created and the multipart upload was
/// aborted (unless [`UploadError::AbortFailed`] says the abort itself failed).
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The bucket does not exist (`NoSuchBucket`).
    #[error("S3 bucket {bucket:?} does not exist: {detail}")]
    BucketNotFound {
        /// The bucket.
        bucket: String,
        /// The S3 error.
        detail: String,
    },
    /// The credentials were refused (`InvalidAccessKeyId`, `SignatureDoesNotMatch`,
    /// `AccessDenied`, or a bare 403).
    #[error("S3 rejected the credentials ({operation}): {detail}")]
    CredentialsRejected {
        /// The S3 operation that was refused.
        operation: &'static str,
        /// The S3 error.
        detail: String,
    },
    /// An object already exists at the key; it was left untouched.
    #[error("refusing to overwrite existing object {uri}")]
    ObjectExists {
        /// `s3://bucket/key`.
        uri: String,
    },
    /// The snapshot's trailer is not the SHA-256 of its DB bytes (corrupted or truncated stream).
    #[error(transparent)]
    ChecksumMismatch(VerifyError),
    /// The snapshot stream ended before even a 32-byte trailer arrived.
    #[error(transparent)]
    TruncatedSnapshot(VerifyError),
    /// The snapshot source failed (e.g. the etcd stream broke).
    #[error("snapshot stream failed after {bytes_received} bytes: {source}")]
    SnapshotStreamFailed {
        /// Bytes received before the failure.
        bytes_received: u64,
        /// The source's error.
        source: Box<dyn StdError + Send + Sync>,
    },
    /// S3 could not be reached or did not answer in time (connection errors, timeouts, 5xx).
    #[error("S3 unavailable ({operation}): {detail}")]
    S3Unavailable {
        /// The S3 operation that failed.
        operation: &'static str,
        /// The error.
        detail: String,
    },
    /// The completion failed without saying "not done" (its answer lost, e.g.) and S3 did not
    /// answer the read-back of the key for [`ABORT_PATIENCE`]: the object may exist. Not a
    /// failure to report as such: the caller must find out later (list and read back the key)
    /// before saying the backup failed.
    #[error(
        "whether {uri} was stored is unknown: the completion failed ({completion}) and S3 did not \
         answer its read-back ({detail})"
    )]
    CompletionUnknown {
        /// `s3://bucket/key`.
        uri: String,
        /// How the completion failed.
        completion: Box<UploadError>,
        /// Why the read-back got no answer.
        detail: String,
    },
    /// Any other failure.
    #[error("{operation} failed: {detail}")]
    Other {
        /// What failed.
        operation: &'static str,
        /// The error.
        detail: String,
    },
    /// The upload failed with `error`, and aborting the multipart upload failed too: a pending
    /// upload (never a visible object) may remain until a bucket lifecycle rule removes it.
    #[error("{error}; aborting multipart upload {upload_id} failed too: {abort_detail}")]
    AbortFailed {
        /// The original failure.
        error: Box<UploadError>,
        /// The multipart upload that may remain.
        upload_id: String,
        /// Why the abort failed.
        abort_detail: String,
    },
}

impl UploadError {
    /// PascalCase reason for conditions and events (of the original failure for
    /// [`UploadError::AbortFailed`]).
    pub fn reason(&self) -> &'static str {
        match self {
            UploadError::BucketNotFound { .. } => "BucketNotFound",
            UploadError::CredentialsRejected { .. } => "CredentialsRejected",
            UploadError::ObjectExists { .. } => "ObjectExists",
            UploadError::ChecksumMismatch(_) => "ChecksumMismatch",
            UploadError::TruncatedSnapshot(_) => "TruncatedSnapshot",
            UploadError::SnapshotStreamFailed { .. } => "SnapshotStreamFailed",
            UploadError::S3Unavailable { .. } => "S3Unavailable",
            UploadError::CompletionUnknown { .. } => "CompletionUnknown",
            UploadError::Other { .. } => "Other",
            UploadError::AbortFailed { error, .. } => error.reason(),
        }
    }

    /// The original failure, looking through [`UploadError::AbortFailed`].
    pub fn root(&self) -> &UploadError {
        match self {
            UploadError::AbortFailed { error, .. } => error.root(),
            other => other,
        }
    }
}

impl From<VerifyError> for UploadError {
    fn from(e: VerifyError) -> Self {
        match e {
            VerifyError::TruncatedSnapshot { .. } => UploadError::TruncatedSnapshot(e),
            VerifyError::ChecksumMismatch { .. } => UploadError::ChecksumMismatch(e),
        }
    }
}

/// Maps an SDK error to an [`UploadError`] ([`crate::s3::classify`] judges it).
fn classify<E>(operation: &'static str, bucket: &str, err: SdkError<E>) -> UploadError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let (kind, detail) = crate::s3::classify(&err);
    match kind {
        S3ErrorKind::Unavailable => UploadError::S3Unavailable { operation, detail },
        S3ErrorKind::BucketNotFound => UploadError::BucketNotFound {
            bucket: bucket.to_owned(),
            detail,
        },
        S3ErrorKind::CredentialsRejected => UploadError::CredentialsRejected { operation, detail },
        // An upload names no existing object: a 404 here is not a missing snapshot.
        S3ErrorKind::ObjectNotFound | S3ErrorKind::Other => {
            UploadError::Other { operation, detail }
        }
    }
}

/// Streams `source` (an etcd snapshot: DB bytes then their 32-byte SHA-256) into a new object
/// `bucket`/`key` with the given user metadata, in parts of `part_size` bytes (clamped to
/// [`MIN_PART_SIZE`]..=[`MAX_PART_SIZE`]; use [`DEFAULT_PART_SIZE`] unless there is a reason not
/// to). The object is completed only if the trailer verifies; see the module docs for the
/// guarantees.
pub async fn stream_to_s3<S, B, E>(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    metadata: BTreeMap<String, String>,
    source: S,
    part_size: usize,
) -> Result<Artifact, UploadError>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    let part_size = part_size.clamp(MIN_PART_SIZE, MAX_PART_SIZE);
    let uri = format!("s3://{bucket}/{key}");
    ensure_absent(s3, bucket, key, &uri).await?;

    let created = with_timeout(
        "CreateMultipartUpload",
        failpoint::around(
            "backup.s3_create_multipart",
            s3.create_multipart_upload()
                .bucket(bucket)
                .key(key)
                .content_type("application/octet-stream")
                .set_metadata(Some(metadata.into_iter().collect::<HashMap<_, _>>()))
                .checksum_algorithm(ChecksumAlgorithm::Crc32)
                .send(),
        ),
    )
    .await?
    .map_err(|e| classify("CreateMultipartUpload", bucket, e))?;
    let upload_id = created
        .upload_id()
        .ok_or_else(|| UploadError::Other {
            operation: "CreateMultipartUpload",
            detail: "the response has no upload id".to_owned(),
        })?
        .to_owned();

    let mut upload = Multipart {
        s3: s3.clone(),
        bucket: bucket.to_owned(),
        key: key.to_owned(),
        upload_id,
        parts: Vec::new(),
        in_flight: VecDeque::new(),
        finished: false,
        timing: UploadTiming::default(),
    };
    match upload.run(source, part_size).await {
        Ok(verified) => Ok(Artifact {
            uri,
            bucket: bucket.to_owned(),
            key: key.to_owned(),
            size_bytes: verified.size_bytes,
            sha256: verified.object_sha256_hex(),
            db_sha256: hex(&verified.db_sha256),
            parts: u32::try_from(upload.parts.len()).unwrap_or(u32::MAX),
            timing: upload.timing,
        }),
        Err(e) => Err(upload.abort(e).await),
    }
}

/// Fails with [`UploadError::BucketNotFound`] if the bucket is missing and with
/// [`UploadError::ObjectExists`] if `key` exists.
///
/// The bucket is checked explicitly because SeaweedFS (4.48) creates a missing bucket on
/// CreateMultipartUpload for an admin identity instead of answering `NoSuchBucket`. Both checks
/// need `s3:ListBucket` (without it, AWS answers 403 instead of 404 for a missing key, which reads
/// as [`UploadError::CredentialsRejected`]).
async fn ensure_absent(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    uri: &str,
) -> Result<(), UploadError> {
    match with_timeout("HeadBucket", s3.head_bucket().bucket(bucket).send()).await? {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => {
            return Err(UploadError::BucketNotFound {
                bucket: bucket.to_owned(),
                detail: DisplayErrorContext(&e).to_string(),
            });
        }
        Err(e) => return Err(classify("HeadBucket", bucket, e)),
    }
    match with_timeout(
        "HeadObject",
        s3.head_object().bucket(bucket).key(key).send(),
    )
    .await?
    {
        Ok(_) => Err(UploadError::ObjectExists {
            uri: uri.to_owned(),
        }),
        // 404: no such key (the bucket exists, checked above).
        Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(()),
        Err(e) => Err(classify("HeadObject", bucket, e)),
    }
}

async fn with_timeout<T>(
    operation: &'static str,
    fut: impl Future<Output = T>,
) -> Result<T, UploadError> {
    tokio::time::timeout(REQUEST_TIMEOUT, fut)
        .await
        .map_err(|_| UploadError::S3Unavailable {
            operation,
            detail: format!("no answer within {REQUEST_TIMEOUT:?}"),
        })
}

/// One multipart upload in progress; aborted on drop unless completed or aborted.
struct Multipart {
    s3: aws_sdk_s3::Client,
    bucket: String,
    key: String,
    upload_id: String,
    /// Parts S3 has acknowledged, in part-number order.
    parts: Vec<CompletedPart>,
    /// Parts being sent, oldest (lowest number) first.
    in_flight: VecDeque<PartTask>,
    finished: bool,
    timing: UploadTiming,
}

/// One part being sent, in a task of its own. Dropping it cancels the request (its connection
/// is closed), so a dropped upload leaves no part still being sent: one that S3 applied after
/// the upload's abort would re-create the upload (SeaweedFS does), pending for good (issue 18).
/// A part whose whole body S3 had already received may still be applied late; S3 itself says
/// an abort may then have to be repeated.
struct PartTask(JoinHandle<Result<CompletedPart, UploadError>>);

impl Drop for PartTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Multipart {
    /// Streams, verifies and completes. On error the caller aborts.
    ///
    /// The loop only receives and copies: each full part goes to S3 (a task of its own) and to
    /// the [`PartHasher`] (a thread of its own) at once, so etcd's stream is drained while the
    /// previous parts are hashed and sent.
    async fn run<S, B, E>(&mut self, source: S, part_size: usize) -> Result<Verified, UploadError>
    where
        S: Stream<Item = Result<B, E>>,
        B: AsRef<[u8]>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let mut source = pin!(source);
        let buffers = PartBuffers::new(part_size, 1 + PARTS_IN_FLIGHT);
        let mut hasher = PartHasher::start();
        let mut received: u64 = 0;
        let mut buf = buffers.take();
        loop {
            let asked = Instant::now();
            let Some(item) = source.next().await else {
                self.timing.waiting_for_source += asked.elapsed();
                break;
            };
            self.timing.waiting_for_source += asked.elapsed();
            let chunk = item.map_err(|e| UploadError::SnapshotStreamFailed {
                bytes_received: received,
                source: e.into(),
            })?;
            let mut data = chunk.as_ref();
            received += data.len() as u64;
            while !data.is_empty() {
                let n = (part_size - buf.len()).min(data.len());
                buf.extend_from_slice(&data[..n]);
                data = &data[n..];
                if buf.len() == part_size {
                    // The next buffer is taken once this part has its slot: while it waits,
                    // no fifth buffer exists.
                    let part = buffers.share(std::mem::take(&mut buf));
                    hasher.feed(part.clone()).await;
                    self.send_part(part).await?;
                    buf = buffers.take();
                }
            }
        }
        // Verify before uploading the last part and completing: a bad stream never completes.
        let finishing = Instant::now();
        let last = buffers.share(buf);
        if !last.is_empty() {
            hasher.feed(last.clone()).await;
        }
        let verified = hasher.finish().await?;
        if !last.is_empty() {
            self.send_part(last).await?;
        }
        while !self.in_flight.is_empty() {
            self.wait_oldest().await?;
        }
        self.complete(&verified).await?;
        self.timing.finishing = finishing.elapsed();
        Ok(verified)
    }

    /// Starts uploading `data` in the background, once fewer than [`PARTS_IN_FLIGHT`] parts are
    /// being sent (waiting for the oldest first).
    async fn send_part(&mut self, data: Bytes) -> Result<(), UploadError> {
        let waiting = Instant::now();
        while self.in_flight.len() >= PARTS_IN_FLIGHT {
            self.wait_oldest().await?;
        }
        self.timing.waiting_for_s3 += waiting.elapsed();
        let number = i32::try_from(self.parts.len() + self.in_flight.len() + 1)
            .ok()
            .filter(|n| *n <= MAX_PARTS)
            .ok_or_else(|| UploadError::Other {
                operation: "UploadPart",
                detail: format!("more than {MAX_PARTS} parts: raise the part size"),
            })?;
        let (s3, bucket, key, upload_id) = (
            self.s3.clone(),
            self.bucket.clone(),
            self.key.clone(),
            self.upload_id.clone(),
        );
        self.in_flight.push_back(PartTask(tokio::spawn(async move {
            let out = with_timeout(
                "UploadPart",
                failpoint::around(
                    "backup.s3_upload_part",
                    s3.upload_part()
                        .bucket(&bucket)
                        .key(&key)
                        .upload_id(&upload_id)
                        .part_number(number)
                        .checksum_algorithm(ChecksumAlgorithm::Crc32)
                        .body(ByteStream::from(data))
                        .send(),
                ),
            )
            .await?
            .map_err(|e| classify("UploadPart", &bucket, e))?;
            Ok(CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_owned))
                .set_checksum_crc32(out.checksum_crc32().map(str::to_owned))
                .build())
        })));
        Ok(())
    }

    /// Waits for the oldest part being sent (if any) and records it: parts are recorded in
    /// part-number order, as the completion lists them.
    async fn wait_oldest(&mut self) -> Result<(), UploadError> {
        if let Some(mut task) = self.in_flight.pop_front() {
            let part = (&mut task.0).await.map_err(|e| UploadError::Other {
                operation: "UploadPart",
                detail: format!("upload task failed: {e}"),
            })??;
            self.parts.push(part);
        }
        Ok(())
    }

    /// Completes the upload. A completion whose answer did not say "done" may still have been
    /// applied: its answer lost on the way back, after which the SDK's retry finds the upload gone
    /// or, because of `If-None-Match`, the key taken by our own object (`ObjectExists`). So on
    /// any error the key is read back: holding exactly the verified bytes, it is this upload's
    /// object and the upload succeeded (issue 18: the backup reported Failed with its object in
    /// place). Otherwise the error stands and the caller aborts.
    async fn complete(&mut self, verified: &Verified) -> Result<(), UploadError> {
        let error = match self.send_complete().await {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        match self.holds_our_object(verified).await {
            Ok(true) => {
                self.finished = true;
                Ok(())
            }
            // Not there, or other bytes (another writer's object: ObjectExists stands).
            Ok(false) => Err(error),
            // S3 does not answer: the object may exist or not. The upload is aborted (a no-op if
            // it was completed after all), and the caller is told it does not know, so that it
            // looks again later (the backup operator's `find_left_behind`) instead of reporting
            // a failure with the object possibly in place (issue 18).
            Err(detail) => Err(UploadError::CompletionUnknown {
                uri: format!("s3://{}/{}", self.bucket, self.key),
                completion: Box::new(error),
                detail,
            }),
        }
    }

    /// Whether the key now holds the verified snapshot (size and whole-object SHA-256). Retried
    /// while S3 does not answer, for up to [`ABORT_PATIENCE`]; `Err` if it never did.
    async fn holds_our_object(&self, verified: &Verified) -> Result<bool, String> {
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(500);
        loop {
            let detail = match self.read_back(verified).await {
                Ok(answer) => return Ok(answer),
                Err(detail) => detail,
            };
            if started.elapsed() + delay > ABORT_PATIENCE {
                return Err(detail);
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(8));
        }
    }

    /// One read of the key: `Ok(false)` if absent or other bytes, `Err` if S3 did not answer.
    async fn read_back(&self, verified: &Verified) -> Result<bool, String> {
        use sha2::{Digest, Sha256};
        let got = with_timeout(
            "GetObject",
            self.s3
                .get_object()
                .bucket(&self.bucket)
                .key(&self.key)
                .send(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let object = match got {
            Ok(object) => object,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Ok(false);
            }
            Err(e) => return Err(DisplayErrorContext(&e).to_string()),
        };
        if object
            .content_length()
            .is_some_and(|n| n as u64 != verified.size_bytes)
        {
            return Ok(false);
        }
        let mut body = object.body;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| format!("reading the object back: {e}"))?;
            size += chunk.len() as u64;
            hasher.update(&chunk);
        }
        Ok(size == verified.size_bytes && hasher.finalize().as_slice() == verified.object_sha256)
    }

    async fn send_complete(&mut self) -> Result<(), UploadError> {
        let result = with_timeout(
            "CompleteMultipartUpload",
            failpoint::around(
                "backup.s3_complete",
                self.s3
                    .complete_multipart_upload()
                    .bucket(&self.bucket)
                    .key(&self.key)
                    .upload_id(&self.upload_id)
                    // Never overwrite, even if the key appeared after the HeadObject check.
                    .if_none_match("*")
                    .multipart_upload(
                        CompletedMultipartUpload::builder()
                            .set_parts(Some(self.parts.clone()))
                            .build(),
                    )
                    .send(),
            ),
        )
        .await?;
        match result {
            Ok(_) => {
                self.finished = true;
                Ok(())
            }
            Err(e) => {
                let status = e.raw_response().map(|r| r.status().as_u16());
                if matches!(
                    e.code(),
                    Some("PreconditionFailed" | "ConditionalRequestConflict")
                ) || matches!(status, Some(412 | 409))
                {
                    Err(UploadError::ObjectExists {
                        uri: format!("s3://{}/{}", self.bucket, self.key),
                    })
                } else {
                    Err(classify("CompleteMultipartUpload", &self.bucket, e))
                }
            }
        }
    }

    /// Aborts the upload after `error`; returns `error`, wrapped if the abort failed too.
    async fn abort(&mut self, error: UploadError) -> UploadError {
        // Let the parts in flight finish (or fail) first, so that no part lands after the abort.
        for mut task in self.in_flight.drain(..) {
            let _ = (&mut task.0).await;
        }
        self.finished = true;
        // The failure is often S3 itself going away (a restart, a network blip): retried while
        // it does not answer, for up to ABORT_PATIENCE, so that an outage shorter than that
        // leaves no pending upload behind (the issue 18 fault suite found one after 3 s down).
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(500);
        let abort_detail = loop {
            let result = with_timeout(
                "AbortMultipartUpload",
                failpoint::around(
                    "backup.s3_abort",
                    self.s3
                        .abort_multipart_upload()
                        .bucket(&self.bucket)
                        .key(&self.key)
                        .upload_id(&self.upload_id)
                        .send(),
                ),
            )
            .await;
            let (detail, unanswered) = match result {
                Ok(Ok(_)) => return error,
                // Already gone (e.g. a concurrent abort): nothing remains.
                Ok(Err(e)) if e.code() == Some("NoSuchUpload") => return error,
                Ok(Err(e)) => {
                    let classified = classify("AbortMultipartUpload", &self.bucket, e);
                    let unanswered = matches!(classified, UploadError::S3Unavailable { .. });
                    (classified.to_string(), unanswered)
                }
                // REQUEST_TIMEOUT already spent on this one attempt.
                Err(timeout) => (timeout.to_string(), false),
            };
            if !unanswered || started.elapsed() + delay > ABORT_PATIENCE {
                break detail;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(8));
        };
        UploadError::AbortFailed {
            error: Box::new(error),
            upload_id: self.upload_id.clone(),
            abort_detail,
        }
    }
}

impl Drop for Multipart {
    /// The future was dropped mid-upload (the caller gave up on it, typically while S3 held a
    /// request): the parts in flight are cancelled, not waited for (they may hang for
    /// [`REQUEST_TIMEOUT`]), and the abort is sent in the background (best effort; a caller
    /// that reports the upload aborted aborts it too, awaited). The part being awaited when the
    /// future was dropped was cancelled with it ([`PartTask`]).
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let in_flight = std::mem::take(&mut self.in_flight);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (s3, bucket, key, upload_id) = (
                self.s3.clone(),
                self.bucket.clone(),
                self.key.clone(),
                self.upload_id.clone(),
            );
            runtime.spawn(async move {
                // Cancelled, and their requests gone, before the abort is sent.
                for mut task in in_flight {
                    task.0.abort();
                    let _ = (&mut task.0).await;
                }
                let abort = failpoint::around(
                    "backup.s3_abort_on_drop",
                    s3.abort_multipart_upload()
                        .bucket(bucket)
                        .key(key)
                        .upload_id(upload_id)
                        .send(),
                );
                let _ = tokio::time::timeout(REQUEST_TIMEOUT, abort).await;
            });
        } else {
            // Each PartTask cancels its part when dropped.
            drop(in_flight);
        }
    }
}

/// The part buffers of one upload, reused: a part's buffer comes back here once S3 has it and
/// it is hashed (its last [`Bytes`] dropped), instead of being freed while the next one is
/// allocated. Freed and allocated again, 8 MiB buffers left the allocator's arenas holding
/// freed parts on several threads, so the backup's peak RSS grew with the snapshot's size.
struct PartBuffers {
    part_size: usize,
    /// Buffers kept for reuse; one more in use is allocated anew (and freed when returned).
    keep: usize,
    free: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl PartBuffers {
    fn new(part_size: usize, keep: usize) -> Self {
        PartBuffers {
            part_size,
            keep,
            free: Arc::new(Mutex::new(Vec::with_capacity(keep))),
        }
    }

    /// An empty buffer of `part_size` capacity: a returned one if any.
    fn take(&self) -> Vec<u8> {
        let reused = self.free.lock().ok().and_then(|mut free| free.pop());
        match reused {
            Some(mut buffer) => {
                buffer.clear();
                buffer
            }
            None => Vec::with_capacity(self.part_size),
        }
    }

    /// `data` as [`Bytes`] (for S3 and the hasher, without a copy) that returns the buffer when
    /// the last clone is dropped. After the upload is over, returned buffers are freed.
    fn share(&self, data: Vec<u8>) -> Bytes {
        Bytes::from_owner(ReturnedOnDrop {
            data,
            free: Arc::downgrade(&self.free),
            keep: self.keep,
        })
    }
}

struct ReturnedOnDrop {
    data: Vec<u8>,
    free: Weak<Mutex<Vec<Vec<u8>>>>,
    keep: usize,
}

impl AsRef<[u8]> for ReturnedOnDrop {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for ReturnedOnDrop {
    fn drop(&mut self) {
        if let Some(free) = self.free.upgrade()
            && let Ok(mut free) = free.lock()
            && free.len() < self.keep
        {
            free.push(std::mem::take(&mut self.data));
        }
    }
}

/// Parts waiting for the hasher besides the one it hashes: it hashes far faster than S3 takes
/// parts, so one is enough to keep it busy.
const HASH_QUEUE: usize = 1;

/// etcd's trailer check ([`TrailerVerifier`]) on a thread of its own, fed whole parts in order:
/// the loop draining etcd's stream does not stop to hash (SHA-256 of a GiB is about half a
/// second of CPU here, and inline it ran between etcd's messages).
struct PartHasher {
    parts: Option<tokio::sync::mpsc::Sender<Bytes>>,
    hashed: JoinHandle<TrailerVerifier>,
}

impl PartHasher {
    fn start() -> Self {
        let (parts, mut queue) = tokio::sync::mpsc::channel::<Bytes>(HASH_QUEUE);
        let hashed = tokio::task::spawn_blocking(move || {
            let mut verifier = TrailerVerifier::new();
            while let Some(part) = queue.blocking_recv() {
                verifier.update(&part);
            }
            verifier
        });
        PartHasher {
            parts: Some(parts),
            hashed,
        }
    }

    /// Hands the next part over (waits while [`HASH_QUEUE`] parts are waiting). A hasher that
    /// is gone (it panicked) makes [`PartHasher::finish`] fail.
    async fn feed(&mut self, part: Bytes) {
        if let Some(parts) = &self.parts {
            let _ = parts.send(part).await;
        }
    }

    /// Waits until every part fed is hashed, then checks the trailer.
    async fn finish(mut self) -> Result<Verified, UploadError> {
        drop(self.parts.take());
        let verifier = (&mut self.hashed).await.map_err(|e| UploadError::Other {
            operation: "hashing the snapshot",
            detail: e.to_string(),
        })?;
        Ok(verifier.finish()?)
    }
}
