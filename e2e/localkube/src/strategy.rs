//! Per-kind rules on the write path (kube-apiserver's strategies and admission): defaulting,
//! validation, custom-resource schemas, ClusterIP allocation, Job selectors, graceful pod
//! deletion, TTL leases for events, and what a CRD write changes in the served API.

use serde_json::{Value, json};

use crate::api::objects::{self, meta_mut, meta_str};
use crate::api::resources::ResourceType;
use crate::api::status::{ApiError, Cause};
use crate::api::{Query, Shared};

/// Event objects live for an hour, as with kube-apiserver's default `--event-ttl`.
const EVENT_TTL_SECONDS: i64 = 3600;

pub fn causes(errors: &[localkube_schema::FieldError]) -> Vec<Cause> {
    localkube_schema::status::dedup(errors)
        .into_iter()
        .map(|e| Cause {
            reason: e.reason().into(),
            field: e.field.clone(),
            message: e.to_string(),
        })
        .collect()
}

fn invalid(rt: &ResourceType, name: &str, errors: &[localkube_schema::FieldError]) -> ApiError {
    ApiError::invalid(
        &rt.qualified_kind(),
        &rt.group,
        &rt.kind,
        name,
        &causes(errors),
    )
}

/// Names: a DNS-1123 subdomain for most kinds, a DNS-1123 label for namespaces and services.
fn validate_name(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    use localkube_schema::names::{NameRule, validate_object_name};
    let name = objects::name(obj).unwrap_or("");
    let rule = match rt.kind.as_str() {
        "Namespace" | "Service" => NameRule::DnsLabel,
        // RBAC objects and Events allow any path segment (`system:...` names).
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" | "Event" => {
            NameRule::PathSegment
        }
        _ => NameRule::DnsSubdomain,
    };
    let errors = validate_object_name(name, "", rule);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid(rt, name, &errors))
    }
}

/// Schema handling of a custom resource (apiextensions order: prune, default, validate).
fn admit_custom(
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
    query: &Query,
) -> Result<(), ApiError> {
    let Some(schema) = rt.custom.as_ref().and_then(|c| c.schema.as_ref()) else {
        return Ok(());
    };
    let name = objects::name(obj).unwrap_or("").to_string();
    let unknown = schema.prune(obj);
    let strict = query.get("fieldValidation").map(String::as_str) == Some("Strict");
    if strict && !unknown.is_empty() {
        let fields: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            rt.kind,
            rt.version,
            rt.kind,
            fields.join(", ")
        )));
    }
    schema.apply_defaults(obj);
    let errors = schema.validate(obj, old);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid(rt, &name, &errors))
    }
}

/// Duplicate keys in a JSON body are an error under `fieldValidation=Strict` (a parsed value
/// has already lost them, so this looks at the bytes).
pub fn check_duplicate_fields(
    rt: &ResourceType,
    media: &str,
    raw: &[u8],
    query: &Query,
) -> Result<(), ApiError> {
    if query.get("fieldValidation").map(String::as_str) != Some("Strict")
        || !matches!(media, "" | "application/json")
    {
        return Ok(());
    }
    let duplicates = localkube_schema::strict::duplicate_fields(raw).unwrap_or_default();
    if duplicates.is_empty() {
        return Ok(());
    }
    Err(cannot_handle(
        rt,
        localkube_schema::status::strict_decoding_message(&duplicates, &[]),
    ))
}

/// kube-apiserver's 400 for a body its decoder refuses.
fn cannot_handle(rt: &ResourceType, why: String) -> ApiError {
    ApiError::bad_request(format!(
        "{} in version \"{}\" cannot be handled as a {}: {why}",
        rt.kind, rt.version, rt.kind
    ))
}

/// Decode checks of a built-in object: unknown fields dropped, or refused under
/// `fieldValidation=Strict`; a value of the wrong type refused (400, as the Go decoder does).
fn admit_builtin_fields(rt: &ResourceType, obj: &mut Value, query: &Query) -> Result<(), ApiError> {
    if rt.custom.is_some() {
        return Ok(());
    }
    let unknown = crate::builtin_types::drop_unknown_fields(&rt.group, &rt.kind, obj)
        .map_err(|why| cannot_handle(rt, why))?;
    if !unknown.is_empty() && query.get("fieldValidation").map(String::as_str) == Some("Strict") {
        return Err(cannot_handle(
            rt,
            localkube_schema::status::strict_decoding_message(&[], &unknown),
        ));
    }
    Ok(())
}

pub async fn admit_create(
    server: &Shared,
    rt: &ResourceType,
    obj: &mut Value,
    query: &Query,
) -> Result<(), ApiError> {
    admit_builtin_fields(rt, obj, query)?;
    validate_name(rt, obj)?;
    crate::defaults::apply(&rt.group, &rt.kind, obj);
    crate::admission::admit_create(server, rt, obj).await?;
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => {
            obj["spec"] = json!({ "finalizers": ["kubernetes"] });
            obj["status"] = json!({ "phase": "Active" });
        }
        ("", "Pod") => {
            obj["status"] = json!({ "phase": "Pending", "qosClass": "BestEffort" });
        }
        ("", "Service") => crate::services::allocate_cluster_ip(server, obj).await?,
        ("batch", "Job") => job_selector(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crate::crd::admit(server, obj, None)?
        }
        _ => {}
    }
    if rt.custom.is_some() {
        admit_custom(rt, obj, None, query)?;
    }
    Ok(())
}

/// The selector and labels the Job controller relies on (`batch.kubernetes.io/controller-uid`).
fn job_selector(obj: &mut Value) {
    let uid = meta_str(obj, "uid").unwrap_or("").to_string();
    let name = objects::name(obj).unwrap_or("").to_string();
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if spec.get("manualSelector") == Some(&json!(true)) {
        return;
    }
    spec["selector"] = json!({ "matchLabels": { "batch.kubernetes.io/controller-uid": uid } });
    let labels = json!({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    });
    if !spec.get("template").is_some_and(Value::is_object) {
        spec["template"] = json!({});
    }
    let template = &mut spec["template"];
    if !template.get("metadata").is_some_and(Value::is_object) {
        template["metadata"] = json!({});
    }
    let meta = &mut template["metadata"];
    if !meta.get("labels").is_some_and(Value::is_object) {
        meta["labels"] = json!({});
    }
    if let (Some(target), Some(add)) = (meta["labels"].as_object_mut(), labels.as_object()) {
        for (k, v) in add {
            target.insert(k.clone(), v.clone());
        }
    }
}

pub async fn admit_update(
    server: &Shared,
    rt: &ResourceType,
    old: &Value,
    new: &mut Value,
    query: &Query,
) -> Result<(), ApiError> {
    let name = objects::name(new).unwrap_or("").to_string();
    // While an object is being deleted, finalizers may only be removed (apiserver ValidateObjectMetaUpdate).
    if objects::is_deleting(old) {
        let before = objects::finalizers(old);
        let added: Vec<String> = objects::finalizers(new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                &rt.qualified_kind(),
                &rt.group,
                &rt.kind,
                &name,
                &[Cause {
                    reason: "FieldValueForbidden".into(),
                    field: "metadata.finalizers".into(),
                    message: format!(
                        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        added
                            .iter()
                            .map(|f| format!("\"{f}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }],
            ));
        }
    }
    admit_builtin_fields(rt, new, query)?;
    crate::defaults::apply(&rt.group, &rt.kind, new);
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Service") => crate::services::keep_cluster_ip(old, new, rt)?,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crate::crd::admit(server, new, Some(old))?
        }
        _ => {}
    }
    if rt.custom.is_some() {
        admit_custom(rt, new, Some(old), query)?;
    }
    Ok(())
}

/// managedFields for a create (`Update` operation of the field manager).
pub fn record_create(rt: &ResourceType, obj: &mut Value, manager: Option<&str>) {
    crate::fieldmanager::record(rt, None, obj, manager, None);
}

pub fn record_update(
    rt: &ResourceType,
    old: &Value,
    new: &mut Value,
    manager: Option<&str>,
    subresource: Option<&str>,
) {
    crate::fieldmanager::record(rt, Some(old), new, manager, subresource);
}

pub async fn lease_for(server: &Shared, rt: &ResourceType) -> Result<Option<i64>, ApiError> {
    if rt.kind == "Event" {
        return server
            .store
            .grant_lease(EVENT_TTL_SECONDS)
            .await
            .map(Some)
            .map_err(ApiError::internal);
    }
    Ok(None)
}

pub async fn after_write(server: &Shared, rt: &ResourceType, obj: &Value) {
    if rt.kind == "CustomResourceDefinition" && rt.custom.is_none() {
        crate::crd::register(server, obj);
        if objects::is_deleting(obj) {
            crate::crd::start_cleanup(server.clone(), obj.clone());
        }
    }
}

pub async fn after_delete(server: &Shared, rt: &ResourceType, obj: &Value) {
    if rt.kind == "CustomResourceDefinition" && rt.custom.is_none() {
        crate::crd::unregister(server, obj);
    }
}

/// Pods bound to a node are deleted gracefully: the node agent stops the containers, then
/// deletes the pod for good. Unbound pods go at once.
pub fn graceful_delete_seconds(rt: &ResourceType, obj: &Value, opts: &Value) -> Option<i64> {
    if rt.kind != "Pod" || !rt.group.is_empty() {
        return None;
    }
    let bound = obj["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let phase = obj["status"]["phase"].as_str().unwrap_or("");
    if !bound || matches!(phase, "Succeeded" | "Failed") {
        return None;
    }
    let grace = opts
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30);
    if grace <= 0 { None } else { Some(grace) }
}

/// The form an object is stored in: events.k8s.io Events are kept as core/v1 Events.
pub fn storage_form(rt: &ResourceType, obj: &Value) -> Value {
    if crate::events::is_events_v1(&rt.group, &rt.kind) {
        crate::events::to_core(obj)
    } else {
        obj.clone()
    }
}

/// Fix up a read object for the client (defaults of custom resources apply on read too;
/// events.k8s.io shows its view of the stored core Event).
pub fn present(rt: &ResourceType, mut obj: Value) -> Value {
    if crate::events::is_events_v1(&rt.group, &rt.kind) {
        obj = crate::events::to_events_v1(&obj);
    }
    // Custom resources are served in every version of their CRD (conversion `None`): the
    // version asked for is the one shown.
    if rt.custom.is_some() && obj.is_object() {
        obj["apiVersion"] = serde_json::json!(rt.api_version());
    }
    if let Some(schema) = rt.custom.as_ref().and_then(|c| c.schema.as_ref()) {
        schema.apply_defaults(&mut obj);
    }
    if obj.get("metadata").is_none() {
        meta_mut(&mut obj);
    }
    obj
}
