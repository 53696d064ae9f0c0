//! The stale-leader fence: a leader-elected operator process acts only while its Lease is
//! surely still its own. No I/O but stderr and the process exit.
//!
//! The elector (operator-runtime's `leader`) records, after each renewal, the local monotonic
//! time until which the Lease is ours for sure: the renewal's start (read before the request, so
//! no later than the `renewTime` others see) plus the lease duration, less a margin for clock
//! rates and a write still in flight ([`hold_until`]). Every side effect passes through
//! [`crate::around`], which calls [`check`] first: past that time the process does not send the
//! write and exits. Why here: a reconcile already past its own leadership check when the process
//! was SIGSTOPped resumes where it stopped, and its next write would land before the renew task
//! runs and notices that another replica took the Lease (issue 18). A process that never
//! installed the fence (leader election off, the backup CronJob's Job) is not fenced.

use std::sync::Mutex;
use std::time::Instant;

/// The exit code of a process that stopped at the fence: the same as a leadership loss noticed
/// by the renew task (`ExitCode::FAILURE`); the kubelet restarts it as a standby.
pub const EXIT_CODE: i32 = 1;

/// Whether this process may still act as the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    /// No elector installed a fence: not fenced.
    Unelected,
    /// The Lease is ours until then (monotonic clock).
    HeldUntil(Instant),
    /// Leadership lost or released: never again in this process.
    Revoked,
}

impl Fence {
    /// Whether a side effect may be sent at `now`. Pure.
    pub fn permits(self, now: Instant) -> bool {
        match self {
            Fence::Unelected => true,
            Fence::HeldUntil(until) => now < until,
            Fence::Revoked => false,
        }
    }
}

static FENCE: Mutex<Fence> = Mutex::new(Fence::Unelected);

fn with_fence<T>(f: impl FnOnce(&mut Fence) -> T) -> T {
    // A panic elsewhere while holding this lock leaves a valid value: use it.
    let mut guard = FENCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut guard)
}

/// The elector renewed: side effects may be sent until `until` (the renewal's start plus the
/// lease duration, less the margin). Ignored once revoked.
pub fn hold_until(until: Instant) {
    with_fence(|fence| {
        if *fence != Fence::Revoked {
            *fence = Fence::HeldUntil(until);
        }
    });
}

/// Leadership lost or released: every later side effect of this process is refused.
pub fn revoke() {
    with_fence(|fence| *fence = Fence::Revoked);
}

/// The fence as it stands.
pub fn current() -> Fence {
    with_fence(|fence| *fence)
}

/// Before the side effect `name`: exits the process, without sending it, once the Lease may no
/// longer be ours.
pub fn check(name: &str) {
    let fence = current();
    if fence.permits(Instant::now()) {
        return;
    }
    let line = format!(
        "stale-leader fence: not sending {name}: this process's Lease is no longer surely its own \
         ({fence:?}, now {:?}); exiting with code {EXIT_CODE} so that only the current leader acts",
        Instant::now()
    );
    println!("{line}");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    eprintln!("{line}");
    std::process::exit(EXIT_CODE);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn permits_only_before_the_held_until_time_and_never_after_a_revoke() {
        let t = Instant::now();
        let until = t + Duration::from_secs(10);
        assert!(Fence::Unelected.permits(t + Duration::from_secs(3600)));
        assert!(Fence::HeldUntil(until).permits(t));
        assert!(Fence::HeldUntil(until).permits(until - Duration::from_millis(1)));
        assert!(!Fence::HeldUntil(until).permits(until));
        assert!(!Fence::HeldUntil(until).permits(t + Duration::from_secs(75)));
        assert!(!Fence::Revoked.permits(t));
    }
}
