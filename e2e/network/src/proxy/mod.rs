//! The userspace ClusterIP proxy (spec §d), like kube-proxy's old userspace mode: every TCP
//! port of every Service with a ClusterIP gets a listener on `clusterIP:port` after the address
//! is made local through [`ServiceAddresses`].

mod backends;
mod listener;
mod plan;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::cluster::ServiceCache;
use crate::error::Error;
use plan::{ListenerSpec, Listeners};

/// Makes ClusterIPs locally bindable (the lead's implementation puts them on the bridge).
/// Called from a blocking thread, so implementations may run commands.
pub trait ServiceAddresses: Send + Sync + 'static {
    /// Makes `ip` bindable; called before the first listener on it.
    fn add(&self, ip: Ipv4Addr) -> std::io::Result<()>;
    /// Called after the last listener on `ip` stopped, and for every held address on drop.
    fn remove(&self, ip: Ipv4Addr) -> std::io::Result<()>;
}

/// Failed address adds and listener binds are retried this often even without a change.
const RESYNC: Duration = Duration::from_secs(10);

/// Proxies ClusterIP traffic until dropped; dropping it closes every listener and removes every
/// address it added. Per-Service problems are logged and retried, never fatal.
pub async fn run_proxy(
    client: kube::Client,
    addresses: Arc<dyn ServiceAddresses>,
) -> Result<(), Error> {
    let (cache, mut service_changes, slice_changes) = ServiceCache::start(&client);
    let mut proxy = Proxy {
        addresses,
        cache: cache.clone(),
        listeners: BTreeMap::new(),
        held: BTreeSet::new(),
    };
    // Endpoints are read when a connection arrives: their stream only has to keep flowing.
    let follow_slices = slice_changes.for_each(|()| std::future::ready(()));
    let reconcile = async {
        let mut resync = tokio::time::interval(RESYNC);
        loop {
            tokio::select! {
                change = service_changes.next() => {
                    if change.is_none() {
                        return Error::WatchEnded { resource: "services" };
                    }
                    // Coalesce a burst (the initial list) into one pass.
                    while let Some(Some(())) = service_changes.next().now_or_never() {}
                }
                _ = resync.tick() => {}
            }
            proxy.reconcile().await;
        }
    };
    tokio::select! {
        () = follow_slices => Err(Error::WatchEnded { resource: "endpointslices" }),
        error = reconcile => Err(error),
    }
}

/// A spawned listener, aborted (with its connections) when dropped.
struct Running {
    spec: ListenerSpec,
    task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Proxy {
    addresses: Arc<dyn ServiceAddresses>,
    cache: ServiceCache,
    listeners: BTreeMap<SocketAddrV4, Running>,
    /// Addresses added and not yet removed.
    held: BTreeSet<Ipv4Addr>,
}

impl Proxy {
    async fn reconcile(&mut self) {
        let desired = plan::desired(&self.cache.services());
        let running: Listeners = self
            .listeners
            .iter()
            .map(|(addr, r)| (*addr, r.spec.clone()))
            .collect();
        let changes = plan::diff(&running, &self.held, &desired);
        for addr in changes.stop {
            self.listeners.remove(&addr);
            tracing::info!(%addr, "stopped ClusterIP listener");
        }
        for ip in changes.add_addresses {
            match self.call(ip, AddressOp::Add).await {
                Ok(()) => {
                    self.held.insert(ip);
                }
                Err(error) => {
                    tracing::warn!(%ip, %error, "cannot add ClusterIP address; will retry")
                }
            }
        }
        for (addr, spec) in changes.start {
            if !self.held.contains(addr.ip()) {
                continue;
            }
            match TcpListener::bind(SocketAddr::V4(addr)).await {
                Ok(listener) => {
                    tracing::info!(%addr, service = ?spec.service, "ClusterIP listener started");
                    let task =
                        tokio::spawn(listener::serve(listener, spec.clone(), self.cache.clone()));
                    self.listeners.insert(addr, Running { spec, task });
                }
                Err(error) => {
                    tracing::warn!(%addr, %error, "cannot listen on ClusterIP port; will retry")
                }
            }
        }
        for ip in changes.remove_addresses {
            match self.call(ip, AddressOp::Remove).await {
                Ok(()) => {
                    self.held.remove(&ip);
                }
                Err(error) => {
                    tracing::warn!(%ip, %error, "cannot remove ClusterIP address; will retry")
                }
            }
        }
    }

    /// Runs an address change on a blocking thread (implementations may spawn `ip`).
    async fn call(&self, ip: Ipv4Addr, op: AddressOp) -> std::io::Result<()> {
        let addresses = self.addresses.clone();
        let task = tokio::task::spawn_blocking(move || match op {
            AddressOp::Add => addresses.add(ip),
            AddressOp::Remove => addresses.remove(ip),
        });
        task.await.map_err(std::io::Error::other)?
    }
}

#[derive(Clone, Copy)]
enum AddressOp {
    Add,
    Remove,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.listeners.clear();
        for ip in std::mem::take(&mut self.held) {
            if let Err(error) = self.addresses.remove(ip) {
                tracing::warn!(%ip, %error, "cannot remove ClusterIP address on shutdown");
            }
        }
    }
}
