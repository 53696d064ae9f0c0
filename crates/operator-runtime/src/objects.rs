//! Idempotent create, delete and server-side apply of one object: a step repeated after a crash
//! finds its object already there (or already gone), which is success. I/O.
//!
//! The operators call these (never the raw `Api` methods) inside `failpoint::around`, one named
//! failpoint per call site; the failpoint crate's source scan checks that.

use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A failed API call on one object, named for logs, events and status.
#[derive(Debug, thiserror::Error)]
#[error("{verb} {kind} {name}: {source}")]
pub struct ObjectError {
    /// `create`, `delete`, `apply`.
    pub verb: &'static str,
    /// The object's kind.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// The API error.
    pub source: kube::Error,
}

/// Creates `object`; one that already exists (409) is success.
pub async fn create_if_absent<K>(
    api: &Api<K>,
    kind: &'static str,
    object: &K,
) -> Result<(), ObjectError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(ObjectError {
            verb: "create",
            kind,
            name: object.meta().name.clone().unwrap_or_default(),
            source,
        }),
    }
}

/// Deletes `name`; one already gone (404) is success.
pub async fn delete_if_present<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
) -> Result<(), ObjectError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ObjectError {
            verb: "delete",
            kind,
            name: name.to_owned(),
            source,
        }),
    }
}

/// Server-side applies `object` under `field_manager`, with force: the operator owns the fields
/// it sets, and a stale manager's value must not win.
pub async fn apply_object<K>(
    api: &Api<K>,
    kind: &'static str,
    field_manager: &str,
    object: &K,
) -> Result<(), ObjectError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let params = PatchParams::apply(field_manager).force();
    api.patch(&name, &params, &Patch::Apply(object))
        .await
        .map(|_| ())
        .map_err(|source| ObjectError {
            verb: "apply",
            kind,
            name,
            source,
        })
}
