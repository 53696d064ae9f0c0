//! Leader election between two kube-rs clients on a Lease (spec §g item 5), the way
//! client-go's leaderelection does it: read the Lease, take it when it is free or expired,
//! renew it, all with resourceVersion-checked updates. The server's 409 on a stale
//! resourceVersion is what keeps two replicas from leading at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use serde_json::json;

const LEASE_SECONDS: i64 = 3;

/// One attempt to acquire or renew; true when `me` holds the Lease afterwards.
async fn try_lead(api: &Api<Lease>, me: &str) -> bool {
    let now = jiff::Timestamp::now();
    let Some(mut lease) = api.get_opt("leader").await.unwrap() else {
        let fresh: Lease = serde_json::from_value(json!({"metadata": {"name": "leader"}})).unwrap();
        return api.create(&PostParams::default(), &fresh).await.is_ok()
            && Box::pin(try_lead(api, me)).await;
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let renewed = spec
        .renew_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let expired = renewed + jiff::SignedDuration::from_secs(LEASE_SECONDS) < now;
    if holder != me && !holder.is_empty() && !expired {
        return false;
    }
    spec.holder_identity = Some(me.to_string());
    spec.lease_duration_seconds = Some(LEASE_SECONDS as i32);
    spec.renew_time = Some(MicroTime(now));
    // resourceVersion is the one read: a concurrent writer makes this a 409.
    api.replace("leader", &PostParams::default(), &lease)
        .await
        .is_ok()
}

#[tokio::test]
async fn only_one_replica_leads_and_the_standby_takes_over() {
    let lk = start().await;
    let api_a: Api<Lease> = Api::namespaced(client(&lk).await, "default");
    let api_b: Api<Lease> = Api::namespaced(client(&lk).await, "default");
    let a_leads = Arc::new(AtomicBool::new(false));
    let b_leads = Arc::new(AtomicBool::new(false));
    let a_alive = Arc::new(AtomicBool::new(true));
    let overlap = Arc::new(AtomicBool::new(false));

    let replica = |api: Api<Lease>,
                   me: &'static str,
                   mine: Arc<AtomicBool>,
                   other: Arc<AtomicBool>,
                   alive: Option<Arc<AtomicBool>>,
                   overlap: Arc<AtomicBool>| {
        tokio::spawn(async move {
            loop {
                if alive.as_ref().is_some_and(|a| !a.load(Ordering::SeqCst)) {
                    mine.store(false, Ordering::SeqCst);
                    return;
                }
                let leading = try_lead(&api, me).await;
                mine.store(leading, Ordering::SeqCst);
                if leading && other.load(Ordering::SeqCst) {
                    overlap.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let a = replica(
        api_a,
        "replica-a",
        a_leads.clone(),
        b_leads.clone(),
        Some(a_alive.clone()),
        overlap.clone(),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = replica(
        api_b,
        "replica-b",
        b_leads.clone(),
        a_leads.clone(),
        None,
        overlap.clone(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(a_leads.load(Ordering::SeqCst), "the first replica leads");
    assert!(!b_leads.load(Ordering::SeqCst), "the second one waits");

    // The leader dies without releasing: the standby takes over once the lease expires.
    a_alive.store(false, Ordering::SeqCst);
    a.await.unwrap();
    let started = std::time::Instant::now();
    while !b_leads.load(Ordering::SeqCst) {
        assert!(
            started.elapsed() < Duration::from_secs(LEASE_SECONDS as u64 + 3),
            "standby did not take over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !overlap.load(Ordering::SeqCst),
        "two replicas never led at once"
    );
    b.abort();
}
