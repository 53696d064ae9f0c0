//! The EtcdCluster lifecycle end to end: the chart installed with helm on the local control
//! plane, the cluster operator running in its Pod, real etcd members in Pods, and concurrent
//! clients whose history must stay linearizable, every acknowledged write surviving each step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

const V34: &str = "3.4.23";
const V35: &str = "3.5.35";
const V36: &str = "3.6.16";
const V37: &str = "3.7.3";

/// Generous for a 2-core machine running several scenarios at once; the usual figure is a
/// fraction (see `make bench`).
const STEP: Duration = Duration::from_secs(240);

#[tokio::test]
async fn create_scale_up_and_down_then_upgrade_without_losing_a_write() {
    let env = Env::start().await;
    // The server is upstream's, at the version e2e/upstream/kubernetes/go.mod pins.
    let version = env.kubectl(&["version"]);
    let pinned = pinned_kubernetes_version();
    assert!(
        version.contains(&format!("Server Version: {pinned}")),
        "{version}"
    );
    // `kubectl get etcd -w` for the whole run: every row keeps the CRD's printer columns.
    let watch_out = env.lk.state_dir().join("get-etcd-w.txt");
    let mut watch = std::process::Command::new(env.kc.kubectl())
        .arg("--kubeconfig")
        .arg(env.lk.kubeconfig())
        .args(["get", "etcd", "-n", NS, "-w"])
        .stdout(std::fs::File::create(&watch_out).unwrap())
        .spawn()
        .unwrap();
    env.apply(&cluster_yaml("main", 3, V34)).unwrap();
    env.wait_available("main", 3, V34, STEP).await;
    let clients = Workload::start(env.client_url("main").await);

    // 3 → 5 → 3, each member added as a learner and promoted, then removed one at a time.
    env.apply(&cluster_yaml("main", 5, V34)).unwrap();
    env.wait_available("main", 5, V34, STEP).await;
    clients.check().await;
    env.apply(&cluster_yaml("main", 3, V34)).unwrap();
    env.wait_available("main", 3, V34, STEP).await;
    clients.check().await;
    // Scale-down keeps the removed members' PVCs (reclaimPolicy Retain, the default).
    let pvcs = env.kubectl(&["get", "pvc", "-n", NS, "-o", "name"]);
    assert_eq!(pvcs.lines().count(), 5, "{pvcs}");

    // 3.4 → 3.5 → 3.6, one minor at a time, one member at a time, the way etcd documents it.
    env.apply(&cluster_yaml("main", 3, V35)).unwrap();
    env.wait_available("main", 3, V35, STEP).await;
    clients.check().await;
    env.apply(&cluster_yaml("main", 3, V36)).unwrap();
    env.wait_available("main", 3, V36, STEP).await;
    let checked = clients.check().await;
    assert!(
        checked > 0,
        "the clients got writes acknowledged during the run"
    );
    clients.stop().await;

    let events = env.events_for("main").await.join("\n");
    for reason in [
        "MemberAdded",
        "LearnerPromoted",
        "MemberRemoved",
        "MemberUpgrading",
    ] {
        assert!(events.contains(reason), "no {reason} event in:\n{events}");
    }
    // kubectl shows the printer columns, on a watch's every row too.
    let table = env.kubectl(&["get", "etcd", "-n", NS]);
    assert!(table.contains("main") && table.contains(V36), "{table}");
    let wide = env.kubectl(&["get", "etcd", "-n", NS, "-o", "wide"]);
    assert!(
        wide.contains("ENDPOINT") && wide.contains(&format!("http://main-client.{NS}.svc:2379")),
        "{wide}"
    );
    // The watch is a stream of its own: the GET above saw the last state first. Let the watch
    // print it too before stopping it (the assertion below says what it printed if it never
    // does).
    let deadline = tokio::time::Instant::now() + STEP;
    while tokio::time::Instant::now() < deadline
        && !std::fs::read_to_string(&watch_out)
            .unwrap()
            .lines()
            .skip(1)
            .any(|r| r.contains(V36) && r.contains("True"))
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let watched = std::fs::read_to_string(&watch_out).unwrap();
    let mut lines = watched.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "SIZE",
            "READY",
            "VERSION",
            "PHASE",
            "AVAILABLE",
            "AGE"
        ],
        "{watched}"
    );
    let rows: Vec<&str> = lines.collect();
    assert!(
        rows.len() > 5,
        "the watch saw the cluster change: {watched}"
    );
    for row in &rows {
        // Size is always set (the status columns are empty before the first status); a row
        // without printer columns is just NAME and AGE.
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert!(
            fields.len() >= 3 && fields[0] == "main" && ["3", "5"].contains(&fields[1]),
            "a watch row lost its columns: {row:?} in\n{watched}"
        );
    }
    assert!(
        rows.iter().any(|r| r.contains(V36) && r.contains("True")),
        "{watched}"
    );
}

/// `k8s.io/kubernetes vX.Y.Z` from the module that builds the control plane.
fn pinned_kubernetes_version() -> String {
    let go_mod = workspace().join("e2e/upstream/kubernetes/go.mod");
    let text = std::fs::read_to_string(&go_mod).unwrap();
    text.lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("require ")
                .unwrap_or(l)
                .strip_prefix("k8s.io/kubernetes ")
        })
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no k8s.io/kubernetes requirement in {}", go_mod.display()))
}

/// 3.5 (latest) → 3.6 (latest), the upgrade users make today: one member at a time, followers
/// first, under concurrent clients, their history linearizable and every acknowledged write kept.
#[tokio::test]
async fn upgrade_3_5_to_3_6_without_losing_a_write() {
    let env = Env::start().await;
    env.apply(&cluster_yaml("up", 3, V35)).unwrap();
    env.wait_available("up", 3, V35, STEP).await;
    let clients = Workload::start(env.client_url("up").await);
    clients.check().await;
    // Meanwhile a cluster is created on the newest minor (3.7), alongside.
    env.apply(&cluster_yaml("seven", 1, V37)).unwrap();
    env.apply(&cluster_yaml("up", 3, V36)).unwrap();
    env.wait_available("up", 3, V36, STEP).await;
    let checked = clients.check().await;
    assert!(
        checked > 0,
        "the clients got writes acknowledged during the run"
    );
    let events = env.events_for("up").await.join("\n");
    let upgrades = events.matches("from etcd 3.5.35 to 3.6.16").count();
    assert_eq!(upgrades, 3, "each member upgraded once:\n{events}");
    // Each member took a v2 snapshot on 3.5 before it moved (etcd's 3.5 -> 3.6 guide).
    let snapshots = events.matches("saved a v2 snapshot").count();
    assert_eq!(snapshots, 3, "each member snapshotted once:\n{events}");
    env.wait_available("seven", 1, V37, STEP).await;

    // reclaimPolicy Retain → Delete with 3 → 2: the members' PVCs get the cluster as their owner
    // (so they go with it), and the removed member's PVC is deleted once it left cleanly.
    let delete_policy = cluster_yaml("up", 2, V36).replace(
        "storage: {size: 1Gi}",
        "storage: {size: 1Gi, reclaimPolicy: Delete}",
    );
    env.apply(&delete_policy).unwrap();
    env.wait_available("up", 2, V36, STEP).await;
    clients.check().await;
    let members: Vec<String> = env
        .clusters()
        .get("up")
        .await
        .unwrap()
        .status
        .unwrap()
        .members
        .into_iter()
        .map(|m| m.name)
        .collect();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut list = pvcs.list(&Default::default()).await.unwrap().items;
        list.retain(|p| p.name_any().starts_with("up-")); // not the 3.7 cluster's
        let names: Vec<String> = list.iter().map(|p| p.name_any()).collect();
        let owned = list.iter().all(|p| {
            p.owner_references()
                .iter()
                .any(|o| o.kind == "EtcdCluster" && o.name == "up")
        });
        if names.len() == 2 && owned {
            assert!(
                names.iter().all(|n| members.contains(n)),
                "the PVCs left are the members': {names:?} vs {members:?}"
            );
            break;
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                &env,
                &format!(
                    "after 3 → 2 under reclaimPolicy Delete, PVCs {names:?} (all owned by the cluster: {owned})"
                ),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    clients.stop().await;
}

/// Issue 21: a change of `spec.etcdOptions` and `spec.pod` reaches the running members. Each
/// member is restarted once, one at a time (never two out of the client Service), keeps its
/// data, and comes back with the new flag and the new configuration hash, while every
/// acknowledged write survives.
///
/// The namespace enforces the `restricted` Pod Security level (the API server's PodSecurity
/// admission refuses a root Pod there, checked first): the member Pods, non-root with the
/// operator's security defaults, are admitted, run and write their data volumes.
#[tokio::test]
async fn configuration_change_rolls_members_one_at_a_time_without_losing_a_write() {
    const HASH: &str = "etcd.operator.rs/config-hash";
    let env = Env::start().await;
    env.kubectl(&[
        "label",
        "namespace",
        NS,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    ]);
    let refused = env
        .try_kubectl(&[
            "run",
            "root",
            "-n",
            NS,
            "--image=busybox",
            "--restart=Never",
            "--dry-run=server",
            "--",
            "true",
        ])
        .expect_err("a root Pod is refused in a restricted namespace");
    assert!(refused.contains("violates PodSecurity"), "{refused}");
    // A class that allows expansion (the harness' host-path provisioner: the API server accepts
    // the larger request, nothing resizes the directory), so the volumes grow with the change.
    env.lk
        .kubectl_stdin(
            &env.kc,
            &["apply", "-f", "-"],
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: expandable}\n\
             provisioner: kubernetes.io/host-path\nvolumeBindingMode: Immediate\n\
             allowVolumeExpansion: true\n",
        )
        .unwrap();
    let cfg = || {
        cluster_yaml("cfg", 3, V35).replace(
            "storage: {size: 1Gi}",
            "storage: {size: 1Gi, storageClassName: expandable}",
        )
    };
    env.apply(&cfg()).unwrap();
    env.wait_available("cfg", 3, V35, STEP).await;
    let clients = Workload::start(env.client_url("cfg").await);
    clients.check().await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let member_pods = || async {
        let params = ListParams::default().labels("etcd.operator.rs/cluster=cfg");
        pods.list(&params).await.unwrap().items
    };
    let before: Vec<String> = member_pods()
        .await
        .iter()
        .map(|p| p.annotations().get(HASH).cloned().unwrap_or_default())
        .collect();
    assert_eq!(before.len(), 3);
    assert!(
        before.iter().all(|h| !h.is_empty() && *h == before[0]),
        "{before:?}"
    );
    // Each member Pod has the serving readiness gate, opened by the operator (else no Pod
    // would be Ready: the cluster is Available above).
    for pod in member_pods().await {
        let gates = pod.spec.as_ref().unwrap().readiness_gates.clone();
        assert_eq!(
            gates.unwrap_or_default()[0].condition_type,
            SERVING,
            "{}",
            pod.name_any()
        );
        assert_eq!(serving(&pod), Some("True"), "{}", pod.name_any());
    }

    // New flags, labels, resources and larger volumes at once: the volumes grow first, then the
    // members roll onto the flags, the resources and the quota derived from the new size.
    // The 16 MiB quota and compactOnNoSpace serve the NOSPACE part at the end (the same roll
    // applies the quota: no second roll).
    let changed = cfg().replace("size: 1Gi", "size: 2Gi")
        + "  etcdOptions: {snapshotCount: 5000, quotaBackendBytes: 16777216}\n  \
           pod: {labels: {team: storage}, resources: {requests: {cpu: 50m, memory: 96Mi}}}\n  \
           maintenance: {compactOnNoSpace: true}\n";
    env.apply(&changed).unwrap();
    // Watch the roll: at every moment at most one member is out of the client Service (its Pod
    // missing, stopping or not Ready), until all three run the new configuration.
    let deadline = tokio::time::Instant::now() + STEP;
    let mut saw_progress = false;
    loop {
        let list = member_pods().await;
        let ready = list
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_is_ready(p))
            .count();
        assert!(
            ready >= 2,
            "two members down at once:\n{}",
            env.diagnostics()
        );
        let rolled = list.iter().filter(|p| {
            let hash = p.annotations().get(HASH);
            hash.is_some_and(|h| *h != before[0])
                && p.labels().get("team").map(String::as_str) == Some("storage")
                && p.spec.as_ref().unwrap().containers[0]
                    .args
                    .as_ref()
                    .unwrap()
                    .contains(&"--snapshot-count=5000".to_owned())
                && p.spec.as_ref().unwrap().containers[0]
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("memory"))
                    .is_some_and(|q| q.0 == "96Mi")
        });
        if rolled.count() == 3 && ready == 3 {
            break;
        }
        if let Some(status) = env.clusters().get("cfg").await.unwrap().status {
            saw_progress |= status.conditions.iter().any(|c| {
                c.type_ == "Progressing"
                    && c.reason == "RollingConfiguration"
                    && c.message.contains("members run the current configuration")
            });
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                &env,
                "the configuration change did not reach all three members",
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    env.wait_available("cfg", 3, V35, STEP).await;
    let converged = env
        .wait_status("cfg", "Progressing Converged", STEP, |c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Progressing" && c.reason == "Converged")
            })
        })
        .await;
    assert!(converged.status.is_some());
    assert!(
        saw_progress,
        "status never reported RollingConfiguration with a count"
    );
    let checked = clients.check().await;
    assert!(
        checked > 0,
        "the clients got writes acknowledged during the roll"
    );
    let events = env.events_for("cfg").await;
    let rolled = events
        .iter()
        .filter(|e| e.starts_with("MemberRolled:"))
        .count();
    assert_eq!(rolled, 3, "each member rolled once:\n{}", events.join("\n"));
    // Rolled, not replaced: no member was removed from etcd, each restarted on its own data.
    assert!(
        !events.iter().any(|e| e.starts_with("MemberRemoved:")),
        "{}",
        events.join("\n")
    );
    let hashes: Vec<String> = member_pods()
        .await
        .iter()
        .map(|p| p.annotations().get(HASH).cloned().unwrap_or_default())
        .collect();
    assert!(
        hashes.iter().all(|h| *h == hashes[0] && *h != before[0]),
        "{hashes:?}"
    );
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    let requests: Vec<String> = pvcs
        .list(&ListParams::default().labels("etcd.operator.rs/cluster=cfg"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .resources
                .as_ref()
                .unwrap()
                .requests
                .as_ref()
                .unwrap()["storage"]
                .0
                .clone()
        })
        .collect();
    assert_eq!(requests, vec!["2Gi"; 3], "every member volume asks for 2Gi");
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("ExpandingVolumes:"))
            .count(),
        3, // one series per member (its Pod is the event's related object)
        "{}",
        events.join("\n")
    );
    // A Pod without the hash (as an operator release before hashes built it) is adopted: the
    // hash is recorded on it, the same Pod keeps running (no restart).
    let adopted = member_pods().await.remove(0);
    let adopted_name = adopted.name_any();
    env.kubectl(&[
        "annotate",
        "pod",
        "-n",
        NS,
        &adopted_name,
        &format!("{HASH}-"),
    ]);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let pod = pods.get(&adopted_name).await.unwrap();
        if pod.annotations().get(HASH) == Some(&hashes[0]) {
            assert_eq!(pod.uid(), adopted.uid(), "the adopted Pod was re-created");
            let restarts = |p: &Pod| {
                p.status
                    .as_ref()
                    .unwrap()
                    .container_statuses
                    .as_ref()
                    .unwrap()[0]
                    .restart_count
            };
            assert_eq!(
                restarts(&pod),
                restarts(&adopted),
                "the adopted Pod restarted"
            );
            break;
        }
        if tokio::time::Instant::now() > deadline {
            fail(&env, "the hash was not recorded on the adopted Pod");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The event follows the Pod patch (a separate write): poll for it rather than read once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let events = env.events_for("cfg").await;
        if events
            .iter()
            .any(|e| e.starts_with("MemberPodAdopted:") && e.contains(&adopted_name))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no MemberPodAdopted event for {adopted_name} 20 s after its hash was recorded:\n{}",
            events.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // NOSPACE end to end, the clients still running: fill the 16 MiB quota with history (one
    // key overwritten with 512 KiB values) until etcd refuses writes; the operator compacts
    // (compactOnNoSpace), defragments each member drained from the client Service, disarms.
    let nospace_started = std::time::Instant::now();
    let drains = DrainWatch::start(env.client.clone(), "cfg");
    let url = env.client_url("cfg").await;
    let refusal = fill_until_no_space(&env, &url).await;
    assert!(refusal.contains("database space exceeded"), "{refusal}");
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let events = env.events_for("cfg").await;
        if events.iter().any(|e| e.starts_with("NoSpaceDisarmed:")) {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            fail(&env, "the operator did not disarm the NOSPACE alarm");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Writes succeed again (the alarm is cluster-wide: any member may take this one).
    let mut client = etcd_client::Client::connect([url.as_str()], None)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Err(e) = client.put("after-nospace", "ok", None).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "writes still refused after the disarm: {e}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let status = client.status().await.unwrap();
    assert!(
        status.db_size() < 8 << 20,
        "the database file did not shrink: {} bytes",
        status.db_size()
    );
    eprintln!(
        "NOSPACE filled, cleared and writable again in {:?}",
        nospace_started.elapsed()
    );
    let events = env.events_for("cfg").await;
    let all = events.join("\n");
    assert!(events.iter().any(|e| e.starts_with("Compacting:")), "{all}");
    // Each member defragmented under NOSPACE, drained from the client Service meanwhile.
    let members: std::collections::BTreeSet<String> =
        member_pods().await.iter().map(|p| p.name_any()).collect();
    let seen = drains
        .stop_when(STEP, |seen| {
            seen.drained == members && seen.out_of_service == members
        })
        .await;
    for member in &members {
        assert!(
            events.iter().any(|e| e.starts_with("Defragmenting:")
                && e.contains(&format!("member {member} "))
                && e.contains("NOSPACE")
                && e.contains("drained from the client Service")),
            "no drained defragmentation of {member}:\n{all}"
        );
    }
    // Each member was seen not Ready with its gate closed, and out of the client Service's
    // endpoints, while it defragmented; never two members at once.
    assert_eq!(seen.drained, members, "{seen:?}");
    assert_eq!(seen.out_of_service, members, "{seen:?}");
    assert!(seen.two_unready.is_none(), "{seen:?}");
    let report = clients.stop().await;
    // Writes refused with NOSPACE were recorded as maybe applied (etcd applies those that
    // crossed the quota before the alarm and answers NOSPACE all the same).
    let refused = report
        .history
        .ops
        .iter()
        .filter(|o| {
            matches!(&o.outcome, e2e_harness::history::Outcome::Unknown(why)
                if e2e_harness::kv_workload::refused_for_no_space(why))
        })
        .count();
    assert!(refused > 0, "the clients saw no NOSPACE refusal");
}

/// The member Pods' readiness gate (etcd-member's `build::SERVING_CONDITION`).
const SERVING: &str = "etcd.operator.rs/serving";

/// The status of a Pod's serving condition.
fn serving(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == SERVING)
        .map(|c| c.status.as_str())
}

/// Overwrites one key with 512 KiB values through `url` until etcd refuses with NOSPACE;
/// returns the refusal.
async fn fill_until_no_space(env: &Env, url: &str) -> String {
    let value = vec![b'x'; 512 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut client: Option<etcd_client::Client> = None;
    loop {
        if tokio::time::Instant::now() > deadline {
            fail(env, "no NOSPACE after 120 s of writes");
        }
        if client.is_none() {
            client = etcd_client::Client::connect([url], None).await.ok();
        }
        if let Some(c) = client.as_mut() {
            match c.put("fill", value.clone(), None).await {
                Ok(_) => continue,
                Err(e) if e.to_string().contains("database space exceeded") => {
                    return e.to_string();
                }
                Err(_) => client = None,
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What [`DrainWatch`] saw of the member Pods and the client Service's endpoints.
#[derive(Clone, Debug, Default)]
struct Drains {
    /// Pods seen with their serving gate closed and not Ready.
    drained: std::collections::BTreeSet<String>,
    /// Pods seen with their gate closed while the client Service's EndpointSlices did not
    /// route to them (their endpoint not ready, or gone).
    out_of_service: std::collections::BTreeSet<String>,
    /// A moment two member Pods were not Ready at once.
    two_unready: Option<String>,
}

/// Watches the member Pods and the client Service's EndpointSlices and judges every state the
/// API server reports, one event at a time. Sampling (a list every 100 ms) missed drains: the
/// defragmentation of a small database is over in milliseconds, and one member's drain fell
/// between two samples in a fresh-clone run (`drained: {"cfg-0", "cfg-2"}`). A watch delivers
/// each version of a Pod, so the Pod's gate-closed-and-not-Ready version is always seen; the
/// EndpointSlice that drops the Pod comes before the operator defragments (it waits for the
/// drain) and so before the gate opens again.
struct DrainWatch {
    stop: tokio::sync::watch::Sender<bool>,
    /// What the task has judged so far, after each event.
    progress: tokio::sync::watch::Receiver<Drains>,
    task: tokio::task::JoinHandle<Drains>,
}

/// The latest Pods and EndpointSlices a [`DrainWatch`] has seen, by name.
#[derive(Default)]
struct DrainView {
    pods: std::collections::BTreeMap<String, Pod>,
    slices: std::collections::BTreeMap<String, k8s_openapi::api::discovery::v1::EndpointSlice>,
}

impl DrainView {
    /// Records into `seen` what the current view shows.
    fn judge(&self, seen: &mut Drains) {
        let live: Vec<&Pod> = self
            .pods
            .values()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let unready: Vec<String> = live
            .iter()
            .filter(|p| !pod_is_ready(p))
            .map(|p| p.name_any())
            .collect();
        if unready.len() >= 2 && seen.two_unready.is_none() {
            seen.two_unready = Some(format!("{unready:?}"));
        }
        for pod in live.iter().filter(|p| serving(p) == Some("False")) {
            let name = pod.name_any();
            if !pod_is_ready(pod) {
                seen.drained.insert(name.clone());
            }
            let routed = self.slices.values().flat_map(|s| &s.endpoints).any(|e| {
                e.target_ref
                    .as_ref()
                    .is_some_and(|t| t.name.as_deref() == Some(name.as_str()))
                    && e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
            });
            if !routed {
                seen.out_of_service.insert(name);
            }
        }
    }
}

impl DrainWatch {
    fn start(client: kube::Client, cluster: &str) -> DrainWatch {
        use futures_util::StreamExt;
        use k8s_openapi::api::discovery::v1::EndpointSlice;
        use kube::runtime::watcher;
        let pods = watcher(
            Api::<Pod>::namespaced(client.clone(), NS),
            watcher::Config::default().labels(&format!("etcd.operator.rs/cluster={cluster}")),
        )
        .map(|e| e.map(|e| Change::of(e, |p| Either::Pod(Box::new(p)))));
        let slices = watcher(
            Api::<EndpointSlice>::namespaced(client, NS),
            watcher::Config::default()
                .labels(&format!("kubernetes.io/service-name={cluster}-client")),
        )
        .map(|e| e.map(|e| Change::of(e, |s| Either::Slice(Box::new(s)))));
        let mut events = futures_util::stream::select(pods.boxed(), slices.boxed());
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (progress_tx, progress) = tokio::sync::watch::channel(Drains::default());
        let task = tokio::spawn(async move {
            let mut seen = Drains::default();
            let mut view = DrainView::default();
            loop {
                let event = tokio::select! {
                    event = events.next() => event,
                    _ = stopped.changed() => break,
                };
                // A watch error is retried by the watcher on the next poll (its own back-off).
                let Some(Ok(event)) = event else { continue };
                match event {
                    Change::Put(Either::Pod(p)) => {
                        view.pods.insert(p.name_any(), *p);
                    }
                    Change::Put(Either::Slice(s)) => {
                        view.slices.insert(s.name_any(), *s);
                    }
                    Change::Gone(Either::Pod(p)) => {
                        view.pods.remove(&p.name_any());
                    }
                    Change::Gone(Either::Slice(s)) => {
                        view.slices.remove(&s.name_any());
                    }
                    Change::Relist => continue,
                }
                view.judge(&mut seen);
                progress_tx.send_replace(seen.clone());
            }
            seen
        });
        DrainWatch {
            stop,
            progress,
            task,
        }
    }

    /// Stops the watch once what it saw satisfies `enough`, or after `within` (then the
    /// caller's assertions say what is missing). The watches are streams of their own, behind
    /// the reads that told the test the drains are over: stopped at once, they could end
    /// before delivering the last member's drain.
    async fn stop_when(mut self, within: Duration, enough: impl Fn(&Drains) -> bool) -> Drains {
        let _ = tokio::time::timeout(within, self.progress.wait_for(|seen| enough(seen))).await;
        let _ = self.stop.send(true);
        self.task.await.unwrap()
    }
}

/// An object from one of [`DrainWatch`]'s two watches.
enum Either {
    Pod(Box<Pod>),
    Slice(Box<k8s_openapi::api::discovery::v1::EndpointSlice>),
}

/// A watch event of either kind.
enum Change {
    Put(Either),
    Gone(Either),
    /// The watch (re)started its list: the objects follow as [`Change::Put`].
    Relist,
}

impl Change {
    fn of<K>(event: kube::runtime::watcher::Event<K>, either: fn(K) -> Either) -> Change {
        use kube::runtime::watcher::Event;
        match event {
            Event::Apply(o) | Event::InitApply(o) => Change::Put(either(o)),
            Event::Delete(o) => Change::Gone(either(o)),
            Event::Init | Event::InitDone => Change::Relist,
        }
    }
}

/// How soon a client Service or budget deleted by hand must be back: at the pass its deletion
/// triggers, not at the operator's 10-minute re-apply.
const REAPPLIED_WITHIN: Duration = Duration::from_secs(120);

#[tokio::test]
async fn killed_member_deleted_member_and_restarted_operator_are_repaired() {
    let env = Env::start().await;
    env.apply(&cluster_yaml("repair", 3, V36)).unwrap();
    env.wait_available("repair", 3, V36, STEP).await;

    // The client Service and the budget deleted by hand come back at the pass their deletion
    // triggers (they are watched), not at the 10-minute re-apply.
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(env.client.clone(), NS);
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(env.client.clone(), NS);
    let service_uid = services.get("repair-client").await.unwrap().uid();
    let budget_uid = budgets.get("repair").await.unwrap().uid();
    env.kubectl(&["delete", "service", "repair-client", "-n", NS]);
    env.kubectl(&["delete", "poddisruptionbudget", "repair", "-n", NS]);
    let deleted = tokio::time::Instant::now();
    loop {
        let service = services.get_opt("repair-client").await.unwrap();
        let budget = budgets.get_opt("repair").await.unwrap();
        if service.is_some_and(|s| s.uid() != service_uid)
            && budget.is_some_and(|b| b.uid() != budget_uid)
        {
            break;
        }
        // What tells the watched pass from the 10-minute re-apply; a pass under CI load can
        // take tens of seconds, so the bound is far above that and far below 10 minutes.
        assert!(
            deleted.elapsed() < REAPPLIED_WITHIN,
            "the client Service and the budget deleted by hand were not applied again within \
             {REAPPLIED_WITHIN:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "client Service and budget deleted by hand: back after {:.1} s",
        deleted.elapsed().as_secs_f64()
    );
    let clients = Workload::start(env.client_url("repair").await);
    let uid = env
        .clusters()
        .get("repair")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();

    // A crashed etcd process: the kubelet restarts it (a first exit at once, as kubelet does, so
    // the operator may never see it unhealthy) and it rejoins with its data as the same member.
    let member_id = |status: &etcd_api::EtcdClusterStatus| {
        status
            .members
            .iter()
            .find(|m| m.name == "repair-1")
            .and_then(|m| m.id.clone())
    };
    let before = member_id(&env.clusters().get("repair").await.unwrap().status.unwrap());
    assert!(before.is_some(), "repair-1 has a member ID");
    kill_member_process("repair-1", &uid);
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let restarts = pods
            .get("repair-1")
            .await
            .ok()
            .and_then(|p| p.status)
            .and_then(|s| s.container_statuses)
            .and_then(|cs| cs.first().map(|c| c.restart_count))
            .unwrap_or(0);
        if restarts >= 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "repair-1 was not restarted after its etcd was killed\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    env.wait_available("repair", 3, V36, STEP).await;
    let after = member_id(&env.clusters().get("repair").await.unwrap().status.unwrap());
    assert_eq!(after, before, "repair-1 rejoined as the same etcd member");
    clients.check().await;

    // A member whose Pod and data are gone is removed and replaced by a new member (a new etcd
    // member ID; the name is reused only once nothing of the old member is left).
    let status = env.clusters().get("repair").await.unwrap().status.unwrap();
    let old_id = status
        .members
        .iter()
        .find(|m| m.name == "repair-2")
        .and_then(|m| m.id.clone())
        .unwrap();
    env.kubectl(&["delete", "pvc", "repair-2", "-n", NS, "--wait=false"]);
    env.kubectl(&["delete", "pod", "repair-2", "-n", NS, "--wait=false"]);
    env.wait_status("repair", "the member without data removed", STEP, |c| {
        c.status.as_ref().is_some_and(|s| {
            !s.members
                .iter()
                .any(|m| m.id.as_deref() == Some(old_id.as_str()))
        })
    })
    .await;
    env.wait_available("repair", 3, V36, STEP).await;
    clients.check().await;
    let events = env.events_for("repair").await.join("\n");
    assert!(events.contains("MemberRemoved"), "{events}");

    // The operator restarted mid-scale converges: delete its Pod right after asking for 5.
    env.apply(&cluster_yaml("repair", 5, V36)).unwrap();
    env.wait_status("repair", "a fourth member", STEP, |c| {
        c.status.as_ref().is_some_and(|s| s.members.len() >= 4)
    })
    .await;
    env.kubectl(&[
        "delete",
        "pod",
        "-n",
        OPERATOR_NAMESPACE,
        "-l",
        "app.kubernetes.io/component=cluster-operator",
    ]);
    env.wait_available("repair", 5, V36, STEP).await;
    clients.check().await;
    clients.stop().await;
}

#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_touched() {
    let env = Env::start().await;

    // The chart aggregates the etcd kinds into the default roles: a namespace editor may create
    // an EtcdCluster there (the API server's own authorization, through impersonation), a
    // viewer may read but not create, a stranger neither.
    env.kubectl(&[
        "create",
        "rolebinding",
        "alice-edits",
        "--clusterrole=edit",
        "--user=alice",
        "-n",
        NS,
    ]);
    env.kubectl(&[
        "create",
        "rolebinding",
        "victor-views",
        "--clusterrole=view",
        "--user=victor",
        "-n",
        NS,
    ]);
    // `auth can-i` prints yes (exit 0) or no (exit 1).
    let can = |user: &str, verb: &str| {
        let resource = "etcdclusters.etcd.operator.rs";
        match env.try_kubectl(&["auth", "can-i", verb, resource, "-n", NS, "--as", user]) {
            Ok(out) => out.trim() == "yes",
            Err(_) => false,
        }
    };
    // The aggregation controller (kube-controller-manager) fills the default roles shortly.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !can("alice", "create") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(can("alice", "create"), "an editor may create EtcdClusters");
    assert!(can("victor", "list"), "a viewer may list EtcdClusters");
    assert!(
        !can("victor", "create"),
        "a viewer may not create EtcdClusters"
    );
    assert!(
        !can("mallory", "list"),
        "a stranger may not list EtcdClusters"
    );

    // What the schema can say, it says: kubectl names the field.
    let too_big = env.apply(&cluster_yaml("big", 9, V35)).unwrap_err();
    assert!(too_big.contains("spec.size"), "{too_big}");
    let malformed = env.apply(&cluster_yaml("bad", 3, "3.5")).unwrap_err();
    assert!(malformed.contains("spec.version"), "{malformed}");
    let long = "a".repeat(51);
    let too_long = env.apply(&cluster_yaml(&long, 3, V35)).unwrap_err();
    assert!(too_long.contains("metadata.name"), "{too_long}");

    // What needs knowledge of etcd is a condition and an event naming the field; no Pod is made.
    env.apply(&cluster_yaml("future", 3, "3.9.0")).unwrap();
    let refused = env
        .wait_status("future", "Degraded InvalidSpec", STEP, |c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Degraded"
                        && c.status == "True"
                        && c.message.contains("spec.version")
                })
            })
        })
        .await;
    assert_eq!(refused.status.unwrap().members.len(), 0);
    let pods = env.kubectl(&["get", "pods", "-n", NS, "-o", "name"]);
    assert!(!pods.contains("future"), "{pods}");
    // The event follows the status (see wait_events).
    env.wait_events("future", "naming spec.version", STEP, |events| {
        events.iter().any(|e| e.contains("spec.version"))
    })
    .await;

    // etcd 3.5.0-3.5.2 are refused by name (the data inconsistency bug fixed in 3.5.3).
    env.apply(&cluster_yaml("old", 1, "3.5.1")).unwrap();
    env.wait_status("old", "3.5.1 refused", STEP, |c| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Degraded"
                    && c.status == "True"
                    && c.message.contains("spec.version: etcd 3.5.1 is refused")
                    && c.message.contains("fixed in 3.5.3")
            })
        })
    })
    .await;
    let pods = env.kubectl(&["get", "pods", "-n", NS, "-o", "name"]);
    assert!(!pods.contains("old-0"), "{pods}");

    // A skipped minor (3.5 → 3.7) and a downgrade (3.5 → 3.4) of a running cluster are refused
    // naming spec.version; the member keeps running, the same Pod on the same version.
    env.apply(&cluster_yaml("live", 1, V35)).unwrap();
    env.wait_available("live", 1, V35, STEP).await;
    let pod_uid = || {
        env.kubectl(&[
            "get",
            "pod",
            "live-0",
            "-n",
            NS,
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    };
    let uid = pod_uid();
    for (version, why) in [
        (V37, "skips a minor version"),
        (V34, "downgrade from 3.5.35"),
    ] {
        env.apply(&cluster_yaml("live", 1, version)).unwrap();
        let refused = env
            .wait_status("live", why, STEP, |c| {
                c.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Degraded"
                            && c.status == "True"
                            && c.message.contains("spec.version")
                            && c.message.contains(why)
                    })
                })
            })
            .await;
        let status = refused.status.unwrap();
        assert_eq!(status.current_version.as_deref(), Some(V35), "{version}");
        assert!(status.members.iter().all(|m| m.healthy), "{status:?}");
        assert_eq!(
            pod_uid(),
            uid,
            "the member's Pod was not touched ({version})"
        );
    }
    // The first refusal's Warning event is there (the second one's may still be on its way:
    // the status is written before the event).
    let events = env.events_for("live").await.join("\n");
    assert!(
        events.contains("InvalidSpec: spec.version: upgrade from 3.5.35 to 3.7.3 skips a minor"),
        "{events}"
    );

    // Volumes cannot shrink: refused, naming the field; the member's PVC keeps its size. (Growth
    // on this class, the harness' default without allowVolumeExpansion, is refused below.)
    let shrink = cluster_yaml("live", 1, V35).replace("size: 1Gi", "size: 512Mi");
    env.apply(&shrink).unwrap();
    env.wait_status("live", "storage shrink refused", STEP, |c| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Degraded"
                    && c.status == "True"
                    && c.message.contains("spec.storage.size")
            })
        })
    })
    .await;
    let size = env.kubectl(&[
        "get",
        "pvc",
        "live-0",
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.resources.requests.storage}",
    ]);
    assert_eq!(size, "1Gi");

    // Growing on a class without allowVolumeExpansion: reported naming the field and the class;
    // the PVC keeps its request and the member is not rolled onto the larger derived quota.
    let grow = cluster_yaml("live", 1, V35).replace("size: 1Gi", "size: 2Gi");
    env.apply(&grow).unwrap();
    env.wait_status("live", "growth without expansion reported", STEP, |c| {
        c.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Degraded"
                    && c.reason == "VolumeExpansionNotAllowed"
                    && c.message.contains("spec.storage.size asks for 2Gi")
                    && c.message.contains("StorageClass standard")
            })
        })
    })
    .await;
    let size = env.kubectl(&[
        "get",
        "pvc",
        "live-0",
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.resources.requests.storage}",
    ]);
    assert_eq!(size, "1Gi");
    assert_eq!(pod_uid(), uid, "the member was not rolled");

    // While an EtcdRestore holds a cluster (its annotation, the hand-over contract in
    // etcd-api's restore.rs) the operator reports Restoring and takes no action. (An invalid
    // spec is reported first, whatever holds the cluster: the spec is put right again.)
    env.apply(&cluster_yaml("live", 1, V35)).unwrap();
    env.kubectl(&[
        "annotate",
        "etcd",
        "live",
        "-n",
        NS,
        "etcd.operator.rs/restoring=restore-1",
    ]);
    env.wait_status("live", "phase Restoring", STEP, |c| {
        c.status
            .as_ref()
            .is_some_and(|s| s.phase == Some(etcd_api::ClusterPhase::Restoring))
    })
    .await;
}
