#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `stream_to_s3` against a real etcd 3.5 and a real SeaweedFS: round trips checked with
//! `etcdutl`, and every failure path checked to leave no object and no pending upload.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_snapshot::{
    MIN_PART_SIZE, PARTS_IN_FLIGHT, SnapshotKey, UploadError, snapshot_stream, stream_to_s3,
};
use futures_util::{Stream, StreamExt, stream};
use sha2::{Digest, Sha256};
use test_support::{EtcdCluster, EtcdVersion, S3Server, Tools};

const BUCKET: &str = "etcd-backups";

/// Per-request timeout of the etcd clients that fill the databases and stream their snapshots.
/// The harness's default ([`test_support::etcd::CLIENT_TIMEOUT`], 5 s) bounds the whole
/// Snapshot call, a stream of megabytes that waits on the S3 upload it feeds; on a loaded CI
/// machine sharing its disk with the e2e tests that took its backup sibling past 5 s
/// (operators/backup/tests/execute.rs, BULK_TIMEOUT).
const BULK_TIMEOUT: Duration = Duration::from_secs(60);

/// A client of the one-member cluster for bulk writes and snapshot streams ([`BULK_TIMEOUT`]).
async fn bulk_client(etcd: &EtcdCluster) -> etcd_client::Client {
    test_support::etcd::connect_with_timeout(&etcd.endpoints(), BULK_TIMEOUT)
        .await
        .unwrap()
}

/// Pseudo-random (incompressible) bytes.
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A synthetic snapshot: `db_len` random bytes then their SHA-256.
fn synthetic_snapshot(db_len: usize) -> Vec<u8> {
    let mut data = random_bytes(db_len, 42);
    let sum = Sha256::digest(&data);
    data.extend_from_slice(&sum);
    data
}

/// `data` as a stream of 32 KiB chunks (etcd's chunk size).
fn chunks(data: Vec<u8>) -> impl Stream<Item = Result<Vec<u8>, io::Error>> {
    let v: Vec<Result<Vec<u8>, io::Error>> =
        data.chunks(32 * 1024).map(|c| Ok(c.to_vec())).collect();
    stream::iter(v)
}

fn key(name: &str) -> String {
    SnapshotKey::new(std::time::SystemTime::now(), 1, name).object_key("snapshots/", "c1")
}

async fn s3_with_bucket() -> (S3Server, aws_sdk_s3::Client) {
    let server = S3Server::start().await.unwrap();
    server.create_bucket(BUCKET).await.unwrap();
    let client = server.client();
    (server, client)
}

/// Keys of all objects in the bucket.
async fn objects(s3: &aws_sdk_s3::Client) -> Vec<String> {
    let out = s3.list_objects_v2().bucket(BUCKET).send().await.unwrap();
    out.contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

/// Ids of the pending multipart uploads in the bucket.
async fn pending_uploads(s3: &aws_sdk_s3::Client) -> Vec<String> {
    let out = s3
        .list_multipart_uploads()
        .bucket(BUCKET)
        .send()
        .await
        .unwrap();
    out.uploads()
        .iter()
        .filter_map(|u| u.upload_id().map(str::to_owned))
        .collect()
}

async fn assert_nothing_left(s3: &aws_sdk_s3::Client) {
    assert_eq!(
        objects(s3).await,
        Vec::<String>::new(),
        "objects left behind"
    );
    assert_eq!(
        pending_uploads(s3).await,
        Vec::<String>::new(),
        "pending multipart uploads left behind"
    );
}

async fn download(s3: &aws_sdk_s3::Client, key: &str) -> Vec<u8> {
    let out = s3
        .get_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap();
    out.body.collect().await.unwrap().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `count` keys with `value_len`-byte incompressible values; returns the revision after.
async fn fill_etcd(client: &mut etcd_client::Client, count: usize, value_len: usize) -> i64 {
    for i in 0..count {
        let value = random_bytes(value_len, i as u64 + 7);
        client
            .put(format!("/data/{i:06}"), value, None)
            .await
            .unwrap();
    }
    client.status().await.unwrap().header().unwrap().revision()
}

/// `etcdutl snapshot status` of a file: (revision, total keys).
fn etcdutl_status(path: &std::path::Path) -> (i64, i64) {
    let etcdutl = Tools::from_env().etcdutl().unwrap();
    let out = std::process::Command::new(etcdutl)
        .args(["snapshot", "status", "-w", "json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "etcdutl snapshot status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["revision"].as_i64().unwrap(),
        v["totalKey"].as_i64().unwrap(),
    )
}

/// Snapshots a real etcd 3.5 holding `count` × `value_len` bytes into S3 and checks the object
/// with etcdutl. Returns (number of parts, object size).
async fn round_trip(count: usize, value_len: usize, restore: bool) -> (u32, u64) {
    let (etcd, (_server, s3)) = tokio::join!(
        async { EtcdCluster::start(EtcdVersion::V3_5, 1).await.unwrap() },
        s3_with_bucket()
    );
    let mut client = bulk_client(&etcd).await;
    let revision = fill_etcd(&mut client, count, value_len).await;

    let key = SnapshotKey::new(std::time::SystemTime::now(), revision as u64, "uid-1")
        .object_key("", "c1");
    let metadata = BTreeMap::from([
        ("revision".to_owned(), revision.to_string()),
        ("etcd-version".to_owned(), "3.5.1".to_owned()),
    ]);
    let source = snapshot_stream(&mut client).await.unwrap();
    let artifact = stream_to_s3(&s3, BUCKET, &key, metadata, source, MIN_PART_SIZE)
        .await
        .unwrap();

    assert_eq!(artifact.uri, format!("s3://{BUCKET}/{key}"));
    let body = download(&s3, &key).await;
    assert_eq!(body.len() as u64, artifact.size_bytes);
    assert_eq!(hex(&Sha256::digest(&body)), artifact.sha256);
    assert_eq!(
        &body[body.len() - 32..],
        &Sha256::digest(&body[..body.len() - 32])[..]
    );
    assert_eq!(artifact.db_sha256, hex(&body[body.len() - 32..]));
    let expected_parts = body.len().div_ceil(MIN_PART_SIZE) as u32;
    assert_eq!(artifact.parts, expected_parts);

    let head = s3
        .head_object()
        .bucket(BUCKET)
        .key(&key)
        .send()
        .await
        .unwrap();
    let meta = head.metadata().unwrap();
    assert_eq!(meta.get("revision"), Some(&revision.to_string()));
    assert_eq!(meta.get("etcd-version").map(String::as_str), Some("3.5.1"));
    assert_eq!(pending_uploads(&s3).await, Vec::<String>::new());

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snap.db");
    std::fs::write(&file, &body).unwrap();
    let (snap_revision, total_keys) = etcdutl_status(&file);
    assert_eq!(snap_revision, revision);
    assert!(total_keys >= count as i64, "{total_keys} keys");

    if restore {
        let etcdutl = Tools::from_env().etcdutl().unwrap();
        let out = std::process::Command::new(etcdutl)
            .args(["snapshot", "restore"])
            .arg(&file)
            .args(["--name", "r1", "--initial-cluster-token", "restored"])
            .args(["--initial-cluster", "r1=http://127.0.0.1:2380"])
            .args(["--initial-advertise-peer-urls", "http://127.0.0.1:2380"])
            .arg("--data-dir")
            .arg(dir.path().join("r1"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "etcdutl snapshot restore: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(dir.path().join("r1/member/snap/db").is_file());
    }
    (artifact.parts, artifact.size_bytes)
}

#[tokio::test(flavor = "multi_thread")]
async fn round_trip_one_part() {
    // ~1 MiB of keys: one part smaller than the minimum part size.
    let (parts, size) = round_trip(1024, 1024, false).await;
    assert_eq!(parts, 1);
    assert!(size > 1024 * 1024, "{size}");
}

#[tokio::test(flavor = "multi_thread")]
async fn round_trip_several_parts_and_restore() {
    // ~20 MiB of incompressible values: several 5 MiB parts.
    let (parts, size) = round_trip(200, 100 * 1024, true).await;
    assert!(parts >= 4, "{parts} parts for {size} bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupted_etcd_stream_is_aborted() {
    let (etcd, (_server, s3)) = tokio::join!(
        async { EtcdCluster::start(EtcdVersion::V3_5, 1).await.unwrap() },
        s3_with_bucket()
    );
    let mut client = bulk_client(&etcd).await;
    fill_etcd(&mut client, 80, 100 * 1024).await; // ~8 MiB: the corruption lands in part 2
    let source = snapshot_stream(&mut client).await.unwrap();
    let mut offset = 0usize;
    let flip_at = 6 * 1024 * 1024;
    let corrupted = source.map(move |chunk| {
        let mut chunk = chunk?.as_ref().to_vec();
        if (offset..offset + chunk.len()).contains(&flip_at) {
            chunk[flip_at - offset] ^= 0x01;
        }
        offset += chunk.len();
        Ok::<_, etcd_client::Error>(chunk)
    });
    let err = stream_to_s3(
        &s3,
        BUCKET,
        &key("corrupt"),
        BTreeMap::new(),
        corrupted,
        MIN_PART_SIZE,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, UploadError::ChecksumMismatch(_)), "{err:?}");
    assert_eq!(err.reason(), "ChecksumMismatch");
    assert_nothing_left(&s3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn truncated_streams_are_aborted() {
    let (_server, s3) = s3_with_bucket().await;
    let snap = synthetic_snapshot(11 * 1024 * 1024);
    let len = snap.len();
    for (cut, reason) in [
        (10, "TruncatedSnapshot"),
        (0, "TruncatedSnapshot"),
        (len / 2, "ChecksumMismatch"),
        (len - 16, "ChecksumMismatch"), // mid-trailer
        (len - 1, "ChecksumMismatch"),
    ] {
        let err = stream_to_s3(
            &s3,
            BUCKET,
            &key(&format!("cut{cut}")),
            BTreeMap::new(),
            chunks(snap[..cut].to_vec()),
            MIN_PART_SIZE,
        )
        .await
        .unwrap_err();
        assert_eq!(err.reason(), reason, "cut at {cut}: {err}");
        assert_nothing_left(&s3).await;
    }
    // The untruncated stream goes through: the server and the function are fine.
    let key = key("whole");
    let artifact = stream_to_s3(
        &s3,
        BUCKET,
        &key,
        BTreeMap::new(),
        chunks(snap.clone()),
        MIN_PART_SIZE,
    )
    .await
    .unwrap();
    assert_eq!(artifact.parts, 3);
    assert_eq!(download(&s3, &key).await, snap);
}

#[tokio::test(flavor = "multi_thread")]
async fn source_error_is_aborted() {
    let (_server, s3) = s3_with_bucket().await;
    let snap = synthetic_snapshot(7 * 1024 * 1024);
    let failing = chunks(snap)
        .take(200)
        .chain(stream::iter([Err(io::Error::other("etcd went away"))]));
    let err = stream_to_s3(
        &s3,
        BUCKET,
        &key("broken"),
        BTreeMap::new(),
        failing,
        MIN_PART_SIZE,
    )
    .await
    .unwrap_err();
    match &err {
        UploadError::SnapshotStreamFailed {
            bytes_received,
            source,
        } => {
            assert_eq!(*bytes_received, 200 * 32 * 1024);
            assert!(source.to_string().contains("etcd went away"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.reason(), "SnapshotStreamFailed");
    assert_nothing_left(&s3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn existing_key_is_not_overwritten() {
    let (_server, s3) = s3_with_bucket().await;
    let key = key("exists");
    s3.put_object()
        .bucket(BUCKET)
        .key(&key)
        .body(b"original".to_vec().into())
        .send()
        .await
        .unwrap();
    let err = stream_to_s3(
        &s3,
        BUCKET,
        &key,
        BTreeMap::new(),
        chunks(synthetic_snapshot(1000)),
        MIN_PART_SIZE,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, UploadError::ObjectExists { uri } if uri.ends_with(&key)),
        "{err:?}"
    );
    assert_eq!(err.reason(), "ObjectExists");
    assert_eq!(download(&s3, &key).await, b"original");
    assert_eq!(objects(&s3).await, vec![key]);
    assert_eq!(pending_uploads(&s3).await, Vec::<String>::new());
}

/// The race the HeadObject check cannot close: the key appears while the upload runs. The
/// conditional completion (`If-None-Match: *`) must refuse, and the upload must be aborted.
#[tokio::test(flavor = "multi_thread")]
async fn object_created_during_upload_is_not_overwritten() {
    let (_server, s3) = s3_with_bucket().await;
    let key = key("race");
    let snap = synthetic_snapshot(6 * 1024 * 1024);
    let (s3c, keyc) = (s3.clone(), key.clone());
    let racing = chunks(snap).enumerate().then(move |(i, chunk)| {
        let (s3, key) = (s3c.clone(), keyc.clone());
        async move {
            if i == 1 {
                s3.put_object()
                    .bucket(BUCKET)
                    .key(&key)
                    .body(b"racer".to_vec().into())
                    .send()
                    .await
                    .unwrap();
            }
            chunk
        }
    });
    let err = stream_to_s3(&s3, BUCKET, &key, BTreeMap::new(), racing, MIN_PART_SIZE)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "ObjectExists", "{err}");
    assert_eq!(download(&s3, &key).await, b"racer");
    assert_eq!(pending_uploads(&s3).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_bucket() {
    let (_server, s3) = s3_with_bucket().await;
    let err = stream_to_s3(
        &s3,
        "no-such-bucket",
        &key("x"),
        BTreeMap::new(),
        chunks(synthetic_snapshot(1000)),
        MIN_PART_SIZE,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, UploadError::BucketNotFound { bucket, .. } if bucket == "no-such-bucket"),
        "{err:?}"
    );
    assert_eq!(err.reason(), "BucketNotFound");
    // ...and the bucket was not created on the way.
    let buckets = s3.list_buckets().send().await.unwrap();
    let names: Vec<_> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(names, vec![BUCKET]);
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_credentials() {
    let (server, s3) = s3_with_bucket().await;
    for bad in [
        server.client_with_credentials(server.access_key(), "not-the-secret"),
        server.client_with_credentials("AKIAUNKNOWN", server.secret_key()),
    ] {
        let err = stream_to_s3(
            &bad,
            BUCKET,
            &key("x"),
            BTreeMap::new(),
            chunks(synthetic_snapshot(1000)),
            MIN_PART_SIZE,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(err, UploadError::CredentialsRejected { .. }),
            "{err:?}"
        );
        assert_eq!(err.reason(), "CredentialsRejected");
    }
    assert_nothing_left(&s3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_killed_mid_upload_returns_an_error() {
    let (server, s3) = s3_with_bucket().await;
    let snap = synthetic_snapshot(16 * 1024 * 1024);
    let kill_at = (7 * 1024 * 1024) / (32 * 1024); // after the first part went out
    let server = Arc::new(std::sync::Mutex::new(server));
    let killer = Arc::clone(&server);
    let source = chunks(snap).enumerate().map(move |(i, chunk)| {
        if i == kill_at {
            killer.lock().unwrap().kill().unwrap();
        }
        chunk
    });
    let start = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(45),
        stream_to_s3(
            &s3,
            BUCKET,
            &key("killed"),
            BTreeMap::new(),
            source,
            MIN_PART_SIZE,
        ),
    )
    .await
    .expect("stream_to_s3 hung after the S3 server died");
    let err = result.unwrap_err();
    // The abort cannot reach the dead server either (retried for ABORT_PATIENCE, in case it
    // comes back): the error says so, with the original cause.
    assert!(matches!(err, UploadError::AbortFailed { .. }), "{err:?}");
    assert!(
        matches!(err.root(), UploadError::S3Unavailable { .. }),
        "{err:?}"
    );
    assert_eq!(err.reason(), "S3Unavailable");
    eprintln!("failed in {:?}: {err}", start.elapsed());
    assert!(!server.lock().unwrap().is_running());
}

/// Peak resident memory of this process (nextest runs each test in its own process).
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// A snapshot of `db_len` random bytes generated on the fly (never held in memory), then its
/// SHA-256 trailer.
fn generated_snapshot(db_len: usize) -> impl Stream<Item = Result<Vec<u8>, io::Error>> {
    const CHUNK: usize = 32 * 1024;
    let state = (0usize, Sha256::new(), 0x2545_f491_4f6c_dd1d_u64, false);
    stream::unfold(state, move |(sent, mut hasher, mut x, done)| async move {
        if done {
            return None;
        }
        if sent == db_len {
            let trailer = hasher.clone().finalize().to_vec();
            return Some((Ok(trailer), (sent, hasher, x, true)));
        }
        let n = CHUNK.min(db_len - sent);
        let mut chunk = Vec::with_capacity(n);
        while chunk.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.extend_from_slice(&x.to_le_bytes()[..8.min(n - chunk.len())]);
        }
        hasher.update(&chunk);
        Some((Ok(chunk), (sent + n, hasher, x, false)))
    })
}

/// Memory stays bounded by the part size, not the object size.
#[tokio::test(flavor = "multi_thread")]
async fn memory_is_bounded_by_part_size() {
    let (_server, s3) = s3_with_bucket().await;
    let before = peak_rss_bytes();
    let size = 120 * 1024 * 1024;
    let start = Instant::now();
    let artifact = stream_to_s3(
        &s3,
        BUCKET,
        &key("big"),
        BTreeMap::new(),
        generated_snapshot(size),
        MIN_PART_SIZE,
    )
    .await
    .unwrap();
    let after = peak_rss_bytes();
    eprintln!(
        "{} bytes in {} parts in {:?}; peak RSS {} MiB before, {} MiB after",
        artifact.size_bytes,
        artifact.parts,
        start.elapsed(),
        before >> 20,
        after >> 20
    );
    assert_eq!(artifact.size_bytes, size as u64 + 32);
    assert_eq!(artifact.parts as usize, (size + 32).div_ceil(MIN_PART_SIZE));
    // One part buffer filling and PARTS_IN_FLIGHT being sent, plus the SDK's copies of parts
    // being sent; nowhere near the 120 MiB object.
    let buffers = 1 + PARTS_IN_FLIGHT;
    assert!(
        after - before < (2 * buffers as u64 + 2) * MIN_PART_SIZE as u64,
        "peak RSS grew by {} MiB",
        (after - before) >> 20
    );
}

/// A caller that gives up (drops the future, e.g. on its own timeout) leaves no pending upload:
/// the abort runs in the background.
#[tokio::test(flavor = "multi_thread")]
async fn dropped_upload_is_aborted_in_the_background() {
    let (_server, s3) = s3_with_bucket().await;
    // 6 MiB (one part sent), then the source stalls forever.
    let stalling = chunks(synthetic_snapshot(6 * 1024 * 1024))
        .take(192)
        .chain(stream::pending());
    let s3c = s3.clone();
    let task = tokio::spawn(async move {
        let key = key("stalled");
        stream_to_s3(&s3c, BUCKET, &key, BTreeMap::new(), stalling, MIN_PART_SIZE).await
    });
    let start = Instant::now();
    while pending_uploads(&s3).await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the upload never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!task.is_finished());
    task.abort(); // drops the stream_to_s3 future
    assert!(task.await.unwrap_err().is_cancelled());
    let start = Instant::now();
    while !pending_uploads(&s3).await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the pending upload was never aborted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_nothing_left(&s3).await;
}

/// A TCP proxy to `upstream` that loses the answer to the first CompleteMultipartUpload (a
/// `POST` with `uploadId=`): the request reaches S3, which applies it, and the connection is
/// closed before any byte of the answer goes back. Returns the proxy's endpoint URL.
async fn answer_losing_proxy(upstream: &str) -> String {
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tokio::spawn(async move {
        loop {
            let (client, _) = listener.accept().await.unwrap();
            let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            tokio::spawn(lose_complete_answer(client, server, lost.clone()));
        }
    });
    endpoint
}

async fn lose_complete_answer(
    client: tokio::net::TcpStream,
    server: tokio::net::TcpStream,
    lost: Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Set once this connection carried the CompleteMultipartUpload whose answer is to be lost.
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let armed_up = armed.clone();
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let text = String::from_utf8_lossy(&buf[..n]);
            let complete = text
                .lines()
                .any(|l| l.starts_with("POST /") && l.contains("uploadId="));
            if complete && !lost.swap(true, Ordering::SeqCst) {
                armed_up.store(true, Ordering::SeqCst);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match server_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if armed.load(Ordering::SeqCst) {
            // S3 answered the completion: it was applied. The client never hears it.
            break;
        }
        if client_write.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    up.abort();
}

/// CompleteMultipartUpload applied by S3 but its answer lost (issue 18): the upload must not
/// report a failure while its object is in place (a backup Failed whose object exists), nor
/// succeed without one. Checked by listing.
#[tokio::test(flavor = "multi_thread")]
async fn completion_applied_but_its_answer_lost() {
    let (server, s3) = s3_with_bucket().await;
    let proxy = answer_losing_proxy(server.endpoint()).await;
    let through_proxy =
        test_support::s3::s3_client(&proxy, server.access_key(), server.secret_key());
    let key = key("ambiguous");
    let snap = synthetic_snapshot(6 * 1024 * 1024);
    let result = tokio::time::timeout(
        Duration::from_secs(120),
        stream_to_s3(
            &through_proxy,
            BUCKET,
            &key,
            BTreeMap::new(),
            chunks(snap.clone()),
            MIN_PART_SIZE,
        ),
    )
    .await
    .expect("stream_to_s3 hung after the lost answer");
    let stored = objects(&s3).await;
    match result {
        Ok(artifact) => {
            assert_eq!(stored, vec![key.clone()], "succeeded: {artifact:?}");
            assert_eq!(
                download(&s3, &key).await,
                snap,
                "the object is not the snapshot"
            );
            assert_eq!(artifact.size_bytes, snap.len() as u64);
            assert_eq!(artifact.sha256, hex(&Sha256::digest(&snap)));
        }
        Err(err) => assert_eq!(
            stored,
            Vec::<String>::new(),
            "the upload failed ({err}) but its object is in place"
        ),
    }
    assert_eq!(pending_uploads(&s3).await, Vec::<String>::new());
}
