//! What localkube and the shim say to each other over the shim's stdin, a Unix socket pair:
//! localkube writes one JSON request and shuts its write side; the shim answers on the same
//! socket. The shim keeps its end close-on-exec, so a successful `execve` closes it: EOF with no
//! report means "started", a report means the start failed and why. This is how a missing program
//! becomes `SpawnError::NotFound` before anyone is told the container started.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::container::{BindMount, Confinement};
use crate::error::SpawnError;

/// Which job the shim does; the first shim argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Pause,
    Container,
    Exec,
}

impl Role {
    pub(crate) fn arg(self) -> &'static str {
        match self {
            Role::Pause => "pause",
            Role::Container => "container",
            Role::Exec => "exec",
        }
    }

    pub(crate) fn parse(arg: &str) -> Option<Role> {
        [Role::Pause, Role::Container, Role::Exec]
            .into_iter()
            .find(|r| r.arg() == arg)
    }
}

/// The pause process: owns the pod's network and UTS namespaces.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PauseRequest {
    /// localkube's pid, checked after PR_SET_PDEATHSIG (see `shim::tie_to_parent`).
    pub parent: u32,
    pub hostname: String,
}

/// A container: joins the pause process's namespaces, gets its own mount namespace.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ContainerRequest {
    pub parent: u32,
    pub pause_pid: u32,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<PathBuf>,
    pub mounts: Vec<BindMount>,
    pub confinement: Confinement,
}

/// A command inside a running container: its mount namespace, the pod's net/UTS namespaces.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ExecRequest {
    pub parent: u32,
    pub target_pid: u32,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// The shim's answer. Containers and execs send only `Failed` (success is the EOF of exec);
/// the pause process sends `Ready` once its namespaces exist.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) enum Report {
    Ready,
    Failed(Failure),
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) enum Failure {
    NotFound { program: String },
    NotExecutable { program: String, reason: String },
    NoCommand,
    Setup { step: String, message: String },
}

impl Failure {
    pub(crate) fn setup(step: &str, message: impl std::fmt::Display) -> Failure {
        Failure::Setup {
            step: step.to_string(),
            message: message.to_string(),
        }
    }
}

impl From<Failure> for SpawnError {
    fn from(f: Failure) -> SpawnError {
        match f {
            Failure::NotFound { program } => SpawnError::NotFound { program },
            Failure::NotExecutable { program, reason } => {
                SpawnError::NotExecutable { program, reason }
            }
            Failure::NoCommand => SpawnError::NoCommand,
            Failure::Setup { step, message } => SpawnError::Setup { step, message },
        }
    }
}

/// Reads the shim's answer: empty means the exec happened.
pub(crate) fn parse_report(bytes: &[u8]) -> Result<Option<Report>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(bytes).map(Some).map_err(|e| {
        format!(
            "unreadable shim report {:?}: {e}",
            String::from_utf8_lossy(bytes)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_through_their_argument() {
        for role in [Role::Pause, Role::Container, Role::Exec] {
            assert_eq!(Role::parse(role.arg()), Some(role));
        }
        assert_eq!(Role::parse("shell"), None);
    }

    #[test]
    fn reports_parse() {
        assert_eq!(parse_report(b""), Ok(None));
        let failed = serde_json::to_vec(&Report::Failed(Failure::NotFound {
            program: "x".into(),
        }))
        .unwrap();
        assert_eq!(
            parse_report(&failed),
            Ok(Some(Report::Failed(Failure::NotFound {
                program: "x".into()
            })))
        );
        assert!(parse_report(b"garbage").is_err());
    }
}
