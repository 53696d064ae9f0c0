//! The part of the kubelet API that kube-apiserver calls: `GET /containerLogs/<ns>/<pod>/
//! <container>` (what `kubectl logs` and `pods/log` clients reach through the API server's
//! proxy) and `/healthz`. Served over TLS on the node's InternalIP at the port the Node object
//! advertises (`status.daemonEndpoints.kubeletEndpoint`), with a certificate from the cluster's
//! CA; a client must present a certificate of that CA (kube-apiserver's
//! `--kubelet-client-certificate`). The kubelet would also ask the API server to authorize the
//! user (SubjectAccessReview on `nodes/log`); only kube-apiserver calls this one, so it does not.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::logs::{LogOptions, log_path, render};

type Body = BoxBody<Bytes, std::io::Error>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// PEM material of the kubelet API's TLS: its serving certificate and key, and the CA whose
/// client certificates it accepts.
pub struct KubeletTls {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

fn tls_config(tls: &KubeletTls) -> Result<rustls::ServerConfig, BoxError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(tls.ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build()?;
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(tls.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Serve the kubelet API on `addr` until the task is dropped.
pub async fn serve(
    addr: SocketAddr,
    tls: KubeletTls,
    client: Client,
    logs_dir: PathBuf,
) -> Result<(), BoxError> {
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(&tls)?));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("kubelet API: binding {addr}: {e}"))?;
    let logs_dir = Arc::new(logs_dir);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "kubelet API: accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let client = client.clone();
        let logs_dir = logs_dir.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "kubelet API: TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let client = client.clone();
                let logs_dir = logs_dir.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(client, &logs_dir, req).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "kubelet API: connection ended");
            }
        });
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    let body = Full::new(Bytes::from(body.into()))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    response
}

/// Query parameters as `key=value` pairs (values are plain: numbers and booleans).
fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn flag(query: &str, name: &str) -> bool {
    matches!(query_param(query, name), Some("true" | "1"))
}

fn number(query: &str, name: &str) -> Result<Option<i64>, String> {
    query_param(query, name)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| format!("invalid value for {name}: {v:?} is not a number"))
        })
        .transpose()
}

async fn handle(
    client: Client,
    logs_dir: &std::path::Path,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    if path == "/healthz" {
        return text(StatusCode::OK, "ok");
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["containerLogs", ns, pod, container] => {
            match container_logs(client, logs_dir, ns, pod, container, &query).await {
                Ok(r) => r,
                Err((status, message)) => text(status, message),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "404 page not found"),
    }
}

/// The container's status in the Pod (restart count, whether it ever started).
fn container_state(pod: &Pod, container: &str) -> Option<(i64, bool, Option<String>, bool)> {
    let status = pod.status.as_ref()?;
    let all = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten());
    all.into_iter().find(|s| s.name == container).map(|s| {
        let restarts = i64::from(s.restart_count);
        let waiting = s.state.as_ref().and_then(|st| st.waiting.as_ref());
        let terminated = s.state.as_ref().is_some_and(|st| st.terminated.is_some());
        (
            restarts,
            waiting.is_none() || restarts > 0,
            waiting.and_then(|w| w.reason.clone()),
            terminated,
        )
    })
}

async fn container_logs(
    client: Client,
    logs_dir: &std::path::Path,
    ns: &str,
    name: &str,
    container: &str,
    query: &str,
) -> Result<Response<Body>, (StatusCode, String)> {
    let bad = |m: String| (StatusCode::BAD_REQUEST, m);
    let pods: Api<Pod> = Api::namespaced(client, ns);
    let pod = pods
        .get_opt(name)
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("pod \"{name}\" not found")))?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let previous = flag(query, "previous");
    let (restarts, started, waiting_reason, _) =
        container_state(&pod, container).unwrap_or((0, false, None, false));
    if previous && restarts == 0 {
        return Err(bad(format!(
            "previous terminated container \"{container}\" in pod \"{name}\" not found"
        )));
    }
    let instance = if previous { restarts - 1 } else { restarts };
    let path = log_path(logs_dir, ns, name, &uid, container, instance);
    if !started || (!previous && !path.exists()) {
        let reason = waiting_reason.unwrap_or_else(|| "ContainerCreating".into());
        return Err(bad(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: {reason}"
        )));
    }
    let opts = LogOptions {
        tail_lines: number(query, "tailLines")
            .map_err(bad)?
            .map(|n| n.max(0) as usize),
        since: number(query, "sinceSeconds")
            .map_err(bad)?
            .map(|s| jiff::Timestamp::now() - jiff::SignedDuration::from_secs(s.max(0))),
        timestamps: flag(query, "timestamps"),
        limit_bytes: number(query, "limitBytes")
            .map_err(bad)?
            .map(|n| n.max(0) as usize),
    };
    let content = tokio::fs::read(&path).await.unwrap_or_default();
    let consumed = content.len();
    let mut first = render(&String::from_utf8_lossy(&content), &opts);
    if let Some(limit) = opts.limit_bytes {
        first.truncate(crate::logs::floor_char_boundary(&first, limit));
    }
    if !flag(query, "follow") || previous {
        return Ok(text(StatusCode::OK, first));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    let live = LogOptions {
        tail_lines: None,
        since: None,
        ..opts
    };
    let container = container.to_string();
    let name = name.to_string();
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(Frame::data(first.into()))).await.is_err() {
            return;
        }
        let mut offset = consumed;
        let mut pending = String::new();
        loop {
            // This container instance ends when the pod shows a later one, a terminated state,
            // or is gone.
            let finished = match pods.get_opt(&name).await {
                Ok(Some(p)) if p.metadata.uid.as_deref() == Some(uid.as_str()) => {
                    container_state(&p, &container)
                        .is_none_or(|(r, _, _, terminated)| r != instance || terminated)
                }
                Ok(_) => true,
                Err(_) => false,
            };
            if let Ok(bytes) = tokio::fs::read(&path).await
                && bytes.len() > offset
            {
                pending.push_str(&String::from_utf8_lossy(&bytes[offset..]));
                offset = bytes.len();
                if let Some(end) = pending.rfind('\n') {
                    let ready: String = pending.drain(..=end).collect();
                    let out = render(&ready, &live);
                    if !out.is_empty() && tx.send(Ok(Frame::data(out.into()))).await.is_err() {
                        return;
                    }
                }
            }
            if finished {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)).boxed();
    let mut response = Response::new(body);
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_read_as_the_api_server_sends_them() {
        let q = "follow=true&tailLines=10&timestamps=1&previous";
        assert!(flag(q, "follow"));
        assert!(flag(q, "timestamps"));
        assert!(!flag(q, "previous"));
        assert_eq!(number(q, "tailLines"), Ok(Some(10)));
        assert_eq!(number(q, "limitBytes"), Ok(None));
        assert!(number("tailLines=x", "tailLines").is_err());
    }
}
