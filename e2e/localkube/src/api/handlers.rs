//! The verbs on resources: get, list, create, update, patch, delete, deletecollection (watch is
//! in `watch.rs`), with kube-apiserver's storage semantics (`etcd3/store.go`) and registry rules.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Response, StatusCode};
use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};

use super::objects::{self, meta_mut, meta_str};
use super::request::ResourceRequest;
use super::resources::ResourceType;
use super::status::{ApiError, GroupResource};
use super::{Query, Shared, User, body, json_response, watch};
use crate::store::{StoreError, Stored};

/// A selector over objects (labels and fields), parsed once per request.
pub struct Filter {
    labels: Option<localkube_query::LabelSelector>,
    fields: Option<localkube_query::ResolvedFieldSelector>,
}

impl Filter {
    pub fn from_query(rt: &ResourceType, query: &Query) -> Result<Self, ApiError> {
        let labels = match query.get("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(
                localkube_query::parse_label_selector(s)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?,
            ),
            None => None,
        };
        let fields = match query.get("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => {
                let parsed = localkube_query::parse_field_selector(s)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                let no_fields: Vec<String> = Vec::new();
                let schema = match &rt.custom {
                    Some(_) => localkube_query::FieldSchema::Custom {
                        namespaced: rt.namespaced,
                        selectable_fields: &no_fields,
                    },
                    None => localkube_query::FieldSchema::BuiltIn {
                        group: &rt.group,
                        kind: &rt.kind,
                    },
                };
                Some(
                    parsed
                        .resolve(&schema)
                        .map_err(|e| ApiError::bad_request(e.to_string()))?,
                )
            }
            None => None,
        };
        Ok(Self { labels, fields })
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(l) = &self.labels
            && !l.matches_object(obj)
        {
            return false;
        }
        if let Some(f) = &self.fields
            && !f.matches(obj)
        {
            return false;
        }
        true
    }
}

pub fn store_error(rt: &ResourceType, name: &str, err: StoreError) -> ApiError {
    let gr = rt.group_resource();
    match err {
        StoreError::AlreadyExists => ApiError::already_exists(&gr, name),
        StoreError::Conflict => ApiError::modified_conflict(&gr, name),
        StoreError::NotFound => ApiError::not_found(&gr, name),
        StoreError::Compacted { .. } => {
            ApiError::expired("The resourceVersion for the provided list is too old.")
        }
        StoreError::FutureRevision(_) => ApiError::too_large_resource_version(),
        other => ApiError::internal(other),
    }
}

pub async fn handle(
    server: &Shared,
    user: &User,
    _method: &Method,
    req: ResourceRequest,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let rt = server
        .registry
        .get(&req.group, &req.version, &req.resource)
        .ok_or_else(ApiError::no_such_resource)?;
    crate::authz::authorize(server, user, &req).await?;
    // A namespaced kind addressed without a namespace is a cross-namespace list or watch only.
    if !rt.namespaced && req.namespace.is_some() {
        return Err(ApiError::no_such_resource());
    }
    if rt.namespaced && req.namespace.is_none() && !matches!(req.verb, "list" | "watch") {
        return Err(ApiError::no_such_resource());
    }
    if let Some(sub) = &req.subresource
        && !rt.has_subresource(sub)
    {
        return Err(ApiError::no_such_resource());
    }
    if body.len() > body::MAX_BODY_BYTES {
        return Err(ApiError::request_entity_too_large(format!(
            "limit is {}",
            body::MAX_BODY_BYTES
        )));
    }
    let ns = req.namespace.as_deref();
    let name = req.name.as_deref().unwrap_or("");
    let object = ObjectRequest {
        server,
        rt: &rt,
        ns,
        name,
        subresource: req.subresource.as_deref(),
        verb: req.verb,
        query,
        headers,
        body: &body,
    };
    match (req.verb, req.subresource.as_deref()) {
        ("get", None | Some("status")) => get(server, &rt, ns, name, query, headers).await,
        ("list", _) => list(server, &rt, ns, query, headers).await,
        ("watch", _) => watch::watch(server, rt.clone(), ns, req.name.as_deref(), query).await,
        ("create", None) => create(server, &rt, ns, query, headers, &body).await,
        ("update", None | Some("status")) => update(&object).await,
        ("patch", None | Some("status")) => crate::patching::patch(&object).await,
        ("create", Some("token")) if rt.plural == "serviceaccounts" => {
            let request = body::decode_object(headers, &body)?;
            let response =
                crate::authn::token_request(server, ns.unwrap_or(""), name, &request).await?;
            Ok(json_response(StatusCode::CREATED, &response))
        }
        ("create", Some("binding")) if rt.kind == "Pod" => {
            let binding = body::decode_object(headers, &body)?;
            let status = crate::pods::bind(server, &rt, ns.unwrap_or(""), name, &binding).await?;
            Ok(json_response(StatusCode::CREATED, &status))
        }
        ("create", Some("eviction")) if rt.kind == "Pod" => {
            let eviction = body::decode_object(headers, &body)?;
            let status = crate::pods::evict(server, &rt, ns.unwrap_or(""), name, &eviction).await?;
            Ok(json_response(StatusCode::CREATED, &status))
        }
        ("update", Some("finalize")) if rt.kind == "Namespace" => update(&object).await,
        ("get", Some("log")) if rt.kind == "Pod" => {
            crate::logs::get(server, &rt, ns.unwrap_or(""), name, query).await
        }
        ("get", Some("scale")) => crate::scale::get(server, &rt, ns, name).await,
        ("update" | "patch", Some("scale")) => crate::scale::write(&object).await,
        ("delete", None) => delete(server, &rt, ns, name, query, headers, &body).await,
        ("deletecollection", None) => delete_collection(server, &rt, ns, query).await,
        _ => Err(ApiError::method_not_allowed()),
    }
}

pub async fn get(
    server: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let key = rt.key(ns, name);
    let revision = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => 0,
        Some(rv) => parse_rv(rv)?,
    };
    let stored = server
        .store
        .get_at(&key, 0)
        .await
        .map_err(|e| store_error(rt, name, e))?;
    // A get "not older than" rv: wait for the server to reach rv (it has: we read latest).
    if revision > 0 {
        let current = server
            .store
            .current_revision()
            .await
            .map_err(|e| store_error(rt, name, e))?;
        if revision > current {
            return Err(ApiError::too_large_resource_version());
        }
    }
    let stored = stored.ok_or_else(|| ApiError::not_found(&rt.group_resource(), name))?;
    let obj = server.present(rt, stored.object);
    if body::wants_table(headers) {
        let metadata = json!({ "resourceVersion": stored.mod_revision.to_string() });
        return Ok(json_response(
            StatusCode::OK,
            &crate::table::table(rt, vec![obj], metadata, query),
        ));
    }
    Ok(json_response(StatusCode::OK, &obj))
}

pub fn parse_rv(rv: &str) -> Result<i64, ApiError> {
    rv.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| ApiError::bad_request(format!("invalid resource version \"{rv}\"")))
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
}

fn encode_continue(rv: i64, start: &str) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: start.into(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(token: &str) -> Result<ContinueToken, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let t: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    if t.v != "meta.k8s.io/v1" || t.rv <= 0 || t.start.contains("..") || t.start.starts_with('/') {
        return Err(bad());
    }
    Ok(t)
}

/// The items of one list call and the metadata of the list.
pub struct Listed {
    pub items: Vec<Value>,
    pub revision: i64,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

/// Read a list with kube-apiserver's semantics (spec §a6): `limit` + `continue` pages at a fixed
/// revision, selectors applied after reading (pages may be shorter than `limit`), and the
/// resourceVersion / resourceVersionMatch rules.
pub async fn read_list(
    server: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    query: &Query,
    filter: &Filter,
) -> Result<Listed, ApiError> {
    let prefix = rt.list_prefix(ns);
    let limit: i64 = match query.get("limit").filter(|s| !s.is_empty()) {
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid limit \"{l}\"")))?,
        None => 0,
    };
    let limit = limit.max(0);
    let (mut revision, mut start) = (0_i64, None::<String>);
    if let Some(token) = query.get("continue").filter(|s| !s.is_empty()) {
        let t = decode_continue(token)?;
        revision = t.rv;
        start = Some(format!("{prefix}{}", t.start));
    } else {
        let rv = query
            .get("resourceVersion")
            .map(String::as_str)
            .unwrap_or("");
        let exact = query.get("resourceVersionMatch").map(String::as_str) == Some("Exact");
        match rv {
            "" | "0" => {}
            rv => {
                let n = parse_rv(rv)?;
                if exact {
                    revision = n;
                } else {
                    wait_for_revision(server, n).await?;
                }
            }
        }
    }
    let mut items = Vec::new();
    let mut next_start = start;
    let (mut more, mut remaining);
    loop {
        let page = server
            .store
            .list(&prefix, next_start.as_deref(), if limit > 0 { limit - items.len() as i64 } else { 0 }, revision)
            .await
            .map_err(|e| match e {
                StoreError::Compacted { .. } if query.get("continue").is_some_and(|c| !c.is_empty()) => ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ),
                other => store_error(rt, "", other),
            })?;
        revision = page.revision;
        more = page.more;
        remaining = page.remaining;
        let last_key = page.items.last().map(|s| s.key.clone());
        for stored in page.items {
            // Selectors see the object as this endpoint shows it (events.k8s.io field names).
            let obj = server.present(rt, stored.object);
            if filter.matches(&obj) {
                items.push(obj);
            }
        }
        match last_key {
            Some(k) if more && (limit == 0 || (items.len() as i64) < limit) => {
                next_start = Some(format!("{k}\0"))
            }
            Some(k) => {
                next_start = Some(format!("{k}\0"));
                break;
            }
            None => break,
        }
    }
    let continue_token = match (&next_start, more) {
        (Some(k), true) => Some(encode_continue(
            revision,
            k.strip_prefix(&prefix).unwrap_or(k),
        )),
        _ => None,
    };
    let remaining = (continue_token.is_some() && filter.is_empty()).then_some(remaining);
    Ok(Listed {
        items,
        revision,
        continue_token,
        remaining,
    })
}

/// `resourceVersion=N` (NotOlderThan): wait up to 3 s for etcd to reach N, then 504.
async fn wait_for_revision(server: &Shared, n: i64) -> Result<(), ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let current = server
            .store
            .current_revision()
            .await
            .map_err(ApiError::internal)?;
        if current >= n {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::too_large_resource_version());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn list(
    server: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    query: &Query,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let filter = Filter::from_query(rt, query)?;
    let listed = read_list(server, rt, ns, query, &filter).await?;
    let mut metadata = json!({ "resourceVersion": listed.revision.to_string() });
    if let Some(c) = &listed.continue_token {
        metadata["continue"] = json!(c);
    }
    if let Some(r) = listed.remaining {
        metadata["remainingItemCount"] = json!(r);
    }
    if body::wants_table(headers) {
        return Ok(json_response(
            StatusCode::OK,
            &crate::table::table(rt, listed.items, metadata, query),
        ));
    }
    let list = json!({ "kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": metadata, "items": listed.items });
    Ok(json_response(StatusCode::OK, &list))
}

pub fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "Invalid dryRun value: {other}; supported values: \"All\""
        ))),
    }
}

/// The body's apiVersion/kind must name this endpoint's kind when present.
pub fn check_type(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if !api_version.is_empty() && api_version != rt.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    if !kind.is_empty() && kind != rt.kind {
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: kind mismatch: got {kind}",
            rt.kind, rt.version, rt.kind
        )));
    }
    Ok(())
}

/// Namespace lifecycle admission: the namespace must exist and not be terminating.
pub async fn check_namespace(
    server: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    let Some(ns) = ns.filter(|_| rt.namespaced) else {
        return Ok(());
    };
    let ns_type = server
        .registry
        .get("", "v1", "namespaces")
        .ok_or_else(ApiError::no_such_resource)?;
    let stored = server
        .store
        .get(&ns_type.key(None, ns))
        .await
        .map_err(ApiError::internal)?;
    match stored {
        None => Err(ApiError::namespace_not_found(ns)),
        Some(s)
            if objects::is_deleting(&s.object) || s.object["status"]["phase"] == "Terminating" =>
        {
            Err(ApiError::forbidden(
                &rt.group_resource(),
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            ))
        }
        Some(_) => Ok(()),
    }
}

async fn create(
    server: &Shared,
    rt: &Arc<ResourceType>,
    ns: Option<&str>,
    query: &Query,
    headers: &HeaderMap,
    raw: &[u8],
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(query)?;
    let obj = body::decode_object(headers, raw)?;
    check_type(rt, &obj)?;
    crate::strategy::check_duplicate_fields(rt, &body::content_type(headers), raw, query)?;
    if let (Some(body_ns), Some(url_ns)) = (meta_str(&obj, "namespace"), ns)
        && body_ns != url_ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if meta_str(&obj, "resourceVersion").is_some() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let generate_name = meta_str(&obj, "generateName").map(str::to_string);
    if objects::name(&obj).is_none() && generate_name.is_none() {
        return Err(ApiError::invalid(
            &rt.qualified_kind(),
            &rt.group,
            &rt.kind,
            "",
            &[super::status::Cause {
                reason: "FieldValueRequired".into(),
                field: "metadata.name".into(),
                message: "metadata.name: Required value: name or generateName is required".into(),
            }],
        ));
    }
    let field_manager = query.get("fieldManager").cloned();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut candidate = obj.clone();
        if objects::name(&candidate).is_none() {
            let generated = format!(
                "{}{}",
                generate_name.as_deref().unwrap_or(""),
                objects::random_suffix()
            );
            meta_mut(&mut candidate).insert("name".into(), json!(generated));
        }
        let name = objects::name(&candidate).unwrap_or("").to_string();
        objects::prepare_create(rt, &mut candidate, ns);
        crate::strategy::admit_create(server, rt, &mut candidate, query).await?;
        check_namespace(server, rt, ns, &name).await?;
        crate::strategy::record_create(rt, &mut candidate, field_manager.as_deref());
        if dry {
            return Ok(json_response(
                StatusCode::CREATED,
                &server.present(rt, candidate),
            ));
        }
        let lease = crate::strategy::lease_for(server, rt).await?;
        match server
            .store
            .create(
                &rt.key(ns, &name),
                &crate::strategy::storage_form(rt, &candidate),
                lease,
            )
            .await
        {
            Ok(stored) => {
                crate::strategy::after_write(server, rt, &stored.object).await;
                return Ok(json_response(
                    StatusCode::CREATED,
                    &server.present(rt, stored.object),
                ));
            }
            Err(StoreError::AlreadyExists)
                if generate_name.is_some() && objects::name(&obj).is_none() && attempts < 8 =>
            {
                continue;
            }
            Err(e) => return Err(store_error(rt, &name, e)),
        }
    }
}

/// Read-modify-write with kube-apiserver's `GuaranteedUpdate`: `mutate` computes the new object
/// from the current one; a lost race is retried unless the client pinned a resourceVersion.
pub async fn guaranteed_update<F>(
    server: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    query: &Query,
    mut mutate: F,
) -> Result<Stored, ApiError>
where
    F: FnMut(&Stored) -> Result<Update, ApiError>,
{
    let key = rt.key(ns, name);
    let dry = dry_run(query)?;
    for _ in 0..16 {
        let current = server
            .store
            .get(&key)
            .await
            .map_err(|e| store_error(rt, name, e))?;
        let current = current.ok_or_else(|| ApiError::not_found(&rt.group_resource(), name))?;
        // Mutations work on the object as this endpoint shows it.
        let current = Stored {
            object: server.present(rt, current.object),
            ..current
        };
        let update = mutate(&current)?;
        let (mut new, pinned) = match update {
            Update::Put { object, pinned_rv } => (object, pinned_rv),
            Update::Unchanged => return Ok(current),
        };
        if let Some(rv) = pinned
            && rv != current.mod_revision
        {
            return Err(ApiError::modified_conflict(&rt.group_resource(), name));
        }
        crate::strategy::admit_update(server, rt, &current.object, &mut new, query).await?;
        // The last finalizer gone from an object being deleted: it goes now.
        if objects::should_delete_during_update(rt, &new) {
            if dry {
                return Ok(Stored {
                    object: new,
                    ..current
                });
            }
            return match server.store.delete(&key, current.mod_revision).await {
                Ok(rev) => {
                    meta_mut(&mut new).insert("resourceVersion".into(), json!(rev.to_string()));
                    crate::strategy::after_delete(server, rt, &new).await;
                    Ok(Stored {
                        object: new,
                        mod_revision: rev,
                        ..current
                    })
                }
                Err(StoreError::Conflict) if pinned.is_none() => continue,
                Err(e) => Err(store_error(rt, name, e)),
            };
        }
        if new == current.object {
            return Ok(current);
        }
        if dry {
            return Ok(Stored {
                object: new,
                ..current
            });
        }
        match server
            .store
            .update(
                &key,
                current.mod_revision,
                current.create_revision,
                &crate::strategy::storage_form(rt, &new),
            )
            .await
        {
            Ok(stored) => {
                crate::strategy::after_write(server, rt, &stored.object).await;
                return Ok(stored);
            }
            Err(StoreError::Conflict) if pinned.is_none() => continue,
            Err(e) => return Err(store_error(rt, name, e)),
        }
    }
    Err(ApiError::modified_conflict(&rt.group_resource(), name))
}

pub enum Update {
    Put {
        object: Value,
        pinned_rv: Option<i64>,
    },
    Unchanged,
}

/// The resourceVersion a client pinned in the object it sent, if any.
/// One request on one named object, as the write handlers (update, patch, apply, scale) take it.
#[derive(Clone, Copy)]
pub struct ObjectRequest<'a> {
    pub server: &'a Shared,
    pub rt: &'a Arc<ResourceType>,
    pub ns: Option<&'a str>,
    pub name: &'a str,
    /// `None`, `status` or `scale`.
    pub subresource: Option<&'a str>,
    /// `update` or `patch`.
    pub verb: &'a str,
    pub query: &'a Query,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

pub fn pinned_rv(obj: &Value) -> Result<Option<i64>, ApiError> {
    meta_str(obj, "resourceVersion").map(parse_rv).transpose()
}

async fn update(r: &ObjectRequest<'_>) -> Result<Response<Body>, ApiError> {
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
    dry_run(query)?;
    let obj = body::decode_object(headers, raw)?;
    check_type(rt, &obj)?;
    crate::strategy::check_duplicate_fields(rt, &body::content_type(headers), raw, query)?;
    match objects::name(&obj) {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {}
    }
    if let (Some(body_ns), Some(url_ns)) = (meta_str(&obj, "namespace"), ns)
        && body_ns != url_ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let pinned = pinned_rv(&obj)?;
    let manager = query.get("fieldManager").cloned();
    let stored = guaranteed_update(server, rt, ns, name, query, |current| {
        let mut new = obj.clone();
        objects::prepare_update(rt, &current.object, &mut new, subresource);
        crate::strategy::record_update(
            rt,
            &current.object,
            &mut new,
            manager.as_deref(),
            subresource,
        );
        Ok(Update::Put {
            object: new,
            pinned_rv: pinned,
        })
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &server.present(rt, stored.object),
    ))
}

fn delete_options(headers: &HeaderMap, raw: &[u8], query: &Query) -> Result<Value, ApiError> {
    let mut opts = if raw.is_empty() {
        json!({})
    } else {
        body::decode_object(headers, raw)?
    };
    for (param, field) in [
        ("propagationPolicy", "propagationPolicy"),
        ("gracePeriodSeconds", "gracePeriodSeconds"),
        ("orphanDependents", "orphanDependents"),
    ] {
        if let Some(v) = query.get(param) {
            opts[field] = match field {
                "gracePeriodSeconds" => {
                    json!(v.parse::<i64>().map_err(|_| ApiError::bad_request(format!(
                        "invalid gracePeriodSeconds \"{v}\""
                    )))?)
                }
                "orphanDependents" => json!(v == "true"),
                _ => json!(v),
            };
        }
    }
    Ok(opts)
}

async fn delete(
    server: &Shared,
    rt: &Arc<ResourceType>,
    ns: Option<&str>,
    name: &str,
    query: &Query,
    headers: &HeaderMap,
    raw: &[u8],
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(query)?;
    let opts = delete_options(headers, raw, query)?;
    let (code, obj) = delete_one(server, rt, ns, name, &opts, dry).await?;
    Ok(json_response(code, &server.present(rt, obj)))
}

/// Delete with finalizers, preconditions and propagation (spec §a8). Returns 200 with the
/// object, whether it is gone or only marked for deletion.
pub async fn delete_one(
    server: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    opts: &Value,
    dry: bool,
) -> Result<(StatusCode, Value), ApiError> {
    let key = rt.key(ns, name);
    let gr = rt.group_resource();
    let policy = match opts.get("propagationPolicy").and_then(Value::as_str) {
        Some(p @ ("Background" | "Foreground" | "Orphan")) => Some(p),
        Some(other) => {
            return Err(ApiError::invalid(
                "DeleteOptions",
                "",
                "DeleteOptions",
                "",
                &[super::status::Cause {
                    reason: "FieldValueNotSupported".into(),
                    field: "propagationPolicy".into(),
                    message: format!(
                        "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                    ),
                }],
            ));
        }
        None if opts.get("orphanDependents") == Some(&json!(true)) => Some("Orphan"),
        None => None,
    };
    for _ in 0..16 {
        let current = server
            .store
            .get(&key)
            .await
            .map_err(|e| store_error(rt, name, e))?;
        let current = current.ok_or_else(|| ApiError::not_found(&gr, name))?;
        check_preconditions(&gr, name, &current, opts)?;
        let mut obj = current.object.clone();
        let mut finalizers = objects::finalizers(&obj);
        match policy {
            Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
                finalizers.push("foregroundDeletion".into())
            }
            Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => {
                finalizers.push("orphan".into())
            }
            _ => {}
        }
        let graceful = crate::strategy::graceful_delete_seconds(rt, &obj, opts);
        // A namespace waits for its content to go (spec.finalizers, emptied via /finalize).
        let namespace_finalizers = rt.kind == "Namespace"
            && obj["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
        if finalizers.is_empty() && graceful.is_none() && !namespace_finalizers {
            if dry {
                return Ok((StatusCode::OK, obj));
            }
            match server.store.delete(&key, current.mod_revision).await {
                Ok(rev) => {
                    meta_mut(&mut obj).insert("resourceVersion".into(), json!(rev.to_string()));
                    crate::strategy::after_delete(server, rt, &obj).await;
                    return Ok((StatusCode::OK, obj));
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(store_error(rt, name, e)),
            }
        }
        // Mark for deletion: deletionTimestamp once, finalizers kept; the object goes when the
        // last finalizer is removed (or the node agent finishes a graceful pod deletion).
        if objects::is_deleting(&obj) && objects::finalizers(&obj) == finalizers {
            return Ok((StatusCode::OK, obj));
        }
        let m = meta_mut(&mut obj);
        if !m.contains_key("deletionTimestamp") {
            let (ts, grace) = match graceful {
                Some(secs) => {
                    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
                    (at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(), secs)
                }
                None => (objects::now_rfc3339(), 0),
            };
            m.insert("deletionTimestamp".into(), json!(ts));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        m.insert("finalizers".into(), json!(finalizers));
        if rt.kind == "Namespace" {
            obj["status"]["phase"] = json!("Terminating");
        }
        if dry {
            return Ok((StatusCode::OK, obj));
        }
        match server
            .store
            .update(&key, current.mod_revision, current.create_revision, &obj)
            .await
        {
            Ok(stored) => {
                crate::strategy::after_write(server, rt, &stored.object).await;
                let code = if policy == Some("Foreground") || rt.kind == "Namespace" {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::OK
                };
                return Ok((code, stored.object));
            }
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(store_error(rt, name, e)),
        }
    }
    Err(ApiError::modified_conflict(&gr, name))
}

fn check_preconditions(
    gr: &GroupResource,
    name: &str,
    current: &Stored,
    opts: &Value,
) -> Result<(), ApiError> {
    let Some(pre) = opts.get("preconditions") else {
        return Ok(());
    };
    if let Some(uid) = pre.get("uid").and_then(Value::as_str) {
        let actual = meta_str(&current.object, "uid").unwrap_or("");
        if uid != actual {
            return Err(ApiError::conflict(
                gr,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = pre.get("resourceVersion").and_then(Value::as_str) {
        let actual = current.mod_revision.to_string();
        if rv != actual {
            return Err(ApiError::conflict(
                gr,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}

async fn delete_collection(
    server: &Shared,
    rt: &Arc<ResourceType>,
    ns: Option<&str>,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    let dry = dry_run(query)?;
    let filter = Filter::from_query(rt, query)?;
    let listed = read_list(server, rt, ns, &Query::new(), &filter).await?;
    let opts = json!({});
    let mut items = Vec::new();
    for obj in listed.items {
        let item_ns = meta_str(&obj, "namespace").map(str::to_string);
        let Some(name) = objects::name(&obj).map(str::to_string) else {
            continue;
        };
        match delete_one(server, rt, item_ns.as_deref(), &name, &opts, dry).await {
            Ok((_, o)) => items.push(o),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({ "kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": { "resourceVersion": listed.revision.to_string() }, "items": items });
    Ok(json_response(StatusCode::OK, &list))
}
