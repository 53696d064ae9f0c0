//! ObjectMeta in full: timestamps, owner references, finalizers, managed fields.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_pb::api::core::v1::ConfigMap;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
};
use localkube_proto::decode;
use localkube_proto::testing::envelope;
use serde_json::{Value, json};

fn s(value: &str) -> Option<String> {
    Some(value.to_owned())
}

fn metadata_json(metadata: ObjectMeta) -> Value {
    let config_map = ConfigMap {
        metadata: Some(metadata),
        ..ConfigMap::default()
    };
    decode(&envelope("v1", "ConfigMap", &config_map)).unwrap()["metadata"].clone()
}

#[test]
fn every_object_meta_field() {
    let metadata = ObjectMeta {
        name: s("cfg"),
        generate_name: s("cfg-"),
        namespace: s("default"),
        self_link: s(""),
        uid: s("11111111-2222-3333-4444-555555555555"),
        resource_version: s("981"),
        generation: Some(3),
        creation_timestamp: Some(Time {
            seconds: Some(1_767_323_045),
            nanos: Some(0),
        }),
        deletion_timestamp: Some(Time {
            seconds: Some(1_767_323_105),
            nanos: Some(500_000_000),
        }),
        deletion_grace_period_seconds: Some(0),
        labels: [("app".to_owned(), "web".to_owned())].into(),
        annotations: [("note".to_owned(), String::new())].into(),
        owner_references: vec![OwnerReference {
            api_version: s("apps/v1"),
            kind: s("ReplicaSet"),
            name: s("web-5d4"),
            uid: s("r-1"),
            controller: Some(true),
            block_owner_deletion: Some(false),
        }],
        finalizers: vec!["example.com/cleanup".to_owned(), "kubernetes".to_owned()],
        managed_fields: vec![ManagedFieldsEntry {
            manager: s("kubectl-create"),
            operation: s("Update"),
            api_version: s("v1"),
            time: Some(Time {
                seconds: Some(1_767_323_045),
                nanos: None,
            }),
            fields_type: s("FieldsV1"),
            fields_v1: Some(FieldsV1 {
                raw: Some(br#"{"f:data":{".":{},"f:a":{}}}"#.to_vec()),
            }),
            subresource: s(""),
        }],
    };
    assert_eq!(
        metadata_json(metadata),
        json!({
            "name": "cfg",
            "generateName": "cfg-",
            "namespace": "default",
            "uid": "11111111-2222-3333-4444-555555555555",
            "resourceVersion": "981",
            "generation": 3,
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "deletionTimestamp": "2026-01-02T03:05:05Z",
            "deletionGracePeriodSeconds": 0,
            "labels": {"app": "web"},
            "annotations": {"note": ""},
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-5d4",
                "uid": "r-1",
                "controller": true,
                "blockOwnerDeletion": false
            }],
            "finalizers": ["example.com/cleanup", "kubernetes"],
            "managedFields": [{
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-02T03:04:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}}}
            }]
        })
    );
}

#[test]
fn go_time_rules() {
    let creation = |time: Option<Time>| {
        metadata_json(ObjectMeta {
            name: s("t"),
            creation_timestamp: time,
            ..ObjectMeta::default()
        })["creationTimestamp"]
            .clone()
    };
    let cases: &[(Option<Time>, Value)] = &[
        // Go writes the zero time as an empty message and reads it back as zero: JSON null.
        (None, Value::Null),
        (Some(Time::default()), Value::Null),
        (
            Some(Time {
                seconds: Some(-62_135_596_800),
                nanos: Some(0),
            }),
            Value::Null,
        ),
        // Present but zero seconds is the Unix epoch, not the zero time.
        (
            Some(Time {
                seconds: Some(0),
                nanos: None,
            }),
            json!("1970-01-01T00:00:00Z"),
        ),
        // metav1.Time is second precision: the protobuf nanos are dropped, never rounded.
        (
            Some(Time {
                seconds: Some(1_767_323_045),
                nanos: Some(999_999_999),
            }),
            json!("2026-01-02T03:04:05Z"),
        ),
        (
            Some(Time {
                seconds: Some(-1),
                nanos: None,
            }),
            json!("1969-12-31T23:59:59Z"),
        ),
    ];
    for (time, want) in cases {
        assert_eq!(&creation(*time), want, "{time:?}");
    }
}

#[test]
fn managed_fields_without_fields_v1() {
    let entry = ManagedFieldsEntry {
        manager: s("helm"),
        operation: s("Apply"),
        ..ManagedFieldsEntry::default()
    };
    let got = metadata_json(ObjectMeta {
        managed_fields: vec![entry],
        ..ObjectMeta::default()
    });
    assert_eq!(
        got["managedFields"],
        json!([{"manager": "helm", "operation": "Apply"}])
    );
}
