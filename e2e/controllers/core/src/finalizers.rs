//! Removing one finalizer from an object, guarded by its resourceVersion (a merge patch that
//! carries `metadata.resourceVersion` is refused with 409 when the object changed meanwhile, so
//! a finalizer added concurrently is never dropped).

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::Error;
use crate::error::is_not_found;

pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let remaining: Vec<&String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .collect();
    if remaining.len() == obj.finalizers().len() {
        return Ok(());
    }
    let patch = json!({
        "metadata": {
            "finalizers": remaining,
            "resourceVersion": obj.resource_version(),
        }
    });
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
