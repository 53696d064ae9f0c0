//! managedFields on every write and server-side apply (`application/apply-patch+yaml`), with
//! honest ownership and conflicts (helm 4 installs this way; kube-rs `Patch::Apply` too). The
//! engine is `localkube_apply`; this module supplies the type information (CRD schemas, the
//! merge-key table of built-in kinds), the fields each endpoint resets, and the HTTP side.

use axum::body::Body;
use axum::http::{Response, StatusCode};
use localkube_apply::{
    FieldSet, ListType, MapKey, MapType, OpenApiSchema, Path, PathElement, Schema, field,
};
use serde_json::{Value, json};

use crate::api::handlers::{self, ObjectRequest, Update};
use crate::api::objects;
use crate::api::resources::ResourceType;
use crate::api::status::{ApiError, Cause};
use crate::api::{body, json_response};

/// Built-in kinds: list merge keys from the strategic-merge-patch table (the same `patchMergeKey`
/// tags the published OpenAPI turns into `x-kubernetes-list-map-keys`).
struct BuiltinSchema {
    group: String,
    kind: String,
}

fn field_names(path: &Path) -> Vec<String> {
    path.iter()
        .filter_map(|e| match e {
            PathElement::Field(name) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

impl Schema for BuiltinSchema {
    fn list_type(&self, path: &Path) -> ListType {
        let names = field_names(path);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let kind = localkube_patch::GroupKind {
            group: &self.group,
            kind: &self.kind,
        };
        match localkube_patch::list_merge_key(kind, &refs) {
            Some(localkube_patch::ListStrategy::MergeByKey(key)) => {
                if key == "containerPort" || key == "port" {
                    // In the OpenAPI list types a port's identity includes its protocol, which
                    // defaults to TCP.
                    return ListType::Map(vec![
                        MapKey::new(key),
                        MapKey {
                            name: "protocol".into(),
                            default: Some(json!("TCP")),
                        },
                    ]);
                }
                ListType::Map(vec![MapKey::new(key)])
            }
            Some(localkube_patch::ListStrategy::MergePrimitives) => ListType::Set,
            Some(localkube_patch::ListStrategy::Replace) | None => ListType::Atomic,
        }
    }

    fn map_type(&self, _path: &Path) -> MapType {
        MapType::Granular
    }

    fn is_declared_field(&self, path: &Path, name: &str) -> bool {
        // Free-form string maps of built-ins: labels/annotations (handled by the engine),
        // selectors, data, and similar; everything else is a struct field.
        let parent = field_names(path);
        let free_form = matches!(
            parent.last().map(String::as_str),
            Some(
                "data"
                    | "stringData"
                    | "binaryData"
                    | "matchLabels"
                    | "nodeSelector"
                    | "selector"
                    | "capacity"
                    | "allocatable"
                    | "requests"
                    | "limits"
                    | "parameters"
            )
        );
        !free_form && !name.is_empty()
    }
}

fn schema_for(rt: &ResourceType) -> Box<dyn Schema + Send + Sync> {
    match rt.custom.as_ref().and_then(|c| c.openapi_schema.clone()) {
        Some(openapi) => Box::new(OpenApiSchema::new(openapi)),
        None => Box::new(BuiltinSchema {
            group: rt.group.clone(),
            kind: rt.kind.clone(),
        }),
    }
}

/// What an endpoint may not write (the strategy's reset fields).
fn reset_fields(rt: &ResourceType, subresource: Option<&str>) -> FieldSet {
    let mut set = FieldSet::new();
    if !rt.has_subresource("status") {
        return set;
    }
    match subresource {
        Some("status") => {
            for top in ["spec", "metadata"] {
                set.insert(&[field(top)]);
            }
        }
        _ => set.insert(&[field("status")]),
    }
    set
}

/// Record the fields a non-apply write changed as owned by `manager` (operation Update).
pub fn record(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &mut Value,
    manager: Option<&str>,
    subresource: Option<&str>,
) {
    let schema = schema_for(rt);
    let reset = reset_fields(rt, subresource);
    let api_version = rt.api_version();
    let now = objects::now_rfc3339();
    let req = localkube_apply::Request {
        manager: manager.filter(|m| !m.is_empty()).unwrap_or("unknown"),
        api_version: &api_version,
        subresource: subresource.unwrap_or(""),
        reset_fields: &reset,
        schema: schema.as_ref(),
        now: &now,
    };
    *new = localkube_apply::record_update(&req, old, new);
}

fn apply_error(
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    e: localkube_apply::ApplyError,
) -> ApiError {
    match e {
        localkube_apply::ApplyError::Conflict(c) => {
            let status = c.to_status();
            let message = status["message"].as_str().unwrap_or("conflict").to_string();
            let mut err = ApiError::conflict(&rt.group_resource(), name, "").with_message(message);
            err.details = status.get("details").cloned();
            err
        }
        localkube_apply::ApplyError::BadRequest(m) => ApiError::bad_request(m),
        localkube_apply::ApplyError::Invalid(m) => ApiError::internal(format!(
            "failed to create typed patch object ({}/{name}; {}, Kind={}): {m}",
            ns.unwrap_or(""),
            rt.api_version(),
            rt.kind
        )),
        localkube_apply::ApplyError::ManagedFields(m) => ApiError::bad_request(m),
    }
}

/// PATCH with `application/apply-patch+yaml`.
pub async fn server_side_apply(r: &ObjectRequest<'_>) -> Result<Response<Body>, ApiError> {
    let ObjectRequest {
        server,
        rt,
        ns,
        name,
        subresource,
        query,
        body: raw,
        ..
    } = *r;
    let Some(manager) = query.get("fieldManager").filter(|m| !m.is_empty()).cloned() else {
        return Err(ApiError::invalid(
            "PatchOptions.meta.k8s.io",
            "meta.k8s.io",
            "PatchOptions",
            "",
            &[Cause {
                reason: "FieldValueRequired".into(),
                field: "fieldManager".into(),
                message: "fieldManager: Required value: is required for apply patch".into(),
            }],
        ));
    };
    let force = query.get("force").is_some_and(|f| f == "true");
    let dry = handlers::dry_run(query)?;
    let applied = body::parse_yaml(raw)?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    handlers::check_type(rt, &applied)?;
    if applied.get("apiVersion").is_none() || applied.get("kind").is_none() {
        return Err(ApiError::bad_request("invalid object type: /, Kind="));
    }
    if let Some(n) = objects::name(&applied)
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let schema = schema_for(rt);
    let reset = reset_fields(rt, subresource);
    let api_version = rt.api_version();
    let key = rt.key(ns, name);
    let existing = server
        .store
        .get(&key)
        .await
        .map_err(|e| handlers::store_error(rt, name, e))?;
    if existing.is_none() {
        if subresource.is_some() {
            return Err(ApiError::not_found(&rt.group_resource(), name));
        }
        // Apply creates the object.
        let mut obj = {
            let now = objects::now_rfc3339();
            let req = localkube_apply::Request {
                manager: &manager,
                api_version: &api_version,
                subresource: "",
                reset_fields: &reset,
                schema: schema.as_ref(),
                now: &now,
            };
            localkube_apply::apply(&req, None, &applied, force)
                .map_err(|e| apply_error(rt, ns, name, e))?
        };
        objects::meta_mut(&mut obj).insert("name".into(), json!(name));
        objects::prepare_create(rt, &mut obj, ns);
        crate::strategy::admit_create(server, rt, &mut obj, query).await?;
        handlers::check_namespace(server, rt, ns, name).await?;
        if dry {
            return Ok(json_response(StatusCode::CREATED, &server.present(rt, obj)));
        }
        let lease = crate::strategy::lease_for(server, rt).await?;
        match server
            .store
            .create(&key, &crate::strategy::storage_form(rt, &obj), lease)
            .await
        {
            Ok(stored) => {
                crate::strategy::after_write(server, rt, &stored.object).await;
                return Ok(json_response(
                    StatusCode::CREATED,
                    &server.present(rt, stored.object),
                ));
            }
            Err(crate::store::StoreError::AlreadyExists) => {} // raced with a create: apply as an update
            Err(e) => return Err(handlers::store_error(rt, name, e)),
        }
    }
    let pinned = handlers::pinned_rv(&applied)?;
    let stored = handlers::guaranteed_update(server, rt, ns, name, query, |current| {
        let now = objects::now_rfc3339();
        let req = localkube_apply::Request {
            manager: &manager,
            api_version: &api_version,
            subresource: subresource.unwrap_or(""),
            reset_fields: &reset,
            schema: schema.as_ref(),
            now: &now,
        };
        let mut merged = localkube_apply::apply(&req, Some(&current.object), &applied, force)
            .map_err(|e| apply_error(rt, ns, name, e))?;
        let managed = merged["metadata"].get("managedFields").cloned();
        objects::prepare_update(rt, &current.object, &mut merged, subresource);
        if let Some(m) = managed {
            objects::meta_mut(&mut merged).insert("managedFields".into(), m);
        }
        Ok(Update::Put {
            object: merged,
            pinned_rv: pinned,
        })
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &server.present(rt, stored.object),
    ))
}
