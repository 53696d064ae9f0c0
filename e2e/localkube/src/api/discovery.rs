//! Discovery (`/api`, `/apis`, per group-version resource lists), `/version` and `/openapi/v3`.
//! Legacy discovery is enough (spec §0.9): clients ask for aggregated v2 first and fall back when
//! the answer's Content-Type is plain `application/json`.

use axum::body::Body;
use axum::http::{Response, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::resources::ResourceType;
use super::status::ApiError;
use super::{Shared, json_response};

/// The Kubernetes version this server reports (kubectl warns beyond one minor of skew).
pub const KUBERNETES_VERSION: &str = "v1.36.0";

pub fn version(git_version: &str) -> Value {
    let minor = git_version.split('.').nth(1).unwrap_or("0");
    json!({
        "major": "1",
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": format!("linux/{}", if cfg!(target_arch = "aarch64") { "arm64" } else { "amd64" }),
        "emulationMajor": "1",
        "emulationMinor": minor,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": minor,
    })
}

pub fn root(server: &Shared, legacy: bool) -> Response<Body> {
    if legacy {
        return json_response(
            StatusCode::OK,
            &json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443" }],
            }),
        );
    }
    let groups: Vec<Value> = server
        .registry
        .group_versions()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, versions)| api_group(&g, &versions))
        .collect();
    json_response(
        StatusCode::OK,
        &json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups }),
    )
}

fn api_group(group: &str, versions: &[String]) -> Value {
    let list: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
        .collect();
    json!({ "name": group, "versions": list, "preferredVersion": list.first().cloned().unwrap_or(Value::Null) })
}

pub fn group(server: &Shared, group: &str) -> Result<Response<Body>, ApiError> {
    let versions = server
        .registry
        .group_versions()
        .remove(group)
        .ok_or_else(ApiError::no_such_resource)?;
    let mut doc = api_group(group, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Ok(json_response(StatusCode::OK, &doc))
}

/// The verbs and kind of each subresource, as kube-apiserver lists them.
fn subresource_entry(rt: &ResourceType, sub: &str) -> Value {
    let (kind, group, version, verbs): (&str, &str, &str, &[&str]) = match sub {
        "status" => (&rt.kind, "", "", &["get", "patch", "update"]),
        "scale" => ("Scale", "autoscaling", "v1", &["get", "patch", "update"]),
        "log" => ("Pod", "", "", &["get"]),
        "eviction" => ("Eviction", "policy", "v1", &["create"]),
        "binding" => ("Binding", "", "", &["create"]),
        "token" => ("TokenRequest", "authentication.k8s.io", "v1", &["create"]),
        "finalize" => ("Namespace", "", "", &["update"]),
        _ => (&rt.kind, "", "", &["get"]),
    };
    let mut e = json!({
        "name": format!("{}/{}", rt.plural, sub),
        "singularName": "",
        "namespaced": rt.namespaced,
        "kind": kind,
        "verbs": verbs,
    });
    if !group.is_empty() {
        e["group"] = json!(group);
        e["version"] = json!(version);
    }
    e
}

pub fn group_version(
    server: &Shared,
    group: &str,
    version: &str,
) -> Result<Response<Body>, ApiError> {
    let types = server.registry.in_group_version(group, version);
    if types.is_empty() {
        return Err(ApiError::no_such_resource());
    }
    let mut resources = Vec::new();
    for rt in &types {
        let mut e = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs(),
            "storageVersionHash": storage_version_hash(rt),
        });
        if !rt.short_names.is_empty() {
            e["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            e["categories"] = json!(rt.categories);
        }
        resources.push(e);
        for sub in &rt.subresources {
            resources.push(subresource_entry(rt, sub));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json_response(
        StatusCode::OK,
        &json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources }),
    ))
}

fn storage_version_hash(rt: &ResourceType) -> String {
    use base64::Engine;
    let digest = Sha256::digest(format!("{}/{}/{}", rt.group, rt.version, rt.kind));
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group-version, CRD group-versions included (spec §a3).
pub fn openapi_index(server: &Shared) -> Value {
    let mut paths = serde_json::Map::new();
    for (group, versions) in server.registry.group_versions() {
        for version in versions {
            let key = gv_path(&group, &version);
            let hash = openapi_group_version(server, &key)
                .map(|doc| {
                    hex(&Sha256::digest(
                        serde_json::to_vec(&doc).unwrap_or_default(),
                    ))
                })
                .unwrap_or_default();
            paths.insert(key.clone(), json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={}", &hash[..hash.len().min(128)]) }));
        }
    }
    json!({ "paths": paths })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

fn gvk(rt: &ResourceType) -> Value {
    json!({ "group": rt.group, "version": rt.version, "kind": rt.kind })
}

/// The operations of one path. Every PATCH carries the `fieldValidation` parameter and lists
/// only json-patch, merge-patch and apply-patch bodies (spec §a3: kubectl then builds strategic
/// merge patches from its compiled-in types, which is right for built-ins).
fn operations(rt: &ResourceType, item: bool, schema_ref: &Value) -> Value {
    let gvk = gvk(rt);
    let body = json!({ "content": { "application/json": { "schema": schema_ref }, "application/yaml": { "schema": schema_ref } } });
    let ok = json!({ "200": { "description": "OK", "content": { "application/json": { "schema": schema_ref } } } });
    let query = |name: &str| json!({ "name": name, "in": "query", "schema": { "type": "string", "uniqueItems": true } });
    let common = vec![
        query("dryRun"),
        query("fieldManager"),
        query("fieldValidation"),
    ];
    let mut ops = serde_json::Map::new();
    if item {
        ops.insert("get".into(), json!({ "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": ok }));
        ops.insert(
            "put".into(),
            json!({ "x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk, "parameters": common, "requestBody": body, "responses": ok }),
        );
        let mut patch_params = common.clone();
        patch_params.push(query("force"));
        ops.insert(
            "patch".into(),
            json!({
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": patch_params,
                "requestBody": { "content": {
                    "application/json-patch+json": { "schema": { "type": "object" } },
                    "application/merge-patch+json": { "schema": { "type": "object" } },
                    "application/apply-patch+yaml": { "schema": { "type": "object" } },
                } },
                "responses": ok,
            }),
        );
        ops.insert(
            "delete".into(),
            json!({ "x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk, "parameters": [query("dryRun")], "responses": ok }),
        );
    } else {
        ops.insert("get".into(), json!({ "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk, "responses": ok }));
        ops.insert(
            "post".into(),
            json!({ "x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk, "parameters": common, "requestBody": body, "responses": ok }),
        );
        ops.insert(
            "delete".into(),
            json!({ "x-kubernetes-action": "deletecollection", "x-kubernetes-group-version-kind": gvk, "responses": ok }),
        );
    }
    Value::Object(ops)
}

fn schema_name(rt: &ResourceType) -> String {
    let group = if rt.group.is_empty() {
        "core".to_string()
    } else {
        rt.group.split('.').rev().collect::<Vec<_>>().join(".")
    };
    format!("{group}.{}.{}", rt.version, rt.kind)
}

/// One group-version's OpenAPI v3 document: every kind's collection and item paths (with
/// `/status` and `/scale`), and schemas for custom resources so `kubectl explain` works.
pub fn openapi_group_version(server: &Shared, gv: &str) -> Option<Value> {
    let gv = gv.split('?').next().unwrap_or(gv);
    let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return None,
    };
    let types = server.registry.in_group_version(&group, &version);
    if types.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for rt in &types {
        let name = schema_name(rt);
        let schema_ref = json!({ "$ref": format!("#/components/schemas/{name}") });
        let mut schema = rt
            .custom
            .as_ref()
            .and_then(|c| c.openapi_schema.clone())
            .unwrap_or_else(
                || json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true }),
            );
        schema["x-kubernetes-group-version-kind"] = json!([gvk(rt)]);
        schemas.insert(name, schema);
        let base = format!("/{}", gv_path(&group, &version));
        let collections = if rt.namespaced {
            vec![
                format!("{base}/namespaces/{{namespace}}/{}", rt.plural),
                format!("{base}/{}", rt.plural),
            ]
        } else {
            vec![format!("{base}/{}", rt.plural)]
        };
        let item_base = &collections[0];
        paths.insert(item_base.clone(), operations(rt, false, &schema_ref));
        let item = format!("{item_base}/{{name}}");
        paths.insert(item.clone(), operations(rt, true, &schema_ref));
        for sub in ["status", "scale"] {
            if rt.has_subresource(sub) {
                paths.insert(format!("{item}/{sub}"), operations(rt, true, &schema_ref));
            }
        }
        if rt.namespaced {
            paths.insert(collections[1].clone(), json!({ "get": { "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk(rt), "responses": { "200": { "description": "OK" } } } }));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": KUBERNETES_VERSION },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}
