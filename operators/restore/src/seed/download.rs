//! The seed's download: the snapshot object fetched in ranged GETs, [`PIECES_IN_FLIGHT`] at a
//! time, each written at its offset in the download file (off the async runtime), and handed in
//! order to a hashing task of its own, which feeds etcd's [`TrailerVerifier`] exactly the bytes
//! that were written. Does I/O (S3, the file); the decisions are pure functions
//! ([`range_plan`], [`parse_content_range`], [`check_piece_answer`]), unit-tested.
//!
//! Why: one GET is one TCP stream, and a stream from real S3 (or through a userspace hop) is
//! held to what one connection carries; `aws s3 cp` fetches 8 MB ranges ten at a time.
//! Measured on this 2-core machine (SeaweedFS, 1.26 GB, dev build) it was SLOWER than one GET:
//! 4.0-5.5 s against 2.6-3.6 s behind a veth + userspace proxy, 6.5 s against 5.4 s in the
//! restore bench's seed Pod, with more CPU (each range is a request SeaweedFS looks up again)
//! and 65 MiB peak RSS against 37 MiB. See the commit that follows this one.

//! Correctness, in the order the code meets it:
//! - The first GET asks for the first piece. A `206` with `Content-Range: bytes 0-E/TOTAL` gives
//!   the object's size and ETag; every later piece is asked `If-Match` that ETag and its answer
//!   must name exactly the range asked and the same total (else the object changed: the seed
//!   fails with `DownloadFailed`, retried with a fresh start by the restore operator).
//! - A server that ignores `Range` answers `200` with the whole body: it is read as one stream,
//!   as before. An empty object (where S3 answers `416` to any range) is read with a plain GET.
//! - A piece whose connection breaks is asked again (up to [`PIECE_ATTEMPTS`]); then the seed
//!   fails with `S3Unavailable` as a broken single stream did.
//! - Memory: at most [`PIECES_IN_FLIGHT`] pieces being fetched or waiting for their turn, plus
//!   [`PIECES_QUEUED_FOR_HASHING`] and the one being hashed, of [`PIECE_BYTES`] each (24 MiB),
//!   each in one buffer of its own size (the network's chunks are copied into it and freed).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use etcd_snapshot::TrailerVerifier;
use futures_util::StreamExt;

use super::{READ_STALL_TIMEOUT, SeedError, SeedSpec, classify, io};

/// Size of one ranged GET: large enough that the request's round trip is noise (~300 GETs for
/// 1.2 GB), small enough that the pieces held in memory stay a few tens of MiB.
pub const PIECE_BYTES: u64 = 4 << 20;
/// Ranged GETs in flight (`aws s3 cp` runs ten): more connections than cores gain nothing here.
pub const PIECES_IN_FLIGHT: usize = 4;
/// Pieces of a single stream being written while the next one is read.
pub const WRITES_IN_FLIGHT: usize = 2;
/// Pieces fetched in order and waiting for the hashing task.
pub const PIECES_QUEUED_FOR_HASHING: usize = 1;
/// Tries per piece before the download is given up.
pub const PIECE_ATTEMPTS: usize = 3;
const PIECE_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// The pieces of an object of `total` bytes, in order (pure). The first piece is also the
/// request that discovers `total`.
pub fn range_plan(total: u64, piece: u64) -> Vec<Range<u64>> {
    let piece = piece.max(1);
    (0..total.div_ceil(piece))
        .map(|i| i * piece..((i + 1) * piece).min(total))
        .collect()
}

/// `Content-Range: bytes START-END/TOTAL` as `(START..END+1, TOTAL)` (pure); `None` for anything
/// else (an unknown total `*`, another unit, an inverted range).
pub fn parse_content_range(value: &str) -> Option<(Range<u64>, u64)> {
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    let (start, end, total): (u64, u64, u64) = (
        start.trim().parse().ok()?,
        end.trim().parse().ok()?,
        total.trim().parse().ok()?,
    );
    (start <= end && end < total).then_some((start..end + 1, total))
}

/// Whether a ranged answer is the piece asked of the object first seen (pure): the range asked,
/// the same total and the same ETag. `Err` says what differs.
pub fn check_piece_answer(
    asked: &Range<u64>,
    total: u64,
    etag: Option<&str>,
    content_range: Option<&str>,
    answer_etag: Option<&str>,
) -> Result<(), String> {
    match content_range.and_then(parse_content_range) {
        Some((range, answer_total)) if range == *asked && answer_total == total => {}
        _ => {
            return Err(format!(
                "asked bytes {}-{} of {total}, the answer's Content-Range is {content_range:?}: \
                 the object changed while it was downloaded",
                asked.start,
                asked.end.saturating_sub(1)
            ));
        }
    }
    match (etag, answer_etag) {
        (Some(first), Some(now)) if first != now => Err(format!(
            "ETag {first} at the first piece, {now} at bytes {}: the object changed while it \
             was downloaded",
            asked.start
        )),
        _ => Ok(()),
    }
}

/// The download file, and the time spent writing it (for the step's log line).
struct Output {
    file: std::fs::File,
    write_nanos: AtomicU64,
    /// Buffers of hashed pieces, reused: a fresh 4 MiB allocation per piece is a fresh mapping
    /// whose every page faults in (measured: twice the download's system CPU time).
    free_buffers: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl Output {
    fn buffer(&self) -> Vec<u8> {
        let reused = self
            .free_buffers
            .lock()
            .ok()
            .and_then(|mut free| free.pop());
        let mut buffer = reused.unwrap_or_default();
        buffer.clear();
        buffer.reserve(PIECE_BYTES as usize);
        buffer
    }

    fn recycle(&self, buffer: Vec<u8>) {
        if let Ok(mut free) = self.free_buffers.lock() {
            free.push(buffer);
        }
    }
}

/// Bytes of the object from `offset`, as received, written to the file already.
struct Piece {
    offset: u64,
    data: Vec<u8>,
}

impl Piece {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
}

/// Downloads the object into `file` (created, synced before returning) and returns the verifier
/// fed every byte of it in order.
pub(super) async fn download(
    spec: &SeedSpec,
    s3: &aws_sdk_s3::Client,
    file: &Path,
) -> Result<TrailerVerifier, SeedError> {
    start(spec, s3).await?.finish(spec, s3, file).await
}

/// The object as its first GET found it; [`Started::finish`] fetches the rest.
pub struct Started(First);

enum First {
    /// A plain GET's body: the whole object, one stream.
    Whole(ByteStream),
    /// A ranged GET's answer for the first piece.
    Ranged {
        body: ByteStream,
        piece: Range<u64>,
        total: u64,
        etag: Option<String>,
    },
}

/// The first GET: the first piece, which also tells the object's size and ETag.
pub async fn start(spec: &SeedSpec, s3: &aws_sdk_s3::Client) -> Result<Started, SeedError> {
    let first = match get(spec, s3, Some(&(0..PIECE_BYTES)), None).await {
        Ok(first) => first,
        // S3 answers 416 to any range of an empty object: read it whole.
        Err(e) if e.code() == Some("InvalidRange") => {
            let whole = get(spec, s3, None, None)
                .await
                .map_err(|e| classify(spec, e))?;
            return Ok(Started(First::Whole(whole.body)));
        }
        Err(e) => return Err(classify(spec, e)),
    };
    let Some((answered, total)) = first.content_range().and_then(parse_content_range) else {
        // A 200 with the whole body: this server ignores Range.
        return Ok(Started(First::Whole(first.body)));
    };
    let Some(piece) = range_plan(total, PIECE_BYTES)
        .into_iter()
        .next()
        .filter(|r| *r == answered)
    else {
        return Err(changed(
            spec,
            format!(
                "asked bytes 0-{}, answered {answered:?} of {total}",
                PIECE_BYTES - 1
            ),
        ));
    };
    let etag = first.e_tag().map(str::to_owned);
    Ok(Started(First::Ranged {
        body: first.body,
        piece,
        total,
        etag,
    }))
}

impl Started {
    /// The object's size, when the first answer gave it (a ranged one).
    pub fn total_bytes(&self) -> Option<u64> {
        match &self.0 {
            First::Whole(_) => None,
            First::Ranged { total, .. } => Some(*total),
        }
    }

    /// Fetches the rest into `file` (created, synced before returning), every piece checked
    /// against the first answer; returns the verifier fed every byte in order.
    pub async fn finish(
        self,
        spec: &SeedSpec,
        s3: &aws_sdk_s3::Client,
        file: &Path,
    ) -> Result<TrailerVerifier, SeedError> {
        let out = tokio::fs::File::create(file)
            .await
            .map_err(io("creating", file))?
            .into_std()
            .await;
        let out = Arc::new(Output {
            file: out,
            write_nanos: AtomicU64::new(0),
            free_buffers: std::sync::Mutex::new(Vec::new()),
        });
        let hashed_out = Arc::clone(&out);
        let started = Instant::now();
        let (to_hasher, mut pieces) =
            tokio::sync::mpsc::channel::<Piece>(PIECES_QUEUED_FOR_HASHING);
        // SHA-256 runs at a few hundred MB/s: on a thread of its own it overlaps the network and
        // the writes instead of adding to them.
        let hasher = tokio::task::spawn_blocking(move || {
            let mut verifier = TrailerVerifier::new();
            let mut hashing = Duration::ZERO;
            while let Some(piece) = pieces.blocking_recv() {
                let hashed = Instant::now();
                verifier.update(&piece.data);
                hashing += hashed.elapsed();
                hashed_out.recycle(piece.data);
            }
            (verifier, hashing)
        });
        let ranged = matches!(self.0, First::Ranged { .. });
        let fetched = match self.0 {
            First::Whole(body) => stream_whole(spec, body, &out, file, &to_hasher).await,
            First::Ranged {
                body,
                piece,
                total,
                etag,
            } => {
                fetch_ranges(
                    spec,
                    s3,
                    (body, piece),
                    total,
                    etag.as_deref(),
                    &out,
                    file,
                    &to_hasher,
                )
                .await
            }
        };
        drop(to_hasher);
        let (verifier, hashing) = hasher
            .await
            .map_err(|e| io("hashing", file)(std::io::Error::other(e)))?;
        let size = fetched?;
        debug_assert_eq!(size, verifier.bytes_seen());
        let fetched_in = started.elapsed();
        let sync = Arc::clone(&out);
        tokio::task::spawn_blocking(move || sync.file.sync_all())
            .await
            .map_err(|e| io("syncing", file)(std::io::Error::other(e)))?
            .map_err(io("syncing", file))?;
        // Where the time went: hashing and writing run beside the network, so a fetch that
        // takes much longer than either is waiting for S3 (or the path to it).
        tracing::info!(
            bytes = size,
            ranged,
            fetch_seconds = fetched_in.as_secs_f64(),
            hashing_seconds = hashing.as_secs_f64(),
            writing_seconds =
                Duration::from_nanos(out.write_nanos.load(Ordering::Relaxed)).as_secs_f64(),
            sync_seconds = (started.elapsed() - fetched_in).as_secs_f64(),
            "snapshot downloaded"
        );
        Ok(verifier)
    }
}

/// Reads the first piece's body and fetches the others, [`PIECES_IN_FLIGHT`] at a time; each is
/// written, then sent to the hasher in order. Returns the size.
#[allow(clippy::too_many_arguments)]
async fn fetch_ranges(
    spec: &SeedSpec,
    s3: &aws_sdk_s3::Client,
    (first_body, first_piece): (ByteStream, Range<u64>),
    total: u64,
    etag: Option<&str>,
    out: &Arc<Output>,
    file: &Path,
    to_hasher: &tokio::sync::mpsc::Sender<Piece>,
) -> Result<u64, SeedError> {
    let mut first_body = Some(first_body);
    let pieces = range_plan(total, PIECE_BYTES).into_iter().map(|range| {
        let body = if range == first_piece {
            first_body.take()
        } else {
            None
        };
        async move {
            match body {
                Some(body) => read_piece(spec, body, range, out, file).await,
                None => fetch_piece(spec, s3, range, total, etag, out, file).await,
            }
        }
    });
    // `buffered` runs up to PIECES_IN_FLIGHT at once and yields them in order.
    let mut in_order = futures_util::stream::iter(pieces).buffered(PIECES_IN_FLIGHT);
    let mut size = 0;
    while let Some(piece) = in_order.next().await {
        let piece = piece?;
        size += piece.len();
        if to_hasher.send(piece).await.is_err() {
            break;
        }
    }
    Ok(size)
}

/// One piece, asked again after a broken connection or a server error.
async fn fetch_piece(
    spec: &SeedSpec,
    s3: &aws_sdk_s3::Client,
    range: Range<u64>,
    total: u64,
    etag: Option<&str>,
    out: &Arc<Output>,
    file: &Path,
) -> Result<Piece, SeedError> {
    let mut attempt = 1;
    loop {
        let result = async {
            let answer = get(spec, s3, Some(&range), etag).await.map_err(|e| {
                if e.code() == Some("PreconditionFailed") {
                    changed(
                        spec,
                        format!(
                            "If-Match {etag:?} refused at bytes {}: the object changed while \
                             it was downloaded",
                            range.start
                        ),
                    )
                } else {
                    classify(spec, e)
                }
            })?;
            check_piece_answer(&range, total, etag, answer.content_range(), answer.e_tag())
                .map_err(|detail| changed(spec, detail))?;
            read_piece(spec, answer.body, range.clone(), out, file).await
        }
        .await;
        match result {
            Err(e @ SeedError::S3Unavailable { .. }) if attempt < PIECE_ATTEMPTS => {
                tracing::warn!(offset = range.start, attempt, error = %e, "piece failed, asking again");
                attempt += 1;
                tokio::time::sleep(PIECE_RETRY_PAUSE).await;
            }
            other => return other,
        }
    }
}

/// Reads a ranged answer's body (it must be exactly `range` long) and writes it at its offset.
async fn read_piece(
    spec: &SeedSpec,
    mut body: ByteStream,
    range: Range<u64>,
    out: &Arc<Output>,
    file: &Path,
) -> Result<Piece, SeedError> {
    let wanted = range.end - range.start;
    let mut piece = Piece {
        offset: range.start,
        data: out.buffer(),
    };
    while let Some(chunk) = next_chunk(spec, &mut body, range.start + piece.len()).await? {
        piece.data.extend_from_slice(&chunk);
    }
    let received = piece.len();
    if received != wanted {
        return Err(SeedError::S3Unavailable {
            uri: spec.uri(),
            detail: format!(
                "the answer for bytes {}-{} ended after {received} of {wanted} bytes",
                range.start,
                range.end - 1
            ),
        });
    }
    write_at(out, file, piece).await
}

/// The whole body of a plain GET, written and hashed piece by piece as it arrives.
async fn stream_whole(
    spec: &SeedSpec,
    mut body: ByteStream,
    out: &Arc<Output>,
    file: &Path,
    to_hasher: &tokio::sync::mpsc::Sender<Piece>,
) -> Result<u64, SeedError> {
    let new_piece = |offset| Piece {
        offset,
        data: out.buffer(),
    };
    let mut offset = 0;
    let mut piece = new_piece(offset);
    // Writes run on the blocking pool while the next piece is read; the oldest must finish
    // before more than WRITES_IN_FLIGHT are pending (bounded memory), and they reach the
    // hasher in order.
    let mut writing = futures_util::stream::FuturesOrdered::new();
    loop {
        let chunk = next_chunk(spec, &mut body, offset).await?;
        let end = chunk.is_none();
        if let Some(chunk) = chunk {
            offset += chunk.len() as u64;
            piece.data.extend_from_slice(&chunk);
        }
        if end || piece.len() >= PIECE_BYTES {
            let full = std::mem::replace(&mut piece, new_piece(offset));
            writing.push_back(spawn_write(out, file, full));
            while writing.len() > WRITES_IN_FLIGHT || (end && !writing.is_empty()) {
                let Some(written) = writing.next().await else {
                    break;
                };
                if to_hasher.send(written?).await.is_err() {
                    return Ok(offset);
                }
            }
            if end {
                return Ok(offset);
            }
        }
    }
}

/// The next chunk of a body, `None` at its end; a stall or a broken connection is
/// `S3Unavailable`. `at`: the object's offset reached, for the message.
async fn next_chunk(
    spec: &SeedSpec,
    body: &mut ByteStream,
    at: u64,
) -> Result<Option<Bytes>, SeedError> {
    let next = tokio::time::timeout(READ_STALL_TIMEOUT, body.next())
        .await
        .map_err(|_| SeedError::S3Unavailable {
            uri: spec.uri(),
            detail: format!("no data for {READ_STALL_TIMEOUT:?} at byte {at}"),
        })?;
    match next {
        None => Ok(None),
        Some(Ok(chunk)) => Ok(Some(chunk)),
        Some(Err(e)) => Err(SeedError::S3Unavailable {
            uri: spec.uri(),
            detail: format!("download broke at byte {at}: {}", DisplayErrorContext(&e)),
        }),
    }
}

/// Writes the piece at its offset on the blocking pool (one round trip per piece, not per
/// chunk) and gives it back for hashing.
async fn write_at(out: &Arc<Output>, file: &Path, piece: Piece) -> Result<Piece, SeedError> {
    spawn_write(out, file, piece).await
}

/// [`write_at`], started at once (not when the future is first polled).
fn spawn_write(
    out: &Arc<Output>,
    file: &Path,
    piece: Piece,
) -> impl std::future::Future<Output = Result<Piece, SeedError>> + use<> {
    use std::os::unix::fs::FileExt;
    let out = Arc::clone(out);
    let file = file.to_owned();
    let write = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        out.file.write_all_at(&piece.data, piece.offset)?;
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        out.write_nanos.fetch_add(nanos, Ordering::Relaxed);
        Ok(piece)
    });
    async move {
        write
            .await
            .map_err(std::io::Error::other)
            .and_then(|written| written)
            .map_err(io("writing", &file))
    }
}

async fn get(
    spec: &SeedSpec,
    s3: &aws_sdk_s3::Client,
    range: Option<&Range<u64>>,
    if_match: Option<&str>,
) -> Result<
    aws_sdk_s3::operation::get_object::GetObjectOutput,
    aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::get_object::GetObjectError>,
> {
    s3.get_object()
        .bucket(&spec.bucket)
        .key(&spec.key)
        .set_range(range.map(|r| format!("bytes={}-{}", r.start, r.end.saturating_sub(1))))
        .set_if_match(if_match.map(str::to_owned))
        .send()
        .await
}

fn changed(spec: &SeedSpec, detail: String) -> SeedError {
    SeedError::DownloadFailed {
        uri: spec.uri(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn range_plan_covers_the_object_exactly_once() {
        let cases: [(u64, u64, &[Range<u64>]); 5] = [
            (0, 8, &[]),
            (1, 8, &[0..1]),
            (8, 8, &[0..8]),
            (9, 8, &[0..8, 8..9]),
            (24, 8, &[0..8, 8..16, 16..24]),
        ];
        for (total, piece, expected) in cases {
            assert_eq!(range_plan(total, piece), expected, "{total} / {piece}");
        }
        let total = 1_260_793_888;
        let plan = range_plan(total, PIECE_BYTES);
        assert_eq!(plan.len(), 301);
        assert_eq!(plan.first().map(|r| r.start), Some(0));
        assert_eq!(plan.last().map(|r| r.end), Some(total));
        assert!(plan.windows(2).all(|w| w[0].end == w[1].start));
    }

    #[test]
    fn content_range_values() {
        assert_eq!(
            parse_content_range("bytes 0-8388607/1260793888"),
            Some((0..8_388_608, 1_260_793_888))
        );
        assert_eq!(parse_content_range("bytes 5-5/6"), Some((5..6, 6)));
        for bad in [
            "",
            "bytes */100",
            "bytes 0-9/*",
            "items 0-9/10",
            "bytes 9-0/10",
            "bytes 0-10/10",
            "bytes 0-9",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_piece_of_another_object_is_refused() {
        let asked = 8..16;
        let etag = Some("\"abc-3\"");
        assert_eq!(
            check_piece_answer(&asked, 20, etag, Some("bytes 8-15/20"), etag),
            Ok(())
        );
        // A server without ETags: the range and total still decide.
        assert_eq!(
            check_piece_answer(&asked, 20, None, Some("bytes 8-15/20"), None),
            Ok(())
        );
        for (content_range, answer_etag) in [
            (Some("bytes 8-15/30"), etag),              // the object grew
            (Some("bytes 8-11/12"), etag),              // it shrank
            (Some("bytes 0-19/20"), etag),              // another range
            (None, etag),                               // a 200 with the whole body
            (Some("bytes 8-15/20"), Some("\"def-3\"")), // rewritten, same size
        ] {
            let e = check_piece_answer(&asked, 20, etag, content_range, answer_etag)
                .expect_err(&format!("{content_range:?} {answer_etag:?}"));
            assert!(e.contains("changed while it was downloaded"), "{e}");
        }
    }
}
