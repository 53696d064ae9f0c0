//! [`etcd_admin::raft_progress_each`] against real etcd: what a member's metrics port says of its
//! raft state, which the cluster operator reads for a member that just started and does not
//! answer (etcd's publish race: a learner that got the leader's snapshot can stay silent on its client
//! port for etcd's request timeout while raft has it in sync).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use etcd_client::MemberAddOptions;
use test_support::etcd::{ClusterState, EtcdMember, initial_cluster_after_add};
use test_support::{EtcdCluster, EtcdVersion, Tools};

const METRICS_PORT: u16 = 2381;

/// A voter and a learner added to it, each read on its metrics port: the voter as a caught-up
/// voter under its own member ID; the learner, once it answers Status, as a caught-up learner
/// under its ID. A port nobody listens on is an error, not a guess.
#[tokio::test(flavor = "multi_thread")]
async fn a_voter_and_a_learner_report_their_raft_progress_on_the_metrics_port() {
    for version in [EtcdVersion::V3_5, EtcdVersion::V3_6] {
        let mut cluster = EtcdCluster::start(version, 1).await.unwrap();
        // Member 1 again, now with a metrics port.
        let seed = cluster.member_mut(1).unwrap();
        let seed_metrics = format!("http://{}:{METRICS_PORT}", seed.ip());
        seed.config_mut()
            .extra_args
            .push(format!("--listen-metrics-urls={seed_metrics}"));
        cluster
            .terminate_member(1, Duration::from_secs(15))
            .await
            .unwrap();
        cluster.start_member(1).await.unwrap();
        let mut client = cluster.member_client(1).await.unwrap();
        let seed_id = client.status().await.unwrap().header().unwrap().member_id();

        let learner_config = cluster
            .member_config(2, ClusterState::Existing, "")
            .unwrap();
        let added = client
            .member_add(
                [learner_config.peer_url()],
                Some(MemberAddOptions::new().with_is_learner()),
            )
            .await
            .unwrap();
        let learner_id = added.member().unwrap().id();
        let learner_metrics = format!("http://{}:{METRICS_PORT}", learner_config.ip);
        let mut config = learner_config.clone();
        config.initial_cluster = initial_cluster_after_add(&added, learner_id, &config.name);
        config
            .extra_args
            .push(format!("--listen-metrics-urls={learner_metrics}"));
        let learner = EtcdMember::spawn(&Tools::from_env(), version, config).unwrap();

        let timeout = Duration::from_secs(2);
        let started = Instant::now();
        let (voter, learner_progress) = loop {
            let reads = etcd_admin::raft_progress_each(
                &[seed_metrics.clone(), learner_metrics.clone()],
                timeout,
            )
            .await;
            if let [Ok(voter), Ok(learner)] = reads.as_slice()
                && learner.caught_up()
            {
                break (*voter, *learner);
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{version:?}: the learner never read as caught up: {reads:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(
            !voter.learner && voter.caught_up(),
            "{version:?}: {voter:?}"
        );
        assert!(
            learner_progress.learner,
            "{version:?}: {learner_progress:?}"
        );
        // etcd 3.5 and 3.6 both name the member that answered.
        assert_eq!(voter.member_id, Some(seed_id), "{version:?}");
        assert_eq!(learner_progress.member_id, Some(learner_id), "{version:?}");
        drop(learner);

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = format!("http://{}", closed.local_addr().unwrap());
        let nobody = etcd_admin::raft_progress_each(&[closed], timeout).await;
        assert!(nobody[0].is_err(), "{version:?}: {nobody:?}");
    }
}
