//! The Pod subresources that are actions rather than views: `pods/binding` (what the scheduler
//! posts) and `pods/eviction` (a PodDisruptionBudget-checked delete, what `kubectl drain` posts).
//! Both follow kube-apiserver's `pkg/registry/core/pod/storage` (binding in `storage.go`,
//! eviction in `eviction.go`), including their error wording.

use serde_json::{Value, json};

use crate::api::handlers::{Update, delete_one, guaranteed_update};
use crate::api::objects::{self, meta_str};
use crate::api::resources::ResourceType;
use crate::api::status::ApiError;
use crate::api::{Query, Shared};
use localkube_query::LabelSelectorObject;

/// `POST pods/<name>/binding`: assign the pod to `target.name` and mark it scheduled. A pod that
/// already has a node, or is being deleted, is a 409 Conflict, as upstream (`assignPod`).
pub async fn bind(
    server: &Shared,
    pods: &ResourceType,
    ns: &str,
    name: &str,
    binding: &Value,
) -> Result<Value, ApiError> {
    let node = binding["target"]["name"].as_str().unwrap_or("").to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            "Binding",
            name,
            &[crate::api::status::Cause {
                reason: "FieldValueRequired".into(),
                field: "target.name".into(),
                message: "target.name: Required value".into(),
            }],
        ));
    }
    let binding_gr = crate::api::status::GroupResource::new("", "pods/binding");
    guaranteed_update(server, pods, Some(ns), name, &Query::new(), |current| {
        let pod = &current.object;
        if objects::is_deleting(pod) {
            return Err(ApiError::conflict(
                &binding_gr,
                name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
            return Err(ApiError::conflict(
                &binding_gr,
                name,
                &format!("pod {name} is already assigned to node \"{assigned}\""),
            ));
        }
        let mut new = pod.clone();
        new["spec"]["nodeName"] = json!(node);
        set_condition(
            &mut new,
            json!({ "type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": objects::now_rfc3339() }),
        );
        Ok(Update::Put {
            object: new,
            pinned_rv: None,
        })
    })
    .await?;
    Ok(crate::api::status::success_status(json!({})))
}

/// Replace the condition of the same `type` (or append it).
fn set_condition(pod: &mut Value, condition: Value) {
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    let status = &mut pod["status"];
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    if let Some(list) = status["conditions"].as_array_mut() {
        match list.iter_mut().find(|c| c["type"] == condition["type"]) {
            Some(existing) => *existing = condition,
            None => list.push(condition),
        }
    }
}

/// The most disrupted-but-not-yet-observed pods a PDB may record (upstream `MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// `POST pods/<name>/eviction`: delete the pod unless its PodDisruptionBudget forbids it.
pub async fn evict(
    server: &Shared,
    pods: &ResourceType,
    ns: &str,
    name: &str,
    eviction: &Value,
) -> Result<Value, ApiError> {
    let delete_options = eviction
        .get("deleteOptions")
        .filter(|o| o.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let pod = server
        .store
        .get(&pods.key(Some(ns), name))
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(&pods.group_resource(), name))?
        .object;
    // Pods that are not running (or already going) are not protected by a budget.
    let phase = pod["status"]["phase"].as_str().unwrap_or("");
    let ignores_budget =
        objects::is_deleting(&pod) || matches!(phase, "Succeeded" | "Failed" | "Pending");
    if !ignores_budget {
        check_and_decrement_budget(server, ns, name, &pod).await?;
    }
    delete_one(server, pods, Some(ns), name, &delete_options, false).await?;
    Ok(crate::api::status::success_status(json!({})))
}

async fn check_and_decrement_budget(
    server: &Shared,
    ns: &str,
    pod_name: &str,
    pod: &Value,
) -> Result<(), ApiError> {
    let Some(pdbs) = server.registry.get("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let page = server
        .store
        .list(&pdbs.list_prefix(Some(ns)), None, 0, 0)
        .await
        .map_err(ApiError::internal)?;
    let matching: Vec<_> = page
        .items
        .into_iter()
        .filter(|pdb| selects(&pdb.object, pod))
        .collect();
    let pdb = match matching.as_slice() {
        [] => return Ok(()),
        [one] => one,
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let pdb_name = objects::name(&pdb.object).unwrap_or("").to_string();
    guaranteed_update(server, &pdbs, Some(ns), &pdb_name, &Query::new(), |current| {
        let mut new = current.object.clone();
        let status = &new["status"];
        let generation = meta_str(&new, "generation")
            .and_then(|g| g.parse::<i64>().ok())
            .or_else(|| new["metadata"]["generation"].as_i64())
            .unwrap_or(0);
        if status["observedGeneration"].as_i64().unwrap_or(0) < generation {
            return Err(budget_refusal(format!(
                "The disruption budget {pdb_name} is still being processed by the server."
            )));
        }
        let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
        if allowed < 0 {
            return Err(ApiError::forbidden_message(
                "pdb disruptions allowed is negative",
            ));
        }
        if status["disruptedPods"]
            .as_object()
            .is_some_and(|m| m.len() > MAX_DISRUPTED_PODS)
        {
            return Err(ApiError::forbidden_message(
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            ));
        }
        if allowed == 0 {
            return Err(budget_refusal(format!(
                "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                status["desiredHealthy"].as_i64().unwrap_or(0),
                status["currentHealthy"].as_i64().unwrap_or(0)
            )));
        }
        new["status"]["disruptionsAllowed"] = json!(allowed - 1);
        if !new["status"]["disruptedPods"].is_object() {
            new["status"]["disruptedPods"] = json!({});
        }
        new["status"]["disruptedPods"][pod_name] = json!(objects::now_rfc3339());
        if allowed - 1 == 0 {
            set_pdb_condition_insufficient(&mut new);
        }
        Ok(Update::Put {
            object: new,
            pinned_rv: Some(current.mod_revision),
        })
    })
    .await
    .map(|_| ())
}

/// Upstream answers 429 so that `kubectl drain` retries.
fn budget_refusal(cause: String) -> ApiError {
    ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        json!([{ "reason": "DisruptionBudget", "message": cause }]),
    )
}

fn set_pdb_condition_insufficient(pdb: &mut Value) {
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    set_condition(
        pdb,
        json!({
            "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
            "message": "", "observedGeneration": generation,
            "lastTransitionTime": objects::now_rfc3339(),
        }),
    );
}

/// Whether a policy/v1 PDB selects the pod: a null selector selects nothing, `{}` everything.
fn selects(pdb: &Value, pod: &Value) -> bool {
    match LabelSelectorObject::from_value(pdb["spec"].get("selector")) {
        Ok(Some(selector)) => selector.to_selector().is_ok_and(|s| s.matches_object(pod)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_condition_replaces_an_existing_one() {
        let mut pod =
            json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}});
        set_condition(&mut pod, json!({"type": "PodScheduled", "status": "True"}));
        assert_eq!(
            pod["status"]["conditions"],
            json!([{"type": "PodScheduled", "status": "True"}])
        );
        let mut bare = json!({});
        set_condition(&mut bare, json!({"type": "Ready", "status": "True"}));
        assert_eq!(bare["status"]["conditions"][0]["type"], "Ready");
    }

    #[test]
    fn pdb_selectors_follow_policy_v1() {
        let pod = json!({"metadata": {"labels": {"app": "etcd"}}});
        let by = |sel: Value| selects(&json!({"spec": {"selector": sel}}), &pod);
        assert!(by(json!({"matchLabels": {"app": "etcd"}})));
        assert!(!by(json!({"matchLabels": {"app": "web"}})));
        assert!(by(json!({})), "an empty selector selects every pod");
        assert!(
            !selects(&json!({"spec": {}}), &pod),
            "no selector selects none"
        );
    }
}
