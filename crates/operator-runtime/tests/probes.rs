//! The probe server over real TCP: bound on an ephemeral port, answered with real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use operator_runtime::metrics::{ReconcileMetrics, new_registry};
use operator_runtime::{ProbeServer, Readiness};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start() -> (
    SocketAddr,
    Readiness,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let server = ProbeServer::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    assert_ne!(addr.port(), 0);
    let readiness = Readiness::new();
    let mut registry = new_registry();
    let reconciles = ReconcileMetrics::register(&mut registry, "restore");
    reconciles.reconciled(Duration::from_millis(3), Some("ObserveFailed"));
    let task = tokio::spawn(server.serve_with_metrics(readiness.clone(), Some(Arc::new(registry))));
    (addr, readiness, task)
}

/// Send raw bytes, return the whole response (the server closes the connection).
async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("no response")
        .unwrap();
    String::from_utf8(response).unwrap()
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: probe\r\nUser-Agent: kube-probe/1.33\r\n\r\n");
    let response = exchange(addr, request.as_bytes()).await;
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[tokio::test]
async fn healthz_readyz_and_everything_else() {
    let (addr, readiness, task) = start().await;

    assert_eq!(get(addr, "/healthz").await, (200, "ok".into()));
    assert_eq!(get(addr, "/readyz").await.0, 503);
    readiness.set_ready(true);
    assert_eq!(get(addr, "/readyz").await, (200, "ok".into()));
    readiness.set_ready(false);
    assert_eq!(get(addr, "/readyz").await.0, 503);
    assert_eq!(get(addr, "/").await.0, 404);
    // The registry's families, whether ready or not (a standby is scraped too).
    let (status, body) = get(addr, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(
            "etcd_operator_reconcile_errors_total{controller=\"restore\",reason=\"ObserveFailed\"} 1\n"
        ),
        "{body}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");

    assert!(!task.is_finished());
    task.abort();
}

#[tokio::test]
async fn bad_and_abandoned_connections_do_not_stop_the_server() {
    let (addr, _readiness, task) = start().await;

    // garbage, an oversized head without an end, and a client that connects and leaves
    assert!(
        exchange(addr, b"\x00\x01\x02garbage\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 400")
    );
    let huge = format!("GET /healthz HTTP/1.1\r\nX-Big: {}", "a".repeat(64 * 1024));
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The server may close before reading everything; only its survival matters here.
    let _ = stream.write_all(huge.as_bytes()).await;
    drop(stream);
    drop(TcpStream::connect(addr).await.unwrap());

    assert_eq!(get(addr, "/healthz").await, (200, "ok".into()));
    assert!(!task.is_finished());
    task.abort();
}

#[tokio::test]
async fn serve_probes_fails_when_the_port_is_taken() {
    let (addr, _readiness, task) = start().await;
    let error = operator_runtime::serve_probes(addr, Readiness::new())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
    task.abort();
}
