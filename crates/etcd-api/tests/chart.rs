//! The chart's CRD templates: fresh (what the types generate), and rendered by both helm majors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use etcd_api::crd;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use test_support::{KubeClients, KubePair};

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/etcd-operator")
}

#[test]
fn committed_crd_templates_match_the_types() {
    let chart = chart_dir();
    for file in crd::chart_templates().unwrap() {
        let path = chart.join(&file.path);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `make crds`", path.display()));
        assert!(
            committed == file.contents,
            "{} is stale: run `make crds` and commit the result",
            path.display()
        );
    }
    let generated: Vec<String> = crd::chart_templates()
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    for entry in std::fs::read_dir(chart.join(crd::CHART_CRD_DIR)).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let path = format!("{}/{name}", crd::CHART_CRD_DIR);
        assert!(
            generated.contains(&path),
            "{path} is no longer generated: run `make crds`"
        );
    }
}

#[test]
fn committed_chart_readme_matches_the_values() {
    let chart = chart_dir();
    let values = std::fs::read_to_string(chart.join("values.yaml")).unwrap();
    let committed = std::fs::read_to_string(chart.join("README.md")).unwrap_or_default();
    let generated = etcd_api::values_doc::readme(&values).unwrap();
    assert!(
        committed == generated,
        "charts/etcd-operator/README.md is stale: run `make chart-docs` and commit the result"
    );
    // Every value of values.yaml is in it, documented: a value added without a `# --` comment
    // fails here (the few self-explaining leaves below excepted).
    let undocumented: Vec<String> = etcd_api::values_doc::values(&values)
        .into_iter()
        .filter(|v| v.doc.is_none())
        .map(|v| v.key)
        .filter(|k| {
            ![
                "pullPolicy",
                "nodeSelector",
                "tolerations",
                "affinity",
                "extraVolumeMounts",
                "create",
                "enabled",
            ]
            .iter()
            .any(|leaf| k.ends_with(leaf))
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "values without a `# --` comment: {undocumented:?}"
    );
}

#[test]
fn committed_api_reference_matches_the_types() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("API.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == etcd_api::reference::markdown(),
        "{} is stale: run `make crds` and commit the result",
        path.display()
    );
}

/// The CRDs in a `helm template` output.
fn rendered_crds(output: &str) -> Vec<CustomResourceDefinition> {
    output
        .split("\n---")
        .filter(|doc| doc.contains("kind: CustomResourceDefinition"))
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect()
}

#[test]
fn both_helm_majors_render_the_crds_exactly_and_honour_crds_install() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let lint = clients.run_helm(&["lint", "--strict", chart]).unwrap();
        assert!(
            lint.contains("0 chart(s) failed"),
            "helm {}: {lint}",
            pair.helm_minor()
        );

        let rendered = clients
            .run_helm(&["template", "etcd-operator", chart])
            .unwrap();
        let crds = rendered_crds(&rendered);
        let mut expected = crd::all();
        expected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let names = |crds: &[CustomResourceDefinition]| -> Vec<Option<String>> {
            crds.iter().map(|c| c.metadata.name.clone()).collect()
        };
        // helm renders templates in file-name order.
        assert_eq!(names(&crds), names(&expected), "helm {}", pair.helm_minor());
        for (got, want) in crds.iter().zip(&expected) {
            assert!(
                got == want,
                "helm {} changes {:?} when rendering it",
                pair.helm_minor(),
                want.metadata.name
            );
        }
        for crd in &crds {
            let annotations = crd.metadata.annotations.clone().unwrap();
            assert_eq!(
                annotations
                    .get("helm.sh/resource-policy")
                    .map(String::as_str),
                Some("keep")
            );
        }

        let without = clients
            .run_helm(&[
                "template",
                "etcd-operator",
                chart,
                "--set",
                "crds.install=false",
            ])
            .unwrap();
        assert!(
            rendered_crds(&without).is_empty(),
            "helm {}: crds.install=false",
            pair.helm_minor()
        );
    }
}

/// The objects of a `helm template` output, as JSON values (CRDs left out).
fn rendered_objects(output: &str) -> Vec<serde_json::Value> {
    output
        .split("\n---")
        .filter(|doc| doc.contains("kind:") && !doc.contains("kind: CustomResourceDefinition"))
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect()
}

fn of_kind<'a>(objects: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The operators as the chart renders them: three Deployments from one image, each running its
/// own binary as a non-root user with its own ServiceAccount; the restore operator's seed image is
/// the chart's image; a disabled operator leaves nothing behind; NOTES.txt names what is there.
#[test]
fn the_chart_renders_three_least_privilege_operators_from_one_image() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let clients = KubeClients::find(KubePair::Current).unwrap();
    let rendered = clients
        .run_helm(&[
            "template",
            "etcd-operator",
            chart,
            "-n",
            "ops",
            "--set",
            "image.tag=9.9.9",
        ])
        .unwrap();
    let objects = rendered_objects(&rendered);
    let image = "ghcr.io/etcd-operator-rs/etcd-operator:9.9.9";
    let deployments = of_kind(&objects, "Deployment");
    let mut binaries = Vec::new();
    for deployment in &deployments {
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(container["image"], image, "{deployment}");
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{deployment}");
        assert_eq!(
            container["securityContext"]["readOnlyRootFilesystem"], true,
            "{deployment}"
        );
        let account = pod["serviceAccountName"].as_str().unwrap();
        assert!(
            of_kind(&objects, "ServiceAccount")
                .iter()
                .any(|sa| sa["metadata"]["name"] == account),
            "{account} is not rendered"
        );
        binaries.push(container["command"][0].as_str().unwrap().to_owned());
    }
    binaries.sort();
    assert_eq!(
        binaries,
        [
            "/usr/local/bin/etcd-backup-operator",
            "/usr/local/bin/etcd-cluster-operator",
            "/usr/local/bin/etcd-restore-operator",
        ]
    );
    let restore = deployments
        .iter()
        .find(|d| d["metadata"]["name"] == "etcd-operator-restore")
        .unwrap();
    let args = restore["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(
        args.as_array()
            .unwrap()
            .contains(&serde_json::json!(format!("--seed-image={image}"))),
        "{args}"
    );
    // The restore operator never deletes a PVC but its own seed's, and never writes Secrets.
    let role = of_kind(&objects, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "etcd-operator-restore")
        .unwrap();
    for rule in role["rules"].as_array().unwrap() {
        let resources = rule["resources"].to_string();
        if resources.contains("secrets") {
            assert_eq!(rule["verbs"], serde_json::json!(["get"]), "{rule}");
        }
    }

    let without_restore = clients
        .run_helm(&[
            "template",
            "etcd-operator",
            chart,
            "--set",
            "restoreOperator.enabled=false",
        ])
        .unwrap();
    assert!(
        !without_restore.contains("etcd-operator-restore"),
        "a disabled operator left objects behind"
    );
    let notes = clients
        .run_helm(&[
            "install",
            "etcd-operator",
            chart,
            "--dry-run=client",
            "-n",
            "ops",
        ])
        .unwrap();
    assert!(
        notes.contains("EtcdRestore: deployment/etcd-operator-restore"),
        "{notes}"
    );
}

/// `podDisruptionBudget.enabled` gives each enabled operator a budget whose selector is exactly
/// its Deployment's; the default renders none (the etcd members' budgets are the operator's).
#[test]
fn operator_disruption_budgets_select_their_own_deployment() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let clients = KubeClients::find(KubePair::Current).unwrap();
    let render = |extra: &[&str]| {
        let mut args = vec!["template", "etcd-operator", chart, "-n", "ops"];
        args.extend_from_slice(extra);
        rendered_objects(&clients.run_helm(&args).unwrap())
    };
    assert!(of_kind(&render(&[]), "PodDisruptionBudget").is_empty());

    let objects = render(&[
        "--set",
        "podDisruptionBudget.enabled=true",
        "--set",
        "podDisruptionBudget.maxUnavailable=2",
        "--set",
        "backupOperator.enabled=false",
    ]);
    let budgets = of_kind(&objects, "PodDisruptionBudget");
    let deployments = of_kind(&objects, "Deployment");
    assert_eq!(budgets.len(), 2, "one per enabled operator: {budgets:?}");
    for budget in budgets {
        assert_eq!(budget["metadata"]["namespace"], "ops");
        assert_eq!(budget["spec"]["maxUnavailable"], 2);
        let selector = &budget["spec"]["selector"]["matchLabels"];
        let selected: Vec<_> = deployments
            .iter()
            .filter(|d| {
                let labels = &d["spec"]["template"]["metadata"]["labels"];
                selector
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| &labels[k] == v)
            })
            .collect();
        assert_eq!(selected.len(), 1, "{budget} selects {selected:?}");
        assert_eq!(
            selected[0]["metadata"]["name"], budget["metadata"]["name"],
            "a budget is named after its Deployment"
        );
    }
}

/// The cluster operator's ClusterRole grants every verb its code uses, and no more where it
/// matters. Each entry names the call that needs it: a missing verb is a 403 that stops the
/// reconcile (issue 17: the objects' plan's `SetPvcOwners`, then `sync_pvc_ownership`, patches
/// the owner references of member PVCs when `spec.storage.reclaimPolicy` changes or after a
/// restore, and `patch` was not granted).
#[test]
fn cluster_operator_role_grants_every_verb_it_uses() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let clients = KubeClients::find(KubePair::Current).unwrap();
    let rendered = clients
        .run_helm(&["template", "etcd-operator", chart, "-n", "ops"])
        .unwrap();
    let objects = rendered_objects(&rendered);
    let role = of_kind(&objects, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "etcd-operator-cluster")
        .unwrap();
    let rules = role["rules"].as_array().unwrap();
    let has = |field: &serde_json::Value, value: &str| {
        field
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == value))
    };
    let granted = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|rule| {
            has(&rule["apiGroups"], group)
                && has(&rule["resources"], resource)
                && has(&rule["verbs"], verb)
        })
    };
    let needed: &[(&str, &str, &str, &str)] = &[
        (
            "etcd.operator.rs",
            "etcdclusters",
            "watch",
            "the controller",
        ),
        (
            "etcd.operator.rs",
            "etcdclusters/status",
            "patch",
            "apply_status",
        ),
        ("", "pods", "list", "observe_kube"),
        ("", "pods", "create", "create_member"),
        ("", "pods", "delete", "DeletePod, UpgradeMember"),
        ("", "persistentvolumeclaims", "list", "observe_kube"),
        ("", "persistentvolumeclaims", "create", "create_member"),
        ("", "persistentvolumeclaims", "delete", "DeletePvc"),
        (
            "",
            "persistentvolumeclaims",
            "patch",
            "ObjectWrite::SetPvcOwners",
        ),
        (
            "",
            "services",
            "patch",
            "ObjectWrite::Apply (server-side apply)",
        ),
        (
            "policy",
            "poddisruptionbudgets",
            "patch",
            "ObjectWrite::Apply",
        ),
        (
            "",
            "services",
            "create",
            "ObjectWrite::Apply (an apply that creates)",
        ),
        (
            "policy",
            "poddisruptionbudgets",
            "create",
            "ObjectWrite::Apply (an apply that creates)",
        ),
        ("", "services", "list", "controller (Services watched)"),
        ("", "services", "watch", "controller (Services watched)"),
        (
            "policy",
            "poddisruptionbudgets",
            "list",
            "controller (budgets watched)",
        ),
        (
            "policy",
            "poddisruptionbudgets",
            "watch",
            "controller (budgets watched)",
        ),
        ("events.k8s.io", "events", "create", "the event recorder"),
        (
            "",
            "pods",
            "patch",
            "execute AdoptPod (the configuration-hash annotation)",
        ),
        (
            "storage.k8s.io",
            "storageclasses",
            "get",
            "observe_kube (allowVolumeExpansion of a PVC to grow)",
        ),
        (
            "",
            "pods/status",
            "patch",
            "set_serving (the member Pods' serving readiness gate)",
        ),
        (
            "discovery.k8s.io",
            "endpointslices",
            "list",
            "wait_out_of_client_service (draining a member to defragment)",
        ),
        (
            "",
            "secrets",
            "get",
            "tls::prepare (TLS Secrets read and checked)",
        ),
        (
            "",
            "secrets",
            "create",
            "tls::prepare, ensure_member_secret (operator-managed certificates)",
        ),
        (
            "cert-manager.io",
            "certificates",
            "get",
            "cert_manager::prepare, ensure_member_ready",
        ),
        (
            "cert-manager.io",
            "certificates",
            "create",
            "cert_manager::prepare, ensure_member_ready",
        ),
        (
            "networking.k8s.io",
            "networkpolicies",
            "patch",
            "ensure_network_policy (server-side apply)",
        ),
        (
            "networking.k8s.io",
            "networkpolicies",
            "create",
            "ensure_network_policy (an apply that creates)",
        ),
        (
            "networking.k8s.io",
            "networkpolicies",
            "get",
            "ensure_network_policy (is there one to delete)",
        ),
        (
            "networking.k8s.io",
            "networkpolicies",
            "delete",
            "ensure_network_policy (spec.networkPolicy.enabled: false)",
        ),
    ];
    // spec.backup: the CronJob and its ServiceAccount, Role and RoleBinding are read, applied
    // and deleted; the Jobs' Role grants are held too (RBAC escalation prevention).
    let mut needed = needed.to_vec();
    for (group, resource) in [
        ("batch", "cronjobs"),
        ("", "serviceaccounts"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
    ] {
        for verb in ["get", "create", "patch", "delete"] {
            needed.push((group, resource, verb, "ensure_scheduled_backup"));
        }
    }
    for verb in ["create", "get", "list", "delete"] {
        needed.push((
            "etcd.operator.rs",
            "etcdbackups",
            verb,
            "the spec.backup Jobs' Role",
        ));
    }
    needed.push((
        "etcd.operator.rs",
        "etcdrestores",
        "list",
        "the spec.backup Jobs' Role",
    ));
    let missing: Vec<String> = needed
        .iter()
        .filter(|(group, resource, verb, _)| !granted(group, resource, verb))
        .map(|(group, resource, verb, by)| format!("{verb} {group}/{resource} (used by {by})"))
        .collect();
    assert!(missing.is_empty(), "not granted: {missing:?}");
    // The image the spec.backup CronJobs run is the one the chart runs the operators from.
    let deployment = of_kind(&objects, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["name"] == "etcd-operator-cluster")
        .unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let image = container["image"].as_str().unwrap();
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str() == Some(&format!("--backup-image={image}"))),
        "{container}"
    );
    // Least privilege: the operator never updates Pods (it patches one annotation onto Pods an
    // older release built, AdoptPod).
    assert!(!granted("", "pods", "update"));

    // The restore operator patches its EtcdRestores' finalizer (issue 17: a restore deleted
    // mid-flight releases its hold on the cluster).
    let restore = of_kind(&objects, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "etcd-operator-restore")
        .unwrap();
    // ... reads its EtcdRestore again between the steps one reconcile takes (issue 24), and
    // opens its seed's readiness gate (issue 17, defect 4).
    for (resource, verb, cannot) in [
        ("etcdrestores", "patch", "patch its finalizer"),
        ("etcdrestores", "get", "read its EtcdRestore"),
        ("pods/status", "patch", "admit its seed"),
    ] {
        assert!(
            restore["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|rule| has(&rule["resources"], resource) && has(&rule["verbs"], verb)),
            "the restore operator cannot {cannot}: {restore}"
        );
    }

    // The scheduled backup's retention lists EtcdRestores: it never deletes a backup an
    // unfinished restore reads (issue 17).
    let scheduled = rendered_objects(
        &clients
            .run_helm(&[
                "template",
                "etcd-operator",
                chart,
                "-n",
                "ops",
                "--set",
                "scheduledBackup.enabled=true",
                "--set",
                "scheduledBackup.clusterName=main",
                "--set",
                "scheduledBackup.s3.bucket=bkt",
            ])
            .unwrap(),
    );
    let role = of_kind(&scheduled, "Role")
        .into_iter()
        .find(|r| r["metadata"]["labels"]["app.kubernetes.io/component"] == "scheduled-backup")
        .unwrap();
    assert!(
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|rule| { has(&rule["resources"], "etcdrestores") && has(&rule["verbs"], "list") }),
        "the scheduled backup cannot list EtcdRestores: {role}"
    );
}

/// values.schema.json: a wrong value is refused by both helm majors before anything renders,
/// with a message naming the value (helm 4 as a JSON pointer, helm 3 dotted).
#[test]
fn the_values_schema_refuses_bad_values_naming_them() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let refused: &[(&str, &str)] = &[
        // A log format the binaries do not know crash-looped the Pods before the schema.
        ("logging.format=yaml", "logging.format"),
        ("clusterOperator.replicas=abc", "clusterOperator.replicas"),
        ("clusterOperator.replicas=-1", "clusterOperator.replicas"),
        ("image.pullPolicy=Sometimes", "image.pullPolicy"),
        (
            "backupOperator.maxConcurrentBackups=0",
            "backupOperator.maxConcurrentBackups",
        ),
        ("scheduledBackup.retain=-2", "scheduledBackup.retain"),
        (
            "scheduledBackup.s3.endpoint=minio:9000",
            "scheduledBackup.s3.endpoint",
        ),
        (
            "restoreOperator.watchNamespace=Not_A_Namespace",
            "restoreOperator.watchNamespace",
        ),
        (
            "metrics.serviceMonitor.interval=often",
            "metrics.serviceMonitor.interval",
        ),
        // A misspelt key would otherwise be ignored silently.
        ("clusterOperater.replicas=2", "clusterOperater"),
        ("leaderElection.enable=false", "enable"),
        ("rbac.scope=tenant", "rbac.scope"),
        (
            "restoreOperator.seed.serviceAccountName=Bad_SA",
            "restoreOperator.seed.serviceAccountName",
        ),
    ];
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        for (set, names) in refused {
            let err = clients
                .run_helm(&["template", "etcd-operator", chart, "--set", set])
                .expect_err(&format!("helm {} accepted --set {set}", pair.helm_minor()))
                .to_string();
            let pointer = format!("/{}", names.replace('.', "/"));
            assert!(
                err.contains(names) || err.contains(&pointer),
                "helm {}: --set {set} refused without naming {names}: {err}",
                pair.helm_minor()
            );
        }
        // Good values still render, including the documented examples.
        for set in [
            "podDisruptionBudget.maxUnavailable=50%",
            "clusterOperator.watchNamespace=db",
            "scheduledBackup.s3.endpoint=http://minio:9000",
        ] {
            clients
                .run_helm(&["template", "etcd-operator", chart, "--set", set])
                .unwrap_or_else(|e| panic!("helm {}: --set {set}: {e}", pair.helm_minor()));
        }
    }
}

/// The knobs platform engineers expect, each reaching the objects it should (rendered by both
/// helm majors): ServiceAccounts (existing or annotated), common/pod labels and annotations,
/// priority, topology spread with the operator's selector filled in, extra args/env/volumes,
/// image registry and digest, name override, history limit, and the CRD switches.
#[test]
fn every_operator_knob_reaches_the_rendered_objects() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let digest = format!("sha256:{}", "a".repeat(64));
    let sets = [
        "clusterOperator.serviceAccount.create=false".to_string(),
        "clusterOperator.serviceAccount.name=platform-etcd".into(),
        "backupOperator.serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/b"
            .into(),
        "commonLabels.team=storage".into(),
        "podLabels.tier=control".into(),
        "podAnnotations.example\\.com/scrape=yes".into(),
        "priorityClassName=system-cluster-critical".into(),
        "restoreOperator.priorityClassName=restore-prio".into(),
        "clusterOperator.topologySpreadConstraints[0].maxSkew=1".into(),
        "clusterOperator.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone".into(),
        "clusterOperator.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway".into(),
        "backupOperator.extraArgs[0]=--some-flag=1".into(),
        "backupOperator.extraEnv[0].name=HTTPS_PROXY".into(),
        "backupOperator.extraEnv[0].value=http://proxy:3128".into(),
        "backupOperator.extraVolumes[0].name=ca".into(),
        "backupOperator.extraVolumes[0].configMap.name=corp-ca".into(),
        "backupOperator.extraVolumeMounts[0].name=ca".into(),
        "backupOperator.extraVolumeMounts[0].mountPath=/etc/corp-ca".into(),
        "image.registry=registry.example.com".into(),
        format!("image.digest={digest}"),
        "nameOverride=etcdop".into(),
        "revisionHistoryLimit=3".into(),
    ];
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let mut args = vec!["template", "rel", chart, "-n", "ops"];
        for s in &sets {
            args.extend(["--set", s.as_str()]);
        }
        let out = clients.run_helm(&args).unwrap();
        let objects = rendered_objects(&out);
        let helm = pair.helm_minor();

        // Names: <release>-<nameOverride>-<operator>.
        let deployment = |suffix: &str| {
            *of_kind(&objects, "Deployment")
                .iter()
                .find(|d| d["metadata"]["name"] == format!("rel-etcdop-{suffix}"))
                .unwrap_or_else(|| panic!("helm {helm}: no Deployment rel-etcdop-{suffix}"))
        };
        let cluster = deployment("cluster");
        let backup = deployment("backup");
        let restore = deployment("restore");

        // An existing ServiceAccount: none rendered, the Deployment and bindings use its name.
        let accounts: Vec<&str> = of_kind(&objects, "ServiceAccount")
            .iter()
            .map(|a| a["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(
            !accounts.contains(&"rel-etcdop-cluster"),
            "helm {helm}: {accounts:?}"
        );
        assert_eq!(
            cluster["spec"]["template"]["spec"]["serviceAccountName"], "platform-etcd",
            "helm {helm}"
        );
        for binding in of_kind(&objects, "ClusterRoleBinding")
            .into_iter()
            .chain(of_kind(&objects, "RoleBinding"))
            .filter(|b| {
                b["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("rel-etcdop-cluster")
            })
        {
            assert_eq!(
                binding["subjects"][0]["name"], "platform-etcd",
                "helm {helm}: {binding}"
            );
        }
        let backup_sa = of_kind(&objects, "ServiceAccount")
            .into_iter()
            .find(|a| a["metadata"]["name"] == "rel-etcdop-backup")
            .unwrap();
        assert_eq!(
            backup_sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
            "arn:aws:iam::1:role/b"
        );

        // Every object carries commonLabels; the operators' Pods the pod labels and annotations.
        for o in &objects {
            assert_eq!(
                o["metadata"]["labels"]["team"], "storage",
                "helm {helm}: {o}"
            );
        }
        for d in [cluster, backup, restore] {
            let template = &d["spec"]["template"];
            assert_eq!(template["metadata"]["labels"]["tier"], "control");
            assert_eq!(template["metadata"]["labels"]["team"], "storage");
            assert_eq!(
                template["metadata"]["annotations"]["example.com/scrape"],
                "yes"
            );
            assert_eq!(d["spec"]["revisionHistoryLimit"], 3);
            assert_eq!(
                template["spec"]["containers"][0]["image"],
                format!("registry.example.com/ghcr.io/etcd-operator-rs/etcd-operator@{digest}")
            );
        }
        let pod = |d: &serde_json::Value| d["spec"]["template"]["spec"].clone();
        assert_eq!(pod(cluster)["priorityClassName"], "system-cluster-critical");
        assert_eq!(pod(restore)["priorityClassName"], "restore-prio");

        // Topology spread selects the operator's own Pods.
        let spread = &pod(cluster)["topologySpreadConstraints"][0];
        assert_eq!(spread["topologyKey"], "topology.kubernetes.io/zone");
        assert_eq!(
            spread["labelSelector"]["matchLabels"], cluster["spec"]["selector"]["matchLabels"],
            "helm {helm}"
        );

        // Extra args, env and volumes reach the backup operator only.
        let container = &pod(backup)["containers"][0];
        let args: Vec<&str> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(args.contains(&"--some-flag=1"), "{args:?}");
        assert!(
            container["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "HTTPS_PROXY" && e["value"] == "http://proxy:3128")
        );
        assert_eq!(container["volumeMounts"][0]["mountPath"], "/etc/corp-ca");
        assert_eq!(pod(backup)["volumes"][0]["configMap"]["name"], "corp-ca");
        assert!(pod(cluster)["volumes"].is_null());

        // The etcd kinds aggregate into view/edit/admin (view reads only); off on request.
        let aggregated: Vec<&serde_json::Value> = of_kind(&objects, "ClusterRole")
            .into_iter()
            .filter(|r| {
                r["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .contains("aggregate-to")
            })
            .collect();
        assert_eq!(aggregated.len(), 3, "helm {helm}");
        for role in &aggregated {
            let name = role["metadata"]["name"].as_str().unwrap();
            let which = name.rsplit('-').next().unwrap();
            assert_eq!(
                role["metadata"]["labels"]
                    [format!("rbac.authorization.k8s.io/aggregate-to-{which}")],
                "true"
            );
            let writes = role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["verbs"].as_array().unwrap().iter().any(|v| v == "create"));
            assert_eq!(writes, which != "view", "{role}");
        }
        let out = clients
            .run_helm(&[
                "template",
                "rel",
                chart,
                "--set",
                "rbac.aggregateToDefaultRoles=false",
            ])
            .unwrap();
        assert!(!out.contains("aggregate-to"), "helm {helm}");

        // CRDs: crds.enabled=false (or the 0.1 spelling crds.install=false) renders none;
        // crds.keep=false drops the keep policy.
        for off in ["crds.enabled=false", "crds.install=false"] {
            let out = clients
                .run_helm(&["template", "rel", chart, "--set", off])
                .unwrap();
            assert!(rendered_crds(&out).is_empty(), "helm {helm}: --set {off}");
        }
        let out = clients
            .run_helm(&["template", "rel", chart, "--set", "crds.keep=false"])
            .unwrap();
        let crds = rendered_crds(&out);
        assert_eq!(crds.len(), 3);
        for crd in crds {
            assert!(
                !crd.metadata
                    .annotations
                    .unwrap_or_default()
                    .contains_key("helm.sh/resource-policy"),
                "helm {helm}"
            );
        }
    }
}

/// The three operators take one set of flags (operator-runtime's shell): the chart passes the
/// same `--leader-elect` and `--watch-namespace` to each and the same environment (identity from
/// the Pod name, the Lease's namespace, log level and format), with both helm majors.
#[test]
fn the_three_operators_get_the_same_flags_and_environment() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let helm = pair.helm_minor();
        let out = clients
            .run_helm(&[
                "template",
                "rel",
                chart,
                "-n",
                "ops",
                "--set",
                "clusterOperator.watchNamespace=db",
                "--set",
                "backupOperator.watchNamespace=db",
                "--set",
                "restoreOperator.watchNamespace=db",
                "--set",
                "logging.format=text",
            ])
            .unwrap();
        let objects = rendered_objects(&out);
        let deployments = of_kind(&objects, "Deployment");
        assert_eq!(deployments.len(), 3, "helm {helm}");
        for d in deployments {
            let container = &d["spec"]["template"]["spec"]["containers"][0];
            let args: Vec<&str> = container["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            for flag in ["--leader-elect=true", "--watch-namespace=db"] {
                assert!(args.contains(&flag), "helm {helm}: {flag} not in {args:?}");
            }
            // The old spellings are accepted by the binaries but no longer rendered.
            assert!(
                !args
                    .iter()
                    .any(|a| a.starts_with("--namespace") || a.starts_with("--pod-name")),
                "helm {helm}: {args:?}"
            );
            let env = container["env"].as_array().unwrap();
            let var = |name: &str| env.iter().find(|e| e["name"] == name).cloned();
            assert_eq!(
                var("POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
                "metadata.name"
            );
            assert_eq!(
                var("POD_NAMESPACE").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
                "metadata.namespace"
            );
            assert_eq!(var("LOG_FORMAT").unwrap()["value"], "text", "helm {helm}");
            assert_eq!(var("LOG_LEVEL").unwrap()["value"], "info", "helm {helm}");
        }
    }
}

/// `rbac.scope=namespaced`: each operator gets a Role and RoleBinding in its watchNamespace and no
/// ClusterRole of its own (the aggregated user roles stay); without a watchNamespace the chart
/// refuses, naming the value. The Lease's name is derived from the release, so two releases in
/// one namespace never share one. Both helm majors.
#[test]
fn namespaced_rbac_and_per_release_leases() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let helm = pair.helm_minor();
        let out = clients
            .run_helm(&[
                "template",
                "rel",
                chart,
                "-n",
                "ops",
                "--set",
                "rbac.scope=namespaced",
                "--set",
                "clusterOperator.watchNamespace=db",
                "--set",
                "backupOperator.watchNamespace=db",
                "--set",
                "restoreOperator.watchNamespace=db2",
            ])
            .unwrap();
        let objects = rendered_objects(&out);
        let cluster_roles: Vec<&str> = of_kind(&objects, "ClusterRole")
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(
            cluster_roles.iter().all(|n| n.contains("aggregate-to")),
            "helm {helm}: operator ClusterRoles in namespaced scope: {cluster_roles:?}"
        );
        assert!(
            of_kind(&objects, "ClusterRoleBinding").is_empty(),
            "helm {helm}"
        );
        for (suffix, ns, component) in [
            ("cluster", "db", "cluster-operator"),
            ("backup", "db", "backup-operator"),
            ("restore", "db2", "restore-operator"),
        ] {
            let name = format!("rel-etcd-operator-{suffix}");
            let role = of_kind(&objects, "Role")
                .into_iter()
                .find(|r| r["metadata"]["name"] == name.as_str())
                .unwrap_or_else(|| panic!("helm {helm}: no Role {name}"));
            assert_eq!(role["metadata"]["namespace"], ns, "helm {helm}");
            assert!(!role["rules"].as_array().unwrap().is_empty());
            let binding = of_kind(&objects, "RoleBinding")
                .into_iter()
                .find(|b| b["metadata"]["name"] == name.as_str())
                .unwrap_or_else(|| panic!("helm {helm}: no RoleBinding {name}"));
            assert_eq!(binding["metadata"]["namespace"], ns);
            assert_eq!(binding["roleRef"]["kind"], "Role");
            assert_eq!(binding["roleRef"]["name"], name.as_str());
            assert_eq!(binding["subjects"][0]["name"], name.as_str());
            assert_eq!(binding["subjects"][0]["namespace"], "ops");
            // Leader election stays in the release namespace.
            let election = of_kind(&objects, "Role")
                .into_iter()
                .find(|r| r["metadata"]["name"] == format!("{name}-leader-election"))
                .unwrap();
            assert_eq!(election["metadata"]["namespace"], "ops");
            let deployment = of_kind(&objects, "Deployment")
                .into_iter()
                .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == component)
                .unwrap();
            let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
            assert!(
                args.as_array()
                    .unwrap()
                    .contains(&serde_json::json!(format!("--watch-namespace={ns}"))),
                "helm {helm}: {args}"
            );
        }

        // Namespaced scope without a watched namespace: refused, naming the missing value.
        let err = clients
            .run_helm(&[
                "template",
                "rel",
                chart,
                "--set",
                "rbac.scope=namespaced",
                "--set",
                "clusterOperator.watchNamespace=db",
                "--set",
                "restoreOperator.watchNamespace=db",
            ])
            .expect_err("namespaced scope without backupOperator.watchNamespace")
            .to_string();
        assert!(
            err.contains("backupOperator.watchNamespace"),
            "helm {helm}: {err}"
        );
        // ... unless that operator is disabled.
        clients
            .run_helm(&[
                "template",
                "rel",
                chart,
                "--set",
                "rbac.scope=namespaced",
                "--set",
                "clusterOperator.watchNamespace=db",
                "--set",
                "restoreOperator.watchNamespace=db",
                "--set",
                "backupOperator.enabled=false",
            ])
            .unwrap_or_else(|e| panic!("helm {helm}: {e}"));

        // Two releases in one namespace: distinct Leases. The name is also the install's
        // identity in the namespace claims, so it is passed without leader election too.
        let lease_with = |release: &str, set: &[&str]| -> Vec<String> {
            let mut args = vec!["template", release, chart, "-n", "ops"];
            args.extend(set.iter().flat_map(|s| ["--set", s]));
            let out = clients.run_helm(&args).unwrap();
            let mut names: Vec<String> = of_kind(&rendered_objects(&out), "Deployment")
                .iter()
                .flat_map(|d| {
                    d["spec"]["template"]["spec"]["containers"][0]["args"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|a| a.as_str()?.strip_prefix("--lease-name="))
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect();
            names.sort();
            names
        };
        let lease = |release: &str| lease_with(release, &[]);
        assert_eq!(
            lease("a"),
            [
                "a-etcd-operator-backup",
                "a-etcd-operator-cluster",
                "a-etcd-operator-restore"
            ],
            "helm {helm}"
        );
        assert!(lease("b").iter().all(|n| n.starts_with("b-")));
        assert_eq!(
            lease_with("a", &["leaderElection.enabled=false"]),
            lease("a"),
            "helm {helm}"
        );
    }
}

/// The `helm test` hook: a test Pod of the chart's image running `etcd-backup-operator
/// self-test` against each enabled operator's metrics Service; off with tests.enabled=false.
#[test]
fn the_helm_test_hook_checks_every_enabled_operator() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let helm = pair.helm_minor();
        let out = clients
            .run_helm(&[
                "template",
                "rel",
                chart,
                "-n",
                "ops",
                "--set",
                "restoreOperator.enabled=false",
            ])
            .unwrap();
        let objects = rendered_objects(&out);
        let pod = of_kind(&objects, "Pod")
            .into_iter()
            .find(|p| p["metadata"]["annotations"]["helm.sh/hook"] == "test")
            .unwrap_or_else(|| panic!("helm {helm}: no test hook Pod"));
        let container = &pod["spec"]["containers"][0];
        assert_eq!(
            container["command"],
            serde_json::json!(["/usr/local/bin/etcd-backup-operator", "self-test"])
        );
        assert_eq!(
            container["args"],
            serde_json::json!([
                "--url=http://rel-etcd-operator-cluster-metrics.ops.svc:8080/healthz",
                "--url=http://rel-etcd-operator-backup-metrics.ops.svc:8080/healthz",
                "--within-seconds=60"
            ]),
            "helm {helm}"
        );
        assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
        let out = clients
            .run_helm(&["template", "rel", chart, "--set", "tests.enabled=false"])
            .unwrap();
        assert!(!out.contains("helm.sh/hook: test"), "helm {helm}");
        let err = clients
            .run_helm(&["template", "rel", chart, "--set", "tests.withinSeconds=0"])
            .expect_err("tests.withinSeconds=0")
            .to_string();
        assert!(
            err.contains("tests.withinSeconds") || err.contains("/tests/withinSeconds"),
            "helm {helm}: {err}"
        );
    }
}

/// The restore's seed Pods: restoreOperator.seed.serviceAccountName (workload identity) and the
/// chart's imagePullSecrets reach the restore operator's flags, which put them on the seed Pod
/// (operators/restore/src/build.rs tests that half). Both helm majors.
#[test]
fn seed_pod_identity_and_pull_secrets_reach_the_restore_operator() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for pair in KubePair::ALL {
        let clients = KubeClients::find(pair).unwrap();
        let helm = pair.helm_minor();
        let args_of = |sets: &[&str]| -> Vec<String> {
            let mut args = vec!["template", "rel", chart, "-n", "ops"];
            for s in sets {
                args.extend(["--set", s]);
            }
            let out = clients.run_helm(&args).unwrap();
            let objects = rendered_objects(&out);
            let restore = of_kind(&objects, "Deployment")
                .into_iter()
                .find(|d| d["metadata"]["name"] == "rel-etcd-operator-restore")
                .unwrap();
            restore["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .filter(|a| {
                    a.starts_with("--seed-service-account")
                        || a.starts_with("--seed-image-pull-secret")
                })
                .collect()
        };
        assert!(args_of(&[]).is_empty(), "helm {helm}: nothing by default");
        assert_eq!(
            args_of(&[
                "restoreOperator.seed.serviceAccountName=etcd-restore-irsa",
                "imagePullSecrets[0].name=regcred",
                "imagePullSecrets[1].name=mirror",
            ]),
            [
                "--seed-service-account=etcd-restore-irsa",
                "--seed-image-pull-secret=regcred",
                "--seed-image-pull-secret=mirror",
            ],
            "helm {helm}"
        );
    }
}
