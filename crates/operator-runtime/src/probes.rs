//! Liveness and readiness endpoints for the operators' Deployments. Does I/O: a TCP listener
//! serving a deliberately tiny subset of HTTP/1.1, so the operators need no web framework.
//!
//! - `GET /healthz` → 200 `ok` while the process serves requests at all (liveness).
//! - `GET /readyz` → 200 `ok` once [`Readiness::set_ready`] was called with `true`, else 503
//!   (readiness: the binaries set it after their watches synced and they hold the Lease).
//! - `GET /metrics` → 200 with the OpenMetrics text of the operator's registry (see
//!   [`crate::metrics`]), when the server was given one; 404 otherwise. A standby serves it too
//!   (its reconcile counters stay at zero), so "operator down" means the process is down.
//! - anything else → 404.
//!
//! One request per connection (`Connection: close`), the request head read with a size and a time
//! bound, so a slow or hostile client costs one small task and never the server.

use std::borrow::Cow;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head we read; probes send ~100 bytes.
const MAX_REQUEST_BYTES: usize = 4096;
/// How long a client may take to send its request head (the kubelet's probe timeout is 1 s by
/// default, so a legitimate probe never needs more).
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Whether the operator is ready; cloned into the probe server and the code that decides.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Starts not ready.
    pub fn new() -> Self {
        Readiness::default()
    }

    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A bound probe listener; [`ProbeServer::local_addr`] tells the port when bound to port 0.
pub struct ProbeServer {
    listener: TcpListener,
}

impl ProbeServer {
    pub async fn bind(addr: SocketAddr) -> io::Result<ProbeServer> {
        Ok(ProbeServer {
            listener: TcpListener::bind(addr).await?,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until the future is dropped. Errors on single connections are logged at debug and
    /// never end the server.
    pub async fn serve(self, readiness: Readiness) -> io::Result<()> {
        self.serve_with_metrics(readiness, None).await
    }

    /// [`ProbeServer::serve`], plus `GET /metrics` rendering `metrics` when given.
    pub async fn serve_with_metrics(
        self,
        readiness: Readiness,
        metrics: Option<Arc<Registry>>,
    ) -> io::Result<()> {
        loop {
            match self.listener.accept().await {
                Ok((stream, _peer)) => {
                    let readiness = readiness.clone();
                    let metrics = metrics.clone();
                    tokio::spawn(async move {
                        if let Err(error) = handle(stream, &readiness, metrics.as_deref()).await {
                            tracing::debug!(%error, "probe connection failed");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "probe listener could not accept a connection");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            }
        }
    }
}

/// Bind `addr` and serve the probes on it; returns only if binding fails.
pub async fn serve_probes(addr: SocketAddr, readiness: Readiness) -> io::Result<()> {
    ProbeServer::bind(addr).await?.serve(readiness).await
}

/// Bind `addr` and serve the probes and `GET /metrics` (rendering `metrics`) on it; returns only
/// if binding fails.
pub async fn serve_probes_and_metrics(
    addr: SocketAddr,
    readiness: Readiness,
    metrics: Arc<Registry>,
) -> io::Result<()> {
    ProbeServer::bind(addr)
        .await?
        .serve_with_metrics(readiness, Some(metrics))
        .await
}

async fn handle(
    mut stream: TcpStream,
    readiness: &Readiness,
    metrics: Option<&Registry>,
) -> io::Result<()> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(head) => head?,
        Err(_elapsed) => return Ok(()),
    };
    let response = respond(&head, readiness.is_ready(), metrics);
    stream.write_all(response.to_bytes().as_slice()).await?;
    stream.shutdown().await
}

/// Read until the end of the request line (all we look at), the end of the head, EOF, or
/// [`MAX_REQUEST_BYTES`].
async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    while head.len() < MAX_REQUEST_BYTES {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    head.truncate(MAX_REQUEST_BYTES);
    Ok(head)
}

#[derive(Debug, PartialEq, Eq)]
struct Response {
    status: u16,
    content_type: &'static str,
    body: Cow<'static, str>,
}

impl Response {
    fn text(status: u16, body: &'static str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Cow::Borrowed(body),
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            _ => "Service Unavailable",
        };
        format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            self.status,
            self.content_type,
            self.body.len(),
            self.body
        )
        .into_bytes()
    }
}

/// The answer to a request head: pure, so every case is a unit test.
fn respond(head: &[u8], ready: bool, metrics: Option<&Registry>) -> Response {
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(head.len());
    let Ok(line) = std::str::from_utf8(&head[..line_end]) else {
        return Response::text(400, "bad request\n");
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Response::text(400, "bad request\n");
    };
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return Response::text(400, "bad request\n");
    }
    // Probes may carry a query string; it does not change the answer.
    let path = target.split('?').next().unwrap_or(target);
    match (method, path) {
        ("GET", "/healthz") => Response::text(200, "ok"),
        ("GET", "/readyz") if ready => Response::text(200, "ok"),
        ("GET", "/readyz") => Response::text(503, "not ready"),
        ("GET", "/metrics") => match metrics {
            Some(registry) => Response {
                status: 200,
                content_type: crate::metrics::CONTENT_TYPE,
                body: Cow::Owned(crate::metrics::render(registry)),
            },
            None => Response::text(404, "not found"),
        },
        _ => Response::text(404, "not found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str, ready: bool) -> u16 {
        let registry = crate::metrics::new_registry();
        respond(head.as_bytes(), ready, Some(&registry)).status
    }

    #[test]
    fn answers_by_method_path_and_readiness() {
        let cases = [
            ("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", false, 200),
            ("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", true, 200),
            ("GET /healthz?verbose=1 HTTP/1.1\r\n\r\n", false, 200),
            ("GET /readyz HTTP/1.1\r\n\r\n", false, 503),
            ("GET /readyz HTTP/1.1\r\n\r\n", true, 200),
            ("GET /readyz HTTP/1.0\r\n\r\n", true, 200),
            ("GET / HTTP/1.1\r\n\r\n", true, 404),
            ("GET /metrics HTTP/1.1\r\n\r\n", true, 200),
            ("GET /metrics HTTP/1.1\r\n\r\n", false, 200),
            ("POST /metrics HTTP/1.1\r\n\r\n", true, 404),
            ("GET /healthzz HTTP/1.1\r\n\r\n", true, 404),
            ("POST /healthz HTTP/1.1\r\n\r\n", true, 404),
            ("DELETE /readyz HTTP/1.1\r\n\r\n", true, 404),
        ];
        for (head, ready, expected) in cases {
            assert_eq!(status(head, ready), expected, "{head:?} ready={ready}");
        }
    }

    #[test]
    fn malformed_requests_are_rejected_without_panicking() {
        let cases: [&[u8]; 7] = [
            b"",
            b"\r\n\r\n",
            b"GET\r\n\r\n",
            b"GET /healthz\r\n\r\n",
            b"GET /healthz SPDY/3\r\n\r\n",
            b"GET /healthz HTTP/1.1 extra\r\n\r\n",
            b"GET /\xff\xfe HTTP/1.1\r\n\r\n",
        ];
        for head in cases {
            assert_eq!(respond(head, true, None).status, 400, "{head:?}");
        }
    }

    #[test]
    fn responses_are_complete_http() {
        let bytes = respond(b"GET /readyz HTTP/1.1\r\n\r\n", false, None).to_bytes();
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{text}"
        );
        assert!(text.contains("Content-Length: 9\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nnot ready"), "{text}");
    }

    #[test]
    fn metrics_are_the_registry_as_openmetrics_text() {
        let mut registry = crate::metrics::new_registry();
        let reconciles = crate::metrics::ReconcileMetrics::register(&mut registry, "backup");
        reconciles.action("BackupStarted");
        let response = respond(b"GET /metrics HTTP/1.1\r\n\r\n", false, Some(&registry));
        assert_eq!(response.status, 200);
        assert_eq!(response.content_type, crate::metrics::CONTENT_TYPE);
        assert!(
            response.body.contains(
                "etcd_operator_actions_total{controller=\"backup\",action=\"BackupStarted\"} 1\n"
            ),
            "{}",
            response.body
        );
        let text = String::from_utf8(response.to_bytes()).unwrap();
        assert!(
            text.contains(&format!("Content-Length: {}\r\n", response.body.len())),
            "{text}"
        );
        // Without a registry there is no such endpoint.
        let none = respond(b"GET /metrics HTTP/1.1\r\n\r\n", true, None);
        assert_eq!(none.status, 404);
    }
}
