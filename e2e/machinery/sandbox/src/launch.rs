//! The parent side of the shim: start it, send the request, read the answer.
//!
//! PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process. A tokio
//! blocking-pool thread exits after 10 s idle, and `block_in_place` retires worker threads, so a
//! pod started from one of them would be SIGKILLed at a random later time. Every shim is therefore
//! forked by one dedicated thread that lives as long as the process.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::wire::{Report, Role, parse_report};

/// How to run the shim: `program leading_args... <role> <label>`. For localkube that is
/// `Shim { program: current_exe, leading_args: ["sandbox-shim"] }`; the tests use this crate's
/// `localkube-sandbox-shim` binary with no leading arguments.
#[derive(Debug, Clone)]
pub struct Shim {
    pub program: PathBuf,
    pub leading_args: Vec<OsString>,
}

/// A shim that never answers within this time is stuck (a hung mount, say) and is killed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// The shim started; `report` is its answer (`None`: it exec'd the program).
pub(crate) struct Started {
    pub child: Child,
    pub report: Option<Report>,
}

/// Where the shim's stdout/stderr go.
pub(crate) enum Output {
    Null,
    Piped,
}

impl Shim {
    /// Starts the shim for `role`, hands it `request` and waits for its answer. A shim that
    /// failed has been reaped when this returns its report.
    pub(crate) async fn start(
        &self,
        role: Role,
        label: &str,
        request: &impl serde::Serialize,
        output: Output,
    ) -> Result<Started, String> {
        let request =
            serde_json::to_vec(request).map_err(|e| format!("encoding the request: {e}"))?;
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.leading_args)
            .arg(role.arg())
            .arg(label)
            .env_clear()
            .stdin(Stdio::from(OwnedFd::from(theirs)));
        match output {
            Output::Null => cmd.stdout(Stdio::null()).stderr(Stdio::null()),
            Output::Piped => cmd.stdout(Stdio::piped()).stderr(Stdio::piped()),
        };
        // Spawning consumes `cmd`, so the shim's end of the socket is closed here once it is
        // spawned: the EOF we wait for below can only come from the shim.
        let mut child = spawn_on_launcher(cmd)
            .await
            .map_err(|e| format!("starting the shim {}: {e}", self.program.display()))?;
        let answer = tokio::time::timeout(HANDSHAKE_TIMEOUT, converse(ours, &request)).await;
        let answer = match answer {
            Ok(Ok(bytes)) => parse_report(&bytes),
            Ok(Err(e)) => Err(format!("talking to the shim: {e}")),
            Err(_) => Err(format!(
                "the shim did not answer within {HANDSHAKE_TIMEOUT:?}"
            )),
        };
        match answer {
            Ok(report @ (None | Some(Report::Ready))) => Ok(Started { child, report }),
            other => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                other.map(|report| Started { child, report })
            }
        }
    }
}

async fn converse(
    ours: std::os::unix::net::UnixStream,
    request: &[u8],
) -> std::io::Result<Vec<u8>> {
    ours.set_nonblocking(true)?;
    let mut ours = tokio::net::UnixStream::from_std(ours)?;
    ours.write_all(request).await?;
    ours.shutdown().await?;
    let mut answer = Vec::new();
    ours.read_to_end(&mut answer).await?;
    Ok(answer)
}

type Job = Box<dyn FnOnce() + Send>;

/// Forks `cmd` on the launcher thread (see the module doc), registered with the caller's runtime.
async fn spawn_on_launcher(mut cmd: Command) -> std::io::Result<Child> {
    static LAUNCHER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sandbox-launcher".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })
            .map(|_| tx)
            .map_err(|e| e.to_string())
    });
    let launcher = launcher
        .as_ref()
        .map_err(|e| std::io::Error::other(e.clone()))?;
    let runtime = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _entered = runtime.enter();
        let _ = tx.send(cmd.spawn());
    });
    launcher
        .send(job)
        .map_err(|_| std::io::Error::other("the launcher thread is gone"))?;
    rx.await
        .map_err(|_| std::io::Error::other("the launcher thread dropped the spawn"))?
}
