//! Every manifest in `examples/` parses into the API types and passes the CRD's CEL rules and
//! the operator-side validation, and every Helm values file in it names only the chart's values
//! and renders what it promises, so the examples users copy cannot rot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use etcd_api::{EtcdBackup, EtcdCluster, EtcdRestore, validation};
use k8s_openapi::api::core::v1::Secret;
use kube::CustomResourceExt;
use kube::core::cel::Validator;
use serde_json::Value;
use test_support::{KubeClients, KubePair};

/// The examples that are Helm values files for the chart rather than manifests (they have no
/// `kind`); each is checked by [`values_file_renders_what_it_promises`].
const VALUES_FILES: &[&str] = &["scheduled-backup.yaml"];

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/etcd-operator")
}

fn examples() -> Vec<(String, Value)> {
    let dir = examples_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "examples/ holds the user-facing manifests"
    );
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let value: Value =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                value,
            )
        })
        .collect()
}

fn passes_cel<K: CustomResourceExt>(name: &str, value: &Value) {
    let schema = etcd_api::crd::openapi_schema(&K::crd()).unwrap();
    if let Err(errors) = Validator::new().validate(&schema, value, None) {
        panic!("{name}: {errors:?}");
    }
}

#[test]
fn every_example_is_a_valid_object_of_a_known_kind() {
    let mut kinds = Vec::new();
    for (name, value) in examples() {
        if VALUES_FILES.contains(&name.as_str()) {
            assert!(
                value.get("kind").is_none(),
                "{name} is listed as a values file but has a kind"
            );
            continue;
        }
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        match kind.as_str() {
            "EtcdCluster" => {
                passes_cel::<EtcdCluster>(&name, &value);
                let cluster: EtcdCluster = serde_json::from_value(value).unwrap();
                validation::validate_cluster_spec(&cluster.spec)
                    .unwrap_or_else(|e| panic!("{name}: {e:?}"));
            }
            "EtcdBackup" => {
                passes_cel::<EtcdBackup>(&name, &value);
                let _: EtcdBackup = serde_json::from_value(value).unwrap();
            }
            "EtcdRestore" => {
                passes_cel::<EtcdRestore>(&name, &value);
                let restore: EtcdRestore = serde_json::from_value(value).unwrap();
                if let Some(spec) = &restore.spec.cluster_spec {
                    validation::validate_cluster_spec(spec)
                        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
                }
            }
            "Secret" => {
                let secret: Secret = serde_json::from_value(value).unwrap();
                let keys: Vec<&String> = secret.string_data.as_ref().unwrap().keys().collect();
                assert_eq!(
                    keys,
                    ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
                    "{name}"
                );
            }
            other => panic!("{name}: unexpected kind {other:?}; add a check for it here"),
        }
        kinds.push(kind);
    }
    for expected in ["EtcdCluster", "EtcdBackup", "EtcdRestore", "Secret"] {
        assert!(
            kinds.iter().any(|k| k == expected),
            "an example of {expected}"
        );
    }
}

/// Every key path of `example` (a values file) that `chart` (the chart's values.yaml) lacks:
/// helm ignores unknown values silently, so a misspelt key would do nothing.
fn unknown_keys(example: &Value, chart: &Value, path: &str, out: &mut Vec<String>) {
    let Some(map) = example.as_object() else {
        return;
    };
    for (key, value) in map {
        let here = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match chart.get(key) {
            None => out.push(here),
            // A map the chart leaves open (e.g. `nodeSelector: {}`) takes any key.
            Some(Value::Object(open)) if open.is_empty() => {}
            Some(known) => unknown_keys(value, known, &here, out),
        }
    }
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The objects of a `helm template` output, as JSON values.
fn rendered_objects(output: &str) -> Vec<Value> {
    output
        .split("\n---")
        .filter(|doc| doc.contains("kind:"))
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect()
}

/// examples/scheduled-backup.yaml: only the chart's own values, `helm lint --strict` passes with
/// it, and `helm template -f` renders a CronJob on its schedule whose `create-backup` arguments
/// are exactly its values, with the Role in the cluster's namespace reading only its Secret.
/// (The backup scenario, e2e/scenarios/tests/backup.rs, installs it and runs the CronJob.)
#[test]
fn values_file_renders_what_it_promises() {
    let chart = chart_dir();
    let chart_values = yaml_file(&chart.join("values.yaml"));
    let chart = chart.to_str().unwrap();
    let clients = KubeClients::find(KubePair::Current).unwrap();
    for name in VALUES_FILES {
        let path = examples_dir().join(name);
        let values = yaml_file(&path);
        let mut unknown = Vec::new();
        unknown_keys(&values, &chart_values, "", &mut unknown);
        assert!(
            unknown.is_empty(),
            "{name}: keys the chart's values.yaml does not have: {unknown:?}"
        );
        let path = path.to_str().unwrap();
        let lint = clients
            .run_helm(&["lint", "--strict", chart, "-f", path])
            .unwrap();
        assert!(lint.contains("0 chart(s) failed"), "{name}: {lint}");
    }

    let path = examples_dir().join("scheduled-backup.yaml");
    let v = yaml_file(&path)["scheduledBackup"].clone();
    assert_eq!(v["enabled"], true, "the example turns the CronJob on");
    let rendered = clients
        .run_helm(&[
            "template",
            "etcd-operator",
            chart,
            "-n",
            "etcd-operator",
            "-f",
            path.to_str().unwrap(),
        ])
        .unwrap();
    let objects = rendered_objects(&rendered);
    let component =
        |o: &&Value| o["metadata"]["labels"]["app.kubernetes.io/component"] == "scheduled-backup";
    let of_kind = |kind: &str| -> Vec<&Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .filter(component)
            .collect()
    };
    let cronjobs = of_kind("CronJob");
    assert_eq!(cronjobs.len(), 1, "{rendered}");
    let cronjob = cronjobs[0];
    assert_eq!(cronjob["spec"]["schedule"], v["schedule"]);
    let container = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let s = |v: &Value| v.as_str().unwrap().to_owned();
    let n = |v: &Value| v.as_u64().unwrap();
    let mut expected = vec![
        format!("--cluster={}", s(&v["clusterName"])),
        format!("--namespace={}", s(&v["namespace"])),
        format!("--bucket={}", s(&v["s3"]["bucket"])),
        format!("--prefix={}", s(&v["s3"]["prefix"])),
        format!("--endpoint={}", s(&v["s3"]["endpoint"])),
        format!("--region={}", s(&v["s3"]["region"])),
    ];
    if v["s3"]["forcePathStyle"] == true {
        expected.push("--force-path-style".into());
    }
    expected.extend([
        format!("--credentials-secret={}", s(&v["s3"]["credentialsSecret"])),
        format!("--timeout-seconds={}", n(&v["timeoutSeconds"])),
        "--wait".into(),
        format!("--wait-timeout-seconds={}", n(&v["timeoutSeconds"]) + 300),
        format!("--retain={}", n(&v["retain"])),
    ]);
    if v["deleteObjects"] == true {
        expected.push("--delete-objects".into());
    }
    assert_eq!(args, expected, "the CronJob's create-backup arguments");

    // The Job's rights live in the cluster's namespace and read no Secret but the example's.
    let roles = of_kind("Role");
    assert_eq!(roles.len(), 1, "{rendered}");
    assert_eq!(roles[0]["metadata"]["namespace"], v["namespace"]);
    let secret_rules: Vec<&Value> = roles[0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == "secrets")
        })
        .collect();
    assert_eq!(secret_rules.len(), 1, "{}", roles[0]);
    assert_eq!(
        secret_rules[0]["resourceNames"],
        serde_json::json!([v["s3"]["credentialsSecret"]])
    );
    let bindings = of_kind("RoleBinding");
    assert_eq!(bindings.len(), 1, "{rendered}");
    assert_eq!(bindings[0]["metadata"]["namespace"], v["namespace"]);
}
