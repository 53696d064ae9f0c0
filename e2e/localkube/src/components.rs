//! Everything `localkube up` runs beyond the upstream control plane: the node network, the node
//! agent (Node registration with Lease heartbeats, the kubelet API, the pods), cluster DNS and
//! the Service proxy. Each talks to kube-apiserver through kube-rs with the admin credentials.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use localkube_sandbox::{HostNetwork, Shim};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The one node's name (the Node object, `spec.nodeName` of every Pod, `system:node:<name>`).
pub const NODE_NAME: &str = "localkube";
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// How long stopping may take for all pods together before localkube gives up waiting (their
/// processes die with it anyway: every container carries a parent-death signal).
const STOP_TIMEOUT: Duration = Duration::from_secs(40);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Claim this instance's node network: the index recorded in the state directory if there is
/// one (its Services' ClusterIPs and the serving certificate depend on it), else the first free.
pub async fn claim_network(state_dir: &Path) -> Result<HostNetwork, BoxError> {
    let index_file = state_dir.join("network-index");
    let preferred = std::fs::read_to_string(&index_file)
        .ok()
        .and_then(|s| s.trim().parse::<u8>().ok());
    let shim = Shim {
        program: std::env::current_exe()?,
        leading_args: vec!["sandbox-shim".into()],
    };
    let network = HostNetwork::claim(preferred, shim).await.map_err(|e| match preferred {
        Some(n) => format!(
            "this state directory uses node network {n} (Service IPs 10.96.{n}.0/24), which is not free: {e}"
        ),
        None => format!("claiming a node network: {e}"),
    })?;
    if let Some(n) = preferred
        && network.index() != n
    {
        let got = network.index();
        let _ = network.release().await;
        return Err(format!(
            "this state directory uses node network {n} (Service IPs 10.96.{n}.0/24), which another localkube holds (node network {got} was free); stop that one first"
        )
        .into());
    }
    std::fs::write(&index_file, network.index().to_string())?;
    Ok(network)
}

pub struct ComponentOptions {
    pub state_dir: PathBuf,
    /// What each component authenticates as.
    pub kubeconfigs: Kubeconfigs,
    pub network: HostNetwork,
    /// false with `--node kubelet`: the upstream kubelet registers the Node and runs the pods.
    pub run_node_agent: bool,
    /// Whether our cluster DNS and Service proxy run (not beside the real node's CoreDNS and
    /// kube-proxy).
    pub run_dns_and_proxy: bool,
    pub logs_dir: PathBuf,
    pub tools_dir: Option<PathBuf>,
    pub image_map: Option<PathBuf>,
    /// What the node registers itself with and serves the kubelet API with.
    pub node: NodeIdentity,
}

/// Each component's own identity, as on a real cluster: the node agent is
/// `system:node:localkube` (Node authorizer and NodeRestriction: its own Node and Lease, the
/// pods bound to it and what they reference), the proxy `system:kube-proxy`, DNS
/// [`crate::pki::DNS_USER`]. Kubeconfig YAML with inline certificates.
pub struct Kubeconfigs {
    pub node: String,
    pub proxy: String,
    pub dns: String,
}

/// What the node needs to register itself and serve the kubelet API.
pub struct NodeIdentity {
    pub kubelet_version: String,
    /// The CPUs the node advertises (default: the machine's).
    pub cpu: Option<String>,
    pub kubelet_tls: localkube_node::kubelet_api::KubeletTls,
}

/// The kubelet API's port, as the kubelet's default.
pub const KUBELET_PORT: u16 = 10250;

pub struct Components {
    network: Arc<HostNetwork>,
    node_shutdown: watch::Sender<bool>,
    node: Option<JoinHandle<()>>,
    background: Vec<JoinHandle<()>>,
}

/// `ServiceAddresses` of the proxy: ClusterIPs as /32 addresses on the instance's bridge.
struct BridgeAddresses {
    bridge: String,
}

impl localkube_network::ServiceAddresses for BridgeAddresses {
    fn add(&self, ip: Ipv4Addr) -> std::io::Result<()> {
        self.ip(&["addr", "replace", &format!("{ip}/32"), "dev", &self.bridge])
    }

    fn remove(&self, ip: Ipv4Addr) -> std::io::Result<()> {
        self.ip(&["addr", "del", &format!("{ip}/32"), "dev", &self.bridge])
    }
}

impl BridgeAddresses {
    fn ip(&self, args: &[&str]) -> std::io::Result<()> {
        let out = std::process::Command::new("ip").args(args).output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

pub async fn kube_client(kubeconfig: &str) -> Result<kube::Client, BoxError> {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

fn spawn_logged<F, E>(name: &'static str, fut: F) -> JoinHandle<()>
where
    F: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display,
{
    tokio::spawn(async move {
        match fut.await {
            Ok(()) => tracing::warn!(component = name, "stopped"),
            Err(e) => tracing::error!(component = name, error = %e, "failed"),
        }
    })
}

/// How often the runtime watchdog looks at the clock, and how late a look may be before it
/// says so: DNS, the Service proxy and the node agent share this process's runtime, so a task
/// that blocks a worker thread delays them all (a pod's DNS lookup timing out, an operator's
/// API call through the `kubernetes` Service stalling), and this names the moment.
const WATCHDOG_TICK: Duration = Duration::from_millis(100);
const WATCHDOG_LATE: Duration = Duration::from_millis(300);

/// Logs a warning whenever the runtime ran a timer more than [`WATCHDOG_LATE`] late.
async fn runtime_watchdog() -> Result<(), std::convert::Infallible> {
    loop {
        let before = tokio::time::Instant::now();
        tokio::time::sleep(WATCHDOG_TICK).await;
        let late = before.elapsed().saturating_sub(WATCHDOG_TICK);
        if late > WATCHDOG_LATE {
            tracing::warn!(
                late_ms = late.as_millis() as u64,
                "localkube's runtime ran a timer late: a task blocked its worker threads \
                 (cluster DNS, the Service proxy and the node agent waited as long)"
            );
        }
    }
}

impl Components {
    pub async fn start(opts: ComponentOptions) -> Result<Components, BoxError> {
        let client = kube_client(&opts.kubeconfigs.node).await?;
        let proxy_client = kube_client(&opts.kubeconfigs.proxy).await?;
        let dns_client = kube_client(&opts.kubeconfigs.dns).await?;
        let network = Arc::new(opts.network);
        let gateway = network.gateway();
        write_network_file(&opts.state_dir, &network)?;
        let images = crate::images::load(
            &opts.state_dir,
            opts.tools_dir.as_deref(),
            opts.image_map.as_deref(),
        )?;
        let mut background = vec![spawn_logged("runtime watchdog", runtime_watchdog())];
        if opts.run_node_agent {
            background.push(spawn_logged(
                "node registration",
                localkube_node::registration::run(
                    client.clone(),
                    localkube_node::registration::NodeRegistration {
                        name: NODE_NAME.to_string(),
                        internal_ip: gateway,
                        kubelet_port: KUBELET_PORT,
                        kubelet_version: opts.node.kubelet_version,
                        cpu: opts.node.cpu,
                    },
                ),
            ));
            background.push(spawn_logged(
                "kubelet API",
                localkube_node::kubelet_api::serve(
                    SocketAddr::new(gateway.into(), KUBELET_PORT),
                    opts.node.kubelet_tls,
                    client.clone(),
                    opts.logs_dir.clone(),
                ),
            ));
        }
        if opts.run_dns_and_proxy {
            background.extend([
                spawn_logged(
                    "cluster DNS",
                    localkube_network::run_dns(
                        dns_client,
                        localkube_network::DnsOptions {
                            listen: SocketAddr::new(gateway.into(), 53),
                            cluster_domain: CLUSTER_DOMAIN.to_string(),
                            upstream: None,
                        },
                    ),
                ),
                spawn_logged(
                    "service proxy",
                    localkube_network::run_proxy(
                        proxy_client,
                        Arc::new(BridgeAddresses {
                            bridge: network.bridge_name(),
                        }),
                    ),
                ),
            ]);
        }
        let (node_shutdown, shutdown_rx) = watch::channel(false);
        let node = opts.run_node_agent.then(|| {
            spawn_logged(
                "node agent",
                localkube_node::run(
                    client,
                    localkube_node::NodeOptions {
                        node_name: NODE_NAME.to_string(),
                        root: opts.state_dir.join("node"),
                        logs_dir: opts.logs_dir,
                        images,
                        network: network.clone(),
                        dns_server: gateway,
                        cluster_domain: CLUSTER_DOMAIN.to_string(),
                        host_ip: gateway,
                        volume_dirs: localkube_node::VolumeDirs {
                            provisioner_path: crate::upstream::HOSTPATH_PROVISIONER_DIR.into(),
                            host_dir: crate::upstream::provisioned_volumes_dir(&opts.state_dir),
                        },
                    },
                    shutdown_rx,
                ),
            )
        });
        Ok(Components {
            network,
            node_shutdown,
            node,
            background,
        })
    }

    /// The instance's node network (bridge, gateway, pod /24).
    pub fn network(&self) -> &HostNetwork {
        &self.network
    }

    /// Stop the pods (gracefully, bounded), then everything else, then remove the bridge.
    pub async fn stop(self) -> StoppedNetwork {
        let _ = self.node_shutdown.send(true);
        if let Some(node) = self.node
            && tokio::time::timeout(STOP_TIMEOUT, node).await.is_err()
        {
            tracing::warn!("pods did not stop in time; their processes die with localkube");
        }
        for task in &self.background {
            task.abort();
        }
        for task in self.background {
            let _ = task.await;
        }
        StoppedNetwork(self.network)
    }
}

/// The node network after the node stopped. Released last, once the control plane is gone too:
/// kube-apiserver listens on its gateway, and a next instance that claimed the same network while
/// the old API server still held `10.244.N.1:6443` could not start its own.
pub struct StoppedNetwork(Arc<HostNetwork>);

impl StoppedNetwork {
    pub async fn release(self) {
        match Arc::try_unwrap(self.0) {
            Ok(network) => {
                if let Err(e) = network.release().await {
                    tracing::warn!(error = %e, "releasing the node network");
                }
            }
            Err(_) => tracing::warn!("the node network is still in use; its bridge goes on drop"),
        }
    }
}

/// `state/network.json`: what `localkube run` and tests need to know about this instance.
fn write_network_file(state_dir: &Path, network: &HostNetwork) -> std::io::Result<()> {
    let info = serde_json::json!({
        "index": network.index(),
        "bridge": network.bridge_name(),
        "gateway": network.gateway().to_string(),
        "dnsServer": network.gateway().to_string(),
        "clusterDomain": CLUSTER_DOMAIN,
        "podCIDR": network.pod_cidr(),
        "serviceCIDR": network.service_cidr(),
    });
    std::fs::write(
        state_dir.join("network.json"),
        serde_json::to_string_pretty(&info).unwrap_or_default(),
    )
}
