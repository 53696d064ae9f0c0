//! The member watch (issue 24) against real etcd: a watched member triggers its cluster's
//! reconcile once it answers, and not while it answers nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use etcd_api::{EtcdCluster, EtcdClusterSpec};
use etcd_cluster_operator::member_watch::{MemberWatches, WatchTarget};
use test_support::{EtcdCluster as Etcd, EtcdVersion};

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}: {status}");
}

/// A stopped etcd (SIGSTOP) accepts the connection and answers nothing, as one that is still
/// starting does: no trigger. Continued, it answers the request already waiting, and the
/// cluster is triggered at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_watched_member_triggers_its_cluster_once_it_answers() {
    let mut etcd = Etcd::start(EtcdVersion::V3_6, 1).await.unwrap();
    let url = etcd.member(1).unwrap().client_url();
    let pid = etcd.member_mut(1).unwrap().pid().unwrap();
    let mut cluster = EtcdCluster::new("main", EtcdClusterSpec::new(3, "3.6.0"));
    cluster.metadata.namespace = Some("db".into());
    cluster.metadata.uid = Some("uid-1".into());
    let watches = MemberWatches::default();
    let mut triggers = watches.triggers();
    let target = WatchTarget {
        member: "main-1".into(),
        client_url: url,
        metrics: None,
    };

    signal(pid, "STOP");
    watches.set(&cluster, Some(target.clone()), None);
    let early = tokio::time::timeout(Duration::from_secs(2), triggers.recv()).await;
    signal(pid, "CONT");
    assert!(
        early.is_err(),
        "triggered while the member answered nothing"
    );

    let continued = tokio::time::Instant::now();
    let triggered = tokio::time::timeout(Duration::from_secs(10), triggers.recv())
        .await
        .expect("no trigger after the member answered")
        .expect("the trigger stream ended");
    eprintln!(
        "triggered {:?} after the member continued",
        continued.elapsed()
    );
    assert_eq!(triggered.name, "main");
    assert_eq!(triggered.namespace.as_deref(), Some("db"));

    // A pass that waits on nothing ends the watch: a member no longer waited on triggers
    // nothing when it answers.
    signal(pid, "STOP");
    watches.set(&cluster, Some(target), None);
    watches.set(&cluster, None, None);
    signal(pid, "CONT");
    let after = tokio::time::timeout(Duration::from_secs(1), triggers.recv()).await;
    assert!(after.is_err(), "a watch ended by a pass still triggered");
}
