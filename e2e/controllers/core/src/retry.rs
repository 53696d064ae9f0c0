//! Per-object exponential backoff for failed reconciles, as client-go's rate-limited work queue
//! does for kube-controller-manager (5 ms doubling, capped): a broken object does not hot-loop,
//! a fixed one is retried promptly.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

const BASE: Duration = Duration::from_millis(200);
const CAP: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Record a failure of `key` and return how long to wait before the next attempt.
    pub fn failed(&self, key: &str) -> Duration {
        let mut map = match self.failures.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        let n = map.entry(key.to_string()).or_insert(0);
        let delay = delay_after(*n);
        *n = n.saturating_add(1);
        delay
    }

    /// Forget the failures of `key` after a successful reconcile.
    pub fn succeeded(&self, key: &str) {
        let mut map = match self.failures.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.remove(key);
    }
}

/// BASE × 2^failures, capped.
fn delay_after(failures: u32) -> Duration {
    BASE.checked_mul(1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX))
        .map_or(CAP, |d| d.min(CAP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_then_caps_and_resets() {
        let b = Backoff::default();
        assert_eq!(b.failed("a"), Duration::from_millis(200));
        assert_eq!(b.failed("a"), Duration::from_millis(400));
        assert_eq!(b.failed("a"), Duration::from_millis(800));
        assert_eq!(b.failed("b"), Duration::from_millis(200));
        for _ in 0..20 {
            b.failed("a");
        }
        assert_eq!(b.failed("a"), CAP);
        b.succeeded("a");
        assert_eq!(b.failed("a"), Duration::from_millis(200));
    }
}
