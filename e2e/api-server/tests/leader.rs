//! Leader election against a real API server: two contenders on one Lease, hand-over on release,
//! take-over after a holder stops renewing, and loss when someone overwrites the Lease.
//! Short timings (5 s lease, 4 s renew deadline, 0.5 s retry) keep the file under a minute.
//! Shorter ones (2 s, 1.5 s, 0.3 s) gave a renewal 1.5 s to succeed on a loaded CI machine,
//! where the API server's etcd shares its disk with every other test: one slow fsync there and
//! a holder lost its lease in the middle of a case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use operator_runtime::{Leadership, LeaseConfig, LeaseError, acquire, acquire_on_own_thread};

const NS: &str = "operators";
const LEASE_DURATION: Duration = Duration::from_secs(5);
const RENEW_DEADLINE: Duration = Duration::from_secs(4);
const RETRY_PERIOD: Duration = Duration::from_millis(500);

fn config(lease: &str, identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
        ..LeaseConfig::new(NS, lease, identity)
    }
}

async fn lease(client: &kube::Client, name: &str) -> Lease {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap()
}

async fn holder(client: &kube::Client, name: &str) -> Option<String> {
    lease(client, name).await.spec.unwrap().holder_identity
}

async fn transitions(client: &kube::Client, name: &str) -> i32 {
    lease(client, name)
        .await
        .spec
        .unwrap()
        .lease_transitions
        .unwrap()
}

/// Start two contenders at once; return the winner's leadership, its identity, and the loser's
/// still-running acquire.
async fn contend(
    client: &kube::Client,
    lease: &str,
) -> (
    Leadership,
    &'static str,
    tokio::task::JoinHandle<Result<Leadership, LeaseError>>,
) {
    let a = tokio::spawn(acquire(client.clone(), config(lease, "pod-a")));
    let b = tokio::spawn(acquire(client.clone(), config(lease, "pod-b")));
    let (mut a, mut b) = (a, b);
    tokio::select! {
        won = &mut a => (won.unwrap().unwrap(), "pod-a", b),
        won = &mut b => (won.unwrap().unwrap(), "pod-b", a),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_election_against_the_api_server() {
    let (lk, client) = common::api_server().await;
    common::create_namespace(&client, NS).await;

    exactly_one_leads_and_release_hands_over(&client).await;
    a_holder_that_stops_renewing_is_replaced_after_the_lease_duration(&client).await;
    lost_resolves_when_another_identity_overwrites_the_lease(&client).await;
    holder_restarting_with_the_same_identity_keeps_the_lease(&client).await;
    invalid_config_is_an_error_not_a_wait(&client).await;
    a_renamed_lease_waits_for_the_previous_one_to_be_let_go(&client).await;
    the_lease_is_kept_while_the_controller_saturates_its_runtime(
        &client,
        common::config_of(&lk).await,
    )
    .await;
}

/// Issue 24: the cluster operator crash-looped while 100 clusters formed, "lost leadership:
/// could not renew within the renew deadline", though the API server answered Lease requests
/// in ~0.1 s: its renewals waited behind the reconciles for the same runtime threads. Here every
/// worker of the test's runtime is held (as by reconciles busy decoding, dialling and
/// building) for longer than the renew deadline; the holder must renew meanwhile, and its
/// release still clears the Lease. (With `acquire`, on the same runtime, this failed: "lost the
/// lease while the runtime's 2 workers were busy for 3s".)
async fn the_lease_is_kept_while_the_controller_saturates_its_runtime(
    client: &kube::Client,
    kube_config: kube::Config,
) {
    // Its own thread, runtime and client: nothing the controller does can delay a renewal.
    let leader = acquire_on_own_thread(kube_config, config("saturated", "pod-a"))
        .await
        .unwrap();
    let renewed_before = renew_time(client, "saturated").await;
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let busy_for = RENEW_DEADLINE * 2;
    let busy: Vec<_> = (0..workers)
        .map(|_| tokio::spawn(async move { std::thread::sleep(busy_for) }))
        .collect();
    for task in busy {
        task.await.unwrap();
    }
    assert!(
        !leader.is_lost(),
        "lost the lease while the runtime's {workers} workers were busy for {busy_for:?}"
    );
    let renewed_after = renew_time(client, "saturated").await;
    assert!(
        renewed_after > renewed_before,
        "not renewed while the runtime was busy"
    );
    assert_eq!(holder(client, "saturated").await.as_deref(), Some("pod-a"));
    leader.release().await;
    assert_eq!(holder(client, "saturated").await, None, "not released");
}

async fn renew_time(client: &kube::Client, name: &str) -> Timestamp {
    lease(client, name)
        .await
        .spec
        .unwrap()
        .renew_time
        .unwrap()
        .0
}

/// A rolling upgrade that renames the Lease (the chart derives it from the release): the new
/// replica takes the new Lease at once but acts only once the old replica let go of the old one.
async fn a_renamed_lease_waits_for_the_previous_one_to_be_let_go(client: &kube::Client) {
    let old = acquire(client.clone(), config("binary-name", "old-pod"))
        .await
        .unwrap();
    let renamed = LeaseConfig {
        previous_name: Some("binary-name".into()),
        ..config("release-name", "new-pod")
    };
    let new = tokio::spawn(acquire(client.clone(), renamed));
    // The new Lease is ours at once (renewed while we wait) ...
    let taken = tokio::time::timeout(LEASE_DURATION * 2, async {
        while Api::<Lease>::namespaced(client.clone(), NS)
            .get_opt("release-name")
            .await
            .unwrap()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .as_deref()
            != Some("new-pod")
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(taken.is_ok(), "the new replica did not take its own lease");
    // ... but acquire returns only once the old holder is gone, well past a lease duration here.
    tokio::time::sleep(LEASE_DURATION * 2).await;
    assert!(
        !new.is_finished(),
        "acting while the old replica still holds its lease"
    );
    old.release().await;
    let new = tokio::time::timeout(LEASE_DURATION, new)
        .await
        .expect("not leading one retry period after the old replica let go")
        .unwrap()
        .unwrap();
    assert!(!new.is_lost(), "renewed while waiting");
    assert_eq!(
        holder(client, "release-name").await.as_deref(),
        Some("new-pod")
    );
    new.release().await;
}

async fn exactly_one_leads_and_release_hands_over(client: &kube::Client) {
    let (mut winner, winner_id, loser) = contend(client, "handover").await;
    assert_eq!(winner.identity(), winner_id);
    assert_eq!(holder(client, "handover").await.as_deref(), Some(winner_id));
    assert_eq!(
        transitions(client, "handover").await,
        0,
        "created, no change of holder"
    );

    // The winner keeps renewing: the loser must not get in for well past a lease duration.
    let waited = tokio::time::timeout(LEASE_DURATION * 2, async {
        while !loser.is_finished() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        waited.is_err(),
        "the second contender acquired a held lease"
    );
    assert!(!winner.is_lost());
    // renewals moved renewTime past the creation
    let spec = lease(client, "handover").await.spec.unwrap();
    assert!(spec.renew_time.unwrap().0 > spec.acquire_time.unwrap().0);
    // lost() stays pending while renewing
    assert!(
        tokio::time::timeout(RETRY_PERIOD * 2, winner.lost())
            .await
            .is_err()
    );

    let released_at = Instant::now();
    winner.release().await;
    let next = loser.await.unwrap().unwrap();
    let took = released_at.elapsed();
    assert!(
        took < LEASE_DURATION,
        "took over {took:?} after release: should be about one retry period, not an expiry"
    );
    assert_ne!(next.identity(), winner_id);
    let spec = lease(client, "handover").await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(next.identity()));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(
        spec.lease_duration_seconds,
        Some(LEASE_DURATION.as_secs() as i32)
    );
    next.release().await;
    assert_eq!(
        holder(client, "handover").await,
        None,
        "release keeps the object, clears the holder"
    );
}

async fn a_holder_that_stops_renewing_is_replaced_after_the_lease_duration(client: &kube::Client) {
    let (winner, winner_id, loser) = contend(client, "crash").await;
    // Dropping without release is what a crashed process looks like: no renewals, no clearing.
    drop(winner);
    let dropped_at = Instant::now();
    let next = tokio::time::timeout(LEASE_DURATION * 4, loser)
        .await
        .expect("the standby never took over the abandoned lease")
        .unwrap()
        .unwrap();
    let took = dropped_at.elapsed();
    // The last renewal was at most one retry period before the drop; the standby must wait for
    // the lease to expire from there.
    assert!(
        took >= LEASE_DURATION - RETRY_PERIOD - Duration::from_millis(100),
        "took over after {took:?}, before the lease could have expired"
    );
    assert_ne!(next.identity(), winner_id);
    assert_eq!(
        holder(client, "crash").await.as_deref(),
        Some(next.identity())
    );
    assert_eq!(transitions(client, "crash").await, 1);
    next.release().await;
}

async fn lost_resolves_when_another_identity_overwrites_the_lease(client: &kube::Client) {
    let mut leader = acquire(client.clone(), config("overwritten", "pod-a"))
        .await
        .unwrap();
    let api = Api::<Lease>::namespaced(client.clone(), NS);
    let mut current = api.get("overwritten").await.unwrap();
    let spec = current.spec.as_mut().unwrap();
    spec.holder_identity = Some("intruder".into());
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    spec.lease_duration_seconds = Some(60);
    api.replace("overwritten", &PostParams::default(), &current)
        .await
        .unwrap();
    let overwritten_at = Instant::now();

    tokio::time::timeout(RENEW_DEADLINE + RETRY_PERIOD * 2, leader.lost())
        .await
        .expect("lost() did not resolve after another identity took the lease");
    assert!(
        overwritten_at.elapsed() < RENEW_DEADLINE,
        "noticed at the next renewal, not only at the deadline"
    );
    assert!(leader.is_lost());
    // cancel-safe and sticky: resolves again at once
    tokio::time::timeout(Duration::from_millis(100), leader.lost())
        .await
        .unwrap();
    // releasing a lost leadership must not clear the new holder
    leader.release().await;
    assert_eq!(
        holder(client, "overwritten").await.as_deref(),
        Some("intruder")
    );
}

async fn holder_restarting_with_the_same_identity_keeps_the_lease(client: &kube::Client) {
    let first = acquire(client.clone(), config("restart", "pod-a"))
        .await
        .unwrap();
    drop(first);
    // A restarted Pod with the same name holds it already: no waiting for expiry.
    let started = Instant::now();
    let again = acquire(client.clone(), config("restart", "pod-a"))
        .await
        .unwrap();
    assert!(
        started.elapsed() < LEASE_DURATION,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        transitions(client, "restart").await,
        0,
        "same holder: no transition"
    );
    again.release().await;
}

async fn invalid_config_is_an_error_not_a_wait(client: &kube::Client) {
    let bad = LeaseConfig {
        renew_deadline: LEASE_DURATION,
        ..config("invalid", "pod-a")
    };
    let result = tokio::time::timeout(Duration::from_secs(5), acquire(client.clone(), bad))
        .await
        .expect("acquire waited on an invalid config");
    match result {
        Err(error @ LeaseError::InvalidConfig { field, .. }) => {
            assert_eq!(field, "lease_duration");
            assert_eq!(error.reason(), "InvalidLeaseConfig");
        }
        Err(other) => panic!("expected InvalidConfig, got {other:?}"),
        Ok(_) => panic!("acquired with an invalid config"),
    }
    let api = Api::<Lease>::namespaced(client.clone(), NS);
    assert!(
        api.get_opt("invalid").await.unwrap().is_none(),
        "wrote a Lease anyway"
    );
}
