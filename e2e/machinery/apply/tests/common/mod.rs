//! Schemas and helpers shared by the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use localkube_apply::{
    ApplyError, FieldSet, ManagedFieldsEntry, OpenApiSchema, Operation, Request, Schema, apply,
    managed_fields, record_update,
};
use serde_json::{Value, json};

/// A Deployment-like schema: containers keyed by name, ports by (containerPort, protocol) with
/// protocol defaulting to TCP, args atomic, a status with conditions keyed by type.
pub fn deployment_schema() -> OpenApiSchema {
    OpenApiSchema::new(json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "paused": {"type": "boolean"},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                "template": {"type": "object", "properties": {
                    "metadata": {"type": "object", "properties": {
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                    "spec": {"type": "object", "properties": {
                        "containers": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "properties": {
                                "name": {"type": "string"},
                                "image": {"type": "string"},
                                "args": {"type": "array", "items": {"type": "string"}},
                                "ports": {
                                    "type": "array",
                                    "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                                    "items": {"type": "object", "properties": {
                                        "containerPort": {"type": "integer"},
                                        "protocol": {"type": "string", "default": "TCP"}}}
                                }
                            }}
                        }
                    }}
                }}
            }},
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "phase": {"type": "string"},
                "conditions": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "properties": {
                        "type": {"type": "string"}, "status": {"type": "string"}}}
                }
            }}
        }
    }))
}

/// ConfigMap: `data` is a declared field holding free-form entries.
pub fn configmap_schema() -> OpenApiSchema {
    OpenApiSchema::new(json!({
        "type": "object",
        "properties": {
            "data": {"type": "object", "additionalProperties": {"type": "string"}},
            "binaryData": {"type": "object", "additionalProperties": {"type": "string"}}
        }
    }))
}

/// Builds requests against one endpoint.
pub struct Endpoint<'a> {
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub reset: FieldSet,
    pub schema: &'a dyn Schema,
}

impl<'a> Endpoint<'a> {
    pub fn new(api_version: &'a str, schema: &'a dyn Schema) -> Self {
        Endpoint {
            api_version,
            subresource: "",
            reset: FieldSet::new(),
            schema,
        }
    }

    pub fn request(&'a self, manager: &'a str, now: &'a str) -> Request<'a> {
        Request {
            manager,
            api_version: self.api_version,
            subresource: self.subresource,
            reset_fields: &self.reset,
            schema: self.schema,
            now,
        }
    }

    pub fn apply(
        &self,
        manager: &str,
        now: &str,
        live: Option<&Value>,
        applied: &Value,
        force: bool,
    ) -> Result<Value, ApplyError> {
        apply(&self.request(manager, now), live, applied, force)
    }

    pub fn update(&self, manager: &str, now: &str, old: Option<&Value>, new: &Value) -> Value {
        record_update(&self.request(manager, now), old, new)
    }
}

/// `(manager, operation, subresource, fieldsV1 bytes)` of one managedFields entry.
pub type Owner = (String, Operation, String, String);

/// The [`Owner`] row of every managedFields entry, in stored order.
pub fn owners(obj: &Value) -> Vec<Owner> {
    managed_fields(obj)
        .unwrap()
        .into_iter()
        .map(|e: ManagedFieldsEntry| {
            (
                e.manager,
                e.operation,
                e.subresource,
                e.fields.to_fields_v1_json(),
            )
        })
        .collect()
}

/// Shorthand for an expected owner row.
pub fn owner(
    manager: &str,
    op: Operation,
    sub: &str,
    fields: &str,
) -> (String, Operation, String, String) {
    (manager.to_string(), op, sub.to_string(), fields.to_string())
}

/// The conflict error's message, panicking on success or another error.
pub fn conflict_message(result: Result<Value, ApplyError>) -> String {
    match result {
        Err(ApplyError::Conflict(c)) => c.message,
        other => panic!("expected a conflict, got {other:?}"),
    }
}
