use std::net::SocketAddr;

/// Why [`crate::run_dns`] or [`crate::run_proxy`] stopped. Per-object problems never end either
/// future: they are logged and retried on the next change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot bind the cluster DNS server on {protocol} {addr}: {source}")]
    DnsBind {
        protocol: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the cluster domain {domain:?} is not a valid DNS name: {reason}")]
    ClusterDomain { domain: String, reason: String },
    #[error("the cluster DNS server stopped: {0}")]
    DnsServer(String),
    #[error("the {resource} watch ended")]
    WatchEnded { resource: &'static str },
}
