//! etcd's upgrade path with the real binaries: a 3-member cluster rolled 3.4 → 3.5 → 3.6 → 3.7
//! member by member on the same data directories, the cluster version read with
//! [`etcd_admin::cluster_version`] reaching each minor before the next starts, and the data
//! intact at the end. Also what the operator relies on when it waits for the cluster version:
//! a member of the next-but-one minor cannot join.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use test_support::{EtcdCluster, EtcdVersion};

/// Polls every running member's cluster version until all report `want` (e.g. "3.5.0").
async fn wait_cluster_version(cluster: &mut EtcdCluster, want: &str) -> Duration {
    let start = Instant::now();
    let endpoints = cluster.running_endpoints();
    loop {
        let mut seen = Vec::new();
        for endpoint in &endpoints {
            seen.push(
                etcd_admin::cluster_version(endpoint, Duration::from_secs(2))
                    .await
                    .unwrap_or_else(|e| e.to_string()),
            );
        }
        if seen.iter().all(|v| v == want) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "cluster version never reached {want}: {seen:?}\n{}",
            cluster.log_tails(10)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn server_versions(cluster: &EtcdCluster) -> Vec<String> {
    let mut versions = Vec::new();
    for i in cluster.member_indexes() {
        let mut client = cluster.member_client(i).await.unwrap();
        versions.push(client.status().await.unwrap().version().to_owned());
    }
    versions
}

#[tokio::test(flavor = "multi_thread")]
async fn rolling_upgrade_walks_every_minor_and_the_cluster_version_follows() {
    let mut cluster = EtcdCluster::start(EtcdVersion::V3_4, 3).await.unwrap();
    let id = cluster.cluster_id();
    let mut client = cluster.member_client(1).await.unwrap();
    client.put("written-on", "3.4", None).await.unwrap();
    wait_cluster_version(&mut cluster, "3.4.0").await;

    let mut from = EtcdVersion::V3_4;
    while let Some(next) = from.next_minor() {
        for i in [2, 3, 1] {
            cluster
                .terminate_member(i, Duration::from_secs(15))
                .await
                .unwrap();
            cluster.start_member_with_version(i, next).await.unwrap();
            // Mid-roll the cluster version stays at the old minor.
            if i != 1 {
                let cv = etcd_admin::cluster_version(
                    &cluster.member(1).unwrap().client_url(),
                    Duration::from_secs(2),
                )
                .await
                .unwrap();
                assert_eq!(cv, format!("{}.0", from.as_minor()), "member {i} on {next}");
            }
        }
        assert_eq!(
            server_versions(&cluster).await,
            vec![next.version_string(); 3],
            "every member on {next}"
        );
        let took = wait_cluster_version(&mut cluster, &format!("{}.0", next.as_minor())).await;
        eprintln!(
            "cluster version {} reached {took:?} after the last member",
            next.as_minor()
        );
        let mut client = cluster.member_client(2).await.unwrap();
        let got = client.get("written-on", None).await.unwrap();
        assert_eq!(got.kvs()[0].value_str().unwrap(), "3.4");
        assert_eq!(got.header().unwrap().cluster_id(), id);
        client
            .put(format!("on-{}", next.as_minor()), "ok", None)
            .await
            .unwrap();
        from = next;
    }
    let mut client = cluster.member_client(3).await.unwrap();
    let keys = client
        .get("", Some(etcd_client::GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    let names: Vec<&str> = keys.kvs().iter().map(|kv| kv.key_str().unwrap()).collect();
    assert_eq!(names, ["on-3.5", "on-3.6", "on-3.7", "written-on"]);
}

/// Why minors go one at a time: etcd two minors ahead does not run on the data of a cluster
/// that is one minor behind what it upgrades from. Measured: 3.6.16 on a 3.4 cluster's data
/// panics with "removed all voters", 3.7.3 on a 3.5 cluster's data with "unmarshal should never
/// fail". The other two members keep serving.
async fn skipping_a_minor_fails(base: EtcdVersion, skip: EtcdVersion) {
    let mut cluster = EtcdCluster::start(base, 3).await.unwrap();
    wait_cluster_version(&mut cluster, &format!("{}.0", base.as_minor())).await;
    cluster
        .terminate_member(2, Duration::from_secs(15))
        .await
        .unwrap();
    let joined = cluster.start_member_with_version(2, skip).await;
    assert!(
        joined.is_err(),
        "etcd {skip} ran on a {base} member's data:\n{}",
        cluster.log_tails(20)
    );
    let log = std::fs::read_to_string(cluster.member(2).unwrap().log_path()).unwrap();
    assert!(log.contains("panic"), "{log}");
    let mut client = cluster.member_client(1).await.unwrap();
    client.put("still", "serving", None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_6_does_not_run_on_3_4_data() {
    skipping_a_minor_fails(EtcdVersion::V3_4, EtcdVersion::V3_6).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_7_does_not_run_on_3_5_data() {
    skipping_a_minor_fails(EtcdVersion::V3_5, EtcdVersion::V3_7).await;
}

/// `GET path` on a plain `http://IP:PORT` URL: the status code.
fn http_status(url: &str, path: &str) -> u16 {
    use std::io::{Read, Write};
    let host = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// Why the cluster operator takes a v2 snapshot on 3.5 before moving a member to 3.6: etcd
/// 3.4's `/health` (what a readiness probe asks) is a v2 read through raft, and etcd 3.6
/// panics replaying such a WAL entry ("detected disallowed v2 WAL"). Restarting once on 3.5
/// with `--snapshot-count=1` saves a v2 snapshot past it (etcd's 3.5 → 3.6 upgrade guide); the
/// counter [`etcd_admin::v2_snapshots_saved_tls`] reads says when, and 3.6 then starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_v2_snapshot_on_3_5_lets_a_member_born_on_3_4_start_on_3_6() {
    let mut cluster = EtcdCluster::start(EtcdVersion::V3_4, 1).await.unwrap();
    let url = cluster.member(1).unwrap().client_url();
    let mut client = cluster.member_client(1).await.unwrap();
    client.put("born-on", "3.4", None).await.unwrap();
    for _ in 0..3 {
        assert_eq!(http_status(&url, "/health"), 200);
    }
    cluster
        .terminate_member(1, Duration::from_secs(15))
        .await
        .unwrap();
    cluster
        .start_member_with_version(1, EtcdVersion::V3_5)
        .await
        .unwrap();
    wait_cluster_version(&mut cluster, "3.5.0").await;
    cluster
        .terminate_member(1, Duration::from_secs(15))
        .await
        .unwrap();

    // Straight to 3.6 (on a copy of the data, which a failed start may have touched): refused.
    let data_dir = cluster.member(1).unwrap().data_dir().to_owned();
    let copy = cluster.dir().join("copy-for-3.6");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&data_dir)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let mut config = cluster.member(1).unwrap().config().clone();
    config.data_dir = copy;
    config.log_path = cluster.dir().join("copy-for-3.6.log");
    config.initial_cluster_state = test_support::ClusterState::Existing;
    let mut straight =
        test_support::EtcdMember::spawn(cluster.tools(), EtcdVersion::V3_6, config).unwrap();
    let refused = straight
        .wait_ready(None, Duration::from_secs(20))
        .await
        .unwrap_err();
    let log = std::fs::read_to_string(straight.log_path()).unwrap();
    assert!(
        log.contains("detected disallowed v2 WAL"),
        "{refused}\n{}",
        log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
    );
    drop(straight);

    // Once on 3.5 with --snapshot-count=1: a v2 snapshot is saved.
    cluster
        .member_mut(1)
        .unwrap()
        .config_mut()
        .extra_args
        .push("--snapshot-count=1".into());
    cluster
        .start_member_with_version(1, EtcdVersion::V3_5)
        .await
        .unwrap();
    let start = Instant::now();
    loop {
        let saved = etcd_admin::v2_snapshots_saved_tls(&url, Duration::from_secs(2), None)
            .await
            .unwrap();
        if saved > 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no v2 snapshot saved"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster
        .terminate_member(1, Duration::from_secs(15))
        .await
        .unwrap();
    cluster
        .member_mut(1)
        .unwrap()
        .config_mut()
        .extra_args
        .clear();

    // Then 3.6 starts on the same data and serves it.
    cluster
        .start_member_with_version(1, EtcdVersion::V3_6)
        .await
        .unwrap();
    let mut client = cluster.member_client(1).await.unwrap();
    let got = client.get("born-on", None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"3.4");
}

/// The per-read timeout of the two tests below. Sequential reads of three silent members take
/// three of it, concurrent ones one, and the tests draw the line at two: a whole timeout of slack
/// for a loaded machine's late timers. Long enough too that the one member that does answer
/// answers within it under CI load (with 1 s it was the test's tightest bound).
const SILENT_MEMBER_TIMEOUT: Duration = Duration::from_secs(3);

/// The operator reads the cluster version of every member each pass: all members at once, so a
/// member that accepts the connection and never answers costs the pass one timeout, not one per
/// such member. Sequentially, these three silent members took 3 x 1 s (with a 1 s timeout).
#[tokio::test(flavor = "multi_thread")]
async fn cluster_versions_are_read_at_once_and_a_silent_member_costs_one_timeout() {
    let mut cluster = EtcdCluster::start(EtcdVersion::V3_6, 1).await.unwrap();
    wait_cluster_version(&mut cluster, "3.6.0").await;
    // Listening sockets that never accept: the kernel completes the connection (backlog), the
    // request is never read, as with a stopped (SIGSTOP) etcd.
    let silent: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut endpoints = vec![cluster.member(1).unwrap().client_url()];
    endpoints.extend(
        silent
            .iter()
            .map(|l| format!("http://{}", l.local_addr().unwrap())),
    );
    let timeout = SILENT_MEMBER_TIMEOUT;
    let started = Instant::now();
    let answers = etcd_admin::cluster_versions_tls(&endpoints, timeout, None).await;
    let took = started.elapsed();
    eprintln!("{} cluster versions read in {took:?}", endpoints.len());
    assert_eq!(answers.len(), 4);
    assert_eq!(answers[0].as_deref().ok(), Some("3.6.0"), "{answers:?}");
    for answer in &answers[1..] {
        assert!(
            matches!(answer, Err(etcd_admin::AdminError::Timeout { .. })),
            "{answer:?}"
        );
    }
    assert!(
        took < 2 * timeout,
        "the reads were not concurrent: {took:?} for three silent members of {timeout:?} each"
    );
}

/// The v2-snapshot counters of several members are read at once: three silent members (a
/// stopped etcd) cost one timeout together, not one each, and the member that answers is read.
#[tokio::test]
async fn v2_snapshot_counters_are_read_at_once_and_a_silent_member_costs_one_timeout() {
    let cluster = EtcdCluster::start(EtcdVersion::V3_5, 1).await.unwrap();
    let silent: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut endpoints = vec![cluster.member(1).unwrap().client_url()];
    endpoints.extend(
        silent
            .iter()
            .map(|l| format!("http://{}", l.local_addr().unwrap())),
    );
    let timeout = SILENT_MEMBER_TIMEOUT;
    let started = Instant::now();
    let answers = etcd_admin::v2_snapshots_saved_each_tls(&endpoints, timeout, None).await;
    let took = started.elapsed();
    eprintln!("{} v2 snapshot counters read in {took:?}", endpoints.len());
    assert_eq!(answers.len(), 4);
    assert!(answers[0].is_ok(), "{answers:?}");
    for answer in &answers[1..] {
        assert!(
            matches!(answer, Err(etcd_admin::AdminError::Timeout { .. })),
            "{answer:?}"
        );
    }
    assert!(
        took < 2 * timeout,
        "the reads were not concurrent: {took:?} for three silent members of {timeout:?} each"
    );
}
