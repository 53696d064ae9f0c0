//! `make bench` (repair part, issue #24): how long from a member's data loss to a healthy
//! replacement, split into detection and repair, against the same repair by hand with etcd's
//! membership calls in the same run.
//!
//! (a) The operator: a 3-member EtcdCluster (formed untimed); each round deletes a follower's
//! PVC and Pod at once (`kubectl delete --wait=false`, as a lost node or volume would leave
//! it). The observable signal is the Pod's deletion (t = 0, when the delete returns);
//! **detection** is the operator's first action after it (the eventTime of its first action
//! Event on the EtcdCluster since t = 0, e.g. `MemberRemoved`; its `MemberUnhealthy` Warning
//! before that is shown as a step, not counted as an action); **repair** ends when the
//! EtcdCluster's
//! status is Available with 3 healthy voters and the lost member's etcd ID is gone.
//!
//! (b) By hand: a 3-member cluster of host processes (started untimed); each round SIGKILLs a
//! follower and deletes its data dir (t = 0), then `member remove`, `member add --learner`, the
//! new member started with `--initial-cluster-state=existing` on an empty data dir, `member
//! promote` (each retried every 100 ms while etcd answers "retry later", as the operator's calls
//! are), until every voter answers status with a leader. Detection by hand is 0 by definition.
//!
//! Goals (issue #24): detection ≤ 2 s; repair ≤ detection + 7 s. `BENCH_ROUNDS` (default 3) sets
//! the rounds of each side, alternating. Needs the workspace's binaries built (`make bench` builds
//! them in release, as the image ships them, and points `LOCALKUBE_BIN` at
//! `target/release/localkube`; without it, `target/debug`'s). With `BENCH_RESULTS` set, appends the
//! figures for the combined table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod by_hand;
#[path = "../tests/common/mod.rs"]
mod common;
mod passes;

use std::time::{Duration, Instant};

use by_hand::{healthy_voters, retry_later};
use common::*;
use etcd_client::MemberAddOptions;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use test_support::bench::{self, Figure, Part, Side, Steps, Unit};
use test_support::{ClusterState, EtcdCluster, EtcdMember, EtcdVersion};

const VERSION: EtcdVersion = EtcdVersion::V3_6;
const SIZE: usize = 3;
const NAME: &str = "repair";
/// Both sides poll at this interval.
const POLL: Duration = Duration::from_millis(100);
/// A round that takes longer than this is a failure, not a figure.
const ROUND_TIMEOUT: Duration = Duration::from_secs(180);
const GOAL_DETECTION: f64 = 2.0;
/// The operator's Event reasons that are actions on the cluster (the first one ends detection).
const ACTIONS: &[&str] = &[
    "MemberRemoved",
    "MemberAdded",
    "MemberPodCreated",
    "LearnerPromoted",
    "MemberPodDeleted",
    "PvcDeleted",
];
/// The bench's own step at t = 0.
const SIGNAL: &str = "Signal: PVC + Pod deleted";
/// Repair may take this much longer than detection.
const GOAL_REPAIR_AFTER_DETECTION: f64 = 7.0;

struct Round {
    total: Duration,
    /// Seconds from the signal to the first action (the operator's first Event).
    detection: f64,
    steps: Steps,
    /// The cluster operator's reconcile passes during the round (its `pass` debug lines).
    passes: Vec<passes::PassLine>,
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("BENCH_ROUNDS is a number"))
        .unwrap_or(3);
    assert!(rounds > 0, "BENCH_ROUNDS must be at least 1");
    // The by-hand side's replacements take loopback host numbers SIZE + 1 ..= 9.
    assert!(
        rounds <= 9 - SIZE,
        "BENCH_ROUNDS must be at most {}",
        9 - SIZE
    );
    let setup = Instant::now();
    // With the cluster operator's pass lines: where detection and repair wait.
    let env = Env::start_with_values(&passes::DEBUG_PASS_VALUES).await;
    let version = VERSION.version_string();
    env.apply(&cluster_yaml(NAME, SIZE as u32, version))
        .unwrap();
    env.wait_available(NAME, SIZE, version, ROUND_TIMEOUT).await;
    println!(
        "local control plane up, chart installed, {SIZE}-member cluster Available in {:.1} s",
        setup.elapsed().as_secs_f64()
    );
    let mut by_hand_cluster = EtcdCluster::start(VERSION, SIZE)
        .await
        .expect("a 3-member cluster starts");

    let mut operator = Vec::new();
    let mut by_hand = Vec::new();
    for round in 1..=rounds {
        let a = operator_round(&env).await;
        // The replacement takes the next unused member index (host number).
        let b = by_hand_round(&mut by_hand_cluster, SIZE + round).await;
        println!(
            "round {round}/{rounds}: data loss → healthy: operator {:.2} s (detection {:.2} s), \
             by hand {:.2} s",
            a.total.as_secs_f64(),
            a.detection,
            b.total.as_secs_f64()
        );
        operator.push(a);
        by_hand.push(b);
    }
    let figures = report(&operator, &by_hand);
    let passes: Vec<(Duration, &[passes::PassLine])> = operator
        .iter()
        .map(|r| (r.total, r.passes.as_slice()))
        .collect();
    print!("{}", passes::passes_report(&passes));
    if let Some(path) = bench::record(&figures).expect("recording the figures") {
        println!("\nfigures appended to {}", path.display());
    }
}

/// Available with `SIZE` healthy voters, `gone` not among them, the generation seen.
fn repaired(c: &etcd_api::EtcdCluster, gone: &str) -> bool {
    common::status_shows_healthy_voters(c, SIZE)
        && c.status
            .as_ref()
            .is_some_and(|s| !s.members.iter().any(|m| m.id.as_deref() == Some(gone)))
}

/// (a) A follower's PVC and Pod deleted; polled every `POLL` until repaired.
async fn operator_round(env: &Env) -> Round {
    let clusters = env.clusters();
    let status = clusters.get(NAME).await.unwrap().status.unwrap();
    let lost = status
        .members
        .iter()
        .find(|m| !m.leader && !m.learner)
        .expect("a follower in the status")
        .clone();
    let lost_id = lost.id.clone().expect("the follower's member ID");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);

    env.kubectl(&["delete", "pvc", &lost.name, "-n", NS, "--wait=false"]);
    let wall_start = jiff::Timestamp::now();
    let start = Instant::now();
    env.kubectl(&["delete", "pod", &lost.name, "-n", NS, "--wait=false"]);
    let mut steps = Steps::default();
    steps.push(SIGNAL, start.elapsed().as_secs_f64());
    let mut pod_gone = false;
    loop {
        if !pod_gone
            && pods
                .get_opt(&lost.name)
                .await
                .is_ok_and(|p| p.is_none_or(|p| p.metadata.deletion_timestamp.is_none()))
        {
            // Gone, or already its replacement (no deletion timestamp).
            pod_gone = true;
            steps.push("OldPodGone (observed)", start.elapsed().as_secs_f64());
        }
        if clusters
            .get(NAME)
            .await
            .is_ok_and(|c| repaired(&c, &lost_id))
        {
            break;
        }
        assert!(
            start.elapsed() < ROUND_TIMEOUT,
            "{NAME}: {} ({lost_id}) not replaced {ROUND_TIMEOUT:?} after its PVC and Pod were \
             deleted\n{}",
            lost.name,
            env.diagnostics()
        );
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();
    for (offset, reason) in operator_events(env, wall_start).await {
        steps.push(&reason, offset);
    }
    steps.sort_by_offset();
    // The first of the operator's actions (its events that change the cluster; a
    // MemberUnhealthy event before it is an observation, not yet an action).
    let detection = steps
        .iter()
        .find(|(k, _)| ACTIONS.iter().any(|a| k.starts_with(&format!("{a} #"))))
        .map_or(f64::NAN, |(_, offset)| offset);
    let passes = passes::operator_passes(env, NAME, wall_start, total);
    Round {
        total,
        detection,
        steps,
        passes,
    }
}

/// The operator's Events on the EtcdCluster since `start` (eventTime, and a folded series'
/// lastObservedTime), as (seconds since `start`, reason), in time order.
async fn operator_events(env: &Env, start: jiff::Timestamp) -> Vec<(f64, String)> {
    let events: Api<Event> = Api::namespaced(env.client.clone(), NS);
    let list = events.list(&ListParams::default()).await.unwrap();
    let since = |at: jiff::Timestamp| at.duration_since(start).as_secs_f64();
    let mut timed = Vec::new();
    for e in list
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME))
    {
        let reason = e.reason.unwrap_or_default();
        let times = e
            .event_time
            .map(|t| t.0)
            .into_iter()
            .chain(e.series.map(|s| s.last_observed_time.0));
        for at in times.filter(|at| *at >= start) {
            timed.push((since(at), reason.clone()));
        }
    }
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    timed
}

/// (b) By hand on `cluster`: a follower killed and its data dir deleted, then replaced by member
/// `new_index`; the replacement stays in the cluster for the next round.
async fn by_hand_round(cluster: &mut EtcdCluster, new_index: usize) -> Round {
    let leader = cluster
        .wait_for_leader(ROUND_TIMEOUT)
        .await
        .expect("a leader");
    let follower = cluster
        .member_indexes()
        .into_iter()
        .find(|i| *i != leader)
        .expect("a follower");
    let mut client = cluster
        .member_client(leader)
        .await
        .expect("a client for the leader");
    let lost_peer = cluster.member(follower).unwrap().peer_url();
    let lost_dir = cluster.member(follower).unwrap().data_dir().to_owned();

    let start = Instant::now();
    let mut steps = Steps::default();
    cluster
        .kill_member(follower)
        .expect("SIGKILL of the follower");
    std::fs::remove_dir_all(&lost_dir).expect("deleting its data dir");
    steps.push(SIGNAL, 0.0);
    let offset = |start: Instant| start.elapsed().as_secs_f64();

    let list = client.member_list().await.expect("member list");
    let lost_id = list
        .members()
        .iter()
        .find(|m| m.peer_urls().contains(&lost_peer))
        .expect("the lost member in the list")
        .id();
    retry_later(start, ROUND_TIMEOUT, "member remove", || {
        let mut client = client.clone();
        async move { client.member_remove(lost_id).await }
    })
    .await;
    steps.push("MemberRemoved", offset(start));
    let peer = cluster
        .member_config(new_index, ClusterState::Existing, "")
        .expect("member config")
        .peer_url();
    let added = retry_later(start, ROUND_TIMEOUT, "member add --learner", || {
        let mut client = client.clone();
        let peer = peer.clone();
        async move {
            client
                .member_add([peer], Some(MemberAddOptions::new().with_is_learner()))
                .await
        }
    })
    .await;
    let id = added.member().expect("the added member").id();
    steps.push("MemberAdded", offset(start));
    let initial_cluster =
        test_support::etcd::initial_cluster_after_add(&added, id, &format!("m{new_index}"));
    let config = cluster
        .member_config(new_index, ClusterState::Existing, &initial_cluster)
        .expect("member config");
    let new_member = EtcdMember::spawn(cluster.tools(), VERSION, config).expect("member starts");
    steps.push("MemberPodCreated", offset(start));
    retry_later(start, ROUND_TIMEOUT, "member promote", || {
        let mut client = client.clone();
        async move { client.member_promote(id).await }
    })
    .await;
    steps.push("LearnerPromoted", offset(start));
    let mut endpoints: Vec<String> = cluster
        .member_indexes()
        .into_iter()
        .filter(|i| *i != follower)
        .map(|i| cluster.member(i).unwrap().client_url())
        .collect();
    endpoints.push(new_member.client_url());
    loop {
        if healthy_voters(&mut client, &endpoints).await == SIZE {
            break;
        }
        assert!(
            start.elapsed() < ROUND_TIMEOUT,
            "by hand: {SIZE} healthy voters not seen after {ROUND_TIMEOUT:?}\n{}",
            cluster.log_tails(20)
        );
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();
    drop(cluster.replace_member(follower, new_index, new_member));
    Round {
        total,
        detection: 0.0,
        steps,
        passes: Vec::new(),
    }
}

fn side<'a>(label: &'a str, rounds: &'a [Round]) -> Side<'a> {
    Side::new(label, rounds.iter().map(|r| (r.total, &r.steps)))
}

fn report(operator: &[Round], by_hand: &[Round]) -> Vec<Figure> {
    let a = side(
        "(a) operator: PVC + Pod deleted → replaced, Available",
        operator,
    );
    let b = side(
        "(b) by hand: remove, add learner, start, promote → healthy",
        by_hand,
    );
    let n = operator.len();
    println!(
        "\nEtcdCluster size {SIZE}, etcd {}: a follower's data lost → a healthy replacement, {n} \
         rounds each, same run",
        VERSION.version_string()
    );
    print!("{}", bench::totals_table(&a, &b, "ratio (a)/(b), medians"));
    println!(
        "\nsteps: median seconds since the signal (operator: its events' eventTime; t = 0 when \
         `kubectl delete pod` returned)"
    );
    print!("{}", bench::steps_table(&a, &b, "healthy (observed)"));
    let detection: Vec<f64> = operator.iter().map(|r| r.detection).collect();
    let detection = bench::Summary::of(&detection).map_or(f64::NAN, |s| s.median);
    let repair = a.summary().median;
    let repair_goal = detection + GOAL_REPAIR_AFTER_DETECTION;
    println!(
        "\n| figure | value | goal | ratio |\n|---|---|---|---|\n\
         | detection (median) | {detection:.2} s | {GOAL_DETECTION:.2} s | {:.2} |\n\
         | repair (median) | {repair:.2} s | detection + {GOAL_REPAIR_AFTER_DETECTION:.0} s = \
         {repair_goal:.2} s | {:.2} |\n\
         | repair by hand (median) | {:.2} s | | |",
        detection / GOAL_DETECTION,
        repair / repair_goal,
        b.summary().median
    );
    vec![
        Figure::new(
            Part::Repair,
            Unit::Seconds,
            (
                &format!(
                    "operator: a follower's PVC + Pod deleted → first action (detection; {n} \
                     round(s), median)"
                ),
                detection,
            ),
            ("goal", GOAL_DETECTION),
        ),
        Figure::new(
            Part::Repair,
            Unit::Seconds,
            (
                &format!(
                    "operator: a follower's PVC + Pod deleted → replaced, Available ({n} \
                     round(s), median)"
                ),
                repair,
            ),
            ("goal: detection + 7 s", repair_goal),
        ),
        Figure::new(
            Part::Repair,
            Unit::Seconds,
            (
                &format!(
                    "operator: a follower's PVC + Pod deleted → replaced, Available ({n} \
                     round(s), median)"
                ),
                repair,
            ),
            (
                "by hand: member remove, add learner, start, promote",
                b.summary().median,
            ),
        ),
    ]
}
