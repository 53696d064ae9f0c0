//! Kubernetes plumbing shared by the three operators (etcd-cluster-operator,
//! etcd-backup-operator, etcd-restore-operator): nothing here knows about etcd.
//!
//! - [`logging`] — `init_logging(filter, format)`, JSON lines carrying span fields (no I/O but stdout).
//! - [`leader`] — leader election on a `coordination.k8s.io/v1` Lease; the decision is the pure
//!   [`leader::decide`], the renew task does the I/O.
//! - [`status`] — `apply_status`, server-side apply of a status subresource (I/O).
//! - [`events`] — best-effort Kubernetes Events with the API's size limits applied (I/O).
//! - [`backoff`] — per-object exponential back-off keyed by UID for the error policy (pure).
//! - [`probes`] — `/healthz`, `/readyz` and `/metrics` on a plain TCP listener (I/O).
//! - [`metrics`] — the Prometheus registry and the reconcile/action families every operator
//!   exposes (no I/O).
//! - [`selftest`] — the `helm test` checks: operators answer, the CRDs are served (I/O).
//! - [`shell`] — the flags every binary shares (`LogArgs`, `ShellArgs`): one set of names,
//!   env vars and defaults.
//! - [`shutdown`] — SIGTERM/SIGINT.
//! - [`objects`] — idempotent create, delete and server-side apply of one object (I/O).
//! - [`elected`] — `run_elected`: the above wired into an operator's `run` (backup, restore).
//! - [`claim`] — the claim Lease per namespace that keeps two installs with overlapping watched
//!   namespaces from both acting there (I/O; the decision is [`leader::decide`]).
//!
//! A binary's `main` wires them roughly as: `init_logging`, install the rustls provider, build
//! the client, spawn `serve_probes`, `acquire` the Lease, run the controller until
//! `shutdown_signal()` or `Leadership::lost()`, then `release()` (on shutdown) or exit non-zero
//! (on loss, so the Pod restarts as a standby).

pub mod backoff;
pub mod claim;
pub mod elected;
pub mod events;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod objects;
pub mod probes;
pub mod selftest;
pub mod shell;
pub mod shutdown;
pub mod status;

pub use backoff::FailureBackoff;
pub use claim::{Claim, NamespaceClaims};
pub use elected::{run_elected, run_elected_with_metrics};
pub use events::Events;
pub use leader::{
    Decision, Leadership, LeaseConfig, LeaseError, acquire, acquire_on_own_thread, decide,
    hostname, lease_identity,
};
pub use logging::{LogFormat, LoggingError, ParseLogFormatError, init_logging};
pub use metrics::ReconcileMetrics;
pub use objects::{ObjectError, apply_object, create_if_absent, delete_if_present};
pub use probes::{ProbeServer, Readiness, serve_probes, serve_probes_and_metrics};
pub use shell::{LogArgs, ShellArgs};
pub use shutdown::shutdown_signal;
pub use status::apply_status;
