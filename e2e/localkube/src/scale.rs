//! The scale subresource (`autoscaling/v1 Scale`) of Deployments, ReplicaSets and custom
//! resources that declare it (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`):
//! what `kubectl scale` reads and patches.

use axum::body::Body;
use axum::http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::api::handlers::{self, ObjectRequest, Update};
use crate::api::resources::ResourceType;
use crate::api::status::ApiError;
use crate::api::{Shared, body, json_response};

/// Where replicas live in the object: (spec path, status path, selector path), as JSON paths
/// without the leading dot split into segments.
fn paths(rt: &ResourceType) -> (Vec<String>, Vec<String>, Option<Vec<String>>) {
    let split = |p: &str| {
        p.trim_start_matches('.')
            .split('.')
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    match rt.custom.as_ref().and_then(|c| c.scale.as_ref()) {
        Some(scale) => (
            split(
                scale["specReplicasPath"]
                    .as_str()
                    .unwrap_or(".spec.replicas"),
            ),
            split(
                scale["statusReplicasPath"]
                    .as_str()
                    .unwrap_or(".status.replicas"),
            ),
            scale["labelSelectorPath"].as_str().map(split),
        ),
        None => (split(".spec.replicas"), split(".status.replicas"), None),
    }
}

fn get_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.get(k))
}

fn set_path(obj: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for p in parents {
        if !cur.get(p).is_some_and(Value::is_object) {
            cur[p.as_str()] = json!({});
        }
        cur = &mut cur[p.as_str()];
    }
    cur[last.as_str()] = value;
}

/// The Scale view of an object.
pub fn scale_of(rt: &ResourceType, obj: &Value) -> Value {
    let (spec, status, selector) = paths(rt);
    let selector = match selector {
        Some(p) => get_path(obj, &p).cloned().unwrap_or(json!("")),
        None => json!(label_selector_string(&obj["spec"]["selector"])),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "uid": obj["metadata"]["uid"],
            "resourceVersion": obj["metadata"]["resourceVersion"],
            "creationTimestamp": obj["metadata"]["creationTimestamp"],
        },
        "spec": { "replicas": get_path(obj, &spec).cloned().unwrap_or(json!(0)) },
        "status": { "replicas": get_path(obj, &status).cloned().unwrap_or(json!(0)), "selector": selector },
    })
}

/// `matchLabels` as the selector string Scale.status.selector carries (`a=b,c=d`).
fn label_selector_string(selector: &Value) -> String {
    let mut parts: Vec<String> = selector["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    parts.join(",")
}

pub async fn get(
    server: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let stored = server
        .store
        .get(&rt.key(ns, name))
        .await
        .map_err(|e| handlers::store_error(rt, name, e))?;
    let stored = stored.ok_or_else(|| ApiError::not_found(&rt.group_resource(), name))?;
    Ok(json_response(
        StatusCode::OK,
        &scale_of(rt, &server.present(rt, stored.object)),
    ))
}

/// PUT or PATCH of the Scale: the new `spec.replicas` goes into the object.
pub async fn write(r: &ObjectRequest<'_>) -> Result<Response<Body>, ApiError> {
    let ObjectRequest {
        server,
        rt,
        ns,
        name,
        verb,
        query,
        headers,
        body: raw,
        ..
    } = *r;
    let media = body::content_type(headers);
    let doc = if verb == "update" {
        body::decode_object(headers, raw)?
    } else {
        body::parse_json(raw)?
    };
    let (spec_path, _, _) = paths(rt);
    let stored = handlers::guaranteed_update(server, rt, ns, name, query, |current| {
        let scale = scale_of(rt, &current.object);
        let new_scale = match (verb, media.as_str()) {
            ("update", _) => doc.clone(),
            (_, "application/json-patch+json") => localkube_patch::json_patch(&scale, &doc)
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            (_, "application/merge-patch+json" | "application/strategic-merge-patch+json") => {
                localkube_patch::merge_patch(&scale, &doc)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?
            }
            _ => {
                return Err(ApiError::unsupported_media_type(format!(
                    "the patch type {media} is not supported for the scale subresource"
                )));
            }
        };
        let replicas = new_scale["spec"]["replicas"]
            .as_i64()
            .filter(|r| *r >= 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    "Scale.autoscaling",
                    "autoscaling",
                    "Scale",
                    name,
                    &[crate::api::status::Cause {
                        reason: "FieldValueInvalid".into(),
                        field: "spec.replicas".into(),
                        message: format!(
                            "spec.replicas: Invalid value: {}: must be greater than or equal to 0",
                            new_scale["spec"]["replicas"]
                        ),
                    }],
                )
            })?;
        let pinned = handlers::pinned_rv(&new_scale)?.filter(|rv| *rv != current.mod_revision);
        let mut obj = current.object.clone();
        set_path(&mut obj, &spec_path, json!(replicas));
        crate::api::objects::prepare_update(rt, &current.object, &mut obj, None);
        crate::strategy::record_update(
            rt,
            &current.object,
            &mut obj,
            query.get("fieldManager").map(String::as_str),
            Some("scale"),
        );
        Ok(Update::Put {
            object: obj,
            pinned_rv: pinned,
        })
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &scale_of(rt, &server.present(rt, stored.object)),
    ))
}
