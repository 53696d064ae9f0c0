//! A holder that cannot reach the API server gives up leadership after the renew deadline, not
//! at the first failed request and not never. Its own file: it stops its API server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use operator_runtime::{LeaseConfig, acquire};

#[tokio::test(flavor = "multi_thread")]
async fn lost_resolves_once_renewal_failed_past_the_renew_deadline() {
    let (lk, client) = common::api_server().await;
    common::create_namespace(&client, "operators").await;
    // Not shorter: a renewal must not miss its deadline on a loaded CI machine (the API
    // server's etcd shares its disk with the other tests) before the API server is stopped.
    let renew_deadline = Duration::from_secs(4);
    let retry_period = Duration::from_millis(500);
    let config = LeaseConfig {
        lease_duration: Duration::from_secs(5),
        renew_deadline,
        retry_period,
        ..LeaseConfig::new("operators", "unreachable", "pod-a")
    };
    let mut leader = acquire(client, config).await.unwrap();

    // kube-apiserver stops gracefully (seconds): the API may be gone at any point of the
    // stop, so the renewal deadline counts from its start.
    let stopped_at = Instant::now();
    lk.stop().await.unwrap();
    tokio::time::timeout(renew_deadline + Duration::from_secs(3), leader.lost())
        .await
        .expect("lost() never resolved with the API server gone");
    let after = stopped_at.elapsed();
    // The last successful renewal began at most one retry period before the stop.
    assert!(
        after >= renew_deadline - retry_period - Duration::from_millis(100),
        "gave up after {after:?}: before the renew deadline"
    );
    assert!(leader.is_lost());
    // Releasing with the server gone returns (logs) instead of hanging.
    tokio::time::timeout(Duration::from_secs(5), leader.release())
        .await
        .expect("release hung");
}
