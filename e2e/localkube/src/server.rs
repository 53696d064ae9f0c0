//! HTTPS serving: rustls with the generated CA, HTTP/1.1 and h2 (client-go speaks h2 over TLS),
//! client certificates optional at the TLS layer so that bearer tokens work too; the identity
//! of each connection is read from its certificate, of each request from its token.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::api::{self, Shared, User};
use crate::pki::{Pki, identity_from_der};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

pub fn tls_config(pki: &Pki) -> Result<rustls::ServerConfig, ServeError> {
    let tls = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pki.ca_cert.as_bytes()) {
        roots.add(cert.map_err(|e| tls(&e))?).map_err(|e| tls(&e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls(&e))?;
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pki.serving_cert.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| tls(&e))?;
    let key = PrivateKeyDer::from_pem_slice(pki.serving_key.as_bytes()).map_err(|e| tls(&e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| tls(&e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Listen { addr, source })
}

/// Accept connections until the task is dropped.
pub async fn serve(listener: TcpListener, tls: rustls::ServerConfig, server: Shared) {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let server = server.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let cert_user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|c| identity_from_der(c.as_ref()))
                .map(|(name, mut groups)| {
                    groups.push("system:authenticated".into());
                    User { name, groups }
                });
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let server = server.clone();
                let cert_user = cert_user.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(server, cert_user, req).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        });
    }
}

async fn handle(
    server: Shared,
    cert_user: Option<User>,
    req: Request<hyper::body::Incoming>,
) -> axum::http::Response<Body> {
    use http_body_util::BodyExt;
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, api::body::MAX_BODY_BYTES + 1);
    let bytes = match limited.collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            return api::error_response(&api::status::ApiError::request_entity_too_large(format!(
                "limit is {}",
                api::body::MAX_BODY_BYTES
            )));
        }
    };
    let user = match crate::authn::bearer_user(&server, &parts.headers).await {
        Ok(Some(u)) => Some(u),
        Ok(None) => cert_user,
        Err(e) => return api::error_response(&e),
    };
    api::dispatch(server, user, parts.method, parts.uri, parts.headers, bytes).await
}
