//! The chart's lifecycle end to end, with each helm major (helm 4.3 with kubectl 1.37, helm 3.17
//! with kubectl 1.32), on the local control plane with real etcd members in Pods:
//!
//! 1. `helm install` of the previous chart version (tests/fixtures/etcd-operator-0.1.0.tgz, as
//!    a user has it) with its default values, then examples/cluster-production.yaml applied as
//!    it is: Available with its 5 members, its Pod template (labels, resources, anti-affinity),
//!    etcd options and volume size on the members; a key written.
//! 2. `helm upgrade` to the working chart (charts/etcd-operator, a higher version) with
//!    `-f examples/scheduled-backup.yaml -f tests/fixtures/upgrade-values.yaml`: the release is
//!    the working chart's version; the three operator Deployments roll to the new settings (log
//!    level and format, the dead member grace) and their new Pods log that way; the example's
//!    CronJob appears; the CRDs are the same objects with the working chart's content; the
//!    EtcdCluster is the same object (UID, spec, generation), its member Pods and PVCs are the
//!    same objects (no member restarted), it is still Available and the key reads back; the
//!    upgraded operator still acts (5 → 4 members, every PVC kept).
//! 3. `helm uninstall`: the CRDs (`helm.sh/resource-policy: keep`), the EtcdCluster, its
//!    running member Pods (serving the key) and every PVC remain, the same objects; everything
//!    the release installed otherwise is gone: the operator Deployments and their Pods,
//!    ServiceAccounts, ClusterRoles and bindings, leader-election Roles, the CronJob and its
//!    Role.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};

const RELEASE: &str = "etcd-operator";
/// The previous chart version as released: charts/etcd-operator at bf79453, packaged with
/// `helm package` (how to regenerate it: tests/fixtures/README.md).
const PREVIOUS_CHART: &str = "e2e/scenarios/tests/fixtures/etcd-operator-0.1.0.tgz";
const PREVIOUS_VERSION: &str = "0.1.0";
/// examples/cluster-production.yaml's cluster, size and version.
const CLUSTER: &str = "prod";
const SIZE: usize = 5;
const VERSION: &str = "3.6.16";
/// The chart's operators: `<release>-<suffix>` Deployment, ServiceAccount, ClusterRole(Binding)
/// and leader-election Role, Pods labelled with the component.
const OPERATORS: [(&str, &str); 3] = [
    ("cluster", "cluster-operator"),
    ("backup", "backup-operator"),
    ("restore", "restore-operator"),
];
const CRDS: [&str; 3] = [
    "etcdbackups.etcd.operator.rs",
    "etcdclusters.etcd.operator.rs",
    "etcdrestores.etcd.operator.rs",
];
/// The chart's own label on everything the release renders (its CRDs carry only `part-of`).
const RELEASE_LABEL: &str = "app.kubernetes.io/instance=etcd-operator";
const KEY: &str = "chart/lifecycle";
/// Generous for a 2-core machine; the usual figure is a fraction.
const STEP: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread")]
async fn upgrade_rolls_the_operators_and_uninstall_leaves_every_cluster_and_its_data() {
    for pair in KubePair::ALL {
        lifecycle(pair).await;
    }
}

async fn lifecycle(pair: KubePair) {
    let clock = tokio::time::Instant::now();
    let helm = format!("helm {}", pair.helm_minor());
    let env = start(pair).await;
    let t = || format!("[{helm} {:>5.1?}]", clock.elapsed());

    // 1. Install the previous chart version with its defaults, as a user did then.
    let chart = workspace().join("charts/etcd-operator");
    let previous = workspace().join(PREVIOUS_CHART);
    let version = chart_version(&env, &chart);
    assert_eq!(chart_version(&env, &previous), PREVIOUS_VERSION);
    assert!(
        semver(&version) > semver(PREVIOUS_VERSION),
        "{helm}: the working chart's version {version} must be above the previous release's \
         {PREVIOUS_VERSION} (raise charts/etcd-operator/Chart.yaml's version)"
    );
    helm_ok(
        &env,
        &[
            "install",
            RELEASE,
            previous.to_str().unwrap(),
            "--namespace",
            OPERATOR_NAMESPACE,
            "--create-namespace",
            "--wait",
            "--timeout",
            "180s",
        ],
    );
    env.kubectl(&["create", "namespace", NS]);
    for (suffix, _) in OPERATORS {
        let d = deployment(&env, suffix).await;
        assert_eq!(
            (env_var(&d, "LOG_LEVEL"), env_var(&d, "LOG_FORMAT")),
            (Some("info".into()), Some("json".into())),
            "{helm}: the chart's default logging on {RELEASE}-{suffix}"
        );
    }
    assert_eq!(
        release_chart(&env),
        (1, format!("etcd-operator-{PREVIOUS_VERSION}")),
        "{helm}"
    );
    let crds = crd_uids(&env).await;
    eprintln!(
        "{} installed chart {PREVIOUS_VERSION} with its defaults",
        t()
    );

    // The previous chart runs this build's operators (there are no older binaries here), and
    // they open member Pods' readiness gate (`pods/status`, issue 21), which 0.1.0's RBAC did
    // not grant because its operators had no gate. Granted beside the release until the
    // upgrade, then removed: from there on the working chart's RBAC alone must do. (An operator
    // image run under an older chart's RBAC leaves new members not Ready and reports the
    // refused `pods/status` patch in its Degraded condition: upgrade the chart, not the image.)
    env.apply(&skew_grant()).unwrap();
    // examples/cluster-production.yaml as it is. It runs on localkube's one node unchanged: its
    // anti-affinity is `preferred` (a single node still schedules every member) and localkube's
    // scheduler does not count resource requests.
    let production =
        std::fs::read_to_string(workspace().join("examples/cluster-production.yaml")).unwrap();
    env.apply(&production)
        .unwrap_or_else(|e| panic!("{helm}: applying examples/cluster-production.yaml: {e}"));
    env.wait_available(CLUSTER, SIZE, VERSION, STEP).await;
    check_production_members(&env).await;
    write_keys(
        &env,
        CLUSTER,
        [(KEY.to_owned(), "before-upgrade".to_owned())],
    )
    .await;
    // What the upgrade must leave as it is: the cluster's object, its members' Pods and volumes.
    let before = env.clusters().get(CLUSTER).await.unwrap();
    let cluster = before.metadata.uid.clone().unwrap();
    let members_before = uids::<Pod>(&env).await;
    let pvcs_before = uids::<PersistentVolumeClaim>(&env).await;
    assert_eq!(members_before.len(), SIZE, "{members_before:?}");
    assert_eq!(pvcs_before.len(), SIZE, "{pvcs_before:?}");
    eprintln!(
        "{} {CLUSTER} Available with {SIZE} members, key written",
        t()
    );

    // 2. Upgrade to the working chart with changed values: the scheduled backup example, and the
    // fixture over it.
    let example = workspace().join("examples/scheduled-backup.yaml");
    let fixture = workspace().join("e2e/scenarios/tests/fixtures/upgrade-values.yaml");
    let values = [
        "-f",
        example.to_str().unwrap(),
        "-f",
        fixture.to_str().unwrap(),
    ];
    let mut upgrade = vec![
        "upgrade",
        RELEASE,
        chart.to_str().unwrap(),
        "--namespace",
        OPERATOR_NAMESPACE,
        "--wait",
        "--timeout",
        "180s",
    ];
    upgrade.extend(values);
    helm_ok(&env, &upgrade);
    env.kubectl(&[
        "delete",
        "clusterrolebinding,clusterrole",
        SKEW_GRANT,
        "--wait",
    ]);
    assert_eq!(
        release_chart(&env),
        (2, format!("etcd-operator-{version}")),
        "{helm}"
    );
    for (suffix, _) in OPERATORS {
        let d = deployment(&env, suffix).await;
        let labels = d.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("helm.sh/chart"),
            Some(&format!("etcd-operator-{version}")),
            "{helm}: {RELEASE}-{suffix} is the working chart's"
        );
        assert_eq!(
            (env_var(&d, "LOG_LEVEL"), env_var(&d, "LOG_FORMAT")),
            (Some("debug".into()), Some("text".into())),
            "{helm}: {RELEASE}-{suffix} after the upgrade"
        );
        let args = container(&d).args.clone().unwrap_or_default();
        if suffix == "cluster" {
            assert!(
                args.contains(&"--dead-member-after-seconds=120".to_owned()),
                "{helm}: {args:?}"
            );
        }
    }
    wait_operators_rolled(&env).await;
    // The chart's `helm test` hook: every operator answers through its Service and the three
    // kinds are served (the Pod is the image's `etcd-backup-operator self-test`).
    let tested = helm_ok(
        &env,
        &[
            "test",
            RELEASE,
            "--namespace",
            OPERATOR_NAMESPACE,
            "--timeout",
            "120s",
        ],
    );
    assert!(
        tested.contains(&format!("{RELEASE}-self-test")) && tested.contains("Succeeded"),
        "{helm}: helm test:\n{tested}"
    );
    eprintln!("{} helm test passed", t());
    let logs = env.kubectl(&[
        "logs",
        "-n",
        OPERATOR_NAMESPACE,
        "-l",
        "app.kubernetes.io/component=cluster-operator",
        "--tail",
        "200",
    ]);
    assert!(
        logs.lines().any(|l| l.contains(" DEBUG ")) && !logs.lines().any(|l| l.starts_with('{')),
        "{helm}: the upgraded cluster operator logs debug lines as text:\n{logs}"
    );
    let cronjob = Api::<CronJob>::namespaced(env.client.clone(), OPERATOR_NAMESPACE)
        .get(&format!("{RELEASE}-scheduled-backup"))
        .await
        .unwrap_or_else(|e| panic!("{helm}: the example's CronJob: {e}"));
    let spec = cronjob.spec.unwrap();
    assert_eq!(
        spec.schedule, "0 */6 * * *",
        "{helm}: the example's schedule"
    );
    let job = spec.job_template.spec.unwrap().template.spec.unwrap();
    let args = job.containers[0].args.clone().unwrap_or_default();
    for arg in [
        "--cluster=prod",
        "--namespace=db",
        "--bucket=etcd-backups",
        "--retain=28",
        "--delete-objects",
    ] {
        assert!(args.iter().any(|a| a == arg), "{helm}: {arg} in {args:?}");
    }
    assert_eq!(
        crd_uids(&env).await,
        crds,
        "{helm}: the upgrade kept the CRDs (the same objects)"
    );
    let changed = check_crds_are_the_charts(&env, &chart, &previous, &values);
    let after = env.clusters().get(CLUSTER).await.unwrap();
    assert_eq!(
        (
            after.metadata.uid.as_deref(),
            after.metadata.generation,
            &after.spec
        ),
        (
            Some(cluster.as_str()),
            before.metadata.generation,
            &before.spec
        ),
        "{helm}: the upgrade kept the EtcdCluster (UID, generation, spec)"
    );
    env.wait_available(CLUSTER, SIZE, VERSION, STEP).await;
    assert_eq!(
        uids::<Pod>(&env).await,
        members_before,
        "{helm}: the upgrade restarted no etcd member"
    );
    assert_eq!(
        uids::<PersistentVolumeClaim>(&env).await,
        pvcs_before,
        "{helm}: the upgrade kept every member's PVC"
    );
    assert_eq!(read_key(&env).await, "before-upgrade", "{helm}");
    eprintln!(
        "{} upgraded {PREVIOUS_VERSION} → {version}: operators rolled, CRDs are the working \
         chart's ({changed}), {CLUSTER} untouched",
        t()
    );

    // The upgraded operator still acts: one member fewer. Its volume stays (reclaimPolicy
    // Retain, as the example says).
    env.kubectl(&[
        "patch",
        "etcd",
        CLUSTER,
        "-n",
        NS,
        "--type",
        "merge",
        "-p",
        &format!("{{\"spec\":{{\"size\":{}}}}}", SIZE - 1),
    ]);
    env.wait_available(CLUSTER, SIZE - 1, VERSION, STEP).await;
    let members = uids::<Pod>(&env).await;
    let pvcs = uids::<PersistentVolumeClaim>(&env).await;
    assert_eq!(members.len(), SIZE - 1, "{helm}: {members:?}");
    assert_eq!(
        pvcs, pvcs_before,
        "{helm}: every member's PVC is kept, the removed member's too"
    );
    eprintln!("{} scaled to {} by the upgraded operator", t(), SIZE - 1);

    // 3. Uninstall: what the release rendered goes, clusters and their data stay.
    let released = released_objects(&env);
    for (suffix, component) in OPERATORS {
        for expected in [
            format!("deployment.apps/{RELEASE}-{suffix}"),
            format!("serviceaccount/{RELEASE}-{suffix}"),
            format!("clusterrole.rbac.authorization.k8s.io/{RELEASE}-{suffix}"),
            format!("clusterrolebinding.rbac.authorization.k8s.io/{RELEASE}-{suffix}"),
            format!("role.rbac.authorization.k8s.io/{RELEASE}-{suffix}-leader-election"),
            // upgrade-values.yaml turns the operators' disruption budgets on.
            format!("poddisruptionbudget.policy/{RELEASE}-{suffix}"),
        ] {
            assert!(
                released.lines().any(|l| l == expected),
                "{helm}: {expected} ({component}) not among {released:?}"
            );
        }
    }
    assert!(
        released
            .lines()
            .any(|l| l == format!("cronjob.batch/{RELEASE}-scheduled-backup")),
        "{released:?}"
    );
    let output = helm_ok(
        &env,
        &["uninstall", RELEASE, "--namespace", OPERATOR_NAMESPACE],
    );
    for crd in CRDS {
        assert!(
            output.contains(crd),
            "{helm}: helm uninstall names {crd} as kept by its resource policy:\n{output}"
        );
    }
    wait_release_gone(&env, &helm).await;
    eprintln!("{} uninstalled; the release's objects are gone", t());

    // Kept: the CRDs, the EtcdCluster, its members (running, serving) and every volume.
    assert_eq!(crd_uids(&env).await, crds, "{helm}: the CRDs are kept");
    assert_eq!(cluster_uid(&env).await, cluster, "{helm}");
    assert_eq!(
        uids::<Pod>(&env).await,
        members,
        "{helm}: the members' Pods are the same"
    );
    assert_eq!(
        uids::<PersistentVolumeClaim>(&env).await,
        pvcs,
        "{helm}: every PVC is kept"
    );
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        let name = pod.metadata.name.clone().unwrap();
        let status = pod.status.unwrap_or_default();
        let ready = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        assert!(
            status.phase.as_deref() == Some("Running")
                && ready
                && pod.metadata.deletion_timestamp.is_none(),
            "{helm}: {name} is not running and ready after the uninstall"
        );
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    for pvc in claims.list(&ListParams::default()).await.unwrap().items {
        let phase = pvc.status.and_then(|s| s.phase);
        assert_eq!(
            phase.as_deref(),
            Some("Bound"),
            "{helm}: {:?}",
            pvc.metadata.name
        );
    }
    assert_eq!(
        read_key(&env).await,
        "before-upgrade",
        "{helm}: the cluster serves without the operators"
    );
    eprintln!("{} the cluster, its members and its volumes remain", t());
}

/// A local control plane and clients of `pair`, without the chart (the scenario installs it
/// with the chart's defaults; `Env::start` installs it with text logs and helm 4 only).
async fn start(pair: KubePair) -> Env {
    let binary = e2e_harness::localkube_binary().expect("localkube is built");
    for bin in [
        "etcd-cluster-operator",
        "etcd-backup-operator",
        "etcd-restore-operator",
    ] {
        check_operator_binary(&binary, bin);
    }
    let lk = LocalKube::start_with(&binary)
        .await
        .expect("localkube starts");
    let kc = KubeClients::find(pair).expect("kubectl and helm (make deps)");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    Env { lk, kc, client }
}

fn helm_ok(env: &Env, args: &[&str]) -> String {
    env.lk.helm(&env.kc, args).unwrap_or_else(|e| {
        fail(
            env,
            &format!("helm {} {args:?} failed: {e}", env.kc.pair().helm_minor()),
        )
    })
}

async fn deployment(env: &Env, suffix: &str) -> Deployment {
    Api::<Deployment>::namespaced(env.client.clone(), OPERATOR_NAMESPACE)
        .get(&format!("{RELEASE}-{suffix}"))
        .await
        .unwrap()
}

fn container(d: &Deployment) -> &k8s_openapi::api::core::v1::Container {
    &d.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
}

fn env_var(d: &Deployment, name: &str) -> Option<String> {
    container(d)
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

/// Waits until every operator Pod runs the upgraded template (text logs) and is Ready, and
/// none of the old ones is left.
async fn wait_operators_rolled(env: &Env) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut rolled = true;
        for (_, component) in OPERATORS {
            let list = pods
                .list(
                    &ListParams::default()
                        .labels(&format!("app.kubernetes.io/component={component}")),
                )
                .await
                .unwrap()
                .items;
            let upgraded = |p: &Pod| {
                p.spec.as_ref().unwrap().containers[0]
                    .env
                    .as_ref()
                    .is_some_and(|e| {
                        e.iter()
                            .any(|v| v.name == "LOG_FORMAT" && v.value.as_deref() == Some("text"))
                    })
            };
            let ready = |p: &Pod| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            };
            rolled &= list.len() == 1 && list.iter().all(|p| upgraded(p) && ready(p));
        }
        if rolled {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            fail(env, "the operator Pods did not roll to the upgraded values");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The example's Pod template, etcd options and volume size on every member.
async fn check_production_members(env: &Env) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let list = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(list.len(), SIZE);
    for pod in list {
        let name = pod.metadata.name.clone().unwrap();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("team").map(String::as_str),
            Some("platform"),
            "{name}"
        );
        let spec = pod.spec.unwrap();
        let anti = spec
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution)
            .unwrap_or_default();
        assert_eq!(anti.len(), 1, "{name}: the example's anti-affinity");
        assert_eq!(
            anti[0].pod_affinity_term.topology_key,
            "kubernetes.io/hostname"
        );
        let etcd = &spec.containers[0];
        let resources = etcd.resources.clone().unwrap_or_default();
        let requests = resources.requests.unwrap_or_default();
        assert_eq!(
            requests.get("memory").map(|q| q.0.as_str()),
            Some("2Gi"),
            "{name}"
        );
        let command: Vec<String> = etcd
            .command
            .iter()
            .chain(etcd.args.iter())
            .flatten()
            .cloned()
            .collect();
        for flag in [
            "--quota-backend-bytes=4294967296",
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=1h",
            "--snapshot-count=10000",
            "--heartbeat-interval=100",
            "--election-timeout=1000",
        ] {
            assert!(
                command.iter().any(|a| a == flag),
                "{name}: {flag} in {command:?}"
            );
        }
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), NS);
    for pvc in claims.list(&ListParams::default()).await.unwrap().items {
        let size = pvc
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .and_then(|r| r.get("storage").cloned());
        assert_eq!(
            size.map(|q| q.0).as_deref(),
            Some("8Gi"),
            "{:?}",
            pvc.metadata.name
        );
    }
}

async fn crd_uids(env: &Env) -> BTreeMap<String, String> {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let mut out = BTreeMap::new();
    for name in CRDS {
        let crd = crds
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("CRD {name}: {e}"));
        let annotations = crd.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations
                .get("helm.sh/resource-policy")
                .map(String::as_str),
            Some("keep"),
            "{name}"
        );
        out.insert(name.to_owned(), crd.metadata.uid.unwrap());
    }
    out
}

async fn cluster_uid(env: &Env) -> String {
    env.clusters()
        .get(CLUSTER)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

/// Name → UID of every object of kind `K` in the scenarios' namespace.
async fn uids<K>(env: &Env) -> BTreeMap<String, String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(env.client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|o| o.meta().deletion_timestamp.is_none())
        .map(|o| {
            (
                o.meta().name.clone().unwrap(),
                o.meta().uid.clone().unwrap(),
            )
        })
        .collect()
}

/// Everything labelled as the release's, cluster-wide, as `kind/name` lines.
fn released_objects(env: &Env) -> String {
    env.kubectl(&[
        "get",
        "deployments,replicasets,pods,serviceaccounts,roles,rolebindings,cronjobs,jobs,\
         clusterroles,clusterrolebindings,poddisruptionbudgets",
        "--all-namespaces",
        "-l",
        RELEASE_LABEL,
        "-o",
        "name",
    ])
}

/// Waits until nothing of the release is left: no object with its label, and by name none of
/// the operators' Deployments, ServiceAccounts, ClusterRoles, ClusterRoleBindings and Roles, nor
/// the CronJob and its Role; no release is listed or recorded.
async fn wait_release_gone(env: &Env, helm: &str) {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut left = Vec::new();
        let labelled = released_objects(env);
        left.extend(labelled.lines().map(str::to_owned));
        for (suffix, _) in OPERATORS {
            let name = format!("{RELEASE}-{suffix}");
            let in_ns = |kind: &str, name: &str| format!("{kind}/{OPERATOR_NAMESPACE}/{name}");
            if Api::<Deployment>::namespaced(env.client.clone(), OPERATOR_NAMESPACE)
                .get_opt(&name)
                .await
                .unwrap()
                .is_some()
            {
                left.push(in_ns("Deployment", &name));
            }
            if Api::<ServiceAccount>::namespaced(env.client.clone(), OPERATOR_NAMESPACE)
                .get_opt(&name)
                .await
                .unwrap()
                .is_some()
            {
                left.push(in_ns("ServiceAccount", &name));
            }
            let election = format!("{name}-leader-election");
            if Api::<Role>::namespaced(env.client.clone(), OPERATOR_NAMESPACE)
                .get_opt(&election)
                .await
                .unwrap()
                .is_some()
            {
                left.push(in_ns("Role", &election));
            }
            if Api::<ClusterRole>::all(env.client.clone())
                .get_opt(&name)
                .await
                .unwrap()
                .is_some()
            {
                left.push(format!("ClusterRole/{name}"));
            }
            if Api::<ClusterRoleBinding>::all(env.client.clone())
                .get_opt(&name)
                .await
                .unwrap()
                .is_some()
            {
                left.push(format!("ClusterRoleBinding/{name}"));
            }
        }
        let scheduled = format!("{RELEASE}-scheduled-backup");
        if Api::<CronJob>::namespaced(env.client.clone(), OPERATOR_NAMESPACE)
            .get_opt(&scheduled)
            .await
            .unwrap()
            .is_some()
        {
            left.push(format!("CronJob/{scheduled}"));
        }
        if Api::<Role>::namespaced(env.client.clone(), NS)
            .get_opt(&scheduled)
            .await
            .unwrap()
            .is_some()
        {
            left.push(format!("Role/{NS}/{scheduled}"));
        }
        let releases = env
            .lk
            .helm(&env.kc, &["list", "--all-namespaces", "-q"])
            .unwrap_or_else(|e| e.to_string());
        if !releases.trim().is_empty() {
            left.push(format!("helm release {}", releases.trim()));
        }
        // helm's release records (Secrets labelled owner=helm), whatever their state.
        let records = env.kubectl(&[
            "get",
            "secrets",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            "owner=helm",
            "-o",
            "name",
        ]);
        left.extend(records.lines().map(str::to_owned));
        if left.is_empty() {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            fail(env, &format!("{helm}: left after helm uninstall: {left:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The scenario's key, read linearizably through the cluster's client Service (retried while
/// the Service's endpoints settle).
async fn read_key(env: &Env) -> String {
    let url = env.client_url(CLUSTER).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(Duration::from_secs(5));
        match etcd_client::Client::connect([url.as_str()], Some(options)).await {
            Ok(mut client) => match client.get(KEY, None).await {
                Ok(response) => {
                    if let Some(kv) = response.kvs().first() {
                        return kv.value_str().unwrap().to_owned();
                    }
                    last = format!("{KEY} is absent");
                }
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    fail(env, &format!("reading {KEY} through {url}: {last}"))
}

/// `version` of a chart (a directory or a packaged .tgz), as helm reads it.
fn chart_version(env: &Env, chart: &std::path::Path) -> String {
    let text = helm_ok(env, &["show", "chart", chart.to_str().unwrap()]);
    text.lines()
        .find_map(|l| l.strip_prefix("version:"))
        .unwrap_or_else(|| panic!("no version in {}:\n{text}", chart.display()))
        .trim()
        .to_owned()
}

/// `major.minor.patch` as numbers, for ordering chart versions.
fn semver(version: &str) -> Vec<u64> {
    version
        .split(['.', '-', '+'])
        .take(3)
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("chart version {version}"))
        })
        .collect()
}

/// The release's revision and chart (`<name>-<version>`) as `helm list` reports them; it must be
/// deployed.
/// The ClusterRole and binding [`skew_grant`] creates.
const SKEW_GRANT: &str = "chart-test-previous-chart-skew";

/// What this build's cluster operator needs beyond the previous chart's RBAC while it runs
/// under that chart: patching member Pods' status (their readiness gate).
fn skew_grant() -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {SKEW_GRANT}}}\n\
         rules:\n- {{apiGroups: [\"\"], resources: [pods/status], verbs: [patch]}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
         metadata: {{name: {SKEW_GRANT}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {SKEW_GRANT}}}\n\
         subjects:\n- {{kind: ServiceAccount, name: {RELEASE}-cluster, namespace: {OPERATOR_NAMESPACE}}}\n"
    )
}

fn release_chart(env: &Env) -> (u64, String) {
    let out = helm_ok(
        env,
        &["list", "--namespace", OPERATOR_NAMESPACE, "-o", "json"],
    );
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let release = list
        .as_array()
        .and_then(|l| l.iter().find(|r| r["name"] == RELEASE))
        .unwrap_or_else(|| panic!("{RELEASE} not in helm list: {out}"));
    assert_eq!(release["status"], "deployed", "{release}");
    let revision = match &release["revision"] {
        serde_json::Value::String(s) => s.parse().unwrap(),
        n => n.as_u64().unwrap(),
    };
    (revision, release["chart"].as_str().unwrap().to_owned())
}

/// The CRDs `chart` renders with `values`, as helm renders them for an upgrade.
fn rendered_crds(env: &Env, chart: &std::path::Path, values: &[&str]) -> Vec<serde_json::Value> {
    CRDS.iter()
        .map(|name| {
            let template = format!("templates/crds/{name}.yaml");
            let mut args = vec![
                "template",
                RELEASE,
                chart.to_str().unwrap(),
                "--namespace",
                OPERATOR_NAMESPACE,
                "--show-only",
                &template,
            ];
            args.extend_from_slice(values);
            let yaml = helm_ok(env, &args);
            // kubectl turns the YAML into JSON without sending it anywhere.
            let json = env
                .lk
                .kubectl_stdin(
                    &env.kc,
                    &["create", "--dry-run=client", "-o", "json"],
                    &yaml,
                )
                .unwrap_or_else(|e| fail(env, &format!("{name} of {}: {e}", chart.display())));
            serde_json::from_str(&json).unwrap()
        })
        .collect()
}

/// Each installed CRD is the working chart's: its spec (names, versions, schemas, printer
/// columns, subresources) exactly as `chart` renders it, and the rendered labels and annotations
/// on it. Returns how the working chart's CRDs differ from the previous chart's (when they are
/// the same, the upgrade had nothing to change in them and this check is only a guard).
fn check_crds_are_the_charts(
    env: &Env,
    chart: &std::path::Path,
    previous: &std::path::Path,
    values: &[&str],
) -> String {
    let helm = format!("helm {}", env.kc.pair().helm_minor());
    let working = rendered_crds(env, chart, values);
    let old = rendered_crds(env, previous, &[]);
    let mut changed = 0;
    for ((name, rendered), old) in CRDS.iter().zip(&working).zip(&old) {
        // As the API server has it (JSON as stored, not through k8s-openapi's types).
        let installed: serde_json::Value =
            serde_json::from_str(&env.kubectl(&["get", "crd", name, "-o", "json"])).unwrap();
        // kube-apiserver stores a CRD with its defaults filled in (apiextensions' SetDefaults):
        // the conversion strategy None and the list kind <Kind>List.
        let mut expected = rendered["spec"].clone();
        if expected.get("conversion").is_none() {
            expected["conversion"] = serde_json::json!({"strategy": "None"});
        }
        if expected["names"].get("listKind").is_none() {
            let kind = expected["names"]["kind"].as_str().unwrap_or("").to_string();
            expected["names"]["listKind"] = serde_json::json!(format!("{kind}List"));
        }
        let mut differences = Vec::new();
        json_diff("spec", &expected, &installed["spec"], &mut differences);
        assert!(
            differences.is_empty(),
            "{helm}: CRD {name} after the upgrade is not the working chart's; {} fields differ: \
             {:?}",
            differences.len(),
            &differences[..differences.len().min(10)]
        );
        for field in ["labels", "annotations"] {
            let want = rendered["metadata"][field].as_object().cloned();
            for (key, value) in want.unwrap_or_default() {
                assert_eq!(
                    installed["metadata"][field][&key], value,
                    "{helm}: CRD {name} {field} {key}"
                );
            }
        }
        let mut since = Vec::new();
        json_diff("", old, rendered, &mut since);
        changed += since.len();
    }
    if changed == 0 {
        format!("the same as {PREVIOUS_VERSION}'s")
    } else {
        format!("{changed} fields changed since {PREVIOUS_VERSION}")
    }
}

/// The paths at which `a` and `b` differ (a field missing on one side counts as `null`).
fn json_diff(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                json_diff(
                    &format!("{path}.{key}"),
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                json_diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        _ if a != b => out.push(path.to_owned()),
        _ => {}
    }
}
