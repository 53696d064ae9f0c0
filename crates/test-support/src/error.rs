//! The one error type of the harness, [`HarnessError`]: one variant per step that can fail
//! (finding a binary, claiming addresses, spawning, waiting for readiness, talking to etcd or S3),
//! each message naming the component so that a failing test says what broke and why.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

pub use crate::tools::MissingBinary;

/// Everything that can go wrong while starting or driving a test component.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A binary of the test components is not installed (see [`MissingBinary`]).
    #[error(transparent)]
    MissingBinary(#[from] MissingBinary),

    /// No free loopback address block or port range could be claimed.
    #[error("could not claim {what}: {detail}")]
    Claim {
        /// What was being claimed, e.g. "a loopback address block".
        what: String,
        /// Why every candidate was rejected.
        detail: String,
    },

    /// The process could not even be spawned.
    #[error("failed to spawn {name} ({program}): {source}")]
    Spawn {
        /// Name of the process, e.g. "etcd m1".
        name: String,
        /// The binary that was executed.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },

    /// The process exited while it should have been starting or running.
    #[error("{name} exited early ({status}); last lines of its log:\n{log_tail}")]
    ExitedEarly {
        /// Name of the process, e.g. "etcd m2".
        name: String,
        /// Its exit status.
        status: ExitStatus,
        /// The last lines of its log file.
        log_tail: String,
    },

    /// The component did not become ready in time.
    #[error("{what} not ready after {waited:?}: {detail}\n{log_tails}")]
    NotReady {
        /// What was waited for, e.g. "etcd 3.5.1 cluster of 3 members on 127.130.4.x".
        what: String,
        /// How long it was waited for.
        waited: Duration,
        /// The last failed check.
        detail: String,
        /// The last lines of the log of each process involved, each under a header.
        log_tails: String,
    },

    /// A file-system or socket operation of the harness failed.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What the harness was doing.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },

    /// An etcd request failed.
    #[error("etcd: {context}: {source}")]
    Etcd {
        /// What the harness was doing, e.g. "connecting to http://127.130.4.1:2379".
        context: String,
        /// The client error.
        source: etcd_client::Error,
    },

    /// An S3 request failed.
    #[error("S3 (SeaweedFS): {context}: {detail}")]
    S3 {
        /// What the harness was doing, e.g. "creating bucket backups".
        context: String,
        /// The SDK error with its full chain of causes.
        detail: String,
    },

    /// A command line tool (kubectl, helm, etcdctl, ...) failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: ExitStatus,
        /// What it wrote to stderr.
        stderr: String,
    },

    /// A member index that this cluster does not have.
    #[error("etcd cluster has no member {index} (members: {known:?})")]
    NoSuchMember {
        /// The index asked for.
        index: usize,
        /// The indexes the cluster has.
        known: Vec<usize>,
    },

    /// An argument out of the supported range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl HarnessError {
    /// An I/O error with what was being done (also for the e2e harness, `e2e/harness`).
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn etcd(context: impl Into<String>, source: etcd_client::Error) -> Self {
        HarnessError::Etcd {
            context: context.into(),
            source,
        }
    }
}
