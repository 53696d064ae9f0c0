//! `shutdown_signal` resolves on SIGTERM. Its own test binary: it signals its own process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use tokio::signal::unix::{SignalKind, signal};

#[tokio::test]
async fn sigterm_ends_the_wait() {
    // Registering a handler first replaces SIGTERM's default action (exit) for this process, so
    // a signal that arrives before `shutdown_signal` listens cannot kill the test.
    let _guard = signal(SignalKind::terminate()).unwrap();
    let waiter = tokio::spawn(operator_runtime::shutdown_signal());
    assert!(!waiter.is_finished());

    // shutdown_signal only sees signals sent after it first ran: send until it reports one.
    let start = Instant::now();
    while !waiter.is_finished() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "SIGTERM not noticed"
        );
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    waiter.await.unwrap();
}
