//! One etcd client per member endpoint, kept between observations (issue 24: every reconcile
//! dialled a new connection per member, each with a DNS lookup on the blocking pool, and at 100
//! clusters a reconcile's p99 was 4.7 s).
//!
//! A client is keyed by the scope it was made for (the cluster operator passes the EtcdCluster's
//! UID), the endpoint, the timeout and a digest of the TLS material. So a cluster deleted and
//! created again under the same name (same member DNS names, new UID) never reuses a connection
//! made for the old one, and new certificates or a new CA give a new connection. A client is
//! dropped when a request on it fails (the next observation dials again), when its endpoint is
//! no longer asked or the TLS material changed ([`ClientPool::retain`]), and when it was not
//! used for [`IDLE_EXPIRY`] (a deleted cluster's).
//!
//! The pool also remembers when each endpoint last answered a status request
//! ([`ClientPool::answered_at`]), also an answer that came after its observation stopped
//! waiting: how the cluster operator tells a member that never answered since its Pod started
//! (a short wait, `observe_pooled`'s `starting`) from one that did (the full timeout).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::Client;

use crate::error::AdminError;
use crate::observe::connect;
use crate::tls::ClientTls;

/// A client unused this long is dropped (its cluster was deleted, or its member went away
/// without the scope being observed again).
pub const IDLE_EXPIRY: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    scope: String,
    endpoint: String,
    timeout: Duration,
    /// Digest of the [`ClientTls`] (0 without TLS); the key itself never leaves the process.
    tls: u64,
}

struct Entry {
    client: Client,
    used: Instant,
}

/// A starting member's status request in flight ([`ClientPool::start_asking`]); dropping it,
/// however the request ended, lets the next observation ask again.
pub(crate) struct AskingGuard {
    asking: Arc<Mutex<HashSet<(String, String)>>>,
    key: (String, String),
}

impl Drop for AskingGuard {
    fn drop(&mut self) {
        self.asking
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// Called once per new connection (a dial), e.g. to count them in a metric.
pub type OnDial = Arc<dyn Fn() + Send + Sync>;

/// Shared clients to etcd members; cheap to clone (one shared map).
#[derive(Clone, Default)]
pub struct ClientPool {
    clients: Arc<Mutex<HashMap<Key, Entry>>>,
    /// When each (scope, endpoint) last answered a status request, in Unix milliseconds.
    answered: Arc<Mutex<HashMap<(String, String), i64>>>,
    /// The (scope, endpoint)s of starting members with a status request in flight: the one
    /// request an observation sends such a member and, unanswered after the brief wait, leaves
    /// running to record the answer (see `observe_pooled`).
    asking: Arc<Mutex<HashSet<(String, String)>>>,
    on_dial: Option<OnDial>,
}

impl fmt::Debug for ClientPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientPool")
            .field("clients", &self.len())
            .finish_non_exhaustive()
    }
}

fn tls_digest(tls: Option<&ClientTls>) -> u64 {
    tls.map_or(0, |tls| {
        let mut hasher = DefaultHasher::new();
        tls.hash(&mut hasher);
        // 0 stands for plain HTTP.
        hasher.finish().max(1)
    })
}

impl ClientPool {
    /// An empty pool that calls `on_dial` for each new connection.
    pub fn with_dial_hook(on_dial: OnDial) -> Self {
        ClientPool {
            clients: Arc::default(),
            answered: Arc::default(),
            asking: Arc::default(),
            on_dial: Some(on_dial),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many clients are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no client is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn key(scope: &str, endpoint: &str, timeout: Duration, tls: Option<&ClientTls>) -> Key {
        Key {
            scope: scope.to_owned(),
            endpoint: endpoint.to_owned(),
            timeout,
            tls: tls_digest(tls),
        }
    }

    /// The client kept for `endpoint` in `scope`, or a new one (kept). Drops clients unused
    /// for [`IDLE_EXPIRY`]. etcd-client connects lazily: a new client costs no round trip
    /// until its first request.
    pub async fn client(
        &self,
        scope: &str,
        endpoint: &str,
        timeout: Duration,
        tls: Option<&ClientTls>,
    ) -> Result<Client, AdminError> {
        let key = Self::key(scope, endpoint, timeout, tls);
        let now = Instant::now();
        {
            let mut clients = self.lock();
            clients.retain(|_, entry| now.duration_since(entry.used) < IDLE_EXPIRY);
            if let Some(entry) = clients.get_mut(&key) {
                entry.used = now;
                return Ok(entry.client.clone());
            }
        }
        let client = connect(endpoint, timeout, false, tls).await?;
        if let Some(on_dial) = &self.on_dial {
            on_dial();
        }
        self.lock().insert(
            key,
            Entry {
                client: client.clone(),
                used: now,
            },
        );
        Ok(client)
    }

    /// A request on the client for `endpoint` failed: the next one dials again (the
    /// connection may be broken, or the name may point at a new Pod).
    pub fn forget_endpoint(&self, scope: &str, endpoint: &str) {
        self.lock()
            .retain(|key, _| !(key.scope == scope && key.endpoint == endpoint));
    }

    /// `endpoint` of `scope` answered a status request just now.
    pub(crate) fn record_answer(&self, scope: &str, endpoint: &str) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((scope.to_owned(), endpoint.to_owned()), now);
    }

    /// Marks a status request to the starting member at `endpoint` of `scope` as in flight
    /// until the returned guard is dropped (the request answered, failed or was cancelled);
    /// `None` when one already is (then this observation sends none and does not wait).
    pub(crate) fn start_asking(&self, scope: &str, endpoint: &str) -> Option<AskingGuard> {
        let key = (scope.to_owned(), endpoint.to_owned());
        self.asking
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone())
            .then(|| AskingGuard {
                asking: self.asking.clone(),
                key,
            })
    }

    /// When `endpoint` of `scope` last answered a status request (Unix milliseconds), if it
    /// did since this process started and since `scope` was last [forgotten](Self::forget).
    pub fn answered_at(&self, scope: &str, endpoint: &str) -> Option<i64> {
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(scope.to_owned(), endpoint.to_owned()))
            .copied()
    }

    /// Keeps, of `scope`'s clients, only those for `endpoints` with this `timeout` and `tls`:
    /// a member that went away, or TLS material that changed, drops its client (and its last
    /// answer's time when its endpoint is no longer asked).
    pub fn retain(
        &self,
        scope: &str,
        endpoints: &[String],
        timeout: Duration,
        tls: Option<&ClientTls>,
    ) {
        let digest = tls_digest(tls);
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(s, endpoint), _| s != scope || endpoints.contains(endpoint));
        self.lock().retain(|key, _| {
            key.scope != scope
                || (endpoints.contains(&key.endpoint)
                    && key.timeout == timeout
                    && key.tls == digest)
        });
    }

    /// Drops every client of `scope` (its cluster is gone).
    pub fn forget(&self, scope: &str) {
        self.lock().retain(|key, _| key.scope != scope);
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(s, _), _| s != scope);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    const T: Duration = Duration::from_secs(2);

    fn counted() -> (ClientPool, Arc<AtomicU64>) {
        let dials = Arc::new(AtomicU64::new(0));
        let counter = dials.clone();
        let pool = ClientPool::with_dial_hook(Arc::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        (pool, dials)
    }

    /// Two self-signed CA certificates (no key needed: nothing is dialled).
    const CA_1: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBiDCCAS+gAwIBAgIUGVp7+1BvVCR0A1jyM93c9BIfQjAwCgYIKoZIzj0EAwIw\n\
GTEXMBUGA1UEAwwOcG9vbC10ZXN0LWNhLTEwIBcNMjYxMTI2MTExMjU2WhgPMjEy\n\
NjExMDIxMTEyNTZaMBkxFzAVBgNVBAMMDnBvb2wtdGVzdC1jYS0xMFkwEwYHKoZI\n\
zj0CAQYIKoZIzj0DAQcDQgAEtD4zra5tVWDZwgSvuyn9q75KemJz/G/c3IHWI9Jh\n\
+wgLUTSX3kSeGvxeXrhG9DdCR7JlTASXeYAyq0/9g2LR66NTMFEwHQYDVR0OBBYE\n\
FBuaWcRLS3JswQvP6FMAVM9ZaIweMB8GA1UdIwQYMBaAFBuaWcRLS3JswQvP6FMA\n\
VM9ZaIweMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgQFniuEdI\n\
U0IDYx2i0Z90djGaotqX0K46JkyGcn1B+OoCIGDLGbYg/TSJao3uwzAG+3PHyoDQ\n\
vzc0SQAEEduG7FEv\n\
-----END CERTIFICATE-----";
    const CA_2: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBiDCCAS+gAwIBAgIUVMNnXEseKDso9yzYgXtdW6NL18EwCgYIKoZIzj0EAwIw\n\
GTEXMBUGA1UEAwwOcG9vbC10ZXN0LWNhLTIwIBcNMjYxMTI2MTExMjU2WhgPMjEy\n\
NjExMDIxMTEyNTZaMBkxFzAVBgNVBAMMDnBvb2wtdGVzdC1jYS0yMFkwEwYHKoZI\n\
zj0CAQYIKoZIzj0DAQcDQgAEvkzYuEVQn1LVXSNtbJaf+7xLp7ycq7yOKw27lHQI\n\
CXh3K0rbVbsuJHekyFJzhmHBpaMApdfEdxv2sHujdTNA5KNTMFEwHQYDVR0OBBYE\n\
FPmXc49CJROs28d80m0fv1u+mc42MB8GA1UdIwQYMBaAFPmXc49CJROs28d80m0f\n\
v1u+mc42MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgE/pIqqsc\n\
9vjvSonF5CoBILMgAB1Dm4cHcUvbukK/23wCICU3d4x073W3CeLjXOrz0FWGNFP8\n\
Sjop33sHzHOjV6vS\n\
-----END CERTIFICATE-----";

    fn tls(ca: &str) -> ClientTls {
        ClientTls {
            ca_pem: ca.into(),
            identity: None,
        }
    }

    /// A client is reused only for the same scope (cluster UID), endpoint, timeout and TLS
    /// material: a cluster recreated under the same name (same member URL, new UID) dials
    /// its own. No server is needed: etcd-client dials lazily.
    #[tokio::test]
    async fn a_client_is_reused_only_for_the_same_cluster_endpoint_and_tls() {
        let (pool, dials) = counted();
        let url = "http://main-0.main.db.svc:2379";
        let dialled = || dials.load(Ordering::Relaxed);
        pool.client("uid-old", url, T, None).await.unwrap();
        pool.client("uid-old", url, T, None).await.unwrap();
        assert_eq!(dialled(), 1, "the second observation reuses the client");
        pool.client("uid-new", url, T, None).await.unwrap();
        assert_eq!(
            dialled(),
            2,
            "the recreated cluster (new UID) dials its own"
        );
        // The same member switched to TLS, then its CA rotated.
        let https = "https://main-0.main.db.svc:2379";
        pool.client("uid-new", https, T, Some(&tls(CA_1)))
            .await
            .unwrap();
        pool.client("uid-new", https, T, Some(&tls(CA_1)))
            .await
            .unwrap();
        assert_eq!(dialled(), 3, "TLS material is part of the key");
        pool.client("uid-new", https, T, Some(&tls(CA_2)))
            .await
            .unwrap();
        assert_eq!(dialled(), 4, "new TLS material dials again");
        assert_eq!(pool.len(), 4);

        // The new material is current: the old TLS client and the plaintext one go.
        pool.retain("uid-new", &[https.to_owned()], T, Some(&tls(CA_2)));
        assert_eq!(
            pool.len(),
            2,
            "uid-old's client and uid-new's CA_2 client stay"
        );
        // A member that went away drops its client.
        pool.retain("uid-new", &[], T, Some(&tls(CA_2)));
        assert_eq!(pool.len(), 1);
        // A failed request: the next call dials again.
        pool.forget_endpoint("uid-old", url);
        pool.client("uid-old", url, T, None).await.unwrap();
        assert_eq!(dialled(), 5);
        pool.forget("uid-old");
        assert!(pool.is_empty());
    }

    #[tokio::test]
    async fn a_malformed_endpoint_is_an_error_and_not_kept() {
        let (pool, dials) = counted();
        assert!(pool.client("uid", "not a url", T, None).await.is_err());
        assert!(pool.is_empty());
        assert_eq!(dials.load(Ordering::Relaxed), 0);
    }

    /// One status request at a time per starting member, per scope; the mark goes with the
    /// request's guard, however the request ends (a cancelled one included).
    #[test]
    fn a_starting_member_is_asked_by_one_request_at_a_time() {
        let pool = ClientPool::default();
        let first = pool.start_asking("uid", "http://m1:2379");
        assert!(first.is_some());
        assert!(pool.start_asking("uid", "http://m1:2379").is_none());
        // Another member, or the same name in another cluster, is asked on its own.
        let other = pool.start_asking("uid", "http://m2:2379");
        let other_scope = pool.start_asking("uid2", "http://m1:2379");
        assert!(other.is_some() && other_scope.is_some());
        drop(first);
        assert!(pool.start_asking("uid", "http://m1:2379").is_some());
    }
}
