//! Per-object exponential back-off for the error policy. No I/O.
//!
//! kube-runtime requeues a failed object after whatever `error_policy` returns and has no
//! per-object back-off of its own (kube-rs/kube#1916), so a flat requeue hammers the API and etcd
//! while an object keeps failing. The operators keep a failure count per object UID here: the
//! error policy calls [`FailureBackoff::failure`] and requeues after the delay it returns; a
//! successful reconcile calls [`FailureBackoff::success`], which resets the count.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Failure counts per object UID, shared by the reconciler and the error policy (`Send + Sync`).
#[derive(Debug)]
pub struct FailureBackoff {
    base: Duration,
    max: Duration,
    /// Consecutive failures that all wait `base` before the doubling starts.
    flat: u32,
    failures: Mutex<HashMap<String, u32>>,
}

impl FailureBackoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        FailureBackoff {
            base,
            max,
            flat: 1,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// The first `n` consecutive failures all wait `base`; the doubling starts after them. For a
    /// refusal known to last a few seconds, which should be retried soon after it ends.
    pub fn flat_for(mut self, n: u32) -> Self {
        self.flat = n.max(1);
        self
    }

    /// Record one more failure of `uid` and return how long to wait before retrying it:
    /// `base` for the first failures (one unless [`FailureBackoff::flat_for`] says more), then
    /// doubling with every further failure, capped at `max`.
    pub fn failure(&self, uid: &str) -> Duration {
        let n = {
            let mut failures = self.lock();
            let count = failures.entry(uid.to_owned()).or_insert(0);
            *count = count.saturating_add(1);
            *count
        };
        delay(self.base, self.max, n.saturating_sub(self.flat))
    }

    /// The object reconciled cleanly: its next failure starts from `base` again. Also call it when
    /// the object is deleted, so the map does not grow with objects that no longer exist.
    pub fn success(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Consecutive failures recorded for `uid` since its last success.
    pub fn failures(&self, uid: &str) -> u32 {
        self.lock().get(uid).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        // The map holds plain counters, consistent after any panic: keep using it.
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The error policy every operator's controller runs after a failed reconcile: one more
/// failure of the object on `backoff`, one warning naming the object, the failure's `reason`
/// (PascalCase, as in metrics and events) and when it is tried again, then a requeue after the
/// back-off's delay.
pub fn requeue_failure<K>(
    object: &K,
    reason: &'static str,
    error: &dyn std::fmt::Display,
    backoff: &FailureBackoff,
) -> kube::runtime::controller::Action
where
    K: kube::Resource,
{
    let meta = object.meta();
    let delay = backoff.failure(meta.uid.as_deref().unwrap_or_default());
    tracing::warn!(
        namespace = meta.namespace.as_deref().unwrap_or_default(),
        name = meta.name.as_deref().unwrap_or_default(),
        reason,
        %error,
        retry_in = ?delay,
        "reconcile failed"
    );
    kube::runtime::controller::Action::requeue(delay)
}

/// `base * 2^exponent`, capped at `max`, without overflowing for any `exponent`.
fn delay(base: Duration, max: Duration, exponent: u32) -> Duration {
    2u32.checked_pow(exponent)
        .and_then(|factor| base.checked_mul(factor))
        .map_or(max, |d| d.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn doubles_from_base_up_to_the_cap() {
        let backoff = FailureBackoff::new(secs(5), secs(300));
        let seen: Vec<Duration> = (0..9).map(|_| backoff.failure("uid-a")).collect();
        let expected = [5, 10, 20, 40, 80, 160, 300, 300, 300].map(secs);
        assert_eq!(seen, expected);
        assert_eq!(backoff.failures("uid-a"), 9);
    }

    #[test]
    fn a_flat_start_retries_at_base_then_doubles() {
        let half = Duration::from_millis(500);
        let backoff = FailureBackoff::new(half, secs(30)).flat_for(4);
        let seen: Vec<Duration> = (0..10).map(|_| backoff.failure("uid-a")).collect();
        let expected = [
            500, 500, 500, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000,
        ]
        .map(Duration::from_millis);
        assert_eq!(seen, expected);
        backoff.success("uid-a");
        assert_eq!(backoff.failure("uid-a"), half);
        // flat_for(0) and flat_for(1) are the plain doubling.
        for flat in [0, 1] {
            let plain = FailureBackoff::new(secs(1), secs(60)).flat_for(flat);
            let seen: Vec<Duration> = (0..3).map(|_| plain.failure("b")).collect();
            assert_eq!(seen, [1, 2, 4].map(secs), "flat_for({flat})");
        }
    }

    #[test]
    fn success_resets_only_that_object() {
        let backoff = FailureBackoff::new(secs(1), secs(60));
        backoff.failure("a");
        backoff.failure("a");
        assert_eq!(backoff.failure("b"), secs(1));
        assert_eq!(backoff.failure("a"), secs(4));
        backoff.success("a");
        assert_eq!(backoff.failures("a"), 0);
        assert_eq!(backoff.failure("a"), secs(1));
        assert_eq!(backoff.failure("b"), secs(2));
    }

    #[test]
    fn success_of_an_unknown_object_is_harmless() {
        let backoff = FailureBackoff::new(secs(1), secs(60));
        backoff.success("never-failed");
        assert_eq!(backoff.failure("never-failed"), secs(1));
    }

    #[test]
    fn huge_failure_counts_stay_at_the_cap() {
        for n in [32, 33, 64, 1_000, u32::MAX] {
            assert_eq!(
                delay(Duration::from_millis(500), secs(600), n),
                secs(600),
                "n={n}"
            );
        }
        // one below overflow of the factor but overflowing the Duration multiply
        assert_eq!(delay(Duration::MAX / 2, Duration::MAX, 3), Duration::MAX);
    }

    #[test]
    fn a_cap_below_base_wins() {
        let backoff = FailureBackoff::new(secs(10), secs(3));
        assert_eq!(backoff.failure("x"), secs(3));
    }

    #[test]
    fn is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<FailureBackoff>();
    }

    /// The shared error policy backs off per object: the same object waits longer each time,
    /// another object starts from the base.
    #[test]
    fn the_error_policy_backs_off_per_object() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::runtime::controller::Action;
        let object = |uid: &str| {
            let mut map = ConfigMap::default();
            map.metadata.uid = Some(uid.into());
            map
        };
        let backoff = FailureBackoff::new(secs(1), secs(60));
        let error = "boom";
        let first = requeue_failure(&object("a"), "Boom", &error, &backoff);
        let second = requeue_failure(&object("a"), "Boom", &error, &backoff);
        let other = requeue_failure(&object("b"), "Boom", &error, &backoff);
        assert_eq!(first, Action::requeue(secs(1)));
        assert_eq!(second, Action::requeue(secs(2)));
        assert_eq!(other, Action::requeue(secs(1)));
    }
}
