//! Restart and pull back-off: 10 s, doubling, capped at 5 min, forgotten after 10 quiet
//! minutes (kubelet's `flowcontrol.Backoff` with `backOffPeriod` 10 s and
//! `MaxContainerBackOff` 300 s).
//!
//! A container's first exit is restarted at once: kubelet's `doBackOff` asks `IsInBackOffSince`
//! before it records the exit with `Next`, and a container without an entry is not in back-off.
//! So restarts wait 0, 10, 20, 40 s ...; a failed pull records its entry before the next
//! attempt, so pulls wait 10, 20, 40 s ...

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// The back-off of one container (`CrashLoopBackOff`) or one image (`ImagePullBackOff`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    /// A container that ran this long, or a failure this long after the previous one, starts
    /// over at `initial` (flowcontrol's "expired" entry: twice the maximum).
    reset_after: Duration,
    delay: Option<Duration>,
    last_failure: Option<Timestamp>,
    /// The first failure (and the first after a reset) waits nothing (container restarts).
    first_is_free: bool,
}

impl Backoff {
    /// Container restarts: `CrashLoopBackOff`.
    pub fn crash_loop() -> Backoff {
        Backoff {
            first_is_free: true,
            ..Backoff::new(Duration::from_secs(10), Duration::from_secs(300))
        }
    }

    /// Image pulls: `ImagePullBackOff`.
    pub fn image_pull() -> Backoff {
        Backoff::new(Duration::from_secs(10), Duration::from_secs(300))
    }

    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            reset_after: max * 2,
            delay: None,
            last_failure: None,
            first_is_free: false,
        }
    }

    /// Records a failure at `now` (a container exit, with how long it ran; a failed pull, with
    /// zero) and returns the delay before the next attempt.
    pub fn on_exit(&mut self, now: Timestamp, ran_for: Duration) -> Duration {
        let quiet_for = self
            .last_failure
            .map(|last| duration_between(last, now))
            .unwrap_or(Duration::ZERO);
        let delay = match self.delay {
            Some(previous) if ran_for < self.reset_after && quiet_for <= self.reset_after => {
                if previous.is_zero() {
                    self.initial
                } else {
                    (previous * 2).min(self.max)
                }
            }
            _ if self.first_is_free => Duration::ZERO,
            _ => self.initial,
        };
        self.delay = Some(delay);
        self.last_failure = Some(now);
        delay
    }

    /// Whether the delay since the last failure has passed (always true before any failure).
    pub fn ready_to_restart(&self, now: Timestamp) -> bool {
        self.restart_at().is_none_or(|at| now >= at)
    }

    /// When the next attempt may start.
    pub fn restart_at(&self) -> Option<Timestamp> {
        let (last, delay) = (self.last_failure?, self.delay?);
        let delay = k8s_openapi::jiff::SignedDuration::try_from(delay).ok()?;
        last.checked_add(delay).ok()
    }

    /// The current delay, as the waiting message reports it.
    pub fn delay(&self) -> Option<Duration> {
        self.delay
    }
}

fn duration_between(earlier: Timestamp, later: Timestamp) -> Duration {
    Duration::try_from(later.duration_since(earlier)).unwrap_or(Duration::ZERO)
}

/// The `CrashLoopBackOff` waiting message:
/// `back-off 20s restarting failed container=c pod=p_ns(uid)`.
pub fn crash_loop_message(
    delay: Duration,
    container: &str,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> String {
    format!(
        "back-off {} restarting failed container={container} pod={}",
        go_duration(delay),
        crate::dns::format_pod(pod)
    )
}

/// The `BackOff` event message for a crash-looping container.
pub fn crash_loop_event_message(container: &str, pod: &k8s_openapi::api::core::v1::Pod) -> String {
    format!(
        "Back-off restarting failed container {container} in pod {}",
        crate::dns::format_pod(pod)
    )
}

/// Go's `time.Duration.String()` for whole seconds and milliseconds: `10s`, `1m20s`, `5m0s`,
/// `1h0m0s`, `500ms`, `0s`.
pub fn go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let total = d.as_secs();
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    let millis = d.subsec_millis();
    let secs = if millis == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{millis:03}").trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::SignedDuration;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = Backoff::crash_loop();
        assert!(b.ready_to_restart(t(0)));
        let mut now = 0;
        let mut delays = Vec::new();
        for _ in 0..8 {
            let d = b.on_exit(t(now), Duration::from_secs(1));
            delays.push(d.as_secs());
            now += i64::try_from(d.as_secs()).unwrap() + 1;
        }
        // The first exit is restarted at once, as kubelet does.
        assert_eq!(delays, [0, 10, 20, 40, 80, 160, 300, 300]);
        // it ran 10 minutes: back to the start
        assert_eq!(b.on_exit(t(now), Duration::from_secs(600)), Duration::ZERO);
        assert_eq!(
            b.on_exit(t(now + 1), Duration::from_secs(5)),
            Duration::from_secs(10)
        );
        // a failure more than 10 minutes after the previous one also starts over
        assert_eq!(b.on_exit(t(now + 1 + 601), Duration::ZERO), Duration::ZERO);
        // Pulls wait from the first failure on.
        let mut pull = Backoff::image_pull();
        assert_eq!(pull.on_exit(t(0), Duration::ZERO), Duration::from_secs(10));
        assert_eq!(pull.on_exit(t(10), Duration::ZERO), Duration::from_secs(20));
    }

    #[test]
    fn ready_after_the_delay() {
        let mut b = Backoff::image_pull();
        b.on_exit(t(0), Duration::ZERO);
        assert!(!b.ready_to_restart(t(0)));
        assert!(!b.ready_to_restart(t(9)));
        assert!(b.ready_to_restart(t(10)));
        assert_eq!(b.restart_at(), Some(t(0) + SignedDuration::from_secs(10)));
        b.on_exit(t(10), Duration::ZERO);
        assert!(!b.ready_to_restart(t(29)));
        assert!(b.ready_to_restart(t(30)));
        assert_eq!(b.delay(), Some(Duration::from_secs(20)));
    }

    #[test]
    fn go_durations() {
        let cases = [
            (0, "0s"),
            (10_000, "10s"),
            (80_000, "1m20s"),
            (160_000, "2m40s"),
            (300_000, "5m0s"),
            (3_600_000, "1h0m0s"),
            (500, "500ms"),
            (1_500, "1.5s"),
        ];
        for (millis, text) in cases {
            assert_eq!(go_duration(Duration::from_millis(millis)), text);
        }
    }

    #[test]
    fn messages() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "p", "namespace": "ns", "uid": "123"}}),
        )
        .unwrap();
        assert_eq!(
            crash_loop_message(Duration::from_secs(40), "c", &pod),
            "back-off 40s restarting failed container=c pod=p_ns(123)"
        );
        assert_eq!(
            crash_loop_event_message("c", &pod),
            "Back-off restarting failed container c in pod p_ns(123)"
        );
    }
}
