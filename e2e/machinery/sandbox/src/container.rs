//! Containers: processes in the pod's network/UTS namespaces with their own mount namespace and
//! process group, output captured into a CRI log file.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::process::Child;
use tokio::task::JoinHandle;

use crate::error::{SpawnError, log_setup_error};
use crate::launch::Output;
use crate::sandbox::PodSandbox;
use crate::wire::{ContainerRequest, Report, Role};

/// What to run. Nothing is inherited from the host: `env` is the whole environment and PATH
/// lookup of `argv[0]` uses the PATH in it.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    pub name: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<PathBuf>,
    /// Applied in order, so a later mount may sit inside an earlier one.
    pub mounts: Vec<BindMount>,
    /// Appended to (created if missing) in the CRI log format.
    pub log_path: PathBuf,
    pub confinement: Confinement,
}

/// Who the program runs as and what it may change, as a container runtime sets it up. The
/// default is root with its groups dropped and nothing read-only, as runc does for a container
/// without a security context.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    pub uid: u32,
    pub gid: u32,
    pub supplementary_groups: Vec<u32>,
    /// The kernel's `no_new_privs`: setuid binaries and file capabilities grant nothing.
    pub no_new_privileges: bool,
    /// Every mount but the container's own (`mounts`), /dev, /proc and /sys is read-only in the
    /// container's mount namespace: the host's file system stands in for the image's root.
    pub read_only_root: bool,
}

/// `source` (a host file or directory) appears at `target` inside the container only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindMount {
    pub source: PathBuf,
    pub target: PathBuf,
    pub read_only: bool,
}

/// How a container ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, or 128 + the signal number when killed by a signal (what the kubelet shows
    /// as `terminated.exitCode`).
    pub exit_code: i32,
    pub signal: Option<i32>,
}

impl ExitStatus {
    pub(crate) fn from_std(status: std::process::ExitStatus) -> ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ExitStatus {
                exit_code: code,
                signal: None,
            },
            (None, Some(sig)) => ExitStatus {
                exit_code: 128 + sig,
                signal: Some(sig),
            },
            // Neither: stopped/continued, which `wait` does not report. Treated as the kubelet
            // treats a lost container (ContainerStatusUnknown): 137.
            (None, None) => UNKNOWN_EXIT,
        }
    }
}

/// What `wait` reports if the exit status cannot be read (the child was reaped elsewhere).
const UNKNOWN_EXIT: ExitStatus = ExitStatus {
    exit_code: 137,
    signal: None,
};

/// After the main process exits, how long the log pump may take to drain what is left in the
/// pipes. Only a process that escaped the container's process group can hold them open longer.
const LOG_DRAIN: Duration = Duration::from_secs(2);

/// A started container. Dropping it SIGKILLs its process group.
#[derive(Debug)]
pub struct Container {
    name: String,
    pid: u32,
    started_at: SystemTime,
    child: Child,
    log_pump: Option<JoinHandle<()>>,
    /// Set once the main process is reaped; its pid (and so the group id) may then be reused,
    /// so no signal is sent after that.
    exited: Option<ExitStatus>,
}

impl PodSandbox {
    /// Starts a container in this pod. Returns only once the program runs: a missing or
    /// non-executable program is an `Err`, never a started container.
    pub async fn spawn(&self, spec: ContainerSpec) -> Result<Container, SpawnError> {
        if let Some(dir) = spec.log_path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| log_setup_error(&spec.log_path, &e))?;
        }
        let log = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log_path)
            .await
            .map_err(|e| log_setup_error(&spec.log_path, &e))?;
        let request = ContainerRequest {
            parent: std::process::id(),
            pause_pid: self.pid(),
            argv: spec.argv,
            env: spec.env,
            working_dir: spec.working_dir,
            mounts: spec.mounts,
            confinement: spec.confinement,
        };
        let label = format!("{}/{}", self.id, spec.name);
        let started = self
            .net
            .shim
            .start(Role::Container, &label, &request, Output::Piped)
            .await
            .map_err(SpawnError::Shim)?;
        let mut child = match started.report {
            None => started.child,
            Some(Report::Failed(f)) => return Err(f.into()),
            Some(Report::Ready) => {
                return Err(SpawnError::Shim("unexpected ready report".into()));
            }
        };
        let started_at = SystemTime::now();
        let pid = child
            .id()
            .ok_or_else(|| SpawnError::Shim("the container exited before it was seen".into()))?;
        let pump =
            crate::crilog::pump(child.stdout.take(), child.stderr.take(), log, spec.log_path);
        Ok(Container {
            name: spec.name,
            pid,
            started_at,
            child,
            log_pump: Some(tokio::spawn(pump)),
            exited: None,
        })
    }
}

impl Container {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The main process, also the id of the container's process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the program was exec'd (`state.running.startedAt`).
    pub fn started_at(&self) -> SystemTime {
        self.started_at
    }

    /// Sends `signal` to the container's whole process group; a no-op once it has exited.
    pub fn signal(&self, signal: Signal) -> Result<(), nix::errno::Errno> {
        if self.exited.is_some() {
            return Ok(());
        }
        match killpg(self.pgid(), signal) {
            Err(nix::Error::ESRCH) => Ok(()),
            other => other,
        }
    }

    fn pgid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.pid).unwrap_or(i32::MAX))
    }

    /// Waits for the main process to exit, then (as the end of a container's PID namespace
    /// would) kills what is left of its process group, and lets the log catch up. Cancel-safe:
    /// a cancelled wait loses nothing and may be called again.
    pub async fn wait(&mut self) -> ExitStatus {
        let status = match self.exited {
            Some(status) => status,
            None => {
                let status = match self.child.wait().await {
                    Ok(s) => ExitStatus::from_std(s),
                    Err(e) => {
                        tracing::warn!(container = %self.name, error = %e, "waiting for a container");
                        UNKNOWN_EXIT
                    }
                };
                // The pid is reaped but the group lives on while members remain, so the group
                // id still names only this container's processes.
                let _ = killpg(self.pgid(), Signal::SIGKILL);
                self.exited = Some(status);
                status
            }
        };
        if let Some(pump) = self.log_pump.as_mut() {
            if tokio::time::timeout(LOG_DRAIN, &mut *pump).await.is_err() {
                pump.abort();
            }
            self.log_pump = None;
        }
        status
    }

    /// SIGTERM to the process group, SIGKILL if it has not exited after `grace`.
    pub async fn stop(&mut self, grace: Duration) -> ExitStatus {
        if self.exited.is_none() {
            let _ = self.signal(Signal::SIGTERM);
            if let Ok(status) = tokio::time::timeout(grace, self.wait()).await {
                return status;
            }
            let _ = self.signal(Signal::SIGKILL);
        }
        self.wait().await
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = killpg(self.pgid(), Signal::SIGKILL);
        }
        if let Some(pump) = &self.log_pump {
            pump.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exit_codes_like_the_kubelet() {
        let code = |raw| ExitStatus::from_std(std::process::ExitStatus::from_raw(raw));
        assert_eq!(
            code(0),
            ExitStatus {
                exit_code: 0,
                signal: None
            }
        );
        assert_eq!(
            code(3 << 8),
            ExitStatus {
                exit_code: 3,
                signal: None
            }
        );
        assert_eq!(
            code(9),
            ExitStatus {
                exit_code: 137,
                signal: Some(9)
            }
        );
        assert_eq!(
            code(15),
            ExitStatus {
                exit_code: 143,
                signal: Some(15)
            }
        );
    }
}
