//! The engine against this project's real CRD schemas (fixtures generated from the Helm chart's
//! CRDs: `charts/etcd-operator/templates/crds/*.yaml` without the Helm `if` line).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use localkube_schema::status::{causes, invalid_message, strict_decoding_message};
use localkube_schema::{FieldError, StructuralSchema};
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/{name}.etcd.operator.rs.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn schema_of(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

fn compiled(name: &str) -> StructuralSchema {
    StructuralSchema::compile(schema_of(&fixture(name))).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// decode → prune → default → validate, as the apiserver does on create (`old == None`) and update.
fn admit(
    schema: &StructuralSchema,
    mut obj: Value,
    old: Option<&Value>,
) -> (Value, Vec<String>, Vec<FieldError>) {
    let removed = schema.prune(&mut obj);
    schema.apply_defaults(&mut obj);
    let errors = schema.validate(&obj, old);
    (obj, removed, errors)
}

fn cluster(spec: Value) -> Value {
    json!({"apiVersion": "etcd.operator.rs/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": "demo"}, "spec": spec})
}

fn texts(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn every_project_crd_compiles() {
    for name in ["etcdclusters", "etcdbackups", "etcdrestores"] {
        compiled(name);
    }
}

#[test]
fn valid_cluster_is_accepted_with_defaults() {
    let schema = compiled("etcdclusters");
    let (obj, removed, errors) = admit(
        &schema,
        cluster(json!({"size": 3, "version": "3.5.17"})),
        None,
    );
    assert!(removed.is_empty(), "{removed:?}");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(obj["spec"]["paused"], json!(false));
    assert_eq!(
        obj["spec"]["repository"],
        json!("gcr.io/etcd-development/etcd")
    );
    assert_eq!(
        obj["spec"]["storage"],
        json!({"reclaimPolicy": "Retain", "size": "1Gi"})
    );
    assert_eq!(
        obj["metadata"],
        json!({"name": "demo"}),
        "metadata is the server's, untouched"
    );
}

#[test]
fn schema_violations_have_apiserver_messages() {
    let schema = compiled("etcdclusters");
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"size": 0, "version": "3.5.17"}),
            vec![
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ],
        ),
        (
            json!({"size": 9, "version": "3.5.17"}),
            vec![
                "spec.size: Invalid value: 9: spec.size in body should be less than or equal to 7",
            ],
        ),
        (
            json!({"size": 3, "version": "v3.5"}),
            vec![
                "spec.version: Invalid value: \"v3.5\": spec.version in body should match '^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)$'",
            ],
        ),
        (
            json!({"size": 3, "version": "3.5.17", "storage": {"reclaimPolicy": "Keep"}}),
            vec![
                "spec.storage.reclaimPolicy: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"",
                SKIPPED_CEL,
            ],
        ),
        (
            json!({"size": 3}),
            vec!["spec.version: Required value", SKIPPED_CEL],
        ),
        (
            json!({"size": "three", "version": "3.5.17"}),
            vec![
                "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
                SKIPPED_CEL,
            ],
        ),
        (
            json!({"size": 3, "version": "3.5.17", "repository": ""}),
            vec![
                "spec.repository: Invalid value: \"\": spec.repository in body should be at least 1 chars long",
            ],
        ),
        (
            json!({"size": 3, "version": "3.5.17", "repository": "x".repeat(513)}),
            vec![
                "spec.repository: Too long: may not be more than 512 bytes",
                SKIPPED_CEL,
            ],
        ),
    ];
    for (spec, want) in cases {
        let (_, _, errors) = admit(&schema, cluster(spec.clone()), None);
        assert_eq!(texts(&errors), want, "{spec}");
    }
}

const SKIPPED_CEL: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

#[test]
fn the_422_message_and_causes() {
    let schema = compiled("etcdclusters");
    let (_, _, errors) = admit(
        &schema,
        cluster(json!({"size": 0, "version": "3.5.17"})),
        None,
    );
    assert_eq!(
        invalid_message("EtcdCluster", "etcd.operator.rs", "demo", &errors),
        "EtcdCluster.etcd.operator.rs \"demo\" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
    );
    let cause = &causes(&errors)[0];
    assert_eq!(
        (cause.reason, cause.field.as_str()),
        ("FieldValueInvalid", "spec.size")
    );
}

#[test]
fn unknown_fields_are_pruned_and_reported() {
    let schema = compiled("etcdclusters");
    let obj = cluster(json!({
        "size": 3, "version": "3.5.17", "foo": 1,
        "storage": {"size": "2Gi", "bar": {"x": 1}},
        "pod": {"labels": {"app": "x"}, "tolerations": [{"key": "k", "operator": "Exists", "bogus": true}]}
    }));
    let mut with_status = obj.clone();
    with_status["status"] = json!({"members": [{"name": "m0", "extra": 1}]});
    let (pruned, removed, errors) = admit(&schema, with_status, None);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        removed,
        vec![
            "spec.foo",
            "spec.pod.tolerations[0].bogus",
            "spec.storage.bar",
            "status.members[0].extra"
        ]
    );
    assert_eq!(
        pruned["spec"]["pod"]["labels"],
        json!({"app": "x"}),
        "map values are kept"
    );
    assert!(pruned["spec"].get("foo").is_none());
    assert_eq!(
        strict_decoding_message(&[], &removed[..1]),
        "strict decoding error: unknown field \"spec.foo\""
    );
}

#[test]
fn cel_rules_report_their_messages() {
    let schema = compiled("etcdclusters");
    let (_, _, errors) = admit(
        &schema,
        cluster(
            json!({"size": 3, "version": "3.5.17", "etcdOptions": {"electionTimeoutMs": 100, "heartbeatIntervalMs": 100}}),
        ),
        None,
    );
    assert_eq!(
        texts(&errors),
        vec![
            "spec.etcdOptions: Invalid value: electionTimeoutMs must be at least 5 times heartbeatIntervalMs (etcd's defaults are 1000 and 100)"
        ]
    );

    let mut long = cluster(json!({"size": 3, "version": "3.5.17"}));
    long["metadata"]["name"] = json!("a".repeat(51));
    let (_, _, errors) = admit(&schema, long, None);
    assert_eq!(
        texts(&errors),
        vec![
            "<nil>: Invalid value: metadata.name must be a DNS label of at most 50 characters (lowercase letters, digits and '-', starting with a letter): member Pods, PVCs and Services are named after it"
        ]
    );
}

#[test]
fn transition_rules_run_on_update_only() {
    let schema = compiled("etcdclusters");
    let old = admit(
        &schema,
        cluster(json!({"size": 3, "version": "3.5.17", "storage": {"storageClassName": "fast"}})),
        None,
    );
    assert!(old.2.is_empty(), "{:?}", old.2);
    let changed =
        cluster(json!({"size": 3, "version": "3.5.17", "storage": {"storageClassName": "slow"}}));
    let (_, _, on_create) = admit(&schema, changed.clone(), None);
    assert!(on_create.is_empty(), "no oldSelf on create: {on_create:?}");
    let (_, _, on_update) = admit(&schema, changed, Some(&old.0));
    assert_eq!(
        texts(&on_update),
        vec![
            "spec.storage: Invalid value: storageClassName is immutable: existing members' volumes cannot move to another class"
        ]
    );
    let same =
        cluster(json!({"size": 5, "version": "3.5.17", "storage": {"storageClassName": "fast"}}));
    assert!(admit(&schema, same, Some(&old.0)).2.is_empty());
}

#[test]
fn updates_ratchet_unchanged_invalid_values() {
    let schema = compiled("etcdclusters");
    // Stored before a stricter schema: size 0 and bad etcd options.
    let mut stored =
        cluster(json!({"size": 0, "version": "3.5.17", "etcdOptions": {"electionTimeoutMs": 100}}));
    schema.apply_defaults(&mut stored);
    let mut update = stored.clone();
    update["spec"]["paused"] = json!(true);
    let errors = schema.validate(&update, Some(&stored));
    assert!(
        errors.is_empty(),
        "unchanged values are not re-judged: {errors:?}"
    );
    // A rule on a value that changed is judged again, even if the change is elsewhere in it.
    let mut long = stored.clone();
    long["metadata"]["name"] = json!("a".repeat(51));
    let errors = schema.validate(&long, Some(&stored));
    assert_eq!(errors.len(), 1, "{errors:?}");
    update["spec"]["size"] = json!(-1);
    assert_eq!(
        texts(&schema.validate(&update, Some(&stored))),
        vec![
            "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 1"
        ]
    );
}

#[test]
fn list_map_duplicates() {
    let schema = compiled("etcdclusters");
    let mut obj = cluster(json!({"size": 3, "version": "3.5.17"}));
    obj["status"] = json!({"members": [{"name": "a"}, {"name": "b"}, {"name": "a"}]});
    let (_, _, errors) = admit(&schema, obj, None);
    assert_eq!(
        texts(&errors),
        vec!["status.members[2]: Duplicate value: {\"name\":\"a\"}"]
    );
    assert_eq!(errors[0].reason(), "FieldValueDuplicate");
}

#[test]
fn backups_and_restores() {
    let backups = compiled("etcdbackups");
    let backup = |spec: Value| json!({"apiVersion": "etcd.operator.rs/v1alpha1", "kind": "EtcdBackup", "metadata": {"name": "b"}, "spec": spec});
    let ok = backup(json!({"clusterName": "demo", "s3": {"bucket": "bkt"}}));
    let (stored, _, errors) = admit(&backups, ok, None);
    assert!(errors.is_empty(), "{errors:?}");
    let (_, _, errors) = admit(&backups, backup(json!({"s3": {"bucket": "bkt"}})), None);
    assert_eq!(
        texts(&errors),
        vec!["spec: Invalid value: exactly one of spec.clusterName and spec.endpoints must be set"]
    );
    let (_, _, errors) = admit(
        &backups,
        backup(json!({"clusterName": "demo", "s3": {"bucket": "a..b"}})),
        None,
    );
    assert_eq!(
        texts(&errors),
        vec!["spec.s3.bucket: Invalid value: \"a..b\": bucket must not contain '..'"]
    );
    let (_, _, errors) = admit(
        &backups,
        backup(json!({"clusterName": "other", "s3": {"bucket": "bkt"}})),
        Some(&stored),
    );
    assert_eq!(
        texts(&errors),
        vec![
            "spec: Invalid value: spec is immutable: an EtcdBackup runs once; create a new one instead"
        ]
    );
    let (_, _, errors) = admit(
        &backups,
        backup(json!({"endpoints": ["ftp://x"], "s3": {"bucket": "bkt"}})),
        None,
    );
    assert_eq!(
        texts(&errors),
        vec![
            "spec.endpoints[0]: Invalid value: \"ftp://x\": spec.endpoints[0] in body should match '^https?://[^\\s/]+/?$'"
        ]
    );

    let restores = compiled("etcdrestores");
    let restore = json!({"apiVersion": "etcd.operator.rs/v1alpha1", "kind": "EtcdRestore", "metadata": {"name": "r"},
        "spec": {"clusterName": "demo", "source": {"backupRef": {"name": "b"}}, "clusterSpec": {"size": 1, "version": "3.5.17"}}});
    let (stored, removed, errors) = admit(&restores, restore.clone(), None);
    assert!(
        errors.is_empty() && removed.is_empty(),
        "{errors:?} {removed:?}"
    );
    let mut renamed = restore;
    renamed["spec"]["clusterName"] = json!("other");
    let (_, _, errors) = admit(&restores, renamed, Some(&stored));
    assert_eq!(
        texts(&errors),
        vec!["spec.clusterName: Invalid value: \"other\": clusterName is immutable"]
    );
}
