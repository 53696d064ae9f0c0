//! A pod sandbox: a pause process holding the pod's network and UTS namespaces, with `lo` up and
//! a veth to the bridge (`eth0`, the pod IP /24, default route via the gateway). Containers join
//! these namespaces; the veth goes away with the namespace.

use std::net::Ipv4Addr;
use std::sync::Arc;

use tokio::process::Child;

use crate::error::Error;
use crate::host::{HostNetwork, Shared};
use crate::ip::{LINK_ALREADY_GONE, ip, ip_batch_in_netns, ip_tolerant};
use crate::launch::Output;
use crate::netns::{kill_all_in, netns_id};
use crate::wire::{PauseRequest, Report, Role};

/// What the node agent asks for.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// Names the pod in `ps` output (the shim's label); e.g. `<namespace>_<name>_<uid>`.
    pub id: String,
    /// The pod's hostname (`spec.hostname` or the pod name, at most 63 bytes).
    pub hostname: String,
}

/// A running pod sandbox. Destroy it with [`PodSandbox::destroy`]; dropping it kills the pause
/// process as a best effort.
#[derive(Debug)]
pub struct PodSandbox {
    pub(crate) id: String,
    pub(crate) net: Arc<Shared>,
    ip: Ipv4Addr,
    veth: String,
    pause: Child,
    pause_pid: u32,
    /// (device, inode) of the pod's network namespace: how processes are recognised as the pod's.
    netns: (u64, u64),
    destroyed: bool,
}

impl HostNetwork {
    /// Starts a pod sandbox: pause process, namespaces, IP, veth and routes.
    pub async fn create_sandbox(&self, spec: SandboxSpec) -> Result<PodSandbox, Error> {
        let net = Arc::clone(&self.shared);
        let ip = net.allocate_ip()?;
        let request = PauseRequest {
            parent: std::process::id(),
            hostname: spec.hostname.clone(),
        };
        let started = match net
            .shim
            .start(Role::Pause, &spec.id, &request, Output::Null)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                net.release_ip(ip);
                return Err(Error::Shim(e));
            }
        };
        let pause = match (started.report, started.child) {
            (Some(Report::Ready), child) => child,
            (other, _) => {
                net.release_ip(ip);
                return Err(Error::Shim(match other {
                    Some(Report::Failed(f)) => crate::error::SpawnError::from(f).to_string(),
                    _ => "the pause process exited without reporting ready".into(),
                }));
            }
        };
        let mut sandbox = PodSandbox {
            id: spec.id,
            veth: net.next_veth(),
            net,
            ip,
            pause_pid: pause.id().unwrap_or(0),
            pause,
            netns: (0, 0),
            destroyed: false,
        };
        // On error `sandbox` drops here: pause killed, IP released, veth gone with the netns.
        sandbox.netns = netns_id(&sandbox.pause_pid.to_string())
            .map_err(|e| Error::io("reading the pause process's network namespace", e))?;
        sandbox.wire_network(self.gateway()).await?;
        Ok(sandbox)
    }
}

impl PodSandbox {
    async fn wire_network(&self, gateway: Ipv4Addr) -> Result<(), Error> {
        let pid = self.pause_pid.to_string();
        let bridge = crate::host::bridge_name(self.net.index);
        ip(&[
            "link", "add", &self.veth, "type", "veth", "peer", "name", "eth0", "netns", &pid,
        ])
        .await?;
        ip(&["link", "set", &self.veth, "master", &bridge, "up"]).await?;
        ip_batch_in_netns(
            self.pause_pid,
            &[
                "link set lo up".to_string(),
                "link set eth0 up".to_string(),
                format!("addr add {}/24 dev eth0", self.ip),
                format!("route add default via {gateway} dev eth0"),
            ],
        )
        .await
    }

    /// The pod IP.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The pause process, whose namespaces are the pod's.
    pub fn pid(&self) -> u32 {
        self.pause_pid
    }

    /// True when `pid` runs in this pod's network namespace.
    pub(crate) fn owns(&self, pid: u32) -> bool {
        netns_id(&pid.to_string()).is_ok_and(|id| id == self.netns)
    }

    /// Kills every process in the pod (containers still running, exec'd commands, the pause
    /// process), deletes the veth and frees the IP. Containers should be stopped gracefully first.
    pub async fn destroy(mut self) -> Result<(), Error> {
        self.destroyed = true;
        self.kill_all();
        let _ = self.pause.wait().await;
        let deleted = ip_tolerant(&["link", "del", &self.veth], LINK_ALREADY_GONE).await;
        self.net.release_ip(self.ip);
        deleted
    }

    /// SIGKILLs every process of the pod, the pause process included.
    fn kill_all(&self) {
        // (0, 0): the sandbox failed before its namespace was known; only `pause` to kill.
        if self.netns != (0, 0) {
            kill_all_in(self.netns, None);
        }
    }
}

impl Drop for PodSandbox {
    fn drop(&mut self) {
        if !self.destroyed {
            self.kill_all();
            let _ = self.pause.start_kill();
            self.net.release_ip(self.ip);
        }
    }
}
