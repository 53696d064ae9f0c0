//! The plumbing every controller of this crate shares: a context with the client and an event
//! recorder, a per-object retry backoff (the workqueue's rate limiter of kube-controller-manager),
//! and the loop that drives a kube-runtime `Controller` until it is dropped.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::error::Error;

/// First retry delay after a failed reconcile; doubles per consecutive failure.
const RETRY_BASE: Duration = Duration::from_millis(500);
/// Longest retry delay (client-go's default controller rate limiter caps at 1000 s; a local
/// control plane wants faster recovery).
const RETRY_MAX: Duration = Duration::from_secs(60);

/// What a reconcile function gets: the client, a recorder reporting as the upstream controller
/// does, and the failure counts that drive its retry backoff.
pub(crate) struct Context<S> {
    pub client: Client,
    pub recorder: Recorder,
    failures: Mutex<HashMap<String, u32>>,
    pub state: S,
}

impl<S> Context<S> {
    pub(crate) fn new(client: Client, controller: &str, state: S) -> Arc<Context<S>> {
        let reporter = Reporter {
            controller: controller.to_string(),
            instance: None,
        };
        Arc::new(Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            failures: Mutex::new(HashMap::new()),
            state,
        })
    }

    /// Publish an event about `regarding`. Events are best effort, as in client-go's recorder: a
    /// failure is logged and never fails the reconcile that reported it.
    pub(crate) async fn event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&event, regarding).await {
            tracing::debug!(%err, reason, "could not publish event");
        }
    }

    fn retry_delay(&self, key: String) -> Duration {
        let Ok(mut failures) = self.failures.lock() else {
            return RETRY_MAX;
        };
        let count = failures.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        retry_delay_for(*count)
    }

    fn forget(&self, key: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(key);
        }
    }
}

/// The backoff after `failures` consecutive failed reconciles of one object.
pub(crate) fn retry_delay_for(failures: u32) -> Duration {
    let factor = 1u32
        .checked_shl(failures.saturating_sub(1))
        .unwrap_or(u32::MAX);
    RETRY_BASE.saturating_mul(factor).min(RETRY_MAX)
}

fn key_of<K: Resource>(obj: &K) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or(""),
        obj.meta().name.as_deref().unwrap_or("")
    )
}

/// Drive `controller` with `reconcile` until the returned future is dropped. A failed reconcile
/// is logged and retried with a per-object exponential backoff; watch errors are logged (the
/// watchers back off and relist on their own).
pub(crate) async fn drive<K, S, F, Fut>(
    name: &'static str,
    controller: Controller<K>,
    ctx: Arc<Context<S>>,
    reconcile: F,
) where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
    S: Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<Context<S>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let reconcile = Arc::new(reconcile);
    controller
        .run(
            move |obj, ctx| {
                let reconcile = Arc::clone(&reconcile);
                async move {
                    let key = key_of(obj.as_ref());
                    let result = reconcile(obj, Arc::clone(&ctx)).await;
                    if result.is_ok() {
                        ctx.forget(&key);
                    }
                    result
                }
            },
            move |obj: Arc<K>, err: &Error, ctx: Arc<Context<S>>| {
                let delay = ctx.retry_delay(key_of(obj.as_ref()));
                tracing::warn!(controller = name, object = %key_of(obj.as_ref()), %err, ?delay, "reconcile failed; retrying");
                Action::requeue(delay)
            },
            ctx,
        )
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(controller = name, %err, "controller event");
            }
        })
        .await;
}

/// A reference to `obj` for events (`regarding`) and status lists (`CronJob.status.active`).
pub(crate) fn object_reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).to_string()),
        kind: Some(K::kind(&()).to_string()),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.meta().uid.clone(),
        resource_version: obj.meta().resource_version.clone(),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_and_caps() {
        let cases = [
            (1, Duration::from_millis(500)),
            (2, Duration::from_secs(1)),
            (3, Duration::from_secs(2)),
            (8, Duration::from_secs(60)),
            (40, Duration::from_secs(60)),
        ];
        for (failures, want) in cases {
            assert_eq!(retry_delay_for(failures), want, "failures={failures}");
        }
    }
}
