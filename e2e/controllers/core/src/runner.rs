//! What every controller of the crate shares: the reconcile context (client, per-object
//! backoff), the error policy, and draining a kube-runtime `Controller` stream into logs.

use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use crate::Error;
use crate::retry::Backoff;

/// The context of one controller: its client and the failures of the objects it reconciles.
pub struct Ctx<T = ()> {
    pub client: Client,
    pub backoff: Backoff,
    pub extra: T,
}

impl<T> Ctx<T> {
    pub fn new(client: Client, extra: T) -> Arc<Ctx<T>> {
        Arc::new(Ctx {
            client,
            backoff: Backoff::default(),
            extra,
        })
    }
}

/// `namespace/name` (or `name`): the backoff key of an object.
pub fn key<K: Resource>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

/// Requeue a failed object after its backoff delay.
pub fn error_policy<K: Resource, T>(obj: Arc<K>, err: &Error, ctx: Arc<Ctx<T>>) -> Action {
    let key = key(obj.as_ref());
    let delay = ctx.backoff.failed(&key);
    tracing::warn!(object = %key, error = %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Run a controller's result stream to its end (which only a shutdown brings), logging what
/// goes wrong: failed reconciles are retried by the error policy, watch errors by the watcher.
pub async fn drain<K, S>(name: &'static str, stream: S)
where
    K: Resource,
    S: Stream<Item = Result<(ObjectRef<K>, Action), controller::Error<Error, watcher::Error>>>,
{
    stream
        .for_each(|res| async move {
            match res {
                Ok(_) => {}
                Err(controller::Error::ObjectNotFound(obj)) => {
                    tracing::debug!(controller = name, object = %obj, "object gone before its reconcile");
                }
                Err(e) => tracing::warn!(controller = name, error = %e, "controller"),
            }
        })
        .await;
}

/// Mark a reconcile of `obj` as successful (resetting its backoff) and pass its action on.
pub fn done<K: Resource, T>(obj: &K, ctx: &Ctx<T>, action: Action) -> Result<Action, Error> {
    ctx.backoff.succeeded(&key(obj));
    Ok(action)
}

/// A label selector string (`k=v,k2=v2`) from a map selector.
pub fn selector_string<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    labels
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
