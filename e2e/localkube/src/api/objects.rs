//! Object metadata as kube-apiserver's generic registry maintains it (`rest.BeforeCreate`,
//! `BeforeUpdate`, the per-kind strategies): uid, creationTimestamp, generation, generateName,
//! immutable fields, and the status/spec split of the status subresource.

use rand::Rng;
use serde_json::{Map, Value, json};

use super::resources::ResourceType;

/// RFC 3339 at second precision, as metav1.Time serializes.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The five random characters `generateName` and controllers append
/// (`k8s.io/apimachinery/pkg/util/rand`: consonants and digits that cannot spell words).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub fn meta(obj: &Value) -> &Value {
    obj.get("metadata").unwrap_or(&Value::Null)
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let entry = &mut obj["metadata"];
    if !entry.is_object() {
        *entry = json!({});
    }
    match entry {
        Value::Object(m) => m,
        // Set to an object just above.
        _ => unreachable!("metadata is an object"),
    }
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .get("finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

/// Fields a client may never change through create or update: the server owns them.
const SERVER_OWNED_ON_UPDATE: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
];

/// Kinds whose strategy maintains `metadata.generation` (the rest never set it): workloads,
/// PodDisruptionBudgets, Pods (since 1.33), CRDs and every custom resource.
/// kube-apiserver's `ShouldDeleteDuringUpdate`: an update that leaves an object marked for
/// deletion (with no grace period left) without finalizers deletes it. Pods in graceful deletion
/// stay until the node agent deletes them; namespaces also wait for `spec.finalizers`.
pub fn should_delete_during_update(rt: &ResourceType, obj: &Value) -> bool {
    let no_grace_left = meta(obj)
        .get("deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_none_or(|g| g == 0);
    let namespace_done = rt.kind != "Namespace"
        || obj["spec"]["finalizers"]
            .as_array()
            .is_none_or(|f| f.is_empty());
    is_deleting(obj) && finalizers(obj).is_empty() && no_grace_left && namespace_done
}

pub fn has_generation(rt: &ResourceType) -> bool {
    rt.custom.is_some()
        || matches!(
            (rt.group.as_str(), rt.kind.as_str()),
            ("apps", _)
                | ("batch", _)
                | ("policy", _)
                | ("", "Pod")
                | ("apiextensions.k8s.io", _)
                | ("storage.k8s.io", _)
        )
}

/// Set the server-owned metadata of a new object.
pub fn prepare_create(rt: &ResourceType, obj: &mut Value, namespace: Option<&str>) {
    obj["apiVersion"] = json!(rt.api_version());
    obj["kind"] = json!(rt.kind);
    let m = meta_mut(obj);
    m.insert("uid".into(), json!(new_uid()));
    m.insert("creationTimestamp".into(), json!(now_rfc3339()));
    if has_generation(rt) {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("selfLink");
    m.remove("resourceVersion");
    match namespace {
        Some(ns) if rt.namespaced => {
            m.insert("namespace".into(), json!(ns));
        }
        _ => {
            m.remove("namespace");
        }
    }
    if rt.has_subresource("status")
        && rt.kind != "Namespace"
        && rt.kind != "Pod"
        && rt.kind != "CustomResourceDefinition"
    {
        // Status is written only through /status (PrepareForCreate drops it).
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    }
}

/// Everything but metadata and status: a change here bumps `generation`.
fn spec_part(obj: &Value, status_counts: bool) -> Value {
    let mut copy = obj.clone();
    if let Some(o) = copy.as_object_mut() {
        o.remove("metadata");
        if !status_counts {
            o.remove("status");
        }
        o.remove("apiVersion");
        o.remove("kind");
    }
    copy
}

/// Carry the server-owned metadata from `old` into `new`, keep the side of the object the
/// endpoint may not write (status on the main endpoint, everything but status on /status), and
/// bump `generation` when the spec changed.
pub fn prepare_update(rt: &ResourceType, old: &Value, new: &mut Value, subresource: Option<&str>) {
    new["apiVersion"] = json!(rt.api_version());
    new["kind"] = json!(rt.kind);
    let has_status = rt.has_subresource("status");
    match subresource {
        Some("status") => {
            // Only .status changes; for custom resources metadata changes are discarded too.
            let status = new.get("status").cloned();
            let new_meta = meta(new).clone();
            *new = old.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            if rt.custom.is_none() {
                // Built-ins keep label/annotation changes made through /status.
                let m = meta_mut(new);
                for field in ["labels", "annotations"] {
                    match new_meta.get(field) {
                        Some(v) => {
                            m.insert(field.into(), v.clone());
                        }
                        None => {
                            m.remove(field);
                        }
                    }
                }
            }
        }
        _ if has_status => match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        },
        _ => {}
    }
    // A namespace's spec.finalizers change only through /finalize (the namespace controller).
    if rt.kind == "Namespace"
        && rt.group.is_empty()
        && subresource != Some("finalize")
        && (new["spec"].is_object() || new["spec"].is_null())
    {
        match old["spec"].get("finalizers") {
            Some(f) => new["spec"]["finalizers"] = f.clone(),
            None => {
                if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("finalizers");
                }
            }
        }
    }
    let old_meta = meta(old).clone();
    let m = meta_mut(new);
    for field in SERVER_OWNED_ON_UPDATE {
        match old_meta.get(*field) {
            Some(v) => {
                m.insert((*field).into(), v.clone());
            }
            None => {
                m.remove(*field);
            }
        }
    }
    for field in ["name", "namespace"] {
        if let Some(v) = old_meta.get(field) {
            m.insert(field.into(), v.clone());
        }
    }
    // Custom resources without a status subresource count status as spec.
    let status_counts = rt.custom.is_some() && !has_status;
    if has_generation(rt) && spec_part(old, status_counts) != spec_part(new, status_counts) {
        let generation = old_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        meta_mut(new).insert("generation".into(), json!(generation));
    }
}

#[cfg(test)]
mod tests {
    use super::super::resources::Registry;
    use super::*;

    #[test]
    fn generation_moves_with_spec_only() {
        let reg = Registry::new();
        let deploy = reg.get("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "generation": 3, "uid": "u"}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let mut same = json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}, "status": {"replicas": 9}});
        prepare_update(&deploy, &old, &mut same, None);
        assert_eq!(same["metadata"]["generation"], 3);
        assert_eq!(
            same["status"]["replicas"], 1,
            "status is not writable through the main endpoint"
        );
        assert_eq!(same["metadata"]["uid"], "u");
        let mut changed = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        prepare_update(&deploy, &old, &mut changed, None);
        assert_eq!(changed["metadata"]["generation"], 4);
        let mut status =
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 7}, "status": {"replicas": 2}});
        prepare_update(&deploy, &old, &mut status, Some("status"));
        assert_eq!(
            (
                status["spec"]["replicas"].clone(),
                status["status"]["replicas"].clone(),
                status["metadata"]["generation"].clone()
            ),
            (json!(1), json!(2), json!(3))
        );
    }

    #[test]
    fn generate_name_suffix_uses_the_safe_alphabet() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
