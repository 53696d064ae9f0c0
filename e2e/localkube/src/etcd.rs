//! The control plane's own etcd: one member on the instance's address, data in the state
//! directory (so a restart keeps every object), stopped with the control plane.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("starting {binary}: {source} (run `make deps` to install etcd)")]
    Spawn {
        binary: PathBuf,
        source: std::io::Error,
    },
    #[error("no free port on {0}")]
    NoPort(IpAddr),
    #[error("etcd did not become ready within {0:?}; see {1}")]
    NotReady(Duration, PathBuf),
    #[error("etcd exited early ({status}); see {log}")]
    Exited {
        status: std::process::ExitStatus,
        log: PathBuf,
    },
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

pub struct EtcdProcess {
    child: Child,
    pub endpoint: String,
}

/// A port on `ip` that is free right now.
pub fn free_port(ip: IpAddr) -> Result<u16, EtcdError> {
    let listener = TcpListener::bind(SocketAddr::new(ip, 0)).map_err(|_| EtcdError::NoPort(ip))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|_| EtcdError::NoPort(ip))
}

impl EtcdProcess {
    pub async fn start(binary: &Path, state_dir: &Path, ip: IpAddr) -> Result<Self, EtcdError> {
        let data_dir = state_dir.join("etcd");
        let log_path = state_dir.join("etcd.log");
        let client_port = free_port(ip)?;
        let peer_port = free_port(ip)?;
        let client_url = format!("http://{ip}:{client_port}");
        let peer_url = format!("http://{ip}:{peer_port}");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| EtcdError::Io(log_path.clone(), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| EtcdError::Io(log_path.clone(), e))?;
        let child = crate::shim::command(binary)
            .map_err(|source| EtcdError::Spawn {
                binary: binary.to_path_buf(),
                source,
            })?
            .arg("--name=localkube")
            .arg(format!("--data-dir={}", data_dir.display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=localkube={peer_url}"))
            .arg("--initial-cluster-state=new")
            // Progress notifications let idle watches send bookmarks (spec §a6).
            .arg("--experimental-watch-progress-notify-interval=5s")
            // The control plane's own store (never a member under test): its data outlives a
            // process crash in the page cache, and without fsync its latency does not follow
            // the disk of a machine busy with a test suite (API calls stalled behind fsyncs
            // made tests slow and flaky under load). A machine crash loses it; it is scratch.
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| EtcdError::Spawn {
                binary: binary.to_path_buf(),
                source,
            })?;
        let mut process = Self {
            child,
            endpoint: client_url,
        };
        process.wait_ready(&log_path).await?;
        Ok(process)
    }

    async fn wait_ready(&mut self, log: &Path) -> Result<(), EtcdError> {
        let limit = Duration::from_secs(30);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(EtcdError::Exited {
                    status,
                    log: log.to_path_buf(),
                });
            }
            if let Ok(mut client) =
                etcd_client::Client::connect([self.endpoint.as_str()], None).await
                && client.status().await.is_ok()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EtcdError::NotReady(limit, log.to_path_buf()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, then SIGKILL after a grace period.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}
