//! The stale-leader fence (crates/failpoint's `fence`, issue 18) against a real API server: a
//! leader paused (SIGSTOP) past its lease while another holder takes the Lease must not write
//! when it resumes, even with a reconcile already past its own leadership check.
//!
//! The leader is this test binary re-run as a child process (the fence ends the process, and a
//! process is what SIGSTOP pauses): it acquires the Lease on its own thread and fences itself as
//! the operator binaries do (`Leadership::fence_process`), then loops as a reconcile does: it
//! checks that it still leads, spends a moment on reads, and writes through `failpoint::around`
//! (a counter in a ConfigMap). Paused, it is most likely in those reads, past its check: on
//! resume its next write goes first, before the renewal notices the new holder. Without the
//! fence that write lands (shown failing first: "the stale leader wrote after pod-new took the
//! Lease"); with it the process exits at the fence without sending it.
//! Short timings (5 s lease, 4 s renew deadline) keep the file at seconds; shorter ones (2 s,
//! 1.5 s) could lose the child its lease to one slow renewal on a loaded CI machine before the
//! case began.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use operator_runtime::{LeaseConfig, acquire, acquire_on_own_thread};

const NS: &str = "operators";
const LEASE: &str = "stale";
const COUNTER: &str = "writes";
/// Set in the child's environment: the kubeconfig of the test's API server.
const CHILD_KUBECONFIG: &str = "STALE_LEADER_CHILD_KUBECONFIG";
/// What the child's loop spends between its leadership check and its write (a reconcile's
/// reads); the write itself takes a few milliseconds, so a pause most likely lands here.
const READS: Duration = Duration::from_millis(50);

fn config(identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(5),
        renew_deadline: Duration::from_secs(4),
        retry_period: Duration::from_millis(500),
        ..LeaseConfig::new(NS, LEASE, identity)
    }
}

async fn counter(client: &kube::Client) -> u64 {
    let map = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get(COUNTER)
        .await
        .unwrap();
    map.data.unwrap()["n"].parse().unwrap()
}

/// The leader, run by [`a_paused_leader_resumed_after_a_takeover_writes_nothing`] in a child
/// process with [`CHILD_KUBECONFIG`] set; a no-op in a normal run.
#[tokio::test(flavor = "multi_thread")]
async fn child_leader_writing_in_a_loop() {
    let Ok(kubeconfig) = std::env::var(CHILD_KUBECONFIG) else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let kube_config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(kube_config.clone()).unwrap();
    let leadership = acquire_on_own_thread(kube_config, config("pod-old"))
        .await
        .unwrap();
    // As the operator binaries do, right after acquiring.
    leadership.fence_process();
    println!("leading");
    let maps = Api::<ConfigMap>::namespaced(client, NS);
    // The reconcile loop: its own leadership check, its reads, its write; it stops (as the
    // operators do) once the renewals noticed the loss.
    for n in 1u64.. {
        if leadership.is_lost() {
            break;
        }
        tokio::time::sleep(READS).await;
        let patch = serde_json::json!({"data": {"n": n.to_string()}});
        failpoint::around(
            "cluster.status",
            maps.patch(COUNTER, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        .unwrap();
        println!("wrote {n}");
    }
    println!("lost leadership");
    std::process::exit(1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_leader_resumed_after_a_takeover_writes_nothing() {
    let (lk, client) = common::api_server().await;
    common::create_namespace(&client, NS).await;
    let maps = Api::<ConfigMap>::namespaced(client.clone(), NS);
    let map: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": COUNTER}, "data": {"n": "0"}
    }))
    .unwrap();
    maps.create(&PostParams::default(), &map).await.unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_leader_writing_in_a_loop", "--exact", "--nocapture"])
        .env(CHILD_KUBECONFIG, lk.kubeconfig())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut output = Vec::new();
    let mut read_until = |wanted: &dyn Fn(&str) -> bool, within: Duration| {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = wanted(&line);
                    output.push(line);
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    };
    assert!(
        read_until(&|l| l == "wrote 3", Duration::from_secs(60)),
        "the child never led and wrote"
    );

    // Paused while it leads and writes; the Lease expires meanwhile and another holder takes
    // it (`acquire` waits for the expiry).
    signal(&pid, "STOP");
    let paused = Instant::now();
    let new_holder = acquire(client.clone(), config("pod-new")).await.unwrap();
    // Its last write before the pause was answered long ago (the Lease had to expire first).
    let at_takeover = counter(&client).await;
    eprintln!(
        "pod-new took the Lease {:.1?} after the pause; counter {at_takeover}",
        paused.elapsed()
    );
    signal(&pid, "CONT");
    let exited = wait_exit(&mut child, Duration::from_secs(20));
    read_until(&|_| false, Duration::from_millis(200));
    let after = counter(&client).await;
    let output = output.join("\n");
    assert_eq!(
        after, at_takeover,
        "the stale leader wrote after pod-new took the Lease: counter {at_takeover} -> {after}; \
         its output:\n{output}"
    );
    assert_eq!(exited, Some(1), "the child's exit; its output:\n{output}");
    new_holder.release().await;
}

fn signal(pid: &str, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// The child's exit code once it exits within `within` (killed otherwise).
fn wait_exit(child: &mut std::process::Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
