#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The executor against a real etcd 3.5 and a real SeaweedFS: round trips restored with
//! `etcdutl snapshot restore` and served by a fresh etcd with the same keys, and each failure
//! (credentials, bucket, S3 dying, unreachable members, timeout, shutdown) with its reason and no
//! object left behind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_backup_operator::credentials::S3Credentials;
use etcd_backup_operator::execute::{BackupError, BackupJob, S3Target, execute};
use etcd_client::GetOptions;
use etcd_snapshot::SnapshotKey;
use sha2::{Digest, Sha256};
use test_support::{ClusterState, EtcdCluster, EtcdMember, EtcdVersion, S3Server, Tools};
use tokio_util::sync::CancellationToken;

const BUCKET: &str = "etcd-backups";

/// Per-request timeout of the clients that write and read the large databases. The harness's
/// default ([`test_support::etcd::CLIENT_TIMEOUT`], 5 s) is for small requests; a 1 MiB put
/// waits for its WAL fsync, which took longer than that on a loaded CI machine while other
/// tests wrote to the same disk (one_gib_database_round_trip failed there after 106 s).
const BULK_TIMEOUT: Duration = Duration::from_secs(60);

/// A client of `endpoints` for bulk writes and reads ([`BULK_TIMEOUT`]).
async fn bulk_client(endpoints: &[String]) -> etcd_client::Client {
    test_support::etcd::connect_with_timeout(endpoints, BULK_TIMEOUT)
        .await
        .unwrap()
}

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

/// Writes `count` keys with incompressible `value_len`-byte values.
async fn fill(client: &mut etcd_client::Client, count: usize, value_len: usize) {
    // Four writers in flight: a 1 GiB fill is bound by etcd's fsyncs, not by one round trip.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut client = client.clone();
            tokio::spawn(async move {
                for i in (w..count).step_by(4) {
                    let key = format!("/data/{i:06}");
                    if let Err(e) = client
                        .put(key.as_str(), random_bytes(value_len, i as u64 + 7), None)
                        .await
                    {
                        panic!("put {key} ({value_len} bytes): {e}");
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
}

/// Every key (and the SHA-256 of its value), in order.
async fn keys(client: &mut etcd_client::Client) -> Vec<(String, String)> {
    let keys = client
        .get("", Some(GetOptions::new().with_all_keys().with_keys_only()))
        .await
        .unwrap();
    let mut out = Vec::new();
    for kv in keys.kvs() {
        let key = kv.key_str().unwrap().to_owned();
        let value = client
            .get(key.as_str(), None)
            .await
            .unwrap_or_else(|e| panic!("get {key}: {e}"));
        let digest = format!("{:x}", Sha256::digest(value.kvs()[0].value()));
        out.push((key, digest));
    }
    out
}

fn job(endpoints: Vec<String>, s3: &S3Server, bucket: &str, secret_key: &str) -> BackupJob {
    BackupJob {
        cluster: "main".into(),
        uid: "0b7c6e2a-uid".into(),
        backup: "db/nightly".into(),
        endpoints,
        tls: None,
        s3: S3Target {
            bucket: bucket.into(),
            prefix: "prod/".into(),
            endpoint: Some(s3.endpoint().into()),
            region: s3.region().into(),
            force_path_style: true,
            credentials: Some(S3Credentials {
                access_key_id: s3.access_key().into(),
                secret_access_key: secret_key.into(),
                session_token: None,
            }),
            credentials_source: "Secret db/s3".into(),
        },
        timeout: Duration::from_secs(300),
    }
}

async fn objects(s3: &aws_sdk_s3::Client) -> Vec<String> {
    let out = s3.list_objects_v2().bucket(BUCKET).send().await.unwrap();
    out.contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

async fn assert_nothing_stored(s3: &aws_sdk_s3::Client) {
    assert_eq!(objects(s3).await, Vec::<String>::new(), "objects left");
    let uploads = s3
        .list_multipart_uploads()
        .bucket(BUCKET)
        .send()
        .await
        .unwrap();
    assert!(uploads.uploads().is_empty(), "pending uploads left");
}

/// Writes `body` to `path`; returns its length and SHA-256 (hex).
async fn download(
    mut body: aws_sdk_s3::primitives::ByteStream,
    path: &std::path::Path,
) -> (u64, String) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut digest = Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = body.try_next().await.unwrap() {
        digest.update(&chunk);
        out.write_all(&chunk).unwrap();
        size += chunk.len() as u64;
    }
    out.flush().unwrap();
    (size, format!("{:x}", digest.finalize()))
}

/// Backs up `etcd` to a fresh S3 server, checks the artifact against the object, restores the
/// object with etcdutl into a new member and compares its keys with the original's.
async fn round_trip(members: usize, count: usize, value_len: usize) {
    let (etcd, s3) = tokio::join!(
        async {
            EtcdCluster::start(EtcdVersion::V3_5, members)
                .await
                .unwrap()
        },
        async {
            let s3 = S3Server::start().await.unwrap();
            s3.create_bucket(BUCKET).await.unwrap();
            s3
        }
    );
    let mut client = bulk_client(&etcd.endpoints()).await;
    fill(&mut client, count, value_len).await;
    let revision = client.status().await.unwrap().header().unwrap().revision();
    let original = keys(&mut client).await;

    let job = job(etcd.endpoints(), &s3, BUCKET, s3.secret_key());
    let artifact = execute(&job, &CancellationToken::new()).await.unwrap();

    // `revision` came from whichever member the client asked, which may not have applied the
    // last write yet; the backup picks the member with the highest revision.
    assert!(
        artifact.revision >= revision,
        "artifact revision {} below the revision {revision} seen after the writes",
        artifact.revision
    );
    assert_eq!(artifact.etcd_version, EtcdVersion::V3_5.version_string());
    assert_eq!(artifact.cluster_id, format!("{:x}", etcd.cluster_id()));
    let key = artifact
        .uri
        .strip_prefix(&format!("s3://{BUCKET}/"))
        .unwrap();
    assert!(key.starts_with("prod/main/"), "{key}");
    let parsed = SnapshotKey::parse(key).unwrap();
    assert_eq!(parsed.revision, artifact.revision as u64);
    assert_eq!(parsed.uid, "0b7c6e2a-uid");

    let client_s3 = s3.client();
    let object = client_s3
        .get_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap();
    let metadata = object.metadata().cloned().unwrap_or_default();
    assert_eq!(
        metadata.get("etcd-revision"),
        Some(&artifact.revision.to_string())
    );
    assert_eq!(metadata.get("etcd-cluster-id"), Some(&artifact.cluster_id));
    assert_eq!(
        metadata.get("etcd-backup").map(String::as_str),
        Some("db/nightly")
    );
    // Streamed to the file the restore reads, hashed on the way: holding a 1 GiB object in
    // memory doubled this test's footprint beside a 3.6 GB etcd.
    let file = etcd.dir().join("downloaded.db");
    let (size, sha256) = download(object.body, &file).await;
    assert_eq!(size as i64, artifact.size_bytes);
    assert_eq!(sha256, artifact.sha256);
    assert!(
        artifact.size_bytes > (count * value_len) as i64,
        "{} bytes",
        artifact.size_bytes
    );

    // Restore into a new one-member cluster and compare.
    let config = etcd.member_config(9, ClusterState::New, "").unwrap();
    let config = test_support::EtcdMemberConfig {
        initial_cluster: format!("{}={}", config.name, config.peer_url()),
        initial_cluster_token: "restored".into(),
        ..config
    };
    let tools = Tools::from_env();
    // The etcdutl of the minor that runs the restored member.
    let out = std::process::Command::new(tools.etcdutl_of(EtcdVersion::V3_5).unwrap())
        .args(["snapshot", "restore"])
        .arg(&file)
        .args(["--name", &config.name])
        .args(["--initial-cluster", &config.initial_cluster])
        .args(["--initial-cluster-token", "restored"])
        .args(["--initial-advertise-peer-urls", &config.peer_url()])
        .arg("--data-dir")
        .arg(&config.data_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "etcdutl snapshot restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut restored = EtcdMember::spawn(&tools, EtcdVersion::V3_5, config).unwrap();
    restored
        .wait_ready(None, Duration::from_secs(60))
        .await
        .unwrap();
    let mut restored_client = bulk_client(&[restored.client_url()]).await;
    assert_eq!(keys(&mut restored_client).await, original);
    assert_eq!(original.len(), count);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_mib_database_round_trip() {
    round_trip(3, 1024, 1024).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hundred_mib_database_round_trip() {
    // 1 MiB values (etcd's request limit is 1.5 MiB): 100 MiB of incompressible data, 7 parts.
    round_trip(3, 100, 1024 * 1024).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_gib_database_round_trip() {
    // ~1 GiB of incompressible 1 MiB values on one member (three would hold three copies in
    // memory on this one machine): 64 parts streamed, downloaded and restored with etcdutl.
    round_trip(1, 1024, 1024 * 1024).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_failures_leave_no_object() {
    let (etcd, s3) = tokio::join!(
        async { EtcdCluster::start(EtcdVersion::V3_5, 1).await.unwrap() },
        async {
            let s3 = S3Server::start().await.unwrap();
            s3.create_bucket(BUCKET).await.unwrap();
            s3
        }
    );
    let mut client = etcd.client().await.unwrap();
    fill(&mut client, 64, 1024).await;
    let admin = s3.client();
    let none = CancellationToken::new();

    let err = execute(&job(etcd.endpoints(), &s3, BUCKET, "wrong-secret"), &none)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "CredentialsRejected", "{err}");
    assert!(err.to_string().contains("Secret db/s3"), "{err}");
    assert_nothing_stored(&admin).await;

    let err = execute(
        &job(etcd.endpoints(), &s3, "no-such-bucket", s3.secret_key()),
        &none,
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason(), "BucketNotFound", "{err}");
    assert!(err.to_string().contains("no-such-bucket"), "{err}");
    assert_nothing_stored(&admin).await;

    // Unreachable members: nothing listens on port 1.
    let err = execute(
        &job(
            vec!["http://127.0.0.1:1".into()],
            &s3,
            BUCKET,
            s3.secret_key(),
        ),
        &none,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, BackupError::NoReachableMember { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("http://127.0.0.1:1"), "{err}");

    // The deadline already passed / the operator is shutting down: nothing starts.
    let mut expired = job(etcd.endpoints(), &s3, BUCKET, s3.secret_key());
    expired.timeout = Duration::ZERO;
    let err = execute(&expired, &none).await.unwrap_err();
    assert_eq!(err.reason(), "Timeout", "{err}");
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let err = execute(
        &job(etcd.endpoints(), &s3, BUCKET, s3.secret_key()),
        &cancelled,
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason(), "Interrupted", "{err}");
    assert_nothing_stored(&admin).await;

    // And the same job with good settings works: the failures above were the settings.
    execute(&job(etcd.endpoints(), &s3, BUCKET, s3.secret_key()), &none)
        .await
        .unwrap();
    assert_eq!(objects(&admin).await.len(), 1);
}

/// The S3 server dies while parts are being uploaded and comes back a few seconds later (the
/// same data: the upload begun is still pending there): the backup fails (it does not hang)
/// with S3Unavailable, leaves no object and no pending multipart upload once S3 is back, and
/// the next backup succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn s3_killed_mid_upload_fails_and_leaves_nothing_once_back() {
    let (etcd, s3) = tokio::join!(
        async { EtcdCluster::start(EtcdVersion::V3_5, 1).await.unwrap() },
        async {
            let s3 = S3Server::start().await.unwrap();
            s3.create_bucket(BUCKET).await.unwrap();
            s3
        }
    );
    let mut client = bulk_client(&etcd.endpoints()).await;
    fill(&mut client, 100, 1024 * 1024).await;
    let job = job(etcd.endpoints(), &s3, BUCKET, s3.secret_key());
    let admin = s3.client();
    let s3 = Arc::new(tokio::sync::Mutex::new(s3));
    let server = Arc::clone(&s3);
    let watcher = admin.clone();
    // Kill the server as soon as a multipart upload is pending; start it again 3 s later.
    let outage = tokio::spawn(async move {
        let start = Instant::now();
        loop {
            let pending = watcher
                .list_multipart_uploads()
                .bucket(BUCKET)
                .send()
                .await
                .map(|o| !o.uploads().is_empty())
                .unwrap_or(false);
            if pending {
                server.lock().await.kill().unwrap();
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no upload started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        server.lock().await.restart().await.unwrap();
        eprintln!("S3 back after {:?}", start.elapsed());
    });
    let start = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(120),
        execute(&job, &CancellationToken::new()),
    )
    .await
    .expect("the backup hung after the S3 server died");
    let err = result.unwrap_err();
    eprintln!("failed after {:?}: {err}", start.elapsed());
    assert_eq!(err.reason(), "S3Unavailable", "{err}");
    outage.await.unwrap();
    assert!(s3.lock().await.is_running());
    assert_nothing_stored(&admin).await;
    let artifact = execute(&job, &CancellationToken::new()).await.unwrap();
    assert_eq!(objects(&admin).await.len(), 1, "{artifact:?}");
}

/// The deadline passes while S3 holds the answers to the parts (it never answers): `execute`
/// gives up `CANCEL_GRACE` later by dropping the upload (a 20 MiB snapshot: three parts of
/// 8 MiB at most, one awaited when the run was dropped, two more in flight). The error it
/// returns says the upload was aborted, and the controller records it as the backup's final
/// outcome, which no later start looks at again. So once it has returned, no multipart upload
/// may be pending, and no part of the run may still be on its way to S3: one S3 applies later
/// re-creates the aborted upload (SeaweedFS does). Issue 18, found by the chaos case
/// `backup.s3_abort_on_drop`: the dropped upload's abort ran only in the background, after the
/// parts in flight (up to `REQUEST_TIMEOUT`, 300 s), and the part being awaited was left
/// running; a process that ended meanwhile (a shutdown exits right after its backups returned,
/// or a crash) left the upload pending for good under a backup recorded Failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_backup_stuck_in_s3_past_its_deadline_leaves_no_upload_pending() {
    use std::sync::atomic::Ordering;
    let (etcd, s3) = tokio::join!(
        async { EtcdCluster::start(EtcdVersion::V3_5, 1).await.unwrap() },
        async {
            let s3 = S3Server::start().await.unwrap();
            s3.create_bucket(BUCKET).await.unwrap();
            s3
        }
    );
    let mut client = bulk_client(&etcd.endpoints()).await;
    fill(&mut client, 20, 1024 * 1024).await;
    let admin = s3.client();
    let upstream = s3.endpoint().trim_start_matches("http://").to_owned();
    let proxy = part_holding_proxy(upstream).await;
    let mut job = job(etcd.endpoints(), &s3, BUCKET, s3.secret_key());
    job.s3.endpoint = Some(proxy.endpoint.clone());
    // Long enough for a part to reach the proxy first on a loaded machine (probes, S3 checks and
    // 8 MiB of snapshot come before it): the case is a deadline passing while S3 holds parts.
    job.timeout = Duration::from_secs(10);
    let start = Instant::now();
    let err = tokio::time::timeout(
        Duration::from_secs(120),
        execute(&job, &CancellationToken::new()),
    )
    .await
    .expect("the backup hung on the unanswered parts")
    .unwrap_err();
    eprintln!("failed after {:?}: {err}", start.elapsed());
    assert!(
        proxy.held.load(Ordering::SeqCst) > 0,
        "no part went through the proxy: {err}"
    );
    assert_eq!(err.reason(), "Timeout", "{err}");
    assert_nothing_stored(&admin).await;
    // The dropped parts' requests are cancelled (their connections closed) at once, not after
    // their 300 s request timeout; the bound leaves a loaded machine time to close them.
    let deadline = Instant::now() + Duration::from_secs(30);
    while proxy.open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        proxy.open.load(Ordering::SeqCst),
        0,
        "parts of the given-up run are still being sent to S3 after execute returned"
    );
}

/// [`part_holding_proxy`]: its endpoint, how many UploadParts it held, and how many of those
/// the client has not given up yet (their connections still open).
struct PartHoldingProxy {
    endpoint: String,
    held: Arc<std::sync::atomic::AtomicUsize>,
    open: Arc<std::sync::atomic::AtomicUsize>,
}

/// A TCP proxy on loopback to `upstream` (`host:port`) that holds every UploadPart (a `PUT`
/// with `partNumber=` in its request line): never forwarded, never answered, as an S3 that
/// stopped answering mid-upload; it reads the rest of the request until the client closes the
/// connection. Everything else passes.
async fn part_holding_proxy(upstream: String) -> PartHoldingProxy {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = PartHoldingProxy {
        endpoint: format!("http://{}", listener.local_addr().unwrap()),
        held: Arc::new(AtomicUsize::new(0)),
        open: Arc::new(AtomicUsize::new(0)),
    };
    let (held, open) = (Arc::clone(&proxy.held), Arc::clone(&proxy.open));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let (held, open) = (Arc::clone(&held), Arc::clone(&open));
            tokio::spawn(async move {
                let (mut client_read, client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let answers = tokio::spawn(async move {
                    let mut client_write = client_write;
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                    // S3 may close the idle connection: the client's stays open, unanswered.
                    std::future::pending::<()>().await;
                });
                let mut buf = vec![0u8; 64 * 1024];
                let mut holding = false;
                while let Ok(n) = client_read.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if !holding
                        && String::from_utf8_lossy(&buf[..n])
                            .lines()
                            .any(|l| l.starts_with("PUT /") && l.contains("partNumber="))
                    {
                        holding = true;
                        held.fetch_add(1, Ordering::SeqCst);
                        open.fetch_add(1, Ordering::SeqCst);
                    }
                    if !holding && server_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                if holding {
                    open.fetch_sub(1, Ordering::SeqCst);
                }
                answers.abort();
            });
        }
    });
    proxy
}
