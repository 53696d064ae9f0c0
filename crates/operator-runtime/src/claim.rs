//! Which install of the operators manages a namespace: one claim Lease per operator in each
//! namespace it acts in.
//!
//! Two installs (two Helm releases, or a release and a hand-run binary) whose watched namespaces
//! overlap would both act on the same objects: two cluster operators adding and removing members
//! of one etcd cluster, each with its own view. The leader-election Lease cannot prevent that: it
//! is per release (so that two releases watching disjoint namespaces run side by side). So before
//! it acts on an object, an operator holds the claim Lease of the object's namespace (`<binary>-claim`,
//! e.g. `etcd-cluster-operator-claim`), as its install: `<lease namespace>/<lease name>`, the
//! same for every replica of one release. The first install to act in a namespace keeps it while
//! it renews the claim; the other leaves that namespace's objects alone and says so on each one
//! (a Warning event `OverlappingInstall` naming both installs), and takes over only once the claim
//! expires (the first install was uninstalled or stopped acting there) or is released (on a clean
//! shutdown).
//!
//! An install whose RBAC does not grant the claim Leases (an older chart's Role, with the new
//! binary) acts as before claims existed and says once in its log that overlaps go undetected:
//! stopping would turn an operator upgrade without the chart's RBAC into an outage.
//!
//! The decision is [`crate::leader::decide`], the same as for leader election; this module is the
//! I/O and a cache, so a reconcile costs no API call while the claim is fresh.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

use crate::Events;
use crate::leader::{Decision, decide};

/// The Warning event's reason on an object left to another install.
pub const OVERLAPPING_INSTALL: &str = "OverlappingInstall";

/// How soon an operator looks again at an object another install manages (it takes over once
/// that install's claim expires or is released).
pub const RECHECK_AFTER: Duration = Duration::from_secs(60);

/// How long a claim holds without renewal. Long: a claim is renewed only when an operator acts
/// in the namespace (every reconcile of an object there), and an idle namespace must not change
/// hands between two reconciles of its objects.
pub const CLAIM_DURATION: Duration = Duration::from_secs(300);

/// A claim renewed less than this long ago is ours without asking the API server. Well inside
/// [`CLAIM_DURATION`], so a cached claim never outlives the one in the API server.
const FRESH_FOR: Duration = Duration::from_secs(60);
const _: () = assert!(FRESH_FOR.as_secs() * 3 <= CLAIM_DURATION.as_secs());

/// The answer for one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This install manages the namespace: act.
    Ours,
    /// Another install does (`holder`): leave the namespace's objects alone.
    Theirs { holder: String },
    /// The API server forbids this install the claim Leases (RBAC of an older chart, or a
    /// hand-written Role without them): act as before claims existed, unguarded against an
    /// overlapping install, and say so once in the log.
    Unguarded,
}

/// The claims of one operator of one install.
pub struct NamespaceClaims {
    client: kube::Client,
    lease_name: String,
    install: String,
    /// Namespace → when this process last wrote the claim as ours.
    renewed: Mutex<HashMap<String, Instant>>,
    /// Whether the log already said that the claims are forbidden.
    warned_forbidden: AtomicBool,
    /// Held while the API server is asked: the process's concurrent reconciles (100
    /// EtcdClusters applied at once) wait for the one renewing the claim and find it fresh,
    /// instead of all reading the same Lease and all but one failing on the write conflict.
    asking: tokio::sync::Mutex<()>,
}

impl NamespaceClaims {
    /// `binary` names the operator (the claim Lease is `<binary>-claim`); `install` is the
    /// install's identity, [`crate::ShellArgs::install_identity`].
    pub fn new(client: kube::Client, binary: &str, install: String) -> NamespaceClaims {
        NamespaceClaims {
            client,
            lease_name: claim_lease_name(binary),
            install,
            renewed: Mutex::new(HashMap::new()),
            warned_forbidden: AtomicBool::new(false),
            asking: tokio::sync::Mutex::new(()),
        }
    }

    /// This install's identity, as written in the claims.
    pub fn install(&self) -> &str {
        &self.install
    }

    /// Holds (creates, renews or takes over) the claim of `namespace`, or says who holds it.
    /// An error (the API refused, or another install wrote the claim at the same moment) means
    /// "not known to be ours": the caller must not act and should retry.
    pub async fn claim(&self, namespace: &str) -> Result<Claim, kube::Error> {
        match self.try_claim(namespace).await {
            Err(kube::Error::Api(status)) if status.code == 403 => {
                if !self.warned_forbidden.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        %namespace,
                        lease = %self.lease_name,
                        error = %status.message,
                        "the claim Leases are forbidden to this install (its RBAC predates them): \
                         acting without them, so an overlapping install would not be detected; \
                         grant leases get/create/update in the watched namespaces"
                    );
                }
                Ok(Claim::Unguarded)
            }
            other => other,
        }
    }

    async fn try_claim(&self, namespace: &str) -> Result<Claim, kube::Error> {
        let fresh = || {
            self.cached(namespace)
                .is_some_and(|at| at.elapsed() < FRESH_FOR)
        };
        if fresh() {
            return Ok(Claim::Ours);
        }
        let _asking = self.asking.lock().await;
        // Another reconcile of this process may have written the claim while this one waited.
        if fresh() {
            return Ok(Claim::Ours);
        }
        let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        let current = api.get_opt(&self.lease_name).await?;
        let now = Timestamp::now();
        let spec = current
            .as_ref()
            .map(|lease| lease.spec.clone().unwrap_or_default());
        let decision = decide(spec.as_ref(), &self.install, now);
        let written_at = Instant::now();
        match decision {
            Decision::Wait(_) => {
                self.forget(namespace);
                let holder = spec
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_else(|| "unknown".to_owned());
                return Ok(Claim::Theirs { holder });
            }
            Decision::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.lease_name.clone()),
                        namespace: Some(namespace.to_owned()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.held_spec(None, now)),
                };
                // A write like any other: a stale leader sends none (failpoint's fence).
                failpoint::fence::check("namespace claim");
                api.create(&PostParams::default(), &lease).await?;
            }
            Decision::Take | Decision::Renew => {
                let Some(mut lease) = current else {
                    // decide() answers Create for a missing Lease.
                    return Ok(Claim::Theirs {
                        holder: "unknown".to_owned(),
                    });
                };
                let taking = decision == Decision::Take;
                lease.spec = Some(self.held_spec(lease.spec.take().filter(|_| !taking), now));
                failpoint::fence::check("namespace claim");
                // The read's resourceVersion makes this a compare-and-swap: a concurrent writer
                // (another install taking the same expired claim) gets a conflict, not both.
                api.replace(&self.lease_name, &PostParams::default(), &lease)
                    .await?;
            }
        }
        self.remember(namespace, written_at);
        Ok(Claim::Ours)
    }

    /// Whether to act on `object`: its namespace's claim is ours (`Ok(true)`), or another
    /// install's (`Ok(false)`: a Warning event `OverlappingInstall` on the object says so, and
    /// the caller does nothing but requeue). An error is "not known": do not act.
    pub async fn admit<K>(&self, object: &K, events: &Events) -> Result<bool, kube::Error>
    where
        K: Resource<DynamicType = ()>,
    {
        let namespace = object.namespace().unwrap_or_default();
        match self.claim(&namespace).await? {
            Claim::Ours | Claim::Unguarded => Ok(true),
            Claim::Theirs { holder } => {
                let message = overlap_message(&namespace, &holder, &self.install);
                tracing::warn!(%namespace, %holder, install = %self.install, "another install manages this namespace: not acting");
                events
                    .warning(&object.object_ref(&()), OVERLAPPING_INSTALL, message)
                    .await;
                Ok(false)
            }
        }
    }

    /// Lets go of every claim this process holds, so another install can take the namespaces
    /// at once (on a clean shutdown). Best effort: a claim not released expires.
    pub async fn release_all(&self) {
        let namespaces: Vec<String> = self
            .renewed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(namespace, _)| namespace)
            .collect();
        for namespace in namespaces {
            let api: Api<Lease> = Api::namespaced(self.client.clone(), &namespace);
            let Ok(Some(mut lease)) = api.get_opt(&self.lease_name).await else {
                continue;
            };
            let ours = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(self.install.as_str());
            if !ours {
                continue;
            }
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.renew_time = Some(MicroTime(Timestamp::now()));
            }
            failpoint::fence::check("namespace claim release");
            if let Err(error) = api
                .replace(&self.lease_name, &PostParams::default(), &lease)
                .await
            {
                tracing::warn!(%error, %namespace, "could not release the namespace claim; it expires");
            }
        }
    }

    /// The spec of a claim held by us from `now`, keeping `renewed`'s acquire time and
    /// transitions when we already held it.
    fn held_spec(&self, renewed: Option<LeaseSpec>, now: Timestamp) -> LeaseSpec {
        let now = Some(MicroTime(now));
        let mut spec = renewed.unwrap_or_else(|| LeaseSpec {
            acquire_time: now.clone(),
            ..LeaseSpec::default()
        });
        spec.holder_identity = Some(self.install.clone());
        spec.renew_time = now;
        spec.lease_duration_seconds = i32::try_from(CLAIM_DURATION.as_secs()).ok();
        spec
    }

    fn cached(&self, namespace: &str) -> Option<Instant> {
        self.renewed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(namespace)
            .copied()
    }

    fn remember(&self, namespace: &str, at: Instant) {
        self.renewed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(namespace.to_owned(), at);
    }

    fn forget(&self, namespace: &str) {
        self.renewed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(namespace);
    }
}

/// The claim Lease's name for the operator `binary`.
pub fn claim_lease_name(binary: &str) -> String {
    format!("{binary}-claim")
}

/// The Warning event's message on an object another install manages.
pub fn overlap_message(namespace: &str, holder: &str, install: &str) -> String {
    format!(
        "namespace {namespace} is managed by the etcd-operator install {holder}; this install \
         ({install}) leaves it alone. Two installs watch it: give each its own namespaces \
         (the chart's watchNamespace), or uninstall one"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_message_say_which_installs() {
        assert_eq!(
            claim_lease_name("etcd-cluster-operator"),
            "etcd-cluster-operator-claim"
        );
        let message = overlap_message(
            "team-a",
            "ops/a-etcd-operator-cluster",
            "ops/b-etcd-operator-cluster",
        );
        assert!(message.contains("team-a"));
        assert!(message.contains("ops/a-etcd-operator-cluster"));
        assert!(message.contains("(ops/b-etcd-operator-cluster)"));
        assert!(message.contains("watchNamespace"));
    }
}
