//! Waiting for the signal that ends the process. I/O: installs SIGTERM and SIGINT handlers.
//!
//! Kubernetes sends SIGTERM when it deletes or evicts an operator Pod; the binaries then release
//! their Lease (so a standby takes over at once instead of after the lease duration) and exit.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves at the first SIGTERM or SIGINT received after it is first polled.
///
/// If a handler cannot be installed (the runtime refused it), that signal is logged at error and
/// ignored; the other one still ends the wait.
pub async fn shutdown_signal() {
    let terminate = wait_for(SignalKind::terminate(), "SIGTERM");
    let interrupt = wait_for(SignalKind::interrupt(), "SIGINT");
    tokio::select! {
        () = terminate => {}
        () = interrupt => {}
    }
}

async fn wait_for(kind: SignalKind, name: &'static str) {
    match signal(kind) {
        Ok(mut stream) => {
            if stream.recv().await.is_some() {
                tracing::info!(signal = name, "shutting down");
                return;
            }
            // The stream ended: the runtime is going away, no signal will ever come.
            std::future::pending::<()>().await;
        }
        Err(error) => {
            tracing::error!(signal = name, %error, "cannot listen for the signal");
            std::future::pending::<()>().await;
        }
    }
}
