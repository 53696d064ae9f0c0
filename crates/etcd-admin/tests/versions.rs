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
