//! The localkube node agent: the kubelet of the single node `localkube`.
//!
//! ```text
//!   API (watch pods with spec.nodeName=<node>)
//!        │
//!   agent::run ── one PodWorker task per pod uid ──┬─ sandbox (localkube-sandbox): netns, IP,
//!                                                   │  containers as processes, exec, logs
//!                                                   ├─ what to run (localkube-podspec): env,
//!                                                   │  argv, volume files, probes, back-off
//!                                                   └─ status (localkube-podspec::status) →
//!                                                      PATCH pods/<name>/status
//! ```
//! The decisions (what the kubelet would derive from a Pod) are pure functions in
//! `localkube-podspec`; this crate observes, acts and reports. Every sync of a pod starts from
//! what it observes (the Pod object, its processes), so a lost event is repaired by the next
//! tick.

mod agent;
pub mod kubelet_api;
pub mod logs;
mod lookups;
mod probe;
pub mod registration;
mod volumes;
mod worker;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;

pub use agent::run;
use localkube_podspec::image_map::ImageMap;
use localkube_sandbox::HostNetwork;

/// What the node agent needs from `localkube up`.
pub struct NodeOptions {
    pub node_name: String,
    /// Per-pod directories (`<root>/pods/<uid>/...`: volumes, /etc files).
    pub root: PathBuf,
    /// Container logs, `<logs>/<ns>_<pod>_<uid>/<container>/<restartCount>.log` (what
    /// `pods/log` reads).
    pub logs_dir: PathBuf,
    pub images: ImageMap,
    pub network: Arc<HostNetwork>,
    /// The cluster DNS server pods get in resolv.conf.
    pub dns_server: Ipv4Addr,
    pub cluster_domain: String,
    /// The node's address as pods see it (`status.hostIP`).
    pub host_ip: Ipv4Addr,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("watching pods: {0}")]
    Watch(String),
}
