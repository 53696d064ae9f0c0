//! The `run` subcommand of an operator binary, as the backup and restore operators share it:
//! probes, signals, the Lease, the controller, and the exit code. I/O.
//!
//! A standby is Ready (it is healthy and can take over; a rolling update's new Pod waits for the
//! Lease the old one holds), not Ready again while the controller starts, Ready once it runs.
//! Losing the Lease stops the controller and exits non-zero, so the Pod restarts as a standby;
//! SIGTERM stops the controller and releases the Lease, so a standby takes over at once.

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::{LeaseConfig, ProbeServer, Readiness, acquire_on_own_thread, shutdown_signal};

/// Runs `controller(stop, readiness)` until SIGTERM/SIGINT, as the only active replica when
/// `election` is given. `controller` must return once `stop` is cancelled. The Lease is held
/// on a thread of its own with its own API client built from `kube_config`
/// ([`crate::acquire_on_own_thread`]): renewals never wait behind the controller's work.
pub async fn run_elected<F, Fut>(
    kube_config: kube::Config,
    probe_addr: SocketAddr,
    election: Option<LeaseConfig>,
    controller: F,
) -> ExitCode
where
    F: FnOnce(CancellationToken, Readiness) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_elected_with_metrics(kube_config, probe_addr, None, election, controller).await
}

/// [`run_elected`], with `GET /metrics` on the probe address rendering `metrics`.
pub async fn run_elected_with_metrics<F, Fut>(
    kube_config: kube::Config,
    probe_addr: SocketAddr,
    metrics: Option<Arc<Registry>>,
    election: Option<LeaseConfig>,
    controller: F,
) -> ExitCode
where
    F: FnOnce(CancellationToken, Readiness) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let readiness = Readiness::new();
    let probes = readiness.clone();
    tokio::spawn(async move {
        let served = match ProbeServer::bind(probe_addr).await {
            Ok(server) => server.serve_with_metrics(probes, metrics).await,
            Err(error) => Err(error),
        };
        if let Err(error) = served {
            tracing::error!(%error, addr = %probe_addr, "cannot serve probes");
        }
    });
    let shutdown_requested = CancellationToken::new();
    let signal = shutdown_requested.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        signal.cancel();
    });
    let mut leadership = None;
    if let Some(config) = election {
        readiness.set_ready(true);
        let identity = config.identity.clone();
        tracing::info!(lease = %config.name, %identity, "waiting for leadership");
        tokio::select! {
            acquired = acquire_on_own_thread(kube_config, config) => match acquired {
                Ok(l) => {
                    // From here every side effect is refused (the process exits) once the Lease
                    // may be gone: a reconcile in flight when the process was stopped included.
                    l.fence_process();
                    leadership = Some(l);
                }
                Err(error) => {
                    tracing::error!(%error, reason = error.reason(), "leader election failed");
                    return ExitCode::FAILURE;
                }
            },
            _ = shutdown_requested.cancelled() => return ExitCode::SUCCESS,
        }
        readiness.set_ready(false);
        tracing::info!(%identity, "leading");
    }
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller(stop.clone(), readiness));
    let lost = match leadership.as_mut() {
        Some(l) => tokio::select! {
            _ = l.lost() => true,
            _ = shutdown_requested.cancelled() => false,
        },
        None => {
            shutdown_requested.cancelled().await;
            false
        }
    };
    if lost {
        tracing::error!(
            "leadership lost; stopping the controller and exiting so a standby takes over"
        );
    }
    stop.cancel();
    let _ = running.await;
    match (leadership, lost) {
        (_, true) => ExitCode::FAILURE,
        (Some(l), false) => {
            l.release().await;
            ExitCode::SUCCESS
        }
        (None, false) => ExitCode::SUCCESS,
    }
}
