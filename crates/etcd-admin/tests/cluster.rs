//! etcd-admin against real etcd clusters (test_support::EtcdCluster): observation with and
//! without quorum, growing with a learner, removal, and the errors etcd really returns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use etcd_admin::{AdminError, ClusterView, EtcdAdmin, initial_cluster, member_status, observe};
use test_support::{ClusterState, EtcdCluster, EtcdMember, EtcdVersion};

/// Per-call timeout: generous for a loaded 2-core machine.
const TIMEOUT: Duration = Duration::from_secs(2);
/// How long a membership step may be refused with "retry later" (etcd: ~5 s after a change).
const STEP_DEADLINE: Duration = Duration::from_secs(40);

/// Runs `step` until it gives anything but RetryLater; fails the test after [`STEP_DEADLINE`].
async fn until_not_retry_later<T: std::fmt::Debug>(
    what: &str,
    mut step: impl AsyncFnMut() -> Result<T, AdminError>,
) -> Result<T, AdminError> {
    let start = Instant::now();
    loop {
        match step().await {
            Err(e) if e.is_retry_later() => {
                assert!(
                    start.elapsed() < STEP_DEADLINE,
                    "{what}: still refused after {:?}: {e}",
                    start.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            other => return other,
        }
    }
}

/// Observes until `done` holds; fails the test after `deadline` with the last view.
async fn observe_until(
    endpoints: &[String],
    deadline: Duration,
    done: impl Fn(&ClusterView) -> bool,
) -> ClusterView {
    let start = Instant::now();
    loop {
        let view = observe(endpoints, TIMEOUT).await;
        if done(&view) {
            return view;
        }
        assert!(
            start.elapsed() < deadline,
            "condition not reached after {:?}; last view: {view:#?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn observes_a_healthy_three_member_cluster() {
    let cluster = EtcdCluster::start(EtcdVersion::V3_5, 3).await.unwrap();
    let endpoints = cluster.endpoints();
    let view = observe(&endpoints, TIMEOUT).await;

    let (cluster_id, members) = view.membership.clone().expect("membership");
    assert_eq!(cluster_id, cluster.cluster_id());
    let mut names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["m1", "m2", "m3"]);
    for m in &members {
        let i: usize = m.name[1..].parse().unwrap();
        let member = cluster.member(i).unwrap();
        assert_eq!(m.peer_urls, [member.peer_url()]);
        assert_eq!(m.client_urls, [member.client_url()]);
        assert!(!m.learner);
    }

    assert!(view.unreached.is_empty(), "{view:#?}");
    assert_eq!(view.statuses.len(), 3);
    let statuses: Vec<_> = view.statuses.values().map(|s| s.clone().unwrap()).collect();
    let leaders: Vec<u64> = statuses
        .iter()
        .filter(|s| s.is_leader())
        .map(|s| s.id)
        .collect();
    assert_eq!(leaders.len(), 1, "{statuses:#?}");
    for s in &statuses {
        assert!(s.healthy(), "{s:?}");
        assert_eq!(s.leader_id, leaders[0]);
        assert_eq!(s.cluster_id, cluster_id);
        assert_eq!(s.version, "3.5.35");
        assert!(!s.learner);
        assert!(
            s.revision >= 1 && s.db_size > 0 && s.raft_term >= 2,
            "{s:?}"
        );
        assert!(
            members
                .iter()
                .any(|m| m.id == s.id && m.client_urls == [s.endpoint.clone()])
        );
    }

    // The single-endpoint status and the admin's member list agree with the observation.
    let one = member_status(&endpoints[0], TIMEOUT).await.unwrap();
    assert_eq!(one.endpoint, endpoints[0]);
    assert!(view.statuses.contains_key(&one.id));
    let mut admin = EtcdAdmin::connect(&endpoints, TIMEOUT).await.unwrap();
    let (listed_id, mut listed) = admin.member_list().await.unwrap();
    let mut observed = members.clone();
    listed.sort_by_key(|m| m.id);
    observed.sort_by_key(|m| m.id);
    assert_eq!((listed_id, listed), (cluster_id, observed));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_quorum_there_is_no_membership_and_nothing_hangs() {
    let mut cluster = EtcdCluster::start(EtcdVersion::V3_5, 3).await.unwrap();
    let endpoints = cluster.endpoints();
    // Keep the leader: the most tempting member to believe, until it steps down (check-quorum).
    let survivor = cluster
        .wait_for_leader(Duration::from_secs(10))
        .await
        .unwrap();
    let dead: Vec<usize> = cluster
        .member_indexes()
        .into_iter()
        .filter(|i| *i != survivor)
        .collect();
    let timeout = Duration::from_secs(1);
    // Connected while the cluster is whole: to the leader, the survivor.
    let mut admin = EtcdAdmin::connect(&endpoints, timeout).await.unwrap();
    assert_eq!(
        admin.member_endpoint(),
        cluster.member(survivor).unwrap().client_url()
    );
    for i in &dead {
        cluster.kill_member(*i).unwrap();
    }
    let survivor_url = cluster.member(survivor).unwrap().client_url();

    // Every observation lacks a membership and stays within its time bound; within a few
    // seconds the survivor reports no leader (and "etcdserver: no leader" as an error).
    let start = Instant::now();
    let view = loop {
        let began = Instant::now();
        let view = observe(&endpoints, timeout).await;
        let took = began.elapsed();
        // Bounded by its two steps' timeouts; the slack is for a loaded machine's late timers,
        // and stays below etcd's own 7 s request timeout, which an unbounded call would wait.
        assert!(
            took < 2 * timeout + Duration::from_secs(3),
            "observe took {took:?}"
        );
        assert_eq!(view.membership, None, "{view:#?}");
        let s = view.statuses.values().next().unwrap().as_ref().unwrap();
        if s.leader_id == 0 {
            break view;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{view:#?}");
    };
    assert_eq!(view.statuses.len(), 1, "{view:#?}");
    let s = view.statuses.values().next().unwrap().as_ref().unwrap();
    assert_eq!(s.endpoint, survivor_url);
    assert!(!s.healthy() && !s.is_leader());
    assert_eq!(s.errors, ["etcdserver: no leader"]);
    // Without a membership the dead members' IDs are unknown: listed by endpoint.
    let mut unreached: Vec<&String> = view.unreached.keys().collect();
    unreached.sort();
    let mut want: Vec<String> = dead
        .iter()
        .map(|i| cluster.member(*i).unwrap().client_url())
        .collect();
    want.sort();
    assert_eq!(unreached, want.iter().collect::<Vec<_>>());

    // The admin says so too, quickly: no quorum for the list, no member to make changes through.
    // Each call within its own bound (at most an observation's two timeouts, plus a loaded
    // machine's slack), below the 7 s that etcd's own request timeout would make an unbounded
    // call wait. (One bound for the four calls together, 6 timeouts, left ~2 s of slack.)
    let quickly = 2 * timeout + Duration::from_secs(3);
    let began = Instant::now();
    let err = EtcdAdmin::connect(&endpoints, timeout).await.unwrap_err();
    assert!(matches!(err, AdminError::NoQuorum { .. }), "{err}");
    assert_eq!(err.reason(), "EtcdNoQuorum");
    assert!(
        began.elapsed() < quickly,
        "connect took {:?}",
        began.elapsed()
    );
    let began = Instant::now();
    let err = admin.member_list().await.unwrap_err();
    assert!(matches!(err, AdminError::NoQuorum { .. }), "{err}");
    assert!(
        began.elapsed() < quickly,
        "member list took {:?}",
        began.elapsed()
    );
    let began = Instant::now();
    let err = admin
        .add_learner("http://127.0.0.1:2380")
        .await
        .unwrap_err();
    assert!(err.is_retry_later(), "{err:?}");
    assert!(began.elapsed() < quickly, "add took {:?}", began.elapsed());
    let began = Instant::now();
    let err = member_status(&want[0], timeout).await.unwrap_err();
    assert!(matches!(err, AdminError::Unreachable { .. }), "{err:?}");
    assert!(
        began.elapsed() < quickly,
        "status took {:?}",
        began.elapsed()
    );

    // One member back: quorum again; the still-dead member's failure is keyed by its ID.
    cluster.start_member(dead[0]).await.unwrap();
    let view = observe_until(&endpoints, Duration::from_secs(20), |v| {
        v.membership.is_some()
    })
    .await;
    let (_, members) = view.membership.clone().unwrap();
    let still_dead = cluster.member(dead[1]).unwrap().client_url();
    let dead_id = members
        .iter()
        .find(|m| m.client_urls == [still_dead.clone()])
        .unwrap()
        .id;
    assert!(
        matches!(view.statuses.get(&dead_id), Some(Err(e)) if e.starts_with(&still_dead)),
        "{view:#?}"
    );
    assert!(view.unreached.is_empty(), "{view:#?}");
    assert_eq!(view.statuses.values().filter(|s| s.is_ok()).count(), 2);
}

/// Adds m2 as a learner to a one-member cluster, starts it, promotes it; returns its ID and
/// process. Checks the list at each step and the "too early" promote.
async fn grow_with_learner(cluster: &EtcdCluster, admin: &mut EtcdAdmin) -> (u64, EtcdMember) {
    let version = cluster.version();
    let config = cluster
        .member_config(2, ClusterState::Existing, "")
        .unwrap();
    let peer = config.peer_url();
    let added = until_not_retry_later("add learner", async || admin.add_learner(&peer).await)
        .await
        .unwrap();
    assert!(added.learner && added.name.is_empty() && added.client_urls.is_empty());
    assert_eq!(added.peer_urls, std::slice::from_ref(&peer));

    let (_, list) = admin.member_list().await.unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list.iter().find(|m| m.id == added.id), Some(&added));

    // Not started, so not in sync: etcd refuses the promote for now.
    let err = admin.promote(added.id).await.unwrap_err();
    assert!(err.is_retry_later(), "{err:?}");
    // Adding the same peer URL again: already done.
    let err = until_not_retry_later("add again", async || admin.add_learner(&peer).await)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AdminError::PeerUrlExists { peer_url, .. } if *peer_url == peer),
        "{err:?}"
    );

    let config = cluster
        .member_config(
            2,
            ClusterState::Existing,
            &initial_cluster(&list, added.id, "m2"),
        )
        .unwrap();
    let mut member = EtcdMember::spawn(cluster.tools(), version, config).unwrap();
    until_not_retry_later("promote", async || admin.promote(added.id).await)
        .await
        .unwrap();
    member.check_running().unwrap();
    // etcd checks "in sync" before "is a learner": right after the promote, a repeat can still
    // be refused for now; then it says the member is no learner.
    let err = until_not_retry_later("promote again", async || admin.promote(added.id).await)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AdminError::AlreadyPromoted { id, .. } if id == added.id),
        "{err:?}"
    );

    let mut endpoints = cluster.endpoints();
    endpoints.push(member.client_url());
    let view = observe_until(&endpoints, Duration::from_secs(30), |v| {
        v.statuses.len() == 2
            && v.statuses
                .values()
                .all(|s| s.as_ref().is_ok_and(|s| s.healthy()))
    })
    .await;
    let (_, members) = view.membership.unwrap();
    let m2 = members.iter().find(|m| m.id == added.id).unwrap();
    assert!(!m2.learner);
    assert_eq!(m2.name, "m2");
    assert_eq!(m2.client_urls, [member.client_url()]);
    let s2 = view.statuses[&added.id].as_ref().unwrap();
    assert_eq!(s2.version, version.version_string());
    assert!(!s2.learner);
    (added.id, member)
}

// Every minor the operator supports: membership, data and removal behave the same.
#[tokio::test(flavor = "multi_thread")]
async fn grows_with_a_learner_then_removes_on_3_5() {
    grows_with_a_learner_then_removes(EtcdVersion::V3_5).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn grows_with_a_learner_then_removes_on_3_6() {
    grows_with_a_learner_then_removes(EtcdVersion::V3_6).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn grows_with_a_learner_then_removes_on_3_7() {
    grows_with_a_learner_then_removes(EtcdVersion::V3_7).await;
}

async fn grows_with_a_learner_then_removes(version: EtcdVersion) {
    let cluster = EtcdCluster::start(version, 1).await.unwrap();
    let mut admin = EtcdAdmin::connect(&cluster.endpoints(), TIMEOUT)
        .await
        .unwrap();
    let mut client = cluster.member_client(1).await.unwrap();
    client.put("before-growth", "1", None).await.unwrap();
    let (id, mut m2) = grow_with_learner(&cluster, &mut admin).await;

    // The promoted member serves what was written before it joined, and what is written now.
    let mut c2 = etcd_client::Client::connect([m2.client_url()], None)
        .await
        .unwrap();
    client.put("after-growth", "2", None).await.unwrap();
    for (key, value) in [("before-growth", "1"), ("after-growth", "2")] {
        let got = c2.get(key, None).await.unwrap();
        assert_eq!(
            got.kvs()[0].value_str().unwrap(),
            value,
            "{version:?} {key}"
        );
    }

    // Removing an unknown member: NotFound (what a retried remove sees).
    let (_, list) = admin.member_list().await.unwrap();
    let unknown = list.iter().map(|m| m.id).max().unwrap().wrapping_add(1);
    let err = until_not_retry_later("remove unknown", async || admin.remove(unknown).await)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AdminError::NotFound { id, .. } if id == unknown),
        "{err:?}"
    );
    assert_eq!(err.reason(), "MemberNotFound");

    until_not_retry_later("remove m2", async || admin.remove(id).await)
        .await
        .unwrap();
    let (_, list) = admin.member_list().await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, "m1");
    let err = admin.remove(id).await.unwrap_err();
    assert!(matches!(err, AdminError::NotFound { .. }), "{err:?}");

    // A removed member stops by itself.
    let start = Instant::now();
    while m2.is_running() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "removed member still runs"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_3_4_observes_and_takes_a_learner() {
    let cluster = EtcdCluster::start(EtcdVersion::V3_4, 1).await.unwrap();
    let view = observe(&cluster.endpoints(), TIMEOUT).await;
    let (cluster_id, members) = view.membership.clone().expect("membership");
    assert_eq!(cluster_id, cluster.cluster_id());
    assert_eq!(members.len(), 1);
    let s = view.statuses[&members[0].id].as_ref().unwrap();
    assert!(s.is_leader() && s.healthy(), "{s:?}");
    assert_eq!(s.version, "3.4.23");

    let mut admin = EtcdAdmin::connect(&cluster.endpoints(), TIMEOUT)
        .await
        .unwrap();
    let (_id, _m2) = grow_with_learner(&cluster, &mut admin).await;
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}: {status}");
}

/// Issue 24 (restore bench): a member still starting (a learner receiving the leader's
/// snapshot) accepts connections and answers nothing until it is ready; the cluster operator's
/// pass waited the whole timeout on it. A `starting` endpoint is waited for only
/// STARTING_MEMBER_WAIT, while any other silent endpoint (a known voter, however slow) still gets
/// the full timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_starting_member_is_waited_for_briefly_and_a_voter_for_the_whole_timeout() {
    let cluster = EtcdCluster::start(EtcdVersion::V3_6, 1).await.unwrap();
    let voter = cluster.member(1).unwrap().client_url();
    // A listening socket that never accepts: the connection completes (backlog), nothing answers,
    // as with an etcd that has not finished starting.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = format!("http://{}", silent.local_addr().unwrap());
    let endpoints = [voter.clone(), silent.clone()];
    let pool = etcd_admin::ClientPool::default();

    // Far above STARTING_MEMBER_WAIT: the pass must not wait for the starting member this long.
    let timeout = Duration::from_secs(30);
    let started = Instant::now();
    let view = etcd_admin::observe_pooled(
        &pool,
        "c",
        &endpoints,
        std::slice::from_ref(&silent),
        timeout,
        None,
    )
    .await;
    let took = started.elapsed();
    eprintln!("observed with a silent starting member in {took:?}");
    assert!(took < timeout / 2, "waited {took:?} for a starting member");
    assert!(view.membership.is_some(), "the voter's list: {view:#?}");
    let error = view
        .unreached
        .get(&silent)
        .expect("the starting member is unreached");
    assert!(error.contains("starting member"), "{error}");
    assert!(
        pool.answered_at("c", &voter).is_some(),
        "the voter's answer is recorded"
    );
    assert!(pool.answered_at("c", &silent).is_none());

    // Not starting: the same silent endpoint is waited for the whole (here shorter) timeout.
    let timeout = Duration::from_secs(3);
    let started = Instant::now();
    let view = etcd_admin::observe_pooled(&pool, "c", &endpoints, &[], timeout, None).await;
    let took = started.elapsed();
    assert!(took >= timeout, "gave up on a voter after {took:?}");
    assert!(view.unreached.contains_key(&silent), "{view:#?}");
}

/// A starting member that answers after the observation stopped waiting is not lost: its
/// request goes on in the background and its answer is recorded in the pool, so the next
/// observation no longer takes it for starting (a slow member gets the full timeout).
#[tokio::test(flavor = "multi_thread")]
async fn a_starting_member_answering_late_is_recorded_in_the_pool() {
    let mut cluster = EtcdCluster::start(EtcdVersion::V3_6, 1).await.unwrap();
    let member = cluster.member(1).unwrap().client_url();
    let pid = cluster.member_mut(1).unwrap().pid().unwrap();
    let pool = etcd_admin::ClientPool::default();
    let endpoints = std::slice::from_ref(&member);
    let timeout = Duration::from_secs(30);
    // Stopped (SIGSTOP), it answers nothing until continued.
    signal(pid, "STOP");
    let view = etcd_admin::observe_pooled(&pool, "c", endpoints, endpoints, timeout, None).await;
    let answered_before_continue = pool.answered_at("c", &member);
    signal(pid, "CONT");
    assert!(view.membership.is_none(), "{view:#?}");
    assert!(
        answered_before_continue.is_none(),
        "a stopped etcd answered"
    );
    let deadline = Instant::now() + timeout;
    while pool.answered_at("c", &member).is_none() {
        assert!(
            Instant::now() < deadline,
            "the background request's answer was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A starting member is asked by one status request at a time: while an earlier observation's
/// request still waits for it, the next observation neither asks again (no new connection) nor
/// waits; once that request ends (here: answered after SIGCONT), the member is asked again.
/// The restore bench's passes had each waited STARTING_MEMBER_WAIT again on the same silent
/// member, before every member add, Pod and promotion.
#[tokio::test(flavor = "multi_thread")]
async fn a_starting_member_is_asked_by_one_request_at_a_time() {
    let mut cluster = EtcdCluster::start(EtcdVersion::V3_6, 1).await.unwrap();
    let member = cluster.member(1).unwrap().client_url();
    let pid = cluster.member_mut(1).unwrap().pid().unwrap();
    let dials = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = dials.clone();
    let pool = etcd_admin::ClientPool::with_dial_hook(std::sync::Arc::new(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }));
    let endpoints = std::slice::from_ref(&member);
    let timeout = Duration::from_secs(30);
    let dialled = || dials.load(std::sync::atomic::Ordering::Relaxed);

    signal(pid, "STOP");
    let first = etcd_admin::observe_pooled(&pool, "c", endpoints, endpoints, timeout, None).await;
    let after_first = dialled();
    let second = etcd_admin::observe_pooled(&pool, "c", endpoints, endpoints, timeout, None).await;
    let after_second = dialled();
    signal(pid, "CONT");
    let still_asking = |view: &etcd_admin::ClusterView| {
        view.unreached
            .get(&member)
            .is_some_and(|e| e.contains("earlier observation still waits"))
    };
    assert!(first.membership.is_none(), "{first:#?}");
    assert!(
        !still_asking(&first),
        "the first observation asks: {first:#?}"
    );
    assert_eq!(after_first, 1, "the first observation dials the member");
    assert!(still_asking(&second), "{second:#?}");
    assert_eq!(after_second, 1, "the second observation dialled again");

    // The first request is answered once the member runs again, and ends: the member is asked
    // again (and answers) from then on.
    let deadline = Instant::now() + timeout;
    loop {
        let view =
            etcd_admin::observe_pooled(&pool, "c", endpoints, endpoints, timeout, None).await;
        if view.membership.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the member was never asked again: {view:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
