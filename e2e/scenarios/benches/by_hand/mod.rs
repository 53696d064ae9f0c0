//! What the cluster and restore benches share on their by-hand side: etcd's membership calls
//! retried as the operator retries them, and the end condition both sides are held to.
//! (A directory module, so cargo does not take it for a bench of its own.)

use std::time::{Duration, Instant};

use etcd_client::Client;

/// How often a "retry later" answer is retried: the benches' polling interval.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// Calls `op` until etcd stops answering "retry later" (the messages the operator's etcd-admin
/// treats so: unhealthy cluster for ~5 s after a change, learner not in sync, no leader), every
/// [`RETRY_EVERY`], as the operator retries; panics on any other error or after `timeout`
/// since `start`.
pub async fn retry_later<T, F, Fut>(start: Instant, timeout: Duration, what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    loop {
        match op().await {
            Ok(value) => return value,
            Err(e) if start.elapsed() < timeout && is_retry_later(&e.to_string()) => {
                tokio::time::sleep(RETRY_EVERY).await;
            }
            Err(e) => panic!("by hand: {what}: {e}"),
        }
    }
}

fn is_retry_later(message: &str) -> bool {
    [
        "unhealthy cluster",
        "in sync with leader",
        "no leader",
        "not leader",
        "leader changed",
        "not enough started members",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// Voters in etcd's member list whose endpoint answers status with a leader: what the
/// operator's status calls healthy voters.
pub async fn healthy_voters(client: &mut Client, endpoints: &[String]) -> usize {
    let Ok(list) = client.member_list().await else {
        return 0;
    };
    let voters: Vec<u64> = list
        .members()
        .iter()
        .filter(|m| !m.is_learner())
        .map(etcd_client::Member::id)
        .collect();
    let mut healthy = 0;
    for endpoint in endpoints {
        let Ok(mut member) = test_support::etcd::connect(std::slice::from_ref(endpoint)).await
        else {
            continue;
        };
        if let Ok(status) = member.status().await
            && status.leader() != 0
            && status
                .header()
                .is_some_and(|h| voters.contains(&h.member_id()))
        {
            healthy += 1;
        }
    }
    healthy
}
