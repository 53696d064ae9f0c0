//! The cluster operator's reconcile passes, from its `pass` debug lines (controller.rs
//! `timed_pass`): what the cluster and restore benches print to show where the operator's time
//! went between two steps (inside passes, by step, or waiting between them).

use std::fmt::Write;
use std::time::Duration;

use crate::common::{Env, NS, OPERATOR_NAMESPACE};

/// `helm install` values for the benches: JSON logs with the cluster operator's debug lines
/// (the `pass` lines read here).
pub const DEBUG_PASS_VALUES: [&str; 4] = [
    "--set",
    "logging.format=json",
    "--set",
    "logging.level=info\\,etcd_cluster_operator=debug\\,etcd_admin=debug\\,etcd_member=debug",
];

/// The cluster operator's Pod, by the chart's component label.
const CLUSTER_OPERATOR: &str = "app.kubernetes.io/component=cluster-operator";
/// The restore operator's Pod, by the chart's component label.
const RESTORE_OPERATOR: &str = "app.kubernetes.io/component=restore-operator";

/// One reconcile pass of the operator, from its `pass` debug line.
#[derive(Clone, Debug)]
pub struct PassLine {
    /// When it started, seconds since the round's start.
    pub start: f64,
    /// How long it took, seconds.
    pub took: f64,
    /// `stored` or `listed`: where its Pods came from.
    pub pods: String,
    /// The action planned (`AddLearner`, `Wait:SeedStarting`...).
    pub action: String,
    /// How it ended (the requeue asked for, `list first`, or the error's reason).
    pub outcome: String,
    /// Each step's milliseconds, as logged (`etcd=41.2 action=12.0 ...`).
    pub steps: String,
}

/// The cluster operator's reconcile passes of cluster `name` that started at `start` or later
/// and within `within` of it, as offsets from `start`.
pub fn operator_passes(
    env: &Env,
    name: &str,
    start: jiff::Timestamp,
    within: Duration,
) -> Vec<PassLine> {
    let logs = env.kubectl(&[
        "logs",
        "-n",
        OPERATOR_NAMESPACE,
        "-l",
        CLUSTER_OPERATOR,
        "--tail=-1",
    ]);
    keep_logs(env, name, start, &logs);
    let mut passes: Vec<PassLine> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| {
            line["message"] == "pass"
                && line["span"]["name"] == name
                && line["span"]["namespace"] == NS
        })
        .filter_map(|line| {
            let end: jiff::Timestamp = line["timestamp"].as_str()?.parse().ok()?;
            let fields = &line["fields"];
            let took = fields["total_ms"].as_f64()? / 1000.0;
            let text = |key: &str| fields[key].as_str().unwrap_or_default().to_owned();
            Some(PassLine {
                start: end.duration_since(start).as_secs_f64() - took,
                took,
                pods: text("pods"),
                action: text("action"),
                outcome: text("outcome"),
                steps: text("steps"),
            })
        })
        .filter(|pass| pass.start >= 0.0 && pass.start <= within.as_secs_f64())
        .collect();
    passes.sort_by(|a, b| a.start.total_cmp(&b.start));
    if passes.is_empty() {
        // E.g. an operator binary built before the pass lines: localkube runs the operators
        // next to the localkube binary it was given (LOCALKUBE_BIN, else e2e-harness's own
        // workspace's target/debug).
        println!(
            "no `pass` lines of {name} among the cluster operator's {} log lines",
            logs.lines().count()
        );
    }
    passes
}

/// With `BENCH_RESULTS` set (as `make bench` sets it), keeps the round's logs beside it, in
/// `logs/<cluster>-<round start>-*.log`: the cluster operator's (`operator_log`, its passes and
/// debug lines) and every member container's of the round's cluster (`kubectl logs --prefix`),
/// so a slow round can be explained after the run: etcd's own view of a learner's join (the
/// publish race in CONTRIBUTING.md was found in them) or an operator restart.
fn keep_logs(env: &Env, name: &str, start: jiff::Timestamp, operator_log: &str) {
    let Some(results) = std::env::var_os("BENCH_RESULTS") else {
        return;
    };
    let Some(dir) = std::path::Path::new(&results)
        .parent()
        .map(|d| d.join("logs"))
    else {
        return;
    };
    let stamp = start.strftime("%Y%m%dT%H%M%S").to_string();
    let members = env.try_kubectl(&[
        "logs",
        "-n",
        NS,
        "-l",
        &format!("app.kubernetes.io/instance={name}"),
        "--all-containers",
        "--prefix",
        "--timestamps",
        "--max-log-requests=20",
        "--tail=-1",
    ]);
    let members = members.unwrap_or_else(|e| format!("kubectl logs failed: {e}\n"));
    // An operator that restarted (a lost leader Lease, a crash) shows as a gap in its passes;
    // its previous container's log and the count say so.
    let previous = env
        .try_kubectl(&[
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            CLUSTER_OPERATOR,
            "--previous",
            "--tail=-1",
        ])
        .unwrap_or_default();
    let restarts = env
        .try_kubectl(&[
            "get",
            "pods",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            CLUSTER_OPERATOR,
            "-o",
            "jsonpath={.items[*].status.containerStatuses[*].restartCount}",
        ])
        .unwrap_or_default();
    println!(
        "cluster operator container restarts so far: {}",
        restarts.trim()
    );
    // The restore operator's side of a restore round (the seed, the hold, the hand-over); empty
    // in the benches that do not install it.
    let restore_operator = env
        .try_kubectl(&[
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            RESTORE_OPERATOR,
            "--tail=-1",
        ])
        .unwrap_or_default();
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        if !restore_operator.trim().is_empty() {
            std::fs::write(
                dir.join(format!("{name}-{stamp}-restore-operator.log")),
                &restore_operator,
            )?;
        }
        std::fs::write(
            dir.join(format!("{name}-{stamp}-cluster-operator.log")),
            format!("{previous}{operator_log}"),
        )?;
        // The control plane's own logs: kube-apiserver's traces of slow requests (`Trace[...]`),
        // kube-controller-manager's retries (an EndpointSlice sync retried after 1 s, 2 s, ...
        // delays a new member's DNS name).
        for component in ["kube-apiserver", "kube-controller-manager"] {
            let log = env.lk.state_dir().join(format!("logs/{component}.log"));
            if log.exists() {
                std::fs::copy(&log, dir.join(format!("{name}-{stamp}-{component}.log")))?;
            }
        }
        // localkube's own log: its runtime watchdog's warnings (DNS and the Service proxy
        // stalled), the node agent's container starts.
        std::fs::copy(
            env.lk.log_path(),
            dir.join(format!("{name}-{stamp}-localkube.log")),
        )?;
        std::fs::write(dir.join(format!("{name}-{stamp}-members.log")), members)
    });
    match written {
        Ok(()) => println!("logs of {name}'s round kept in {}", dir.display()),
        Err(e) => println!("logs of {name}'s round not kept in {}: {e}", dir.display()),
    }
    // The API server's own account of the workloads' requests (its audit log, Metadata level
    // for ServiceAccounts): a request that took long inside it shows here with its latency,
    // one that took long only in the client (connection, queueing in the client) does not.
    let audit_path = env.lk.state_dir().join("logs/audit.log");
    match std::fs::read_to_string(&audit_path) {
        Ok(audit) => {
            let slow = slow_api_requests(&audit, start, SLOW_API_REQUEST);
            println!(
                "API requests of workloads since the round's start that took over {SLOW_API_REQUEST:?} \
                 inside the API server (audit log): {}",
                slow.len()
            );
            for line in slow {
                println!("  {line}");
            }
        }
        Err(e) => println!("no audit log at {}: {e}", audit_path.display()),
    }
}

/// A request slower than this inside the API server is listed after a round.
const SLOW_API_REQUEST: Duration = Duration::from_millis(500);

/// The audit events (one JSON object per line) of requests received at `since` or later that
/// took longer than `threshold` from receipt to their last stage: received at (offset from
/// `since`, s), latency, user, verb, URI, response code. Watches are left out: they last by
/// design.
pub fn slow_api_requests(audit: &str, since: jiff::Timestamp, threshold: Duration) -> Vec<String> {
    let mut slow: Vec<(f64, String)> = audit
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["verb"].as_str() != Some("watch"))
        .filter_map(|event| {
            let stamp = |field: &str| event[field].as_str()?.parse::<jiff::Timestamp>().ok();
            let received = stamp("requestReceivedTimestamp")?;
            let done = stamp("stageTimestamp")?;
            let took = done.duration_since(received).as_secs_f64();
            let offset = received.duration_since(since).as_secs_f64();
            (offset >= 0.0 && took > threshold.as_secs_f64()).then(|| {
                let text = format!(
                    "{offset:8.3} s  took {took:6.3} s  {} {} {} -> {} ({})",
                    event["user"]["username"].as_str().unwrap_or("?"),
                    event["verb"].as_str().unwrap_or("?"),
                    event["requestURI"].as_str().unwrap_or("?"),
                    event["responseStatus"]["code"],
                    event["stage"].as_str().unwrap_or("?"),
                );
                (offset, text)
            })
        })
        .collect();
    slow.sort_by(|a, b| a.0.total_cmp(&b.0));
    slow.into_iter().map(|(_, text)| text).collect()
}

/// Where the operator's time went: per round (its total and passes), the time inside reconcile
/// passes of the cluster (and per step, summed over the round's passes) against the time
/// between them (waiting for a watch event or a requeue); then every pass of the median round.
pub fn passes_report(rounds: &[(Duration, &[PassLine])]) -> String {
    let mut out = String::from(
        "\noperator's reconcile passes (its debug lines): per round, seconds inside passes and \
         between them, and each step's sum over the round's passes\n",
    );
    for (i, (total, passes)) in rounds.iter().enumerate() {
        let inside: f64 = passes.iter().map(|p| p.took).sum();
        let mut by_step: Vec<(String, f64)> = Vec::new();
        for pass in passes.iter() {
            for (step, ms) in pass
                .steps
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .filter_map(|(k, v)| Some((k, v.parse::<f64>().ok()?)))
            {
                match by_step.iter_mut().find(|(k, _)| k == step) {
                    Some((_, sum)) => *sum += ms / 1000.0,
                    None => by_step.push((step.to_owned(), ms / 1000.0)),
                }
            }
        }
        let steps: Vec<String> = by_step.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
        let _ = writeln!(
            out,
            "round {}: {:.2} s, {} passes, {:.2} s inside ({}), {:.2} s between",
            i + 1,
            total.as_secs_f64(),
            passes.len(),
            inside,
            steps.join(", "),
            total.as_secs_f64() - inside
        );
    }
    let mut order: Vec<usize> = (0..rounds.len()).collect();
    order.sort_by(|a, b| rounds[*a].0.cmp(&rounds[*b].0));
    // The median round, and the slowest when it is another (what an outlier waited on).
    let mut shown: Vec<(&str, usize)> = Vec::new();
    if let Some(median) = order.get(order.len() / 2) {
        shown.push(("median", *median));
    }
    if let Some(slowest) = order.last()
        && shown.iter().all(|(_, i)| i != slowest)
    {
        shown.push(("slowest", *slowest));
    }
    for (which, index) in shown {
        let (total, passes) = &rounds[index];
        let _ = writeln!(
            out,
            "\npasses of the {which} round (round {}, {:.2} s): start s, took ms, pods, action, outcome, steps ms",
            index + 1,
            total.as_secs_f64()
        );
        for p in passes.iter() {
            let _ = writeln!(
                out,
                "{:>7.3} {:>7.1} {:<6} {:<28} {:<40} {}",
                p.start,
                p.took * 1000.0,
                p.pods,
                p.action,
                p.outcome,
                p.steps
            );
        }
    }
    out
}
