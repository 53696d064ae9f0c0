//! Writing an object's status by server-side apply. Does I/O (one PATCH of the status
//! subresource).
//!
//! Each operator applies the whole status it computed under its own field manager, with force:
//! it is the only writer of that status, so a conflict can only come from a stale manager (an
//! older version of the operator, or `kubectl edit`) and the operator's view must win. Fields the
//! operator stops setting are removed by the apply, which a merge patch would leave behind.

use std::fmt::Debug;

use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Apply `status` to the status subresource of `name`: the body is
/// `{apiVersion, kind, metadata: {name}, status}`, sent with `PatchParams::apply(field_manager)
/// .force()`. Returns the object as stored after the apply.
pub async fn apply_status<K>(
    api: &kube::Api<K>,
    name: &str,
    field_manager: &str,
    status: &impl Serialize,
) -> Result<K, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let body = status_patch::<K>(name, status)?;
    let params = PatchParams::apply(field_manager).force();
    api.patch_status(name, &params, &Patch::Apply(&body)).await
}

/// The apply body for `status` of the object `name` of kind `K`.
fn status_patch<K>(name: &str, status: &impl Serialize) -> Result<serde_json::Value, kube::Error>
where
    K: kube::Resource<DynamicType = ()>,
{
    let status = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    Ok(serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": { "name": name },
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::Lease;

    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Status {
        ready_members: u32,
        phase: &'static str,
    }

    #[test]
    fn body_names_the_kind_and_object_and_carries_only_status() {
        let body = status_patch::<Lease>(
            "main",
            &Status {
                ready_members: 3,
                phase: "Running",
            },
        )
        .unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": { "name": "main" },
                "status": { "readyMembers": 3, "phase": "Running" },
            })
        );
    }
}
