//! The writes several controllers share: adopting and releasing dependents (the
//! `ControllerRefManager`), and deletes guarded by the uid that was decided on.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::error::{Error, is_not_found};

/// Owner references of `obj` with `owner` added (adoption) or the one of uid `release` removed.
/// The patch carries the resourceVersion the decision was made on, so a concurrent change
/// (another controller adopting first) fails with a conflict instead of being overwritten.
fn owner_patch<K: Resource>(obj: &K, refs: Vec<OwnerReference>) -> serde_json::Value {
    let refs = if refs.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::json!(refs)
    };
    serde_json::json!({
        "metadata": {
            "ownerReferences": refs,
            "resourceVersion": obj.meta().resource_version,
        }
    })
}

/// Make `owner` the controller of `obj`.
pub(crate) async fn adopt<K>(api: &Api<K>, obj: &K, owner: OwnerReference) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut refs = obj.owner_references().to_vec();
    refs.retain(|r| r.uid != owner.uid);
    refs.push(owner);
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(owner_patch(obj, refs)),
    )
    .await?;
    Ok(())
}

/// Remove the owner reference with `owner_uid` from `obj`; a vanished object is already free.
pub(crate) async fn release<K>(api: &Api<K>, obj: &K, owner_uid: &str) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut refs = obj.owner_references().to_vec();
    refs.retain(|r| r.uid != owner_uid);
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(owner_patch(obj, refs)),
        )
        .await
    {
        Err(err) if is_not_found(&err) => Ok(()),
        other => other.map(|_| ()).map_err(Error::from),
    }
}

/// Delete `name` if it still has `uid`; `Ok(false)` when it is already gone.
pub(crate) async fn delete<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
    propagation: Option<PropagationPolicy>,
) -> Result<bool, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        propagation_policy: propagation,
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(err) if is_not_found(&err) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// Create `count` copies of `pod` in slow-start batches (1, 2, 4, ...), with the
/// `SuccessfulCreate` / `FailedCreate` events of the ReplicaSet and Job controllers. Stops at the
/// first refusal (a template the API server rejects fails once, not `count` times) and returns it.
pub(crate) async fn create_pods<S>(
    ctx: &crate::runner::Context<S>,
    pod_api: &Api<k8s_openapi::api::core::v1::Pod>,
    pod: &k8s_openapi::api::core::v1::Pod,
    count: usize,
    owner: &k8s_openapi::api::core::v1::ObjectReference,
) -> Result<(), kube::Error> {
    use kube::api::PostParams;
    use kube::runtime::events::EventType;
    for batch in crate::pods::slow_start_batches(count) {
        for _ in 0..batch {
            match pod_api.create(&PostParams::default(), pod).await {
                Ok(created) => {
                    let note = format!("Created pod: {}", created.name_any());
                    ctx.event(owner, EventType::Normal, "SuccessfulCreate", "Create", note)
                        .await;
                }
                Err(err) => {
                    let note = format!("Error creating: {err}");
                    ctx.event(owner, EventType::Warning, "FailedCreate", "Create", note)
                        .await;
                    return Err(err);
                }
            }
        }
    }
    Ok(())
}
