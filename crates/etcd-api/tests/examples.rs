//! Every manifest in `examples/` parses into the API types and passes the CRD's CEL rules and
//! the operator-side validation, so the examples users copy cannot rot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use etcd_api::{EtcdBackup, EtcdCluster, EtcdRestore, validation};
use k8s_openapi::api::core::v1::Secret;
use kube::CustomResourceExt;
use kube::core::cel::Validator;
use serde_json::Value;

fn examples() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
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
