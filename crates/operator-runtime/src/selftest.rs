//! `self-test`: what the chart's `helm test` hook runs: every operator answers on its probe
//! endpoint and the API server serves the three kinds. Read-only; discovery needs no RBAC
//! (every authenticated identity may read it). I/O.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The group/version whose kinds must be served.
pub const GROUP_VERSION: &str = "etcd.operator.rs/v1alpha1";
/// The plural names that must be listed under [`GROUP_VERSION`].
pub const RESOURCES: [&str; 3] = ["etcdclusters", "etcdbackups", "etcdrestores"];

/// One failed check, named for the person reading `helm test`'s output.
#[derive(Debug, thiserror::Error)]
pub enum SelfTestError {
    #[error("{url}: not an http://host:port/path URL")]
    BadUrl { url: String },
    #[error("{url}: {detail}")]
    Endpoint { url: String, detail: String },
    #[error("discovery of {GROUP_VERSION}: {0}")]
    Discovery(#[source] kube::Error),
    #[error("{GROUP_VERSION} does not serve {missing:?} (are the CRDs installed? crds.enabled)")]
    NotServed { missing: Vec<String> },
}

/// `GET url` answers 200, retried every second until `within` has passed (a rolling Pod may be
/// between replicas). Returns the status line of the last attempt on failure.
pub async fn check_endpoint(url: &str, within: Duration) -> Result<(), SelfTestError> {
    let (host_port, path) = split_url(url).ok_or_else(|| SelfTestError::BadUrl {
        url: url.to_owned(),
    })?;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let detail = match tokio::time::timeout(Duration::from_secs(5), get(host_port, path)).await
        {
            Ok(Ok(status)) if status.split_whitespace().nth(1) == Some("200") => return Ok(()),
            Ok(Ok(status)) => status,
            Ok(Err(error)) => error.to_string(),
            Err(_) => "no answer within 5s".to_owned(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(SelfTestError::Endpoint {
                url: url.to_owned(),
                detail,
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The API server lists the three kinds under [`GROUP_VERSION`].
pub async fn check_crds_served(client: &kube::Client) -> Result<(), SelfTestError> {
    let list = client
        .list_api_group_resources(GROUP_VERSION)
        .await
        .map_err(SelfTestError::Discovery)?;
    let missing = missing_resources(list.resources.iter().map(|r| r.name.as_str()));
    if missing.is_empty() {
        Ok(())
    } else {
        Err(SelfTestError::NotServed { missing })
    }
}

fn missing_resources<'a>(served: impl Iterator<Item = &'a str> + Clone) -> Vec<String> {
    RESOURCES
        .iter()
        .filter(|want| !served.clone().any(|name| name == **want))
        .map(|s| (*s).to_owned())
        .collect()
}

/// `http://host:port/path` → (`host:port`, `/path`).
fn split_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    let (host_port, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    (host_port.contains(':') && !host_port.starts_with(':')).then_some((host_port, path))
}

/// The status line of `GET path` (HTTP/1.0: the server closes after answering).
async fn get(host_port: &str, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(host_port).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host_port}\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{ProbeServer, Readiness};

    #[test]
    fn urls_and_missing_kinds() {
        assert_eq!(
            split_url("http://rel-metrics.ops.svc:8080/healthz"),
            Some(("rel-metrics.ops.svc:8080", "/healthz"))
        );
        assert_eq!(split_url("http://h:1"), Some(("h:1", "/")));
        assert_eq!(split_url("https://h:1/x"), None);
        assert_eq!(split_url("http://h/x"), None, "a port is required");
        let served = ["etcdclusters", "etcdclusters/status", "etcdbackups"];
        assert_eq!(missing_resources(served.iter().copied()), ["etcdrestores"]);
    }

    /// Against the real probe server: /healthz answers, /readyz of a not-ready replica fails
    /// naming the status, a closed port fails naming the error.
    #[tokio::test]
    async fn endpoints_against_the_probe_server() {
        let server = ProbeServer::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let readiness = Readiness::new();
        tokio::spawn(server.serve(readiness.clone()));
        check_endpoint(&format!("http://{addr}/healthz"), Duration::ZERO)
            .await
            .unwrap();
        let err = check_endpoint(&format!("http://{addr}/readyz"), Duration::ZERO)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("/readyz") && err.contains("503"), "{err}");
        readiness.set_ready(true);
        check_endpoint(&format!("http://{addr}/readyz"), Duration::ZERO)
            .await
            .unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed_addr = closed.local_addr().unwrap();
        drop(closed);
        let err = check_endpoint(&format!("http://{closed_addr}/healthz"), Duration::ZERO)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(&closed_addr.to_string()), "{err}");
    }
}
