//! PATCH (spec §a5): JSON patch with the Go library's semantics, JSON merge patch, strategic
//! merge patch for built-in kinds (415 for custom resources, as kube-apiserver), and server-side
//! apply with field ownership. A patch is re-applied to the freshly read object on every retry
//! of the guarded update, as kube-apiserver's patcher does.

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode};
use serde_json::Value;

use crate::api::handlers::{self, ObjectRequest, Update};
use crate::api::objects;
use crate::api::resources::ResourceType;
use crate::api::status::ApiError;
use crate::api::{body, json_response};

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
const APPLY_PATCH: &str = "application/apply-patch+yaml";

fn group_kind(rt: &ResourceType) -> localkube_patch::GroupKind<'_> {
    localkube_patch::GroupKind {
        group: &rt.group,
        kind: &rt.kind,
    }
}

fn strategic_supported(rt: &ResourceType) -> bool {
    rt.custom.is_none() && localkube_patch::supports_strategic_merge(group_kind(rt))
}

fn unsupported(rt: &ResourceType) -> ApiError {
    let mut accepted = vec![JSON_PATCH, MERGE_PATCH, APPLY_PATCH];
    if strategic_supported(rt) {
        accepted.insert(2, STRATEGIC_MERGE_PATCH);
    }
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        accepted.join(", ")
    ))
}

/// The response kube-apiserver gives for a patch that does not apply.
fn patch_error(e: localkube_patch::PatchError) -> ApiError {
    let status = e.status();
    let mut err = ApiError::bad_request(status.message.clone());
    err.code = status.code;
    err.reason = status.reason;
    if status.empty_details {
        err.details = Some(serde_json::json!({}));
    }
    err
}

/// Apply one patch document of `media` to `current`.
fn apply_patch(
    rt: &ResourceType,
    media: &str,
    current: &Value,
    patch: &Value,
) -> Result<Value, ApiError> {
    match media {
        JSON_PATCH => localkube_patch::json_patch(current, patch).map_err(patch_error),
        MERGE_PATCH => localkube_patch::merge_patch(current, patch).map_err(patch_error),
        STRATEGIC_MERGE_PATCH => {
            localkube_patch::strategic_merge_patch(current, patch, group_kind(rt))
                .map_err(patch_error)
        }
        _ => Err(unsupported(rt)),
    }
}

pub async fn patch(r: &ObjectRequest<'_>) -> Result<Response<Body>, ApiError> {
    let ObjectRequest {
        server,
        rt,
        ns,
        name,
        subresource,
        query,
        headers,
        body: raw,
        ..
    } = *r;
    let media = body::content_type(headers);
    handlers::dry_run(query)?;
    match media.as_str() {
        JSON_PATCH | MERGE_PATCH => {}
        STRATEGIC_MERGE_PATCH if strategic_supported(rt) => {}
        APPLY_PATCH => {
            return crate::fieldmanager::server_side_apply(r).await;
        }
        _ => return Err(unsupported(rt)),
    }
    let patch_doc = body::parse_json(raw)?;
    let manager = query
        .get("fieldManager")
        .cloned()
        .or_else(|| Some(default_manager(headers)));
    let stored = handlers::guaranteed_update(server, rt, ns, name, query, |current| {
        let mut patched = apply_patch(rt, &media, &current.object, &patch_doc)?;
        // A resourceVersion the patch itself set must match (stale → 409); the one carried over
        // from the current object always does.
        let pinned = handlers::pinned_rv(&patched)?.filter(|rv| *rv != current.mod_revision);
        objects::prepare_update(rt, &current.object, &mut patched, subresource);
        crate::strategy::record_update(
            rt,
            &current.object,
            &mut patched,
            manager.as_deref(),
            subresource,
        );
        Ok(Update::Put {
            object: patched,
            pinned_rv: pinned,
        })
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &server.present(rt, stored.object),
    ))
}

/// The manager recorded when a client names none: its user agent's program name, as
/// kube-apiserver derives it.
pub fn default_manager(headers: &HeaderMap) -> String {
    headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}
