//! Typed errors. `SpawnError` carries the failures the kubelet turns into a container's
//! `StartError`/`RunContainerError`; its Display is the exec error runc reports, so the status
//! message reads like a real cluster's.

use std::time::Duration;

/// Failures of the host network and of pod sandboxes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("instance index {0} is outside 1..=250")]
    InvalidIndex(u8),
    #[error("every instance index 1..=250 is taken (locks under /run/localkube)")]
    NoFreeIndex,
    #[error("no free pod IP left in {0}")]
    PodIpsExhausted(String),
    #[error("{ip} is outside the service CIDR {cidr}")]
    OutsideServiceCidr {
        ip: std::net::Ipv4Addr,
        cidr: String,
    },
    #[error("the sandbox shim failed: {0}")]
    Shim(String),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Why a container (or an exec) did not start. Reported before `spawn` returns, never as a
/// started container that exits at once.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `argv[0]` is not on the container's PATH (or, with a slash, does not exist).
    #[error("{}", not_found_message(program))]
    NotFound { program: String },
    /// It exists but execve refused it (no x bit, a directory, a bad interpreter...).
    #[error("exec: \"{program}\": {reason}")]
    NotExecutable { program: String, reason: String },
    #[error("no command specified")]
    NoCommand,
    /// Namespaces, mounts, working directory or the log file.
    #[error("container setup failed at {step}: {message}")]
    Setup { step: String, message: String },
    #[error("the sandbox shim failed: {0}")]
    Shim(String),
}

/// Go's `exec.LookPath` wording, which runc (and so the kubelet's StartError) shows.
fn not_found_message(program: &str) -> String {
    if program.contains('/') {
        format!("exec: \"{program}\": stat {program}: no such file or directory")
    } else {
        format!("exec: \"{program}\": executable file not found in $PATH")
    }
}

/// Why an exec inside a container gave no exit code.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// Killed at the deadline, as the kubelet does for exec probes (`timeoutSeconds`).
    #[error("command timed out after {after:?}")]
    TimedOut { after: Duration },
    /// The pid is not a process of this pod (it exited, or belongs to another sandbox).
    #[error("process {pid} is not running in this pod sandbox")]
    NotInSandbox { pid: u32 },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// A log file that could not be opened is a setup failure of the container.
pub(crate) fn log_setup_error(path: &std::path::Path, e: &std::io::Error) -> SpawnError {
    SpawnError::Setup {
        step: "log file".into(),
        message: format!("{}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_runc() {
        let bare = SpawnError::NotFound {
            program: "etcdx".into(),
        };
        assert_eq!(
            bare.to_string(),
            r#"exec: "etcdx": executable file not found in $PATH"#
        );
        let path = SpawnError::NotFound {
            program: "/no/such".into(),
        };
        assert_eq!(
            path.to_string(),
            r#"exec: "/no/such": stat /no/such: no such file or directory"#
        );
    }
}
