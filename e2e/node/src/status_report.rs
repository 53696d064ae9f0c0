//! How the agent writes a pod's status to the API server: as kubelet's status manager does, a
//! strategic merge patch, so `conditions` merge by type and a condition another writer owns (a
//! readiness gate, `DisruptionTarget`) is never overwritten from the agent's possibly older copy
//! of the Pod. Only kubelet's own conditions are sent; the others are left as stored.
//!
//! (A JSON merge patch of the whole status, as before, replaced the stored `conditions` list: a
//! readiness gate opened while the agent computed from an older copy was erased, and the Pod
//! stayed NotReady with no one to reopen it.)

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::Api;
use kube::api::{Patch, PatchParams};
use localkube_podspec::status::is_kubelet_condition;
use serde_json::json;

/// The body of the status patch for `status`: everything the agent computed, with only the
/// conditions kubelet owns.
pub fn status_patch(status: &PodStatus) -> serde_json::Value {
    let mut own = status.clone();
    if let Some(conditions) = own.conditions.as_mut() {
        conditions.retain(|c| is_kubelet_condition(&c.type_));
    }
    json!({ "status": own })
}

/// PATCHes `pods/<name>/status` with [`status_patch`] (strategic merge); returns the Pod as
/// stored after it.
pub async fn patch_pod_status(
    pods: &Api<Pod>,
    name: &str,
    status: &PodStatus,
) -> kube::Result<Pod> {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Strategic(status_patch(status)),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodCondition;

    fn condition(type_: &str) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            status: "True".into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_kubelet_conditions_are_sent() {
        let status = PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![
                condition("Ready"),
                condition("etcd.operator.rs/seed-admitted"),
                condition("DisruptionTarget"),
                condition("ContainersReady"),
            ]),
            ..Default::default()
        };
        let patch = status_patch(&status);
        let types: Vec<&str> = patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Ready", "ContainersReady"]);
        assert_eq!(patch["status"]["phase"], "Running");
    }
}
