//! One localkube instance's share of the host network: a bridge, a pod /24 and a Service /24, all
//! derived from an instance index N so several instances (parallel tests) coexist.
//!
//! Ownership of N is an exclusive lock on `/run/localkube/net-<N>.lock`, held by an open file for
//! the life of the `HostNetwork`. The kernel drops the lock when the owner dies, even by SIGKILL;
//! the bridge cannot say that, so a bridge found under a free lock is a leftover and is rebuilt.

use std::fs::File;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::ip::{LINK_ALREADY_GONE, ip, ip_tolerant, link_names};
use crate::ipam::Ipam;
use crate::launch::Shim;

const LOCK_DIR: &str = "/run/localkube";
const MAX_INDEX: u8 = 250;

/// `lkbr<N>`.
pub(crate) fn bridge_name(index: u8) -> String {
    format!("lkbr{index}")
}

/// The bridge's own MAC, `02:6c:6b:62:00:<N>`: locally administered ("lkb"), one per instance.
pub(crate) fn bridge_mac(index: u8) -> String {
    format!("02:6c:6b:62:00:{index:02x}")
}

/// The host side of pod `k`'s veth, `lkv<N>x<k>`: at most 3 + 3 + 1 + 8 = 15 bytes (IFNAMSIZ-1).
/// `k` counts up per instance and is never reused while the instance lives, because a dead pod's
/// veth disappears only when the kernel gets round to tearing down its namespace.
pub(crate) fn veth_name(index: u8, k: u32) -> String {
    format!("{}{}", veth_prefix(index), k % 100_000_000)
}

fn veth_prefix(index: u8) -> String {
    format!("lkv{index}x")
}

/// Links of instance `index` that a previous owner left: its bridge and pod veths.
pub(crate) fn leftover_links(names: &[String], index: u8) -> Vec<String> {
    let prefix = veth_prefix(index);
    let bridge = bridge_name(index);
    names
        .iter()
        .filter(|n| {
            **n == bridge
                || n.strip_prefix(&prefix)
                    .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        })
        .cloned()
        .collect()
}

/// The order in which indexes are tried: the preferred one, then 1..=250.
fn candidates(preferred: Option<u8>) -> impl Iterator<Item = u8> {
    preferred
        .into_iter()
        .chain((1..=MAX_INDEX).filter(move |n| Some(*n) != preferred))
}

/// State shared by a `HostNetwork` and its pod sandboxes.
#[derive(Debug)]
pub(crate) struct Shared {
    pub index: u8,
    pub shim: Shim,
    ipam: Mutex<Ipam>,
    next_veth: AtomicU32,
}

impl Shared {
    pub(crate) fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 244, self.index, 1)
    }

    pub(crate) fn allocate_ip(&self) -> Result<Ipv4Addr, Error> {
        let mut ipam = self.ipam.lock().unwrap_or_else(|p| p.into_inner());
        ipam.allocate()
            .ok_or_else(|| Error::PodIpsExhausted(format!("10.244.{}.0/24", self.index)))
    }

    pub(crate) fn release_ip(&self, ip: Ipv4Addr) -> bool {
        let mut ipam = self.ipam.lock().unwrap_or_else(|p| p.into_inner());
        ipam.release(ip)
    }

    pub(crate) fn next_veth(&self) -> String {
        veth_name(self.index, self.next_veth.fetch_add(1, Ordering::Relaxed))
    }
}

/// The host network of one localkube instance. Delete it with [`HostNetwork::release`]; dropping
/// it deletes the bridge too, as a best effort.
#[derive(Debug)]
pub struct HostNetwork {
    pub(crate) shared: Arc<Shared>,
    /// Held, never read: the lock on `net-<N>.lock` lives as long as this file is open.
    _lock: File,
    released: bool,
}

impl HostNetwork {
    /// Takes instance index `preferred` if it is free, else the first free one in 1..=250, and
    /// (re)creates its bridge `lkbr<N>` with the gateway `10.244.N.1/24`. `shim` is how pods'
    /// processes are started (see [`Shim`]).
    pub async fn claim(preferred: Option<u8>, shim: Shim) -> Result<HostNetwork, Error> {
        if let Some(n) = preferred
            && !(1..=MAX_INDEX).contains(&n)
        {
            return Err(Error::InvalidIndex(n));
        }
        std::fs::create_dir_all(LOCK_DIR)
            .map_err(|e| Error::io(format!("creating {LOCK_DIR}"), e))?;
        let (index, lock) = lock_first_free(preferred)?;
        let shared = Arc::new(Shared {
            index,
            shim,
            ipam: Mutex::new(Ipam::new(index)),
            next_veth: AtomicU32::new(0),
        });
        let mut net = HostNetwork {
            shared,
            _lock: lock,
            released: false,
        };
        if let Err(e) = net.build_bridge().await {
            net.released = true;
            delete_links(index).await.ok();
            return Err(e);
        }
        Ok(net)
    }

    async fn build_bridge(&self) -> Result<(), Error> {
        let bridge = self.bridge_name();
        delete_links(self.index()).await?;
        ip(&["link", "add", &bridge, "type", "bridge"]).await?;
        // An address of its own, set once: without one a Linux bridge takes the lowest of its
        // ports' MACs and changes it as pods come and go, and every pod's ARP entry for its
        // gateway then names a MAC nobody has until it is probed again (seconds of DNS, Service
        // proxy and API server traffic lost: the stalls of issue 24's benches).
        ip(&["link", "set", &bridge, "address", &bridge_mac(self.index())]).await?;
        let gateway = format!("{}/24", self.gateway());
        ip(&["addr", "add", &gateway, "dev", &bridge]).await?;
        ip(&["link", "set", &bridge, "up"]).await
    }

    pub fn index(&self) -> u8 {
        self.shared.index
    }

    /// `10.244.N.1`: on the bridge, the pods' default route, and where host services (DNS, the
    /// Service proxy) listen for pods.
    pub fn gateway(&self) -> Ipv4Addr {
        self.shared.gateway()
    }

    /// `10.244.N.0/24`.
    pub fn pod_cidr(&self) -> String {
        format!("10.244.{}.0/24", self.index())
    }

    /// `10.96.N.0/24`.
    pub fn service_cidr(&self) -> String {
        format!("10.96.{}.0/24", self.index())
    }

    /// `lkbr<N>`.
    pub fn bridge_name(&self) -> String {
        bridge_name(self.index())
    }

    /// Puts a ClusterIP on the bridge as a /32, so a host listener on `ip:port` is reachable from
    /// host processes directly and from pods through their default route. Idempotent.
    pub async fn add_service_ip(&self, service_ip: Ipv4Addr) -> Result<(), Error> {
        self.check_service_ip(service_ip)?;
        let addr = format!("{service_ip}/32");
        ip(&["addr", "replace", &addr, "dev", &self.bridge_name()]).await
    }

    /// Removes a ClusterIP added by `add_service_ip`; removing an absent one is not an error.
    pub async fn remove_service_ip(&self, service_ip: Ipv4Addr) -> Result<(), Error> {
        self.check_service_ip(service_ip)?;
        let addr = format!("{service_ip}/32");
        ip_tolerant(
            &["addr", "del", &addr, "dev", &self.bridge_name()],
            &["Cannot assign requested address", "Address not found"],
        )
        .await
    }

    fn check_service_ip(&self, service_ip: Ipv4Addr) -> Result<(), Error> {
        let [a, b, c, _] = service_ip.octets();
        if (a, b, c) == (10, 96, self.index()) {
            Ok(())
        } else {
            Err(Error::OutsideServiceCidr {
                ip: service_ip,
                cidr: self.service_cidr(),
            })
        }
    }

    /// A pod IP for a caller that manages its own interfaces; `create_sandbox` takes one itself.
    pub fn allocate_pod_ip(&self) -> Result<Ipv4Addr, Error> {
        self.shared.allocate_ip()
    }

    /// Returns an IP from `allocate_pod_ip`; false if it was not allocated.
    pub fn release_pod_ip(&self, pod_ip: Ipv4Addr) -> bool {
        self.shared.release_ip(pod_ip)
    }

    /// Deletes the bridge (with its Service addresses) and any pod veth still attached, then gives
    /// up the index. Pods should be destroyed first: a pod left running loses its network.
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        delete_links(self.index()).await
    }
}

impl Drop for HostNetwork {
    fn drop(&mut self) {
        if !self.released {
            // Synchronous and best effort: Drop cannot await, and the next claim of this index
            // rebuilds the bridge anyway.
            let _ = std::process::Command::new("ip")
                .args(["link", "del", &self.bridge_name()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

fn lock_first_free(preferred: Option<u8>) -> Result<(u8, File), Error> {
    for n in candidates(preferred) {
        let path = format!("{LOCK_DIR}/net-{n}.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {path}"), e))?;
        match file.try_lock() {
            Ok(()) => return Ok((n, file)),
            Err(std::fs::TryLockError::WouldBlock) => continue,
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::io(format!("locking {path}"), e));
            }
        }
    }
    Err(Error::NoFreeIndex)
}

/// Deletes instance `index`'s bridge and pod veths (deleting a veth's host end deletes both).
async fn delete_links(index: u8) -> Result<(), Error> {
    for link in leftover_links(&link_names().await?, index) {
        ip_tolerant(&["link", "del", &link], LINK_ALREADY_GONE).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz() {
        assert_eq!(veth_name(250, 99_999_999), "lkv250x99999999");
        assert_eq!(veth_name(250, 99_999_999).len(), 15);
        assert_eq!(veth_name(3, 100_000_001), "lkv3x1");
        assert_eq!(bridge_name(17), "lkbr17");
        assert_eq!(bridge_mac(17), "02:6c:6b:62:00:11");
    }

    #[test]
    fn leftovers_are_only_this_instances() {
        let names: Vec<String> = [
            "lo", "lkbr1", "lkbr12", "lkv1x0", "lkv1x17", "lkv12x0", "lkv1x", "lkv1xa", "eth0",
        ]
        .map(String::from)
        .into();
        assert_eq!(leftover_links(&names, 1), ["lkbr1", "lkv1x0", "lkv1x17"]);
        assert_eq!(leftover_links(&names, 12), ["lkbr12", "lkv12x0"]);
        assert!(leftover_links(&names, 2).is_empty());
    }

    #[test]
    fn preferred_index_first_then_the_rest_once() {
        let order: Vec<u8> = candidates(Some(5)).collect();
        assert_eq!(order[..3], [5, 1, 2]);
        assert_eq!(order.len(), 250);
        assert_eq!(order.iter().filter(|n| **n == 5).count(), 1);
        assert_eq!(candidates(None).next(), Some(1));
    }
}
