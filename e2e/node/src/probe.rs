//! Performing one probe (exec, HTTP GET, TCP connect) the way the kubelet's prober does; when
//! to probe and what a result means is decided in `localkube-podspec::probes`.

use std::time::Duration;

use localkube_sandbox::PodSandbox;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One probe to perform, with names and ports already resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Exec(Vec<String>),
    Http {
        host: String,
        port: u16,
        path: String,
        https: bool,
        headers: Vec<(String, String)>,
    },
    Tcp {
        host: String,
        port: u16,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub success: bool,
    /// Why it failed, worded as the kubelet's `Unhealthy` event says it.
    pub message: String,
}

impl Outcome {
    fn ok() -> Outcome {
        Outcome {
            success: true,
            message: String::new(),
        }
    }

    fn fail(message: impl Into<String>) -> Outcome {
        Outcome {
            success: false,
            message: message.into(),
        }
    }
}

/// Perform `check` against the container whose main process is `pid`.
pub async fn perform(
    check: &Check,
    sandbox: &PodSandbox,
    pid: u32,
    env: &[(String, String)],
    timeout: Duration,
) -> Outcome {
    match check {
        Check::Exec(argv) => match sandbox.exec(pid, argv.clone(), env.to_vec(), timeout).await {
            Ok(out) if out.exit_code == 0 => Outcome::ok(),
            Ok(out) => Outcome::fail(format!("{}{}", out.stdout, out.stderr).trim().to_string())
                .or_exit(out.exit_code),
            Err(e) => Outcome::fail(e.to_string()),
        },
        Check::Tcp { host, port } => {
            match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), *port))).await {
                Ok(Ok(_)) => Outcome::ok(),
                Ok(Err(e)) => Outcome::fail(format!("dial tcp {host}:{port}: connect: {e}")),
                Err(_) => Outcome::fail(format!("dial tcp {host}:{port}: i/o timeout")),
            }
        }
        Check::Http {
            host,
            port,
            path,
            https,
            headers,
        } => {
            if *https {
                return Outcome::fail(
                    "HTTPS probes are not supported by the localkube node agent".to_string(),
                );
            }
            match tokio::time::timeout(timeout, http_get(host, *port, path, headers)).await {
                Ok(Ok(code)) if (200..400).contains(&code) => Outcome::ok(),
                Ok(Ok(code)) => Outcome::fail(format!("HTTP probe failed with statuscode: {code}")),
                Ok(Err(e)) => Outcome::fail(format!(
                    "Get \"http://{host}:{port}{path}\": dial tcp {host}:{port}: connect: {e}"
                )),
                Err(_) => Outcome::fail(format!(
                    "Get \"http://{host}:{port}{path}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                )),
            }
        }
    }
}

impl Outcome {
    /// An exec probe that printed nothing still says how it ended.
    fn or_exit(mut self, code: i32) -> Outcome {
        if self.message.is_empty() {
            self.message = format!("command terminated with exit code {code}");
        }
        self
    }
}

/// A minimal HTTP/1.1 GET; only the status code matters to a probe.
async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect((host, port)).await?;
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n"
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 4096 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| std::io::Error::other("malformed HTTP response"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn http_get_reads_the_status_code() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            assert!(String::from_utf8_lossy(&buf[..n]).starts_with("GET /health HTTP/1.1\r\n"));
            s.write_all(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
                .await
                .unwrap();
        });
        assert_eq!(
            http_get("127.0.0.1", port, "/health", &[]).await.unwrap(),
            503
        );
    }
}
