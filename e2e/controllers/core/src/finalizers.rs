//! Removing one finalizer from an object, guarded by its resourceVersion (a merge patch that
//! carries `metadata.resourceVersion` is refused with 409 when the object changed meanwhile, so
//! a finalizer added concurrently is never dropped).

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::Error;
use crate::error::is_not_found;

pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    remove_from(api, obj.meta(), finalizer).await
}

/// [`remove`] for an object of which only the metadata is at hand.
pub async fn remove_from<K>(api: &Api<K>, meta: &ObjectMeta, finalizer: &str) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let all = meta.finalizers.as_deref().unwrap_or(&[]);
    let remaining: Vec<&String> = all.iter().filter(|f| *f != finalizer).collect();
    if remaining.len() == all.len() {
        return Ok(());
    }
    let patch = json!({
        "metadata": {
            "finalizers": remaining,
            "resourceVersion": meta.resource_version,
        }
    });
    let name = meta.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
