//! The project's own CRDs on localkube, spec §g items 1 and 3: usable the moment they are
//! applied, schema validation with the apiserver's wording, pruning under --validate=false,
//! strict unknown-field errors, defaults, CEL rules (including transition rules), printer
//! columns, and a CRD with an unsupported CEL function refused at creation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;

const CLUSTER: &str = r#"
apiVersion: etcd.operator.rs/v1alpha1
kind: EtcdCluster
metadata:
  name: main
spec:
  size: 3
  version: "3.5.1"
"#;

async fn etcd_keys(lk: &LocalKube, prefix: &str) -> i64 {
    let mut etcd = etcd_client::Client::connect([lk.etcd_endpoint().unwrap()], None)
        .await
        .unwrap();
    etcd.get(
        prefix,
        Some(
            etcd_client::GetOptions::new()
                .with_prefix()
                .with_count_only(),
        ),
    )
    .await
    .unwrap()
    .count()
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn crds(pair: KubePair) {
    let lk = start().await;
    let k = clients(pair);
    lk.kubectl_stdin(&k, &["apply"], &project_crds()).unwrap();
    // Immediately usable, by short name too.
    let empty = lk.kubectl(&k, &["get", "etcd"]).unwrap();
    assert!(
        empty.is_empty() || empty.contains("No resources"),
        "{empty}"
    );

    lk.kubectl_stdin(&k, &["apply"], CLUSTER).unwrap();
    let cluster = json(
        &lk.kubectl(&k, &["get", "etcdcluster", "main", "-o", "json"])
            .unwrap(),
    );
    assert_eq!(
        cluster["spec"]["storage"]["reclaimPolicy"], "Retain",
        "schema defaults applied: {cluster}"
    );
    let table = lk.kubectl(&k, &["get", "etcd"]).unwrap();
    assert!(
        table.lines().next().unwrap().contains("SIZE"),
        "printer columns:\n{table}"
    );

    let zero = failure(lk.kubectl_stdin(&k, &["apply"], &CLUSTER.replace("size: 3", "size: 0")));
    assert!(
        zero.contains(r#"The EtcdCluster "main" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"#),
        "{zero}"
    );
    let unknown = failure(lk.kubectl_stdin(
        &k,
        &["apply"],
        &CLUSTER.replace("size: 3", "size: 3\n  bogus: 1"),
    ));
    assert!(
        unknown.contains(r#"unknown field "spec.bogus""#),
        "{unknown}"
    );
    lk.kubectl_stdin(
        &k,
        &["apply", "--validate=false"],
        &CLUSTER.replace("size: 3", "size: 3\n  bogus: 1"),
    )
    .unwrap();
    let pruned = json(
        &lk.kubectl(&k, &["get", "etcdcluster", "main", "-o", "json"])
            .unwrap(),
    );
    assert!(pruned["spec"].get("bogus").is_none(), "pruned: {pruned}");

    // A CEL transition rule: storageClassName is immutable (it can be neither added nor changed).
    let added = failure(lk.kubectl_stdin(
        &k,
        &["apply"],
        &CLUSTER.replace("size: 3", "size: 3\n  storage:\n    storageClassName: fast"),
    ));
    assert!(added.contains("storageClassName is immutable"), "{added}");
    let fast = CLUSTER
        .replace("name: main", "name: fast")
        .replace("size: 3", "size: 3\n  storage:\n    storageClassName: fast");
    lk.kubectl_stdin(&k, &["apply"], &fast).unwrap();
    let changed = failure(lk.kubectl_stdin(
        &k,
        &["apply"],
        &fast.replace("storageClassName: fast", "storageClassName: slow"),
    ));
    assert!(changed.contains("spec.storage"), "{changed}");
    assert!(changed.contains("immutable"), "{changed}");

    // A CRD whose rule calls a function the server does not have: refused, not skipped.
    let bad_crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.probe.example.com}
spec:
  group: probe.example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.noSuchFunction()"
            properties:
              a: {type: string}
"#;
    let refused = failure(lk.kubectl_stdin(&k, &["apply"], bad_crd));
    assert!(
        refused.contains("The CustomResourceDefinition \"gadgets.probe.example.com\" is invalid"),
        "{refused}"
    );
    assert!(
        refused.contains("undeclared reference to 'noSuchFunction'"),
        "{refused}"
    );
    let missing = failure(lk.kubectl(&k, &["get", "crd", "gadgets.probe.example.com"]));
    assert!(missing.contains("not found"), "{missing}");

    // Deleting the CRD deletes its objects first.
    lk.kubectl(
        &k,
        &[
            "delete",
            "crd",
            "etcdclusters.etcd.operator.rs",
            "--timeout=30s",
        ],
    )
    .unwrap();
    let crd_gone = failure(lk.kubectl(&k, &["get", "crd", "etcdclusters.etcd.operator.rs"]));
    assert!(crd_gone.contains("not found"), "{crd_gone}");
    // kubectl's discovery cache may still name the resource; the server no longer serves it.
    let gone = failure(lk.kubectl(&k, &["get", "etcdclusters"]));
    assert!(
        gone.contains("the server doesn't have a resource type")
            || gone.contains("the server could not find the requested resource"),
        "{gone}"
    );
    let underneath = etcd_keys(&lk, "/registry/etcd.operator.rs/etcdclusters/").await;
    assert_eq!(
        underneath, 0,
        "the custom resources were deleted with their CRD"
    );
}

#[tokio::test]
async fn project_crds_with_kubectl_current() {
    crds(KubePair::Current).await;
}

#[tokio::test]
async fn project_crds_with_kubectl_previous() {
    crds(KubePair::Previous).await;
}
