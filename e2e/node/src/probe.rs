//! Performing one probe (exec, HTTP GET, TCP connect) the way the kubelet's prober does; which
//! action, when to probe and what a result means is decided in `localkube-podspec::probes`.

use std::time::Duration;

use localkube_podspec::probes::{ProbeAction, ProbeOutcome, http_failure_output};
use localkube_sandbox::PodSandbox;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Perform `action` against the container whose main process is `pid`.
pub async fn perform(
    action: &ProbeAction,
    sandbox: &PodSandbox,
    pid: u32,
    env: &[(String, String)],
    timeout: Duration,
) -> ProbeOutcome {
    let fail = ProbeOutcome::Failure;
    match action {
        ProbeAction::Exec { command } => {
            match sandbox
                .exec(pid, command.clone(), env.to_vec(), timeout)
                .await
            {
                Ok(out) if out.exit_code == 0 => ProbeOutcome::Success,
                Ok(out) => {
                    let printed = format!("{}{}", out.stdout, out.stderr).trim().to_string();
                    fail(if printed.is_empty() {
                        format!("command terminated with exit code {}", out.exit_code)
                    } else {
                        printed
                    })
                }
                Err(e) => fail(e.to_string()),
            }
        }
        ProbeAction::TcpSocket { host, port } => {
            match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), *port))).await {
                Ok(Ok(_)) => ProbeOutcome::Success,
                Ok(Err(e)) => fail(format!("dial tcp {host}:{port}: connect: {e}")),
                Err(_) => fail(format!("dial tcp {host}:{port}: i/o timeout")),
            }
        }
        ProbeAction::HttpGet {
            scheme,
            host,
            port,
            path,
            headers,
        } => {
            if scheme != "HTTP" {
                return fail(format!(
                    "{scheme} probes are not supported by the localkube node agent"
                ));
            }
            match tokio::time::timeout(timeout, http_get(host, *port, path, headers)).await {
                Ok(Ok(code)) if (200..400).contains(&code) => ProbeOutcome::Success,
                Ok(Ok(code)) => fail(http_failure_output(code)),
                Ok(Err(e)) => fail(format!(
                    "Get \"http://{host}:{port}{path}\": dial tcp {host}:{port}: connect: {e}"
                )),
                Err(_) => fail(format!(
                    "Get \"http://{host}:{port}{path}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                )),
            }
        }
        ProbeAction::Grpc { .. } => {
            fail("gRPC probes are not supported by the localkube node agent".to_string())
        }
    }
}

/// A minimal HTTP/1.1 GET; only the status code matters to a probe. `headers` already carry
/// the kubelet's User-Agent and Accept.
async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect((host, port)).await?;
    let mut request =
        format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n");
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
