//! `make bench` (cluster part, issue #6): how long the operator takes from `kubectl apply` of a
//! 3-member EtcdCluster to status Available with 3 healthy voters, against the same membership
//! steps done by hand on real etcd processes (seed with `new`, then per member `member add
//! --learner`, start with `existing`, `member promote`), measured in the same run. Then, on that
//! Available cluster, how long from SIGKILL of a follower's etcd process until the same member
//! serves again and the EtcdCluster is Available with 3 healthy voters (the node agent restarts
//! the container on the member's volume), against a 3-member cluster of host processes where the
//! killed follower is restarted on its data dir at once, until every voter answers status with a
//! leader.
//!
//! Does I/O throughout: starts the local control plane with the chart installed (as the scenarios
//! do), etcd processes on loopback, kubectl and etcd clients. Needs the workspace's binaries built:
//! localkube runs the operator binary next to itself (`make bench` builds them in release, as the
//! image ships them, and points `LOCALKUBE_BIN` at `target/release/localkube`; without it,
//! `target/debug`'s). `BENCH_ROUNDS` (default 3) sets the rounds of each side; rounds alternate
//! operator (apply, then kill), by hand (bootstrap, then kill), so a change in the machine's load
//! hits both sides alike. With `BENCH_RESULTS` set (as `make bench` does), the two ratios are
//! appended there for the combined table (`test_support::bench`).
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
use passes::PassLine;
use test_support::bench::{self, Figure, Part, Side, Steps, Unit};
use test_support::{ClusterState, EtcdCluster, EtcdMember, EtcdVersion};

const VERSION: EtcdVersion = EtcdVersion::V3_6;
const SIZE: usize = 3;
/// Both sides poll their end condition (and the by-hand side its retries) at this interval.
const POLL: Duration = Duration::from_millis(100);
/// A round that takes longer than this is a failure, not a figure.
const ROUND_TIMEOUT: Duration = Duration::from_secs(180);

struct Round {
    total: Duration,
    steps: Steps,
    /// The operator's reconcile passes of this cluster (its debug lines), in order; empty by
    /// hand.
    passes: Vec<PassLine>,
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("BENCH_ROUNDS is a number"))
        .unwrap_or(3);
    assert!(rounds > 0, "BENCH_ROUNDS must be at least 1");
    let setup = Instant::now();
    // JSON logs with the cluster operator's debug lines: each reconcile pass's steps and their
    // times, printed beside the steps table (where the operator's time goes).
    let env = Env::start_with_values(&passes::DEBUG_PASS_VALUES).await;
    println!(
        "local control plane up and chart installed in {:.1} s",
        setup.elapsed().as_secs_f64()
    );

    let mut operator = Vec::new();
    let mut by_hand = Vec::new();
    let mut operator_kill = Vec::new();
    let mut by_hand_kill = Vec::new();
    for round in 1..=rounds {
        let name = format!("bench-{round}");
        let a = operator_round(&env, &name).await;
        let c = operator_kill_round(&env, &name).await;
        delete_cluster(&env, &name);
        let b = by_hand_round().await;
        let d = by_hand_kill_round().await;
        println!(
            "round {round}/{rounds}: apply → Available: operator {:.2} s, by hand {:.2} s; \
             kill → Available: operator {:.2} s, by hand {:.2} s",
            a.total.as_secs_f64(),
            b.total.as_secs_f64(),
            c.total.as_secs_f64(),
            d.total.as_secs_f64()
        );
        operator.push(a);
        by_hand.push(b);
        operator_kill.push(c);
        by_hand_kill.push(d);
    }
    let figures = [
        report(&operator, &by_hand),
        report_kill(&operator_kill, &by_hand_kill),
    ];
    if let Some(path) = bench::record(&figures).expect("recording the figures") {
        println!("\nfigures appended to {}", path.display());
    }
}

/// Available with `SIZE` healthy voters on the version, as the operator's status says: the
/// condition, `readyMembers`, every listed member a healthy voter, the spec's generation seen.
fn fully_available(c: &etcd_api::EtcdCluster, version: &str) -> bool {
    common::status_shows_healthy_voters(c, SIZE)
        && c.status.as_ref().and_then(|s| s.current_version.as_deref()) == Some(version)
}

/// (a) `kubectl apply`, then the EtcdCluster's status polled every 100 ms until Available with
/// `SIZE` healthy voters on the version. The cluster is left for [`operator_kill_round`]; the
/// caller deletes it and its PVCs afterwards (not timed) so the next round starts on an idle
/// machine.
async fn operator_round(env: &Env, name: &str) -> Round {
    let version = VERSION.version_string();
    let wall_start = jiff::Timestamp::now();
    let start = Instant::now();
    env.apply(&cluster_yaml(name, SIZE as u32, version))
        .unwrap_or_else(|e| panic!("kubectl apply {name}: {e}"));
    let clusters = env.clusters();
    loop {
        if let Ok(c) = clusters.get(name).await
            && fully_available(&c, version)
        {
            break;
        }
        assert!(
            start.elapsed() < ROUND_TIMEOUT,
            "{name} not Available after {ROUND_TIMEOUT:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();
    let steps = operator_steps(env, name, wall_start).await;
    let passes = passes::operator_passes(env, name, wall_start, ROUND_TIMEOUT);
    Round {
        total,
        steps,
        passes,
    }
}

/// (c) On the Available cluster: SIGKILL of a follower's etcd process (as a crash would), then
/// polled every `POLL` until the node agent has restarted the container (its restart count went
/// up), the killed member answers again as the same etcd member (same ID) with a leader, every
/// voter does, and the EtcdCluster's status says Available with `SIZE` healthy voters. The same
/// end as (d), which restarts the process itself. kubelet restarts a first exit at once, so the
/// operator may never see the member unhealthy: the status alone would be stale, which is why
/// the members are asked directly (at their Pod IPs, reachable from the node).
async fn operator_kill_round(env: &Env, name: &str) -> Round {
    let version = VERSION.version_string();
    let clusters = env.clusters();
    let cluster = clusters.get(name).await.unwrap();
    let uid = cluster.metadata.uid.clone().expect("the cluster's uid");
    let status = cluster.status.clone().expect("the cluster's status");
    let killed = status
        .members
        .iter()
        .find(|m| !m.leader && !m.learner)
        .expect("a follower in the status")
        .clone();
    let killed_id = killed.id.clone().expect("the follower's member ID");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let pod_endpoint = |pod: &Pod| {
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
        format!("http://{}:2379", ip.expect("a member Pod's IP"))
    };
    let mut endpoints = Vec::new();
    for m in &status.members {
        endpoints.push(pod_endpoint(&pods.get(&m.name).await.unwrap()));
    }
    let killed_endpoint = pod_endpoint(&pods.get(&killed.name).await.unwrap());
    let leader = status
        .members
        .iter()
        .position(|m| m.leader)
        .expect("a leader");
    let mut client = test_support::etcd::connect(std::slice::from_ref(&endpoints[leader]))
        .await
        .expect("a client for the leader");
    let restarts = |pod: &Pod| -> i32 {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum())
    };
    let restarts_before = restarts(&pods.get(&killed.name).await.unwrap());

    let start = Instant::now();
    kill_member_process(&killed.name, &uid);
    let mut steps = Steps::default();
    steps.push("Killed", 0.0);
    let mut restarted = false;
    let mut rejoined = false;
    loop {
        if !restarted
            && let Ok(pod) = pods.get(&killed.name).await
            && restarts(&pod) > restarts_before
        {
            restarted = true;
            steps.push(
                "ContainerRestarted (observed)",
                start.elapsed().as_secs_f64(),
            );
        }
        if restarted && !rejoined && same_member_serves(&killed_endpoint, &killed_id).await {
            rejoined = true;
            steps.push("SameMemberServes (observed)", start.elapsed().as_secs_f64());
        }
        if rejoined
            && healthy_voters(&mut client, &endpoints).await == SIZE
            && clusters
                .get(name)
                .await
                .is_ok_and(|c| fully_available(&c, version))
        {
            break;
        }
        assert!(
            start.elapsed() < ROUND_TIMEOUT,
            "{name}: {} not back {ROUND_TIMEOUT:?} after its etcd was killed (container \
             restarted: {restarted}, same member {killed_id} serving: {rejoined})\n{}",
            killed.name,
            env.diagnostics()
        );
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();
    Round {
        total,
        steps,
        passes: Vec::new(),
    }
}

/// Whether the etcd at `endpoint` answers status with a leader as member `id` (hex, as the
/// status reports it): the killed member back with its own data, not a replacement.
async fn same_member_serves(endpoint: &str, id: &str) -> bool {
    let Ok(mut member) = test_support::etcd::connect(&[endpoint.to_owned()]).await else {
        return false;
    };
    member.status().await.is_ok_and(|s| {
        s.leader() != 0
            && s.header()
                .is_some_and(|h| format!("{:x}", h.member_id()) == id.trim_start_matches("0x"))
    })
}

/// The operator's steps from the EtcdCluster's events (events.k8s.io/v1, times set by the
/// operator on this machine's clock), as offsets from the apply.
///
/// kube-runtime's recorder folds a repeated reason about the same object into one Event with a
/// series (the second member's MemberAdded is the first's Event, count 2): `eventTime` is the
/// first occurrence, `series.lastObservedTime` the latest. With 3 members no reason occurs more
/// than twice, so both occurrences are known.
async fn operator_steps(env: &Env, name: &str, start: jiff::Timestamp) -> Steps {
    let events: Api<Event> = Api::namespaced(env.client.clone(), NS);
    let list = events.list(&ListParams::default()).await.unwrap();
    let since = |at: jiff::Timestamp| at.duration_since(start).as_secs_f64();
    let mut timed: Vec<(f64, String)> = Vec::new();
    for e in list
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
    {
        let reason = e.reason.unwrap_or_default();
        if let Some(first) = e.event_time {
            timed.push((since(first.0), reason.clone()));
        }
        if let Some(series) = e.series {
            timed.push((since(series.last_observed_time.0), reason));
        }
    }
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut steps = Steps::default();
    for (offset, reason) in timed {
        steps.push(&reason, offset);
    }
    steps
}

fn delete_cluster(env: &Env, name: &str) {
    let selector = format!("app.kubernetes.io/instance={name}");
    env.kubectl(&["delete", "etcd", name, "-n", NS, "--wait=true"]);
    // Pods and PVCs go explicitly (the PVCs are kept by the default reclaim policy), and the
    // bench waits for them so no etcd of this round still runs during the next measurement.
    env.kubectl(&[
        "delete",
        "pods,pvc",
        "-n",
        NS,
        "-l",
        &selector,
        "--ignore-not-found",
        "--wait=true",
        "--timeout=120s",
    ]);
}

/// (b) The operator's membership steps without Kubernetes, on real etcd processes on loopback.
async fn by_hand_round() -> Round {
    let start = Instant::now();
    let mut steps = Steps::default();
    let offset = |start: Instant| start.elapsed().as_secs_f64();

    // The seed: `--initial-cluster-state=new` with itself only. The harness returns once it
    // answers as a one-member cluster with a leader.
    steps.push("SeedCreated", 0.0);
    let seed = EtcdCluster::start(VERSION, 1)
        .await
        .expect("seed member starts");
    let mut client = seed.client().await.expect("client for the seed");
    // Dropped before `seed`, whose temp dir holds their data.
    let mut joined: Vec<EtcdMember> = Vec::new();

    for i in 2..=SIZE {
        let peer = seed
            .member_config(i, ClusterState::Existing, "")
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

        // What `member add` prints as ETCD_INITIAL_CLUSTER, the new member named.
        let initial_cluster =
            test_support::etcd::initial_cluster_after_add(&added, id, &format!("m{i}"));
        let config = seed
            .member_config(i, ClusterState::Existing, &initial_cluster)
            .expect("member config");
        joined.push(EtcdMember::spawn(seed.tools(), VERSION, config).expect("member starts"));
        steps.push("MemberPodCreated", offset(start));

        retry_later(start, ROUND_TIMEOUT, "member promote", || {
            let mut client = client.clone();
            async move { client.member_promote(id).await }
        })
        .await;
        steps.push("LearnerPromoted", offset(start));
    }

    // Done when etcd lists SIZE voters and every one of them answers status with a leader: what
    // the operator's status calls healthy voters.
    let endpoints: Vec<String> = std::iter::once(seed.member(1).unwrap().client_url())
        .chain(joined.iter().map(EtcdMember::client_url))
        .collect();
    loop {
        if healthy_voters(&mut client, &endpoints).await == SIZE {
            break;
        }
        assert!(
            start.elapsed() < ROUND_TIMEOUT,
            "by hand: {SIZE} healthy voters not seen after {ROUND_TIMEOUT:?}\n{}",
            seed.log_tails(20)
        );
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();
    drop(joined);
    drop(seed);
    Round {
        total,
        steps,
        passes: Vec::new(),
    }
}

/// (d) The same failure by hand: a 3-member cluster of host processes (started untimed), SIGKILL
/// of a follower, restarted at once on its data dir with `--initial-cluster-state=existing` (what
/// the node agent does with the container), until every voter answers status with a leader.
async fn by_hand_kill_round() -> Round {
    let mut cluster = EtcdCluster::start(VERSION, SIZE)
        .await
        .expect("a 3-member cluster starts");
    let leader = cluster
        .wait_for_leader(ROUND_TIMEOUT)
        .await
        .expect("a leader");
    let follower = cluster
        .member_indexes()
        .into_iter()
        .find(|i| *i != leader)
        .expect("a follower");
    let tools = cluster.tools().clone();
    let endpoints = cluster.endpoints();
    let mut client = cluster
        .member_client(leader)
        .await
        .expect("client for the leader");

    let start = Instant::now();
    let mut steps = Steps::default();
    cluster
        .kill_member(follower)
        .expect("SIGKILL of the follower");
    steps.push("Killed", 0.0);
    cluster
        .member_mut(follower)
        .unwrap()
        .restart(&tools, VERSION, ClusterState::Existing)
        .expect("the follower restarts");
    steps.push(
        "ContainerRestarted (observed)",
        start.elapsed().as_secs_f64(),
    );
    loop {
        if healthy_voters(&mut client, &endpoints).await == SIZE {
            break;
        }
        assert!(
            start.elapsed() < ROUND_TIMEOUT,
            "by hand: {SIZE} healthy voters not seen {ROUND_TIMEOUT:?} after the restart\n{}",
            cluster.log_tails(20)
        );
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();
    drop(cluster);
    Round {
        total,
        steps,
        passes: Vec::new(),
    }
}

/// A side of the table: `label`, each round's total and steps.
fn side<'a>(label: &'a str, rounds: &'a [Round]) -> Side<'a> {
    Side::new(label, rounds.iter().map(|r| (r.total, &r.steps)))
}

/// Prints (a) against (b) with the steps; returns the figure for the combined table.
fn report(operator: &[Round], by_hand: &[Round]) -> Figure {
    let a = side("(a) operator: kubectl apply → Available", operator);
    let b = side("(b) by hand: seed, 2× add learner/start/promote", by_hand);
    let n = operator.len();
    println!(
        "\nEtcdCluster size {SIZE}, etcd {}: apply → Available with {SIZE} healthy voters, {n} rounds each, same run",
        VERSION.version_string()
    );
    print!("{}", bench::totals_table(&a, &b, "ratio (a)/(b), medians"));
    println!(
        "The ratio contains what Kubernetes and the operator add to etcd's own steps: the API \
         round trips and watch delays, Pod scheduling and start (localkube's node agent), the \
         member's DNS name resolving (a joining member's etcd resolves the members' peer URLs, \
         its own among them, and retries every second until the cluster DNS has its new Pod: \
         seconds of a round, in its log as \"failed to resolve URL Host\"), the operator's observe → act → requeue cycle (0.2 s after a \
         member add or an opened serving gate, 1 s after other steps; while the seed \
         starts or a learner catches up, the moment the operator's watch of that member sees it \
         answer or catch up, else every 0.5 s; 0.5 s while etcd answers \"unhealthy cluster\", which it does \
         until every voter has been connected for 5 s, where the by-hand side retries every \
         {poll} ms; 10 s while a member is unhealthy), and status \
         polling by both sides every {poll} ms.",
        poll = POLL.as_millis()
    );
    println!(
        "\nsteps: median seconds since the start of the round (operator: its events' eventTime)"
    );
    print!("{}", bench::steps_table(&a, &b, "Available (observed)"));
    let passes: Vec<(Duration, &[PassLine])> = operator
        .iter()
        .map(|r| (r.total, r.passes.as_slice()))
        .collect();
    print!("{}", passes::passes_report(&passes));
    Figure::new(
        Part::Cluster,
        Unit::Seconds,
        (
            &format!("operator: kubectl apply → Available, {SIZE} members ({n} round(s), median)"),
            a.summary().median,
        ),
        (
            "by hand: seed + 2× learner add/start/promote",
            b.summary().median,
        ),
    )
}

/// Prints (c) against (d) with the steps; returns the figure for the combined table.
fn report_kill(operator: &[Round], by_hand: &[Round]) -> Figure {
    let c = side("(c) operator: kill → Available again", operator);
    let d = side(
        "(d) by hand: kill, restart on its data dir → healthy",
        by_hand,
    );
    let n = operator.len();
    println!(
        "\nEtcdCluster size {SIZE}, etcd {}: SIGKILL of a follower's etcd → Available again with \
         {SIZE} healthy voters, {n} rounds each, same run",
        VERSION.version_string()
    );
    print!("{}", bench::totals_table(&c, &d, "ratio (c)/(d), medians"));
    println!(
        "The ratio contains what Kubernetes adds to etcd's own restart and catch-up on its data \
         dir (which (d) does at once after the kill): the node agent noticing the exit and \
         restarting the container at once (kubelet restarts a first exit without back-off; later \
         ones wait 10 s, 20 s, ...), the Pod status update, and polling by both sides every \
         {poll} ms. The operator has no step here unless it saw the member unhealthy: it then \
         reports Degraded and, once healthy again, Available.",
        poll = POLL.as_millis()
    );
    println!(
        "\nsteps: median seconds since the kill (observed by polling every {} ms)",
        POLL.as_millis()
    );
    print!(
        "{}",
        bench::steps_table(&c, &d, "Available again (observed)")
    );
    Figure::new(
        Part::Cluster,
        Unit::Seconds,
        (
            &format!(
                "operator: a follower's etcd SIGKILLed → Available again ({n} round(s), median)"
            ),
            c.summary().median,
        ),
        (
            "by hand: restart on its data dir at once",
            d.summary().median,
        ),
    )
}
