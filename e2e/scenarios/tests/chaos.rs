//! Crash and restart at the cluster operator's failpoints (crates/failpoint): the operator's
//! Deployment gets `ETCD_OPERATOR_FAILPOINT=<name>:<before|after>`, a spec change makes it reach
//! that side effect, the process exits there (code 86, and again at each restart of the
//! container while the point is still reached), then the variable is removed and the operator
//! restarted without it. Each case then checks that the cluster converges to Available at the
//! size asked, that the etcd member list is exactly the member Pods (no extra or missing member,
//! none left a learner), that every member that existed before the crash kept its etcd ID (a
//! member never restarted on an empty data directory under its old ID), that no PVC vanished
//! (reclaimPolicy Retain), and that the concurrent clients' history is linearizable with no acknowledged write lost.
//!
//! `cargo nextest run` runs a representative subset ([`SUBSET`]); `make chaos` sets
//! `CHAOS_FULL=1` and runs every failpoint of the cluster operator on both sides, printing one
//! table: scenario, outcome, time to converge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::ListParams;

const VERSION: &str = "3.5.35";
/// Generous for a 2-core machine running several scenarios at once.
const STEP: Duration = Duration::from_secs(240);
const OPERATOR: &str = "app.kubernetes.io/component=cluster-operator";

/// What makes the operator reach a failpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// `spec.size` one up: learner added, PVC and Pod created, promoted; Services, budget and
    /// status written on the way.
    ScaleUp,
    /// `spec.size` one down: member removed, then its Pod deleted (and its PVC under Delete).
    ScaleDown,
    /// `spec.storage.reclaimPolicy` flipped: the PVCs' owner references follow.
    FlipReclaimPolicy,
}

#[derive(Clone)]
struct Case {
    failpoint: &'static str,
    when: &'static str,
    trigger: Trigger,
}

const fn case(failpoint: &'static str, when: &'static str, trigger: Trigger) -> Case {
    Case {
        failpoint,
        when,
        trigger,
    }
}

/// The `make test` subset: one crash in each half of a membership change, and a status write.
const SUBSET: &[Case] = &[
    case("cluster.member_add", "after", Trigger::ScaleUp),
    case("cluster.pod_create", "before", Trigger::ScaleUp),
    case("cluster.member_promote", "before", Trigger::ScaleUp),
    case("cluster.status", "after", Trigger::ScaleUp),
    case("cluster.member_remove", "after", Trigger::ScaleDown),
];

/// Every failpoint of the cluster operator but `cluster.secret_create` and
/// `cluster.secret_replace` (TLS clusters only), on both sides. `pvc_delete` runs under
/// reclaimPolicy `Delete` (set unarmed first).
fn full() -> Vec<Case> {
    use Trigger::*;
    let mut cases = Vec::new();
    for (failpoint, trigger) in [
        ("cluster.member_add", ScaleUp),
        ("cluster.pvc_create", ScaleUp),
        ("cluster.pod_create", ScaleUp),
        ("cluster.member_promote", ScaleUp),
        ("cluster.peer_service_apply", ScaleUp),
        ("cluster.client_service_apply", ScaleUp),
        ("cluster.pdb_apply", ScaleUp),
        ("cluster.status", ScaleUp),
        ("cluster.member_remove", ScaleDown),
        ("cluster.pod_delete", ScaleDown),
        ("cluster.pvc_owner_patch", FlipReclaimPolicy),
        ("cluster.pvc_delete", ScaleDown),
    ] {
        for when in ["before", "after"] {
            cases.push(case(failpoint, when, trigger));
        }
    }
    cases
}

#[tokio::test]
async fn operator_crashed_at_failpoints_converges_after_restart() {
    let full_run = std::env::var("CHAOS_FULL").is_ok_and(|v| v == "1");
    let cases = if full_run { full() } else { SUBSET.to_vec() };
    let env = Env::start().await;
    let deployment = env
        .kubectl(&[
            "get",
            "deployment",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            OPERATOR,
            "-o",
            "name",
        ])
        .trim()
        .to_owned();
    let mut cluster = Cluster {
        name: "chaos",
        size: 3,
        delete_pvcs: false,
    };
    env.apply(&cluster.yaml()).unwrap();
    env.wait_available(cluster.name, cluster.size, VERSION, STEP)
        .await;
    let clients = Workload::start(env.client_url(cluster.name).await);

    let mut table = Vec::new();
    let mut failures = Vec::new();
    for case in &cases {
        let scenario = format!("{}:{}", case.failpoint, case.when);
        // Room to move in the direction the case needs (unarmed, not timed).
        if case.trigger == Trigger::ScaleUp && cluster.size >= 5 {
            cluster.size = 3;
            env.apply(&cluster.yaml()).unwrap();
            env.wait_available(cluster.name, cluster.size, VERSION, STEP)
                .await;
        }
        if case.trigger == Trigger::ScaleDown && cluster.size <= 2 {
            cluster.size = 3;
            env.apply(&cluster.yaml()).unwrap();
            env.wait_available(cluster.name, cluster.size, VERSION, STEP)
                .await;
        }
        // A PVC is deleted only under reclaimPolicy Delete.
        if case.failpoint == "cluster.pvc_delete" && !cluster.delete_pvcs {
            cluster.delete_pvcs = true;
            env.apply(&cluster.yaml()).unwrap();
            env.wait_available(cluster.name, cluster.size, VERSION, STEP)
                .await;
        }
        let before = Snapshot::take(&env, &cluster).await;
        set_failpoint(&env, &deployment, Some(&scenario));
        match case.trigger {
            Trigger::ScaleUp => cluster.size += 1,
            Trigger::ScaleDown => cluster.size -= 1,
            Trigger::FlipReclaimPolicy => cluster.delete_pvcs = !cluster.delete_pvcs,
        }
        env.apply(&cluster.yaml()).unwrap();
        let crashed = wait_crash(&env).await;
        // Timed from the crash: the restart without the failpoint (a rollout, then the Lease the
        // crashed process still held) counts.
        let restarted = Instant::now();
        set_failpoint(&env, &deployment, None);
        let outcome = match crashed {
            Err(e) => Err(e),
            Ok(()) => {
                env.wait_available(cluster.name, cluster.size, VERSION, STEP)
                    .await;
                let after = Snapshot::take(&env, &cluster).await;
                check(&before, &after, &cluster, case)
            }
        };
        let converged = restarted.elapsed();
        let checked = clients.check().await;
        eprintln!(
            "chaos: {scenario}: {outcome:?} in {converged:.1?} ({checked} acknowledged writes present)"
        );
        if let Err(e) = &outcome {
            failures.push(format!("{scenario}: {e}"));
        }
        table.push((scenario, outcome, converged));
    }
    clients.stop().await;

    println!(
        "\n{:<40} {:<10} {:>12}",
        "scenario", "outcome", "converged in"
    );
    for (scenario, outcome, converged) in &table {
        let outcome = match outcome {
            Ok(()) => "ok".to_owned(),
            Err(_) => "FAILED".to_owned(),
        };
        println!(
            "{scenario:<40} {outcome:<10} {:>10.1} s",
            converged.as_secs_f64()
        );
    }
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        env.diagnostics()
    );
}

struct Cluster {
    name: &'static str,
    size: usize,
    delete_pvcs: bool,
}

impl Cluster {
    fn yaml(&self) -> String {
        let policy = if self.delete_pvcs { "Delete" } else { "Retain" };
        format!(
            "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdCluster\nmetadata: {{name: {}}}\nspec:\n  size: {}\n  version: \"{VERSION}\"\n  storage: {{size: 1Gi, reclaimPolicy: {policy}}}\n",
            self.name, self.size
        )
    }
}

/// Arms (`Some`) or disarms the failpoint on the operator's Deployment and waits for the
/// rollout: the new Pod is Ready (a standby is Ready) and the old one gone, so from here only
/// the new process acts.
fn set_failpoint(env: &Env, deployment: &str, value: Option<&str>) {
    let var = match value {
        Some(v) => format!("ETCD_OPERATOR_FAILPOINT={v}"),
        None => "ETCD_OPERATOR_FAILPOINT-".to_owned(),
    };
    env.kubectl(&["set", "env", "-n", OPERATOR_NAMESPACE, deployment, &var]);
    env.kubectl(&[
        "rollout",
        "status",
        "-n",
        OPERATOR_NAMESPACE,
        deployment,
        "--timeout=240s",
    ]);
}

/// Waits until an operator container exited with the failpoint's code.
async fn wait_crash(env: &Env) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let list = pods.list(&ListParams::default().labels(OPERATOR)).await;
        let live = list.iter().flat_map(|l| &l.items);
        let crashed = live
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .any(|pod| {
                let statuses = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref());
                statuses.into_iter().flatten().any(|c| {
                    let exited = |s: Option<&k8s_openapi::api::core::v1::ContainerState>| {
                        s.and_then(|s| s.terminated.as_ref())
                            .is_some_and(|t| t.exit_code == failpoint_exit_code())
                    };
                    exited(c.last_state.as_ref()) || exited(c.state.as_ref())
                })
            });
        if crashed {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the operator did not reach the failpoint within {STEP:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// crates/failpoint's EXIT_CODE (the scenarios do not link the operators' crates).
fn failpoint_exit_code() -> i32 {
    86
}

/// What a case compares before and after.
struct Snapshot {
    /// etcd member name -> ID (hex), from etcd itself.
    members: BTreeMap<String, u64>,
    learners: usize,
    unstarted: usize,
    /// Member Pods (by the cluster label).
    pods: BTreeSet<String>,
    pvcs: BTreeSet<String>,
    /// `reclaimPolicy: Delete` in the spec when it was taken.
    delete_pvcs: bool,
}

impl Snapshot {
    async fn take(env: &Env, cluster: &Cluster) -> Snapshot {
        let name = cluster.name;
        let url = env.client_url(name).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let list = loop {
            let attempt = async {
                let mut client = etcd_client::Client::connect([url.as_str()], None).await?;
                client.member_list().await
            };
            match attempt.await {
                Ok(list) => break list,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    eprintln!("member list failed, retrying: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => panic!("member list: {e}\n{}", env.diagnostics()),
            }
        };
        let members = list
            .members()
            .iter()
            .filter(|m| !m.name().is_empty())
            .map(|m| (m.name().to_owned(), m.id()))
            .collect();
        let selector = format!("etcd.operator.rs/cluster={name}");
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
        let pods = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
        let pvcs = pvcs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        Snapshot {
            members,
            learners: list.members().iter().filter(|m| m.is_learner()).count(),
            unstarted: list
                .members()
                .iter()
                .filter(|m| m.name().is_empty())
                .count(),
            pods,
            pvcs,
            delete_pvcs: cluster.delete_pvcs,
        }
    }
}

fn check(
    before: &Snapshot,
    after: &Snapshot,
    cluster: &Cluster,
    case: &Case,
) -> Result<(), String> {
    let names: BTreeSet<String> = after.members.keys().cloned().collect();
    if after.learners != 0 || after.unstarted != 0 {
        return Err(format!(
            "{} learners and {} unstarted members left: {:?}",
            after.learners, after.unstarted, after.members
        ));
    }
    if names.len() != cluster.size || names != after.pods {
        return Err(format!(
            "etcd members {names:?} are not the {} member Pods {:?}",
            cluster.size, after.pods
        ));
    }
    for (name, id) in &after.members {
        if let Some(old) = before.members.get(name)
            && old != id
        {
            return Err(format!(
                "member {name} changed its etcd ID from {old:x} to {id:x}"
            ));
        }
        if !after.pvcs.contains(name) {
            return Err(format!("member {name} has no PVC"));
        }
    }
    // Under Retain no PVC goes; under Delete only a removed member's may. A case that flips the
    // policy may see either: the operator may still act on the policy it read before the flip
    // (the previous case's clean-up of removed members' PVCs, seen in the first full run).
    let gone: Vec<&String> = before.pvcs.difference(&after.pvcs).collect();
    let delete_policy = cluster.delete_pvcs || before.delete_pvcs;
    let may_go = |pvc: &String| delete_policy && !after.members.contains_key(pvc);
    if let Some(pvc) = gone.iter().find(|p| !may_go(p)) {
        return Err(format!(
            "PVC {pvc} was deleted ({} with reclaimPolicy {})",
            case.failpoint,
            if delete_policy { "Delete" } else { "Retain" }
        ));
    }
    Ok(())
}
