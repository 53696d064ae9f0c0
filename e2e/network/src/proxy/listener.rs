//! One `clusterIP:port` listener: each accepted connection goes to the next backend in round
//! robin; a backend that does not accept within the attempt's timeout is skipped for the next
//! one (kube-proxy userspace's `EndpointDialTimeouts`), and a connection with no backend at all
//! is closed at once, as kube-proxy rejects it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::backends::backends;
use super::plan::ListenerSpec;
use crate::cluster::ServiceCache;

/// One attempt per entry, each on the next endpoint (kube-proxy userspace's values).
const DIAL_TIMEOUTS: [Duration; 4] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];
/// Copy buffer per direction of a proxied connection. tokio's default (8 KiB) cost about twice
/// the CPU per byte of 64 KiB in a loopback measurement (0.8-1.2 against 1.9 GB/s through one
/// proxied stream): on 2 cores that CPU is taken from the seed's download and hashing, and from
/// `aws s3 cp`, both of which reach S3 through here. kube-proxy forwards in the kernel.
const BUFFER: usize = 64 * 1024;
/// Pause after a failed accept (EMFILE and the like) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts until the task is aborted; aborting it also ends the connections it spliced (they
/// live in its JoinSet), which is what removing the Service's address would do anyway.
pub async fn serve(listener: TcpListener, spec: ListenerSpec, cache: ServiceCache) {
    let next = Arc::new(AtomicUsize::new(0));
    let spec = Arc::new(spec);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(forward(client, spec.clone(), cache.clone(), next.clone()));
                }
                Err(error) => {
                    tracing::warn!(service = ?spec.service, %error, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next() => {}
        }
    }
}

async fn forward(
    mut client: TcpStream,
    spec: Arc<ListenerSpec>,
    cache: ServiceCache,
    next: Arc<AtomicUsize>,
) {
    let candidates = backends(
        &cache.slices(&spec.service.namespace, &spec.service.name),
        &spec.port_name,
    );
    if candidates.is_empty() {
        tracing::debug!(service = ?spec.service, port = %spec.port_name, "no ready endpoint; rejecting");
        return;
    }
    for timeout in DIAL_TIMEOUTS {
        let backend = candidates[next.fetch_add(1, Ordering::Relaxed) % candidates.len()];
        let mut upstream = match tokio::time::timeout(timeout, TcpStream::connect(backend)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                tracing::debug!(%backend, %error, "endpoint refused; trying the next");
                continue;
            }
            Err(_) => {
                tracing::debug!(%backend, ?timeout, "endpoint did not accept in time; trying the next");
                continue;
            }
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        if let Err(error) =
            tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, BUFFER, BUFFER)
                .await
        {
            tracing::debug!(%backend, %error, "proxied connection ended with an error");
        }
        return;
    }
    tracing::info!(service = ?spec.service, port = %spec.port_name, "no endpoint accepted the connection");
}
