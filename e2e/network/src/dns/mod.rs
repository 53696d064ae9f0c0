//! The cluster DNS server (spec §d): authoritative for the cluster domain, answering from the
//! live caches, forwarding (or refusing) everything else, on UDP and TCP of one address.

mod answer;
mod handler;
mod query;
mod upstream;

#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_proto::rr::Name;
use hickory_server::Server;
use tokio::net::{TcpListener, UdpSocket};

use crate::cluster::DnsCache;
use crate::error::Error;
use answer::Zone;
use handler::ClusterDns;

/// A TCP client that sends nothing for this long is disconnected (CoreDNS's read timeout).
const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Responses queued per TCP connection.
const TCP_RESPONSE_BUFFER: usize = 16;

#[derive(Clone, Debug)]
pub struct DnsOptions {
    /// UDP and TCP address, e.g. `<bridge gateway>:53`.
    pub listen: SocketAddr,
    /// The zone served, e.g. `cluster.local`.
    pub cluster_domain: String,
    /// The host's original nameserver for names outside the zone; `None` answers them REFUSED
    /// at once, so resolvers move on instead of waiting.
    pub upstream: Option<SocketAddr>,
}

/// Serves cluster DNS until dropped. Fails only when the address cannot be bound, the domain is
/// not a DNS name, or the server's sockets fail; watch errors are logged and retried.
pub async fn run_dns(client: kube::Client, options: DnsOptions) -> Result<(), Error> {
    let origin = zone_origin(&options.cluster_domain)?;
    let udp = UdpSocket::bind(options.listen)
        .await
        .map_err(|source| Error::DnsBind {
            protocol: "UDP",
            addr: options.listen,
            source,
        })?;
    let tcp = TcpListener::bind(options.listen)
        .await
        .map_err(|source| Error::DnsBind {
            protocol: "TCP",
            addr: options.listen,
            source,
        })?;
    let nameserver = match options.listen.ip() {
        IpAddr::V4(ip) if !ip.is_unspecified() => Some(ip),
        _ => None,
    };
    let (cache, follow) = DnsCache::start(&client);
    let mut server = Server::new(ClusterDns {
        zone: Zone { origin, nameserver },
        cache,
        upstream: options.upstream,
    });
    server.register_socket(udp);
    server.register_listener(tcp, TCP_IDLE_TIMEOUT, TCP_RESPONSE_BUFFER);
    tracing::info!(listen = %options.listen, domain = %options.cluster_domain, "cluster DNS serving");
    tokio::select! {
        () = follow => Err(Error::WatchEnded { resource: "cluster DNS" }),
        done = server.block_until_done() => match done {
            Ok(()) => Err(Error::DnsServer("all sockets closed".into())),
            Err(error) => Err(Error::DnsServer(error.to_string())),
        },
    }
}

/// `cluster.local` → `cluster.local.` in lower case.
fn zone_origin(domain: &str) -> Result<Name, Error> {
    let invalid = |reason: String| Error::ClusterDomain {
        domain: domain.to_owned(),
        reason,
    };
    let trimmed = domain.trim_end_matches('.');
    if trimmed.is_empty() {
        return Err(invalid("empty".into()));
    }
    let mut origin = Name::from_ascii(trimmed)
        .map_err(|error| invalid(error.to_string()))?
        .to_lowercase();
    origin.set_fqdn(true);
    Ok(origin)
}
