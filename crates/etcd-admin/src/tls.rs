//! TLS to a member's client port: the CA to trust and, for members that require client
//! certificates (`--client-cert-auth`), the certificate the operator presents. Pure data; the
//! operators fill it from Secrets.

use std::fmt;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How to reach an `https://` client URL.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientTls {
    /// PEM CA certificate(s) the member's serving certificate must chain to.
    pub ca_pem: String,
    /// Client certificate and key to present; `None` presents none.
    pub identity: Option<ClientIdentity>,
}

/// A client certificate and its key, PEM.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientIdentity {
    /// PEM certificate (chain).
    pub cert_pem: String,
    /// PEM private key.
    pub key_pem: String,
}

// The key never reaches a log.
impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca_pem_bytes", &self.ca_pem.len())
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity").finish_non_exhaustive()
    }
}

impl ClientTls {
    /// etcd-client's (tonic's) TLS settings. The server name checked is the URL's host.
    pub fn options(&self) -> etcd_client::TlsOptions {
        let options = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(&self.ca_pem));
        match &self.identity {
            Some(id) => {
                options.identity(etcd_client::Identity::from_pem(&id.cert_pem, &id.key_pem))
            }
            None => options,
        }
    }

    /// A rustls client configuration, for the plain HTTPS request of `GET /version`.
    pub(crate) fn rustls_config(&self) -> Result<rustls::ClientConfig, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("CA certificate: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("CA certificate: {e}"))?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
        match &self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some(id) => {
                let chain = CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("client certificate: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
                    .map_err(|e| format!("client key: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("client certificate: {e}"))
            }
        }
    }
}

/// Why a Secret cannot give a [`ClientTls`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("has no {0}")]
pub struct MissingKey(pub &'static str);

impl ClientTls {
    /// From the data of a `kubernetes.io/tls` Secret: `ca.crt` to trust and, with
    /// `present_certificate`, `tls.crt`/`tls.key` to present.
    pub fn from_secret_data(
        data: &std::collections::BTreeMap<String, Vec<u8>>,
        present_certificate: bool,
    ) -> Result<Self, MissingKey> {
        let text = |key: &'static str| {
            data.get(key)
                .filter(|v| !v.is_empty())
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .ok_or(MissingKey(key))
        };
        let identity = if present_certificate {
            Some(ClientIdentity {
                cert_pem: text("tls.crt")?,
                key_pem: text("tls.key")?,
            })
        } else {
            None
        };
        Ok(ClientTls {
            ca_pem: text("ca.crt")?,
            identity,
        })
    }
}
