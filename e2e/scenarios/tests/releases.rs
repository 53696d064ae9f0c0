//! Several installs of the chart in one Kubernetes, as a platform team runs them: two releases
//! with namespaced RBAC, each confined to its own namespace, run side by side (each converges its
//! cluster and ignores the other's and a third namespace's); a third, cluster-wide release that
//! overlaps both takes only the namespace nobody manages and reports `OverlappingInstall` on the
//! clusters it leaves alone (namespace claims, operator-runtime's claim.rs); and the aggregated
//! roles let a namespace admin create EtcdClusters and a viewer only read them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Env, cluster_yaml, workspace};
use etcd_api::EtcdCluster;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

const VERSION: &str = "3.6.16";
const STEP: Duration = Duration::from_secs(180);

fn install(env: &Env, release: &str, namespace: &str, values: &[&str]) {
    let chart = workspace().join("charts/etcd-operator");
    let mut args = vec![
        "install",
        release,
        chart.to_str().unwrap(),
        "--namespace",
        namespace,
        "--create-namespace",
        "--wait",
        "--timeout",
        "180s",
        "--set",
        "logging.format=text",
    ];
    args.extend(values.iter().flat_map(|v| ["--set", v]));
    if let Err(e) = env.lk.helm(&env.kc, &args) {
        panic!("helm install {release} failed: {e}\n{}", env.diagnostics());
    }
}

/// The values confining every operator of a release to `namespace`.
fn confined_to(namespace: &str) -> Vec<String> {
    ["clusterOperator", "backupOperator", "restoreOperator"]
        .iter()
        .map(|op| format!("{op}.watchNamespace={namespace}"))
        .chain(["rbac.scope=namespaced".to_owned()])
        .collect()
}

async fn wait_available(env: &Env, namespace: &str) -> EtcdCluster {
    let api: Api<EtcdCluster> = Api::namespaced(env.client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        if let Ok(c) = api.get("main").await {
            let status = c.status.clone().unwrap_or_default();
            let available = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True");
            if available && status.ready_members == 1 {
                return c;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{namespace}/main not Available after {STEP:?}\n{}",
            env.diagnostics()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn member_pods(env: &Env, namespace: &str) -> Vec<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    let mut out: Vec<(String, String)> = pods
        .list(&ListParams::default().labels("etcd.operator.rs/cluster"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// `kubectl auth can-i VERB RESOURCE -n NAMESPACE --as USER` (it answers "no" with exit status 1).
fn can_i(env: &Env, user: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    let args = [
        "auth", "can-i", verb, resource, "-n", namespace, "--as", user,
    ];
    match env.lk.kubectl(&env.kc, &args) {
        Ok(out) => out.trim() == "yes",
        Err(e) if e.to_string().contains("exit status: 1") => false,
        Err(e) => panic!("kubectl {args:?}: {e}"),
    }
}

const CLUSTERS: &str = "etcdclusters.etcd.operator.rs";

#[tokio::test(flavor = "multi_thread")]
async fn releases_side_by_side_and_an_overlapping_install_stands_back() {
    let env = Env::start_without_chart().await;
    for ns in ["team-a", "team-b", "team-c"] {
        env.kubectl(&["create", "namespace", ns]);
    }
    // Release a installs the CRDs; b and c share them.
    let a = confined_to("team-a");
    let mut b = confined_to("team-b");
    b.push("crds.enabled=false".into());
    install(
        &env,
        "a",
        "ops-a",
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    install(
        &env,
        "b",
        "ops-b",
        &b.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for ns in ["team-a", "team-b", "team-c"] {
        env.lk
            .kubectl_stdin(
                &env.kc,
                &["apply", "-n", ns],
                &cluster_yaml("main", 1, VERSION),
            )
            .unwrap();
    }
    wait_available(&env, "team-a").await;
    wait_available(&env, "team-b").await;
    let team_a_members = member_pods(&env, "team-a").await;
    assert_eq!(team_a_members.len(), 1, "{team_a_members:?}");

    // Nobody watches team-c yet: its cluster has no status and no member.
    let team_c: Api<EtcdCluster> = Api::namespaced(env.client.clone(), "team-c");
    assert!(team_c.get("main").await.unwrap().status.is_none());
    assert!(member_pods(&env, "team-c").await.is_empty());
    // Namespaced RBAC: release a's cluster operator may not touch team-b (or team-c).
    let account = "system:serviceaccount:ops-a:a-etcd-operator-cluster";
    for (ns, allowed) in [("team-a", true), ("team-b", false), ("team-c", false)] {
        assert_eq!(
            can_i(&env, account, "create", "pods", ns),
            allowed,
            "{account} create pods in {ns}"
        );
    }

    // Release c watches every namespace: it takes team-c, and leaves team-a and team-b to the
    // installs that claimed them, saying so on their clusters.
    install(&env, "c", "ops-c", &["crds.enabled=false"]);
    wait_available(&env, "team-c").await;
    for (ns, holder) in [
        ("team-a", "ops-a/a-etcd-operator-cluster"),
        ("team-b", "ops-b/b-etcd-operator-cluster"),
    ] {
        let events: Api<Event> = Api::namespaced(env.client.clone(), ns);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let note = loop {
            let found = events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("OverlappingInstall"))
                .and_then(|e| e.note);
            if let Some(note) = found {
                break note;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no OverlappingInstall event in {ns}\n{}",
                env.diagnostics()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(
            note.contains(holder) && note.contains("ops-c/c-etcd-operator-cluster"),
            "{note}"
        );
    }
    // ... and did not act there: the same member Pod, still Available.
    assert_eq!(member_pods(&env, "team-a").await, team_a_members);
    wait_available(&env, "team-a").await;

    // Aggregated roles: an admin of team-a may create EtcdClusters there (not in team-b), a
    // viewer may only read them. Aggregation is asynchronous (kube-controller-manager).
    env.kubectl(&[
        "create",
        "rolebinding",
        "jane-admin",
        "--clusterrole=admin",
        "--user=jane",
        "-n",
        "team-a",
    ]);
    env.kubectl(&[
        "create",
        "rolebinding",
        "joe-view",
        "--clusterrole=view",
        "--user=joe",
        "-n",
        "team-a",
    ]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !(can_i(&env, "jane", "create", CLUSTERS, "team-a")
        && can_i(&env, "joe", "get", CLUSTERS, "team-a"))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the admin and view roles never gained the etcd kinds"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!can_i(&env, "jane", "create", CLUSTERS, "team-b"));
    assert!(!can_i(&env, "joe", "create", CLUSTERS, "team-a"));
    env.lk
        .kubectl_stdin(
            &env.kc,
            &[
                "create",
                "--dry-run=server",
                "-n",
                "team-a",
                "--as",
                "jane",
                "-f",
                "-",
            ],
            &cluster_yaml("second", 1, VERSION),
        )
        .unwrap_or_else(|e| panic!("jane may create an EtcdCluster in team-a: {e}"));
}
