//! A real S3 server for tests: [`S3Server`] runs SeaweedFS `weed mini` on a claimed loopback
//! address with machine-unique ports (a [`PortLease`]), generated credentials enforced through
//! `-s3.config`, telemetry off, data and sockets in a temp dir, and waits until `/healthz` answers
//! 200 and an authenticated ListBuckets succeeds. Dropping it SIGKILLs the server.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::DisplayErrorContext;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::addr::{AddressBlock, PortLease, random_hex};
use crate::error::HarnessError;
use crate::process::{
    PANIC_LOG_LINES, ProcessGuard, TestDir, log_tail, log_tail_section, pid_listens_on,
    print_log_tail_if_panicking, remove_env_prefixed,
};
use crate::tools::Tools;

/// The region the clients use (any region works with SeaweedFS).
pub const S3_REGION: &str = "us-east-1";
/// How long [`S3Server::start`] waits for readiness.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts with a fresh port lease when weed exits at once because a port is taken.
const START_ATTEMPTS: usize = 4;
const POLL: Duration = Duration::from_millis(100);

/// The ports of one `weed mini` (each also uses `port + 10000` for gRPC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeedPorts {
    /// `-master.port`.
    pub master: u16,
    /// `-volume.port`.
    pub volume: u16,
    /// `-filer.port`.
    pub filer: u16,
    /// `-s3.port`.
    pub s3: u16,
    /// `-admin.port`.
    pub admin: u16,
}

impl WeedPorts {
    fn from_lease(lease: &PortLease) -> Result<WeedPorts, HarnessError> {
        let p = |i| {
            lease.port(i).ok_or_else(|| {
                HarnessError::InvalidArgument(format!("port lease too short for port {i}"))
            })
        };
        Ok(WeedPorts {
            master: p(0)?,
            volume: p(1)?,
            filer: p(2)?,
            s3: p(3)?,
            admin: p(4)?,
        })
    }
}

/// A running SeaweedFS `weed mini` serving S3 with its own credentials.
#[derive(Debug)]
pub struct S3Server {
    // Field order is drop order: the process dies before the leases and the dir go.
    process: ProcessGuard,
    weed: PathBuf,
    ports: WeedPorts,
    endpoint: String,
    access_key: String,
    secret_key: String,
    _ports_lease: PortLease,
    block: AddressBlock,
    dir: TestDir,
}

impl S3Server {
    /// Starts a server with the tools of [`Tools::from_env`].
    pub async fn start() -> Result<S3Server, HarnessError> {
        Self::start_with(&Tools::from_env()).await
    }

    /// Starts a server with explicit tools.
    pub async fn start_with(tools: &Tools) -> Result<S3Server, HarnessError> {
        let weed = tools.weed()?;
        let block = AddressBlock::claim_checking(&[], 1)?;
        let ip = block.ip(1);
        let dir = TestDir::new(&format!("weed-{ip}-"))?;
        let data_dir = dir.path().join(DATA_DIR);
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| HarnessError::io(format!("creating {}", data_dir.display()), e))?;
        let access_key = format!("test{}", random_hex(16));
        let secret_key = random_hex(40);
        let config_path = dir.path().join(CONFIG_FILE);
        let config = format!(
            r#"{{"identities":[{{"name":"tester","credentials":[{{"accessKey":"{access_key}","secretKey":"{secret_key}"}}],"actions":["Admin","Read","List","Tagging","Write"]}}]}}"#
        );
        std::fs::write(&config_path, config)
            .map_err(|e| HarnessError::io(format!("writing {}", config_path.display()), e))?;
        let log_path = dir.path().join(LOG_FILE);

        let mut attempt = 0;
        let (process, lease, ports) = loop {
            attempt += 1;
            let lease = PortLease::claim(5, &[ip])?;
            let ports = WeedPorts::from_lease(&lease)?;
            let command = weed_command(&weed, dir.path(), ip, ports);
            let mut process = ProcessGuard::spawn(format!("weed mini {ip}"), command, &log_path)?;
            match wait_healthz(&mut process, ip, ports.s3).await {
                Ok(()) => break (process, lease, ports),
                Err(HarnessError::ExitedEarly { .. })
                    if attempt < START_ATTEMPTS && port_clash_in_log(&log_path) =>
                {
                    // Another program took one of the ports between the bind check and weed's
                    // own bind: try another range.
                    continue;
                }
                Err(e) => return Err(e),
            }
        };
        let mut server = S3Server {
            process,
            weed,
            ports,
            endpoint: format!("http://{ip}:{}", ports.s3),
            access_key,
            secret_key,
            _ports_lease: lease,
            block,
            dir,
        };
        server.wait_authenticated().await?;
        Ok(server)
    }

    async fn wait_authenticated(&mut self) -> Result<(), HarnessError> {
        let client = self.client();
        let start = Instant::now();
        let mut detail;
        loop {
            self.process.check_running()?;
            match client.list_buckets().send().await {
                Ok(_) => return Ok(()),
                Err(e) => detail = format!("ListBuckets: {}", DisplayErrorContext(&e)),
            }
            if start.elapsed() > READY_TIMEOUT {
                return Err(HarnessError::NotReady {
                    what: format!("SeaweedFS S3 at {}", self.endpoint),
                    waited: start.elapsed(),
                    detail,
                    log_tails: log_tail_section(
                        self.process.name(),
                        self.process.log_path(),
                        PANIC_LOG_LINES,
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The server's OS process id (`weed mini` is one process), e.g. to read its CPU time.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The S3 endpoint URL, `http://127.A.B.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The access key id that the server accepts.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret access key that the server accepts.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// The region to sign with, `us-east-1`.
    pub fn region(&self) -> &'static str {
        S3_REGION
    }

    /// All ports of the server.
    pub fn ports(&self) -> WeedPorts {
        self.ports
    }

    /// The claimed address block (the server listens on host 1).
    pub fn address_block(&self) -> &AddressBlock {
        &self.block
    }

    /// The temp dir (data, config, sockets, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log file.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path().to_path_buf()
    }

    /// An S3 client with the server's credentials (path-style addressing, region us-east-1).
    pub fn client(&self) -> aws_sdk_s3::Client {
        self.client_with_credentials(&self.access_key, &self.secret_key)
    }

    /// An S3 client for this server with other credentials (e.g. to check rejection).
    pub fn client_with_credentials(
        &self,
        access_key: &str,
        secret_key: &str,
    ) -> aws_sdk_s3::Client {
        s3_client(&self.endpoint, access_key, secret_key)
    }

    /// Creates a bucket (3–63 characters).
    pub async fn create_bucket(&self, name: &str) -> Result<(), HarnessError> {
        self.client()
            .create_bucket()
            .bucket(name)
            .send()
            .await
            .map_err(|e| HarnessError::S3 {
                context: format!("creating bucket {name} at {}", self.endpoint),
                detail: DisplayErrorContext(&e).to_string(),
            })?;
        Ok(())
    }

    /// True while the server process runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// SIGKILLs the server at once (e.g. in the middle of an upload) and reaps it.
    pub fn kill(&mut self) -> Result<ExitStatus, HarnessError> {
        self.process.kill()
    }

    /// Starts the server again after [`S3Server::kill`] or [`S3Server::stop`]: the same
    /// address, ports, credentials and data directory (what was stored, and the multipart
    /// uploads begun, are still there), as a store that was down and came back.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        if self.process.is_running() {
            return Err(HarnessError::InvalidArgument(
                "restart of an S3 server that is still running".to_owned(),
            ));
        }
        let ip = self.block.ip(1);
        let command = weed_command(&self.weed, self.dir.path(), ip, self.ports);
        self.process = ProcessGuard::spawn(
            format!("weed mini {ip}"),
            command,
            self.dir.path().join(LOG_FILE),
        )?;
        wait_healthz(&mut self.process, ip, self.ports.s3).await?;
        self.wait_authenticated().await
    }

    /// Stops the server gracefully (SIGTERM, up to 10 s, then SIGKILL).
    pub async fn stop(&mut self) -> Result<ExitStatus, HarnessError> {
        self.process.terminate(Duration::from_secs(10)).await
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        print_log_tail_if_panicking(self.process.name(), self.process.log_path());
    }
}

/// The server's data directory and config file in its temp dir, and its log.
const DATA_DIR: &str = "data";
const CONFIG_FILE: &str = "s3.json";
const LOG_FILE: &str = "weed.log";

/// `weed mini` on `ip` and `ports`, its data, config and sockets in `dir`.
fn weed_command(weed: &Path, dir: &Path, ip: Ipv4Addr, ports: WeedPorts) -> Command {
    let mut command = Command::new(weed);
    remove_env_prefixed(&mut command, &["AWS_", "S3_", "WEED_"]);
    command.current_dir(dir).args([
        "mini".to_owned(),
        format!("-dir={}", dir.join(DATA_DIR).display()),
        format!("-ip={ip}"),
        format!("-ip.bind={ip}"),
        format!("-master.port={}", ports.master),
        format!("-volume.port={}", ports.volume),
        format!("-filer.port={}", ports.filer),
        format!("-s3.port={}", ports.s3),
        format!("-admin.port={}", ports.admin),
        "-master.telemetry=false".to_owned(),
        "-admin.ui=false".to_owned(),
        "-webdav=false".to_owned(),
        "-s3.port.iceberg=0".to_owned(),
        "-s3.port.lance=0".to_owned(),
        format!("-s3.config={}", dir.join(CONFIG_FILE).display()),
        format!("-filer.localSocket={}", dir.join("filer.sock").display()),
        format!("-s3.localSocket={}", dir.join("s3.sock").display()),
    ]);
    command
}

/// An S3 client for `endpoint` with static credentials, region us-east-1 and path-style addressing.
/// Built without `aws-config`, so nothing from the environment or `~/.aws` leaks in.
pub fn s3_client(endpoint: &str, access_key: &str, secret_key: &str) -> aws_sdk_s3::Client {
    let credentials = Credentials::new(access_key, secret_key, None, None, "test-support");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(S3_REGION))
        .credentials_provider(credentials)
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// `aws s3 cp <from> <to>` against `endpoint` with static credentials and path-style addressing,
/// nothing read from `~/.aws` or the environment's `AWS_*` (its config file is written to
/// `dir`): the benches' baseline S3 client. One of `from` and `to` is an `s3://` URL.
pub fn aws_s3_cp(
    tools: &Tools,
    dir: &Path,
    endpoint: &str,
    (access_key, secret_key, region): (&str, &str, &str),
    from: &std::ffi::OsStr,
    to: &std::ffi::OsStr,
) -> Result<Command, HarnessError> {
    let config = dir.join("aws-config");
    std::fs::write(&config, "[default]\ns3 =\n  addressing_style = path\n")
        .map_err(|e| HarnessError::io(format!("writing {}", config.display()), e))?;
    let mut command = Command::new(tools.aws()?);
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            command.env_remove(k);
        }
    }
    command
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env("AWS_ACCESS_KEY_ID", access_key)
        .env("AWS_SECRET_ACCESS_KEY", secret_key)
        .env("AWS_DEFAULT_REGION", region)
        .args(["s3", "cp", "--only-show-errors", "--endpoint-url", endpoint])
        .arg(from)
        .arg(to);
    Ok(command)
}

/// Polls `GET http://ip:port/healthz` until it answers 200, failing at once if the process exits.
async fn wait_healthz(
    process: &mut ProcessGuard,
    ip: Ipv4Addr,
    port: u16,
) -> Result<(), HarnessError> {
    let start = Instant::now();
    let mut detail = String::from("no check ran");
    while start.elapsed() < READY_TIMEOUT {
        process.check_running()?;
        match http_get_status(ip, port, "/healthz").await {
            // The answer must come from our process, not a foreign one on a clashing port.
            Ok(200) => match pid_listens_on(process.pid(), ip, port) {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    detail = format!(
                        "{ip}:{port} answers but is not held by weed (pid {})",
                        process.pid()
                    );
                }
                Err(e) => detail = format!("cannot inspect the sockets of weed: {e}"),
            },
            Ok(code) => detail = format!("GET /healthz answered {code}"),
            Err(e) => detail = format!("GET /healthz: {e}"),
        }
        tokio::time::sleep(POLL).await;
    }
    Err(HarnessError::NotReady {
        what: format!("SeaweedFS S3 at http://{ip}:{port}"),
        waited: start.elapsed(),
        detail,
        log_tails: log_tail_section(process.name(), process.log_path(), PANIC_LOG_LINES),
    })
}

/// A minimal HTTP/1.1 GET returning the status code.
async fn http_get_status(ip: Ipv4Addr, port: u16, path: &str) -> std::io::Result<u16> {
    let io = async {
        let mut stream = tokio::net::TcpStream::connect((ip, port)).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {ip}:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::new();
        let mut buf = [0u8; 512];
        while !head.windows(2).any(|w| w == b"\r\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&head);
        text.split_whitespace()
            .nth(1)
            .and_then(|code| code.parse::<u16>().ok())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("not an HTTP response: {text:?}"),
                )
            })
    };
    tokio::time::timeout(Duration::from_secs(2), io)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"))?
}

fn port_clash_in_log(log_path: &Path) -> bool {
    let tail = log_tail(log_path, PANIC_LOG_LINES);
    // Only the last run matters: the log is appended to across attempts.
    let last_run = tail
        .rsplit("### test-support: starting")
        .next()
        .unwrap_or("");
    last_run.contains("Port allocation failed")
        || last_run.contains("is not available")
        || last_run.contains("address already in use")
}
