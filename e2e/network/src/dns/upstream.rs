//! Forwarding to the host's nameserver: names outside the cluster zone, and the targets of
//! ExternalName aliases. One fresh connected UDP socket per query (so only the upstream can
//! answer it), a short timeout, and a retry over TCP when the UDP answer was truncated.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// Long enough for a resolver on the host network, short enough that a pod's resolver (glibc
/// waits 5 s per try) gets SERVFAIL from us before it gives up on us.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// EDNS-sized receive buffer.
const MAX_UDP: usize = 4096;

/// Sends `query` (a whole DNS message) to `upstream` and returns its answer, or `None` when
/// the upstream did not answer in time or answered garbage.
pub async fn exchange(upstream: SocketAddr, query: &[u8]) -> Option<Message> {
    let id = u16::from_be_bytes([*query.first()?, *query.get(1)?]);
    let response = match tokio::time::timeout(TIMEOUT, over_udp(upstream, query, id)).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            tracing::debug!(%upstream, %error, "upstream UDP exchange failed");
            return None;
        }
        Err(_) => {
            tracing::debug!(%upstream, "upstream did not answer in time");
            return None;
        }
    };
    if !response.metadata.truncation {
        return Some(response);
    }
    match tokio::time::timeout(TIMEOUT, over_tcp(upstream, query)).await {
        Ok(Ok(full)) => Some(full),
        // The truncated answer still says something true (and TC tells the client to retry).
        _ => Some(response),
    }
}

/// Asks `upstream` for `name`/`qtype` with recursion desired.
pub async fn lookup(upstream: SocketAddr, name: Name, qtype: RecordType) -> Option<Message> {
    let mut message = Message::query();
    message.metadata.id = next_id();
    message.metadata.recursion_desired = true;
    message.add_query(Query::query(name, qtype));
    let bytes = message.to_vec().ok()?;
    exchange(upstream, &bytes).await
}

/// Query IDs for our own lookups; the connected socket, not the ID, is what keeps answers
/// from being spoofed, so a counter seeded from the clock is enough.
fn next_id() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    NEXT.fetch_add(1, Ordering::Relaxed) ^ (seed as u16)
}

async fn over_udp(upstream: SocketAddr, query: &[u8], id: u16) -> std::io::Result<Message> {
    let local: SocketAddr = if upstream.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).await?;
    socket.connect(upstream).await?;
    socket.send(query).await?;
    let mut buffer = vec![0; MAX_UDP];
    loop {
        let len = socket.recv(&mut buffer).await?;
        // A stray datagram with another ID is not our answer: keep waiting (within TIMEOUT).
        if let Ok(message) = Message::from_vec(&buffer[..len])
            && message.metadata.id == id
        {
            return Ok(message);
        }
    }
}

async fn over_tcp(upstream: SocketAddr, query: &[u8]) -> std::io::Result<Message> {
    let mut stream = TcpStream::connect(upstream).await?;
    let len = u16::try_from(query.len()).map_err(std::io::Error::other)?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(query).await?;
    let len = stream.read_u16().await?;
    let mut buffer = vec![0; usize::from(len)];
    stream.read_exact(&mut buffer).await?;
    Message::from_vec(&buffer).map_err(std::io::Error::other)
}
