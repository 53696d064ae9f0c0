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
pub mod status_report;
mod volumes;
mod worker;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use agent::run;
use localkube_podspec::image_map::ImageMap;
use localkube_sandbox::HostNetwork;
/// The kubelet's fsGroup ownership, also applied by the real node's claim ownership (localkube).
pub use volumes::{MountError, set_volume_ownership};

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
    pub volume_dirs: VolumeDirs,
}

/// Where the provisioner's volumes really are: the host-path provisioner names a PV's directory
/// under `provisioner_path`, which exists only in kube-controller-manager's mount namespace; the
/// same directory is `host_dir` on the host.
#[derive(Debug, Clone)]
pub struct VolumeDirs {
    pub provisioner_path: PathBuf,
    pub host_dir: PathBuf,
}

impl VolumeDirs {
    /// The host directory of a PersistentVolume's path.
    pub fn host_path(&self, pv_path: &Path) -> PathBuf {
        match pv_path.strip_prefix(&self.provisioner_path) {
            Ok(rest) => self.host_dir.join(rest),
            Err(_) => pv_path.to_path_buf(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("watching pods: {0}")]
    Watch(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioner_paths_map_to_the_host_directory_and_others_stay() {
        let dirs = VolumeDirs {
            provisioner_path: "/tmp/hostpath_pv".into(),
            host_dir: "/state/hostpath_pv".into(),
        };
        assert_eq!(
            dirs.host_path(Path::new("/tmp/hostpath_pv/0b1c")),
            PathBuf::from("/state/hostpath_pv/0b1c")
        );
        // A prefix of the name is not the directory.
        assert_eq!(
            dirs.host_path(Path::new("/tmp/hostpath_pvx/0b1c")),
            PathBuf::from("/tmp/hostpath_pvx/0b1c")
        );
        assert_eq!(
            dirs.host_path(Path::new("/mnt/local/disk1")),
            PathBuf::from("/mnt/local/disk1")
        );
    }
}
