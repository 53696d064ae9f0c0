//! Child processes of the harness and their diagnostics: [`ProcessGuard`] (a spawned process whose
//! stdout and stderr go to a log file, SIGKILLed and reaped on drop), [`log_tail`] and
//! [`TestDir`] (a temporary directory that `KEEP_TEST_DIRS=1` keeps).
//!
//! Children stay in the test's process group on purpose: cargo-nextest signals a test's whole process
//! group when it times out, and Ctrl-C reaches them too, so a killed test does not leak servers.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::HarnessError;

/// Environment variable: when `1` (or `true`), temporary directories are kept and their paths printed.
pub const KEEP_TEST_DIRS_ENV: &str = "KEEP_TEST_DIRS";

/// Lines of each log printed when a test panics.
pub const PANIC_LOG_LINES: usize = 40;

/// A running child process that logs to a file. Dropping it SIGKILLs and reaps the process.
#[derive(Debug)]
pub struct ProcessGuard {
    name: String,
    child: Child,
    log_path: PathBuf,
    exit: Option<ExitStatus>,
}

impl ProcessGuard {
    /// Spawns `command` as `name` with stdin from /dev/null and stdout and stderr appended to
    /// `log_path`, after a header line recording the command line.
    pub fn spawn(
        name: impl Into<String>,
        mut command: Command,
        log_path: impl Into<PathBuf>,
    ) -> Result<ProcessGuard, HarnessError> {
        let name = name.into();
        let log_path = log_path.into();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| HarnessError::io(format!("opening log {}", log_path.display()), e))?;
        let header = format!(
            "### test-support: starting {name} at unix time {:.3}: {}\n",
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
            command_line(&command)
        );
        log.write_all(header.as_bytes())
            .map_err(|e| HarnessError::io(format!("writing log {}", log_path.display()), e))?;
        let stderr = log
            .try_clone()
            .map_err(|e| HarnessError::io(format!("duplicating log {}", log_path.display()), e))?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(stderr));
        let child = command.spawn().map_err(|source| HarnessError::Spawn {
            name: name.clone(),
            program: PathBuf::from(command.get_program()),
            source,
        })?;
        Ok(ProcessGuard {
            name,
            child,
            log_path,
            exit: None,
        })
    }

    /// The process name given at spawn, e.g. "etcd m1".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The OS process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log file (stdout and stderr).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// `Some(status)` once the process has exited (reaping it), `None` while it runs.
    pub fn try_exit(&mut self) -> Result<Option<ExitStatus>, HarnessError> {
        if self.exit.is_none() {
            self.exit = self
                .child
                .try_wait()
                .map_err(|e| HarnessError::io(format!("checking on {}", self.name), e))?;
        }
        Ok(self.exit)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.try_exit(), Ok(None))
    }

    /// An [`HarnessError::ExitedEarly`] if the process has exited.
    pub fn check_running(&mut self) -> Result<(), HarnessError> {
        match self.try_exit()? {
            None => Ok(()),
            Some(status) => Err(HarnessError::ExitedEarly {
                name: self.name.clone(),
                status,
                log_tail: log_tail(&self.log_path, PANIC_LOG_LINES),
            }),
        }
    }

    /// SIGKILL and reap. Returns the exit status (of the earlier exit if it had already exited).
    pub fn kill(&mut self) -> Result<ExitStatus, HarnessError> {
        if let Some(status) = self.try_exit()? {
            return Ok(status);
        }
        self.child
            .kill()
            .map_err(|e| HarnessError::io(format!("killing {}", self.name), e))?;
        let status = self
            .child
            .wait()
            .map_err(|e| HarnessError::io(format!("reaping {}", self.name), e))?;
        self.exit = Some(status);
        Ok(status)
    }

    /// SIGTERM, then wait up to `grace` for the exit; SIGKILL after that. Async so that the
    /// waiting does not block the runtime.
    pub async fn terminate(&mut self, grace: Duration) -> Result<ExitStatus, HarnessError> {
        if let Some(status) = self.try_exit()? {
            return Ok(status);
        }
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).ok_or_else(|| {
            HarnessError::InvalidArgument(format!("{} has pid {}", self.name, self.pid()))
        })?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .map_err(|e| HarnessError::io(format!("sending SIGTERM to {}", self.name), e.into()))?;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.try_exit()? {
                return Ok(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill()
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; the process is gone or reaped either way.
        let _ = self.kill();
    }
}

/// The last `lines` lines of a log file (at most its last 256 KiB are read), or a note saying why
/// there are none.
pub fn log_tail(path: &Path, lines: usize) -> String {
    const MAX: u64 = 256 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let start = len.saturating_sub(MAX);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) if text.trim().is_empty() => format!("(log {} is empty)", path.display()),
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read log {}: {e})", path.display()),
    }
}

/// A header plus the last lines of a log, the format used in errors and panic output.
pub fn log_tail_section(name: &str, path: &Path, lines: usize) -> String {
    format!(
        "----- {name} (last {lines} lines of {}) -----\n{}\n",
        path.display(),
        log_tail(path, lines)
    )
}

/// Prints the last [`PANIC_LOG_LINES`] lines of a log to stderr if the current thread is panicking
/// (called from `Drop` implementations so that a failing test shows why).
pub fn print_log_tail_if_panicking(name: &str, path: &Path) {
    if std::thread::panicking() {
        eprintln!("{}", log_tail_section(name, path, PANIC_LOG_LINES));
    }
}

/// True if `KEEP_TEST_DIRS` is `1` or `true`.
pub fn keep_test_dirs() -> bool {
    std::env::var(KEEP_TEST_DIRS_ENV).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// A temporary directory, removed on drop unless `KEEP_TEST_DIRS=1` (then its path is printed).
#[derive(Debug)]
pub struct TestDir {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl TestDir {
    /// A new directory under the system temp dir, named `<prefix><random>`.
    pub fn new(prefix: &str) -> Result<TestDir, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| HarnessError::io(format!("creating temp dir {prefix}*"), e))?;
        let path = dir.path().to_path_buf();
        Ok(TestDir {
            dir: Some(dir),
            path,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            if keep_test_dirs() {
                let path = dir.keep();
                eprintln!("{KEEP_TEST_DIRS_ENV}: kept {}", path.display());
            } else if std::thread::panicking() {
                eprintln!(
                    "removing {} (set {KEEP_TEST_DIRS_ENV}=1 to keep it)",
                    self.path.display()
                );
            }
        }
    }
}

/// A command line for logs and errors (program and arguments separated by spaces).
pub fn command_line(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Removes every inherited environment variable starting with one of `prefixes` from `command`
/// (etcd reads `ETCD_*`, etcdctl `ETCDCTL_*`: a developer's settings must not leak into tests).
pub fn remove_env_prefixed(command: &mut Command, prefixes: &[&str]) {
    for (key, _) in std::env::vars_os() {
        if let Some(k) = key.to_str()
            && prefixes.iter().any(|p| k.starts_with(p))
        {
            command.env_remove(&key);
        }
    }
}

/// Runs a short command to completion and returns its stdout (an error with stderr if it fails).
pub fn run_output(mut command: Command) -> Result<String, HarnessError> {
    let line = command_line(&command);
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| HarnessError::Spawn {
            name: line.clone(),
            program: PathBuf::from(command.get_program()),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(HarnessError::Command {
            command: line,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// True if process `pid` holds a TCP socket listening on `ip:port` (from `/proc/net/tcp` and
/// `/proc/<pid>/fd`). This tells our server apart from a foreign one answering on the same address.
pub fn pid_listens_on(pid: u32, ip: std::net::Ipv4Addr, port: u16) -> std::io::Result<bool> {
    const LISTEN: &str = "0A";
    let local = format!("{:08X}:{port:04X}", u32::from_le_bytes(ip.octets()));
    let table = std::fs::read_to_string("/proc/net/tcp")?;
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, addr, _, state, _, _, _, _, _, inode, ..]
                    if *addr == local && *state == LISTEN =>
                {
                    Some(format!("socket:[{inode}]"))
                }
                _ => None,
            }
        })
        .collect();
    if inodes.is_empty() {
        return Ok(false);
    }
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue; // closed meanwhile
        };
        if inodes.iter().any(|i| target.as_os_str() == i.as_str()) {
            return Ok(true);
        }
    }
    Ok(false)
}
