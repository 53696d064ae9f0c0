//! Unknown fields of built-in kinds (spec §a10): kube-apiserver decodes built-ins into their Go
//! types, so fields the type does not have are dropped, or refused with 400 under
//! `fieldValidation=Strict`. Here the typed decode is a round trip through the k8s-openapi type:
//! whatever key of the input does not come back is unknown.

use serde_json::Value;

/// A built-in kind's value after a round trip through its type, or the decode error.
fn round_trip(group: &str, kind: &str, obj: &Value) -> Option<Result<Value, String>> {
    use k8s_openapi::api;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    macro_rules! via {
        ($t:ty) => {{
            let typed: Result<$t, _> = serde_json::from_value(obj.clone());
            Some(
                typed
                    .map_err(|e| e.to_string())
                    .and_then(|t| serde_json::to_value(&t).map_err(|e| e.to_string())),
            )
        }};
    }
    match (group, kind) {
        ("", "Pod") => via!(api::core::v1::Pod),
        ("", "Service") => via!(api::core::v1::Service),
        ("", "Endpoints") => via!(api::core::v1::Endpoints),
        ("", "Secret") => via!(api::core::v1::Secret),
        ("", "ConfigMap") => via!(api::core::v1::ConfigMap),
        ("", "ServiceAccount") => via!(api::core::v1::ServiceAccount),
        ("", "PersistentVolumeClaim") => via!(api::core::v1::PersistentVolumeClaim),
        ("", "PersistentVolume") => via!(api::core::v1::PersistentVolume),
        ("", "Event") => via!(api::core::v1::Event),
        ("", "Node") => via!(api::core::v1::Node),
        ("", "Namespace") => via!(api::core::v1::Namespace),
        ("apps", "Deployment") => via!(api::apps::v1::Deployment),
        ("apps", "ReplicaSet") => via!(api::apps::v1::ReplicaSet),
        ("batch", "Job") => via!(api::batch::v1::Job),
        ("batch", "CronJob") => via!(api::batch::v1::CronJob),
        ("discovery.k8s.io", "EndpointSlice") => via!(api::discovery::v1::EndpointSlice),
        ("coordination.k8s.io", "Lease") => via!(api::coordination::v1::Lease),
        ("events.k8s.io", "Event") => via!(api::events::v1::Event),
        ("policy", "PodDisruptionBudget") => via!(api::policy::v1::PodDisruptionBudget),
        ("rbac.authorization.k8s.io", "Role") => via!(api::rbac::v1::Role),
        ("rbac.authorization.k8s.io", "ClusterRole") => via!(api::rbac::v1::ClusterRole),
        ("rbac.authorization.k8s.io", "RoleBinding") => via!(api::rbac::v1::RoleBinding),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            via!(api::rbac::v1::ClusterRoleBinding)
        }
        ("storage.k8s.io", "StorageClass") => via!(api::storage::v1::StorageClass),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            via!(apiext::CustomResourceDefinition)
        }
        _ => None,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Remove from `input` every key that did not survive the round trip (`known`), collecting
/// their paths as kube-apiserver names them (`spec.template.spec.containers[0].bogus`).
fn prune(input: &mut Value, known: &Value, path: &str, unknown: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(map), Value::Object(known_map)) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child_path = join(path, &key);
                match known_map.get(&key) {
                    Some(k) => {
                        if let Some(v) = map.get_mut(&key) {
                            prune(v, k, &child_path, unknown);
                        }
                    }
                    None if map.get(&key).is_some_and(Value::is_null) => {}
                    None => {
                        unknown.push(child_path);
                        map.remove(&key);
                    }
                }
            }
        }
        (Value::Array(items), Value::Array(known_items)) => {
            for (i, (item, k)) in items.iter_mut().zip(known_items).enumerate() {
                prune(item, k, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

/// Drop the unknown fields of a built-in object and return their paths; `Err` when the object
/// does not decode into its type at all (a wrong type somewhere), with the decoder's reason.
pub fn drop_unknown_fields(
    group: &str,
    kind: &str,
    obj: &mut Value,
) -> Result<Vec<String>, String> {
    let Some(result) = round_trip(group, kind, obj) else {
        return Ok(vec![]);
    };
    let known = result?;
    let mut unknown = Vec::new();
    prune(obj, &known, "", &mut unknown);
    unknown.sort();
    Ok(unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_found_where_they_are() {
        let mut d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "bogus": 1},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "replicaz": 2,
                     "template": {"spec": {"containers": [{"name": "c", "image": "x", "imagePullPolicee": "Always"}]}}}
        });
        let unknown = drop_unknown_fields("apps", "Deployment", &mut d).unwrap();
        assert_eq!(
            unknown,
            [
                "metadata.bogus",
                "spec.replicaz",
                "spec.template.spec.containers[0].imagePullPolicee"
            ]
        );
        assert!(d["spec"].get("replicaz").is_none());
        assert_eq!(
            d["spec"]["selector"]["matchLabels"]["a"], "b",
            "known fields stay"
        );
    }

    #[test]
    fn wrong_types_are_decode_errors() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": "two"}});
        assert!(drop_unknown_fields("apps", "Deployment", &mut d).is_err());
    }
}
