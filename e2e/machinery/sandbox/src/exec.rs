//! Commands inside a running container (exec probes): the container's mount namespace and
//! working directory, the pod's network and UTS namespaces, output captured in memory.

use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::container::ExitStatus;
use crate::error::{ExecError, SpawnError};
use crate::launch::Output;
use crate::sandbox::PodSandbox;
use crate::wire::{ExecRequest, Report, Role};

/// Output kept per stream; the rest is read and dropped so the command never blocks on a pipe.
/// (The kubelet keeps only 10 KiB of probe output.)
const OUTPUT_LIMIT: usize = 1024 * 1024;

/// What an exec printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// As for containers: 128 + signal when killed.
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl PodSandbox {
    /// Runs `argv` with exactly `env` inside the container whose main process is
    /// `container_pid`. After `timeout` the command's process group is SIGKILLed and
    /// `ExecError::TimedOut` returned.
    pub async fn exec(
        &self,
        container_pid: u32,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        timeout: Duration,
    ) -> Result<ExecOutput, ExecError> {
        if !self.owns(container_pid) {
            return Err(ExecError::NotInSandbox { pid: container_pid });
        }
        let request = ExecRequest {
            parent: std::process::id(),
            target_pid: container_pid,
            argv,
            env,
        };
        let label = format!("{}/exec", self.id);
        let started = self
            .net
            .shim
            .start(Role::Exec, &label, &request, Output::Piped)
            .await
            .map_err(SpawnError::Shim)?;
        let mut child = match started.report {
            None => started.child,
            Some(Report::Failed(f)) => return Err(SpawnError::from(f).into()),
            Some(Report::Ready) => {
                return Err(SpawnError::Shim("unexpected ready report".into()).into());
            }
        };
        let pgid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .map(Pid::from_raw);
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let run = async {
            let (out, err, status) =
                tokio::join!(read_limited(stdout), read_limited(stderr), child.wait());
            (out, err, status)
        };
        match tokio::time::timeout(timeout, run).await {
            Ok((stdout, stderr, status)) => {
                let status = status.map_err(|e| ExecError::Io {
                    context: "waiting for the exec".into(),
                    source: e,
                })?;
                Ok(ExecOutput {
                    exit_code: ExitStatus::from_std(status).exit_code,
                    stdout,
                    stderr,
                })
            }
            Err(_) => {
                // Not reaped yet, so the group id is still this command's.
                if let Some(pgid) = pgid {
                    let _ = killpg(pgid, Signal::SIGKILL);
                }
                let _ = child.wait().await;
                Err(ExecError::TimedOut { after: timeout })
            }
        }
    }
}

async fn read_limited(stream: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut stream) = stream else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = OUTPUT_LIMIT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}
