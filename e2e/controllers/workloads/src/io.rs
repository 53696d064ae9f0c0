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
