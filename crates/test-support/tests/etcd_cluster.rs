//! Real etcd clusters started by the harness: health, cross-member reads, kill/restart, membership
//! changes, parallel clusters, and rejection of a member whose address is already taken.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use test_support::etcd::READY_TIMEOUT;
use test_support::{ClusterState, EtcdCluster, EtcdMember, EtcdVersion, HarnessError};

/// Every endpoint reports the cluster's id, a server version of `version`, and a member list of
/// three started voting members m1..m3 with their URLs; a put through m1 is read back through m2.
async fn assert_healthy_three_members(version: EtcdVersion) {
    let cluster = EtcdCluster::start(version, 3).await.unwrap();
    assert_eq!(cluster.version(), version);
    assert_eq!(cluster.endpoints().len(), 3);
    let prefix = format!("v{}.", version.as_minor());
    for i in 1..=3 {
        let member = cluster.member(i).unwrap();
        assert_eq!(member.name(), format!("m{i}"));
        assert_eq!(
            member.client_url(),
            format!("http://{}:2379", cluster.address_block().ip(i as u8))
        );
        let mut client = cluster.member_client(i).await.unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.header().unwrap().cluster_id(), cluster.cluster_id());
        assert!(
            format!("v{}", status.version()).starts_with(&prefix),
            "m{i} runs etcd {}, expected {prefix}x",
            status.version()
        );
        let list = client.member_list().await.unwrap();
        let names: BTreeSet<&str> = list.members().iter().map(|m| m.name()).collect();
        assert_eq!(names, BTreeSet::from(["m1", "m2", "m3"]));
        for m in list.members() {
            assert!(!m.is_learner());
            assert_eq!(m.client_urls().len(), 1, "{} has not started", m.name());
        }
    }

    let mut c1 = cluster.member_client(1).await.unwrap();
    c1.put("greeting", "hello from m1", None).await.unwrap();
    let mut c2 = cluster.member_client(2).await.unwrap();
    let got = c2.get("greeting", None).await.unwrap();
    assert_eq!(got.kvs().len(), 1);
    assert_eq!(got.kvs()[0].value_str().unwrap(), "hello from m1");
    // The answer really came from m2.
    let m2_id = c2.status().await.unwrap().header().unwrap().member_id();
    assert_eq!(got.header().unwrap().member_id(), m2_id);
    let m1_id = c1.status().await.unwrap().header().unwrap().member_id();
    assert_ne!(m1_id, m2_id);

    // The matching etcdctl sees the same data and all members.
    let mut cluster = cluster;
    let out = cluster
        .etcdctl(&["get", "greeting", "--print-value-only"])
        .unwrap();
    assert_eq!(out.trim(), "hello from m1");
    let out = cluster.etcdctl(&["member", "list"]).unwrap();
    assert_eq!(out.matches(", started, m").count(), 3, "{out}");
    // 3.4 runs with --logger=zap, so both versions log JSON.
    let log = std::fs::read_to_string(cluster.member(1).unwrap().log_path()).unwrap();
    assert!(log.lines().nth(1).unwrap().starts_with('{'), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_4_three_members_are_healthy_and_replicate() {
    assert_healthy_three_members(EtcdVersion::V3_4).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_5_three_members_are_healthy_and_replicate() {
    assert_healthy_three_members(EtcdVersion::V3_5).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_6_three_members_are_healthy_and_replicate() {
    assert_healthy_three_members(EtcdVersion::V3_6).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_7_three_members_are_healthy_and_replicate() {
    assert_healthy_three_members(EtcdVersion::V3_7).await;
}

/// Puts, retrying for up to 15 s while the cluster elects a new leader.
async fn retry_put(client: &mut etcd_client::Client, key: &str, value: &str) {
    let start = std::time::Instant::now();
    loop {
        match client.put(key, value, None).await {
            Ok(_) => return,
            Err(e) if start.elapsed() < Duration::from_secs(15) => {
                eprintln!("put {key} failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("put {key} kept failing: {e}"),
        }
    }
}

/// Kills the leader (the hard case: the others must elect a new one before serving writes).
#[tokio::test(flavor = "multi_thread")]
async fn killed_member_rejoins_with_its_data() {
    let mut cluster = EtcdCluster::start(EtcdVersion::V3_5, 3).await.unwrap();
    let mut ids = Vec::new();
    for i in 1..=3 {
        let mut c = cluster.member_client(i).await.unwrap();
        ids.push(c.status().await.unwrap().header().unwrap().member_id());
    }
    let victim = cluster.wait_for_leader(READY_TIMEOUT).await.unwrap();
    let survivor = if victim == 1 { 2 } else { 1 };
    let victim_id = ids[victim - 1];

    let mut cs = cluster.member_client(survivor).await.unwrap();
    cs.put("before", "1", None).await.unwrap();

    cluster.kill_member(victim).unwrap();
    assert!(!cluster.member_mut(victim).unwrap().is_running());
    assert_eq!(cluster.running_endpoints().len(), 2);
    // The two others keep quorum, elect a new leader and serve writes.
    let new_leader = cluster.wait_for_leader(READY_TIMEOUT).await.unwrap();
    assert_ne!(new_leader, victim);
    retry_put(&mut cs, "while-down", "2").await;
    let other = 6 - victim - survivor;
    let mut co = cluster.member_client(other).await.unwrap();
    let got = co.get("while-down", None).await.unwrap();
    assert_eq!(got.kvs()[0].value_str().unwrap(), "2");

    cluster.start_member(victim).await.unwrap();
    let mut cv = cluster.member_client(victim).await.unwrap();
    let status = cv.status().await.unwrap();
    // Same member (same data dir), same cluster.
    assert_eq!(status.header().unwrap().member_id(), victim_id);
    assert_eq!(status.header().unwrap().cluster_id(), cluster.cluster_id());
    let got = cv.get("while-down", None).await.unwrap();
    assert_eq!(got.kvs()[0].value_str().unwrap(), "2");
    assert_eq!(got.header().unwrap().member_id(), victim_id);
    let got = cv.get("before", None).await.unwrap();
    assert_eq!(got.kvs()[0].value_str().unwrap(), "1");
    // The log kept the first run and recorded the restart.
    let log = std::fs::read_to_string(cluster.member(victim).unwrap().log_path()).unwrap();
    assert_eq!(log.matches("### test-support: starting").count(), 2);
    assert!(log.contains("--initial-cluster-state=existing"));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_clusters_started_concurrently_are_separate() {
    let (a, b) = tokio::join!(
        EtcdCluster::start(EtcdVersion::V3_5, 3),
        EtcdCluster::start(EtcdVersion::V3_5, 1)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.address_block().prefix(), b.address_block().prefix());
    let eps_a: BTreeSet<String> = a.endpoints().into_iter().collect();
    let eps_b: BTreeSet<String> = b.endpoints().into_iter().collect();
    assert!(eps_a.is_disjoint(&eps_b), "{eps_a:?} vs {eps_b:?}");
    assert_ne!(a.cluster_id(), b.cluster_id());
    assert_ne!(a.token(), b.token());

    let mut ca = a.client().await.unwrap();
    let mut cb = b.client().await.unwrap();
    ca.put("owner", "a", None).await.unwrap();
    cb.put("owner", "b", None).await.unwrap();
    let got_a = ca.get("owner", None).await.unwrap();
    let got_b = cb.get("owner", None).await.unwrap();
    assert_eq!(got_a.kvs()[0].value_str().unwrap(), "a");
    assert_eq!(got_b.kvs()[0].value_str().unwrap(), "b");
}

/// A member added to a running one-member cluster of `version` joins with the data written
/// before it, answers from its own ID, and leaves again with `member remove`.
async fn member_add_and_remove(version: EtcdVersion) {
    let mut cluster = EtcdCluster::start(version, 1).await.unwrap();
    let mut c1 = cluster.member_client(1).await.unwrap();
    c1.put("seed", "before-join", None).await.unwrap();

    let id = cluster.add_member(2).await.unwrap();
    assert_eq!(cluster.member_indexes(), vec![1, 2]);
    let mut c2 = cluster.member_client(2).await.unwrap();
    let got = c2.get("seed", None).await.unwrap();
    assert_eq!(got.kvs()[0].value_str().unwrap(), "before-join");
    assert_eq!(got.header().unwrap().member_id(), id);
    let log = std::fs::read_to_string(cluster.member(2).unwrap().log_path()).unwrap();
    assert!(log.contains("--initial-cluster-state=existing"));

    cluster.remove_member(2).await.unwrap();
    assert_eq!(cluster.member_indexes(), vec![1]);
    let list = c1.member_list().await.unwrap();
    assert_eq!(list.members().len(), 1);
    assert_eq!(list.members()[0].name(), "m1");
    c1.put("after", "remove", None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_5_member_add_and_remove() {
    member_add_and_remove(EtcdVersion::V3_5).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_6_member_add_and_remove() {
    member_add_and_remove(EtcdVersion::V3_6).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_7_member_add_and_remove() {
    member_add_and_remove(EtcdVersion::V3_7).await;
}

/// A second etcd on an address that a running member holds dies at once, and waiting for it
/// reports that exit with the log instead of passing on the foreign server's answers.
#[tokio::test(flavor = "multi_thread")]
async fn member_on_a_taken_address_is_reported_not_ready() {
    let cluster = EtcdCluster::start(EtcdVersion::V3_5, 1).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let taken = cluster.member(1).unwrap().ip();
    let config = test_support::EtcdMemberConfig {
        name: "m1".into(),
        ip: taken,
        data_dir: dir.path().join("data"),
        log_path: dir.path().join("clash.log"),
        initial_cluster: format!("m1=http://{taken}:2380"),
        initial_cluster_state: ClusterState::New,
        initial_cluster_token: "clash".into(),
        extra_args: Vec::new(),
    };
    let tools = cluster.tools().clone();
    let mut clash = EtcdMember::spawn(&tools, EtcdVersion::V3_5, config).unwrap();
    let err = clash.wait_ready(None, READY_TIMEOUT).await.unwrap_err();
    match &err {
        HarnessError::ExitedEarly { name, log_tail, .. } => {
            assert!(name.contains("m1"), "{err}");
            assert!(log_tail.contains("address already in use"), "{err}");
        }
        other => panic!("expected ExitedEarly, got {other}"),
    }
    assert!(!clash.is_running());
    // The real cluster is unaffected.
    let mut c = cluster.client().await.unwrap();
    c.put("still", "fine", None).await.unwrap();
}
