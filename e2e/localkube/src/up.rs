//! `localkube up`: start etcd and the upstream control plane, then the node agent, DNS and
//! Service proxy; write the kubeconfig once ready, and stop everything on SIGINT/SIGTERM.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine;

use crate::etcd::EtcdProcess;
use crate::pki::Pki;

#[derive(Debug, Clone)]
pub struct UpOptions {
    pub state_dir: PathBuf,
    pub address: IpAddr,
    pub port: u16,
    pub etcd_binary: PathBuf,
    /// Serve the API alone (no controllers, node agent, DNS or proxy).
    pub api_only: bool,
    /// Where the etcd binaries of the default image map are (`etcd-3.5`, `etcdctl-3.5`,
    /// `etcdutl-3.5`, `etcd-3.4`, `etcdctl-3.4`: the layout `make deps` creates).
    pub tools_dir: Option<PathBuf>,
    /// An image map file replacing the default one.
    pub image_map: Option<PathBuf>,
    /// Where the upstream binaries are (default: `tools_dir`, where `make deps` puts them).
    pub kube_bin_dir: Option<PathBuf>,
    /// The CPUs the node advertises (default: the machine's; our node agent only).
    pub node_cpu: Option<String>,
    /// Which node runs the pods.
    pub node: NodeKind,
    /// With [`NodeKind::Kubelet`]: where `make node-deps` put its binaries (default: tools_dir).
    pub node_bin_dir: Option<PathBuf>,
    /// With [`NodeKind::Kubelet`]: OCI tarballs imported into containerd (the pause image too).
    pub node_images: Vec<PathBuf>,
}

/// The node that runs the pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NodeKind {
    /// Our node agent (e2e/node): containers as host processes in namespaces.
    Agent,
    /// The upstream kubelet with containerd and runc (`make node-deps`; [`crate::realnode`]).
    Kubelet,
}

pub fn kubeconfig(pki: &Pki, server_url: &str) -> String {
    kubeconfig_for(
        pki,
        server_url,
        "localkube-admin",
        &pki.admin_cert,
        &pki.admin_key,
    )
}

/// A kubeconfig (certificates inline) for the identity of `cert`.
pub fn kubeconfig_for(pki: &Pki, server_url: &str, user: &str, cert: &str, key: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: localkube\n  cluster:\n    server: {server_url}\n    certificate-authority-data: {}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: localkube\n  context:\n    cluster: localkube\n    user: {user}\n    namespace: default\ncurrent-context: localkube\npreferences: {{}}\n",
        b64(&pki.ca_cert),
        b64(cert),
        b64(key),
    )
}

fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

/// `up` on the upstream control plane: etcd, kube-apiserver, kube-controller-manager and
/// kube-scheduler (see [`crate::upstream`]), then the node agent, DNS and Service proxy joined to
/// it as the node.
/// Stops what runs under the node, in order: our node components (their Pods' network stays
/// until the end), the control plane, etcd, then the network is released.
async fn stop_below_the_node(
    components: Option<crate::components::Components>,
    control_plane: crate::upstream::ControlPlane,
    etcd: EtcdProcess,
) {
    let network = match components {
        Some(components) => Some(components.stop().await),
        None => None,
    };
    control_plane.stop().await;
    etcd.stop().await;
    if let Some(network) = network {
        network.release().await;
    }
}

pub async fn up(opts: UpOptions) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    std::fs::create_dir_all(&opts.state_dir)?;
    let kubeconfig_path = opts.state_dir.join("kubeconfig");
    let _ = std::fs::remove_file(&kubeconfig_path);
    let bin_dir = opts
        .kube_bin_dir
        .clone()
        .or_else(|| opts.tools_dir.clone())
        .ok_or("--kube-bin-dir (or --tools-dir) must name where kube-apiserver is")?;
    crate::upstream::binaries(&bin_dir)?;
    let node_bin_dir = opts
        .node_bin_dir
        .clone()
        .or_else(|| opts.tools_dir.clone())
        .unwrap_or_default();
    let real_node = opts.node == NodeKind::Kubelet;
    if real_node {
        if opts.api_only {
            return Err("--node kubelet needs the whole control plane, not --api-only".into());
        }
        crate::realnode::check_binaries(&node_bin_dir)?;
        if opts.node_cpu.is_some() {
            tracing::warn!(
                "--node-cpu is ignored with --node kubelet: the kubelet advertises the machine's CPUs"
            );
        }
    }
    let network = if opts.api_only {
        None
    } else {
        Some(crate::components::claim_network(&opts.state_dir).await?)
    };
    let index = network.as_ref().map(|n| n.index()).unwrap_or(0);
    let service_cidr = crate::services::ServiceCidr::new(index);
    // With a node network the API server listens on the node's gateway: kube-apiserver publishes
    // its address as the `kubernetes` Service's endpoint, which may not be a loopback address.
    let api_address: IpAddr = match &network {
        Some(net) => net.gateway().into(),
        None => opts.address,
    };
    let mut serving_ips = vec![
        opts.address,
        api_address,
        service_cidr.kubernetes_ip().into(),
    ];
    // The kubelet serves on the node's own IP (its network namespace), which kube-apiserver
    // verifies (`--kubelet-certificate-authority`).
    let node_addresses = network
        .as_ref()
        .map(|n| crate::realnode::NodeAddresses::new(n.gateway()));
    if let Some(a) = node_addresses.filter(|_| real_node) {
        serving_ips.push(a.node_ip.into());
    }
    let pki = Pki::load_or_generate(&opts.state_dir.join("pki"), &serving_ips)?;
    let etcd = EtcdProcess::start(&opts.etcd_binary, &opts.state_dir, opts.address).await?;
    std::fs::write(opts.state_dir.join("etcd-endpoint"), &etcd.endpoint)?;
    let upstream_opts = crate::upstream::UpstreamOptions {
        bin_dir,
        state_dir: opts.state_dir.clone(),
        etcd_endpoint: etcd.endpoint.clone(),
        address: api_address,
        port: opts.port,
        advertise: network.is_some(),
        component_address: opts.address,
        service_cidr: service_cidr.to_string(),
        api_only: opts.api_only,
    };
    let mut control_plane = crate::upstream::ControlPlane::start(&upstream_opts, &pki).await?;
    let url = control_plane.url.clone();
    let admin_kubeconfig = kubeconfig(&pki, &url);
    let client = crate::components::kube_client(&admin_kubeconfig).await?;
    crate::upstream::bootstrap(&client).await?;
    let kubelet_version = client.apiserver_version().await?.git_version;
    let components = match network {
        Some(network) => Some(
            crate::components::Components::start(crate::components::ComponentOptions {
                state_dir: opts.state_dir.clone(),
                kubeconfigs: crate::components::Kubeconfigs {
                    node: kubeconfig_for(&pki, &url, "node", &pki.node_cert, &pki.node_key),
                    proxy: kubeconfig_for(&pki, &url, "proxy", &pki.proxy_cert, &pki.proxy_key),
                    dns: kubeconfig_for(&pki, &url, "dns", &pki.dns_cert, &pki.dns_key),
                },
                network,
                // The real node brings its own: the kubelet, kube-proxy and CoreDNS.
                run_node_agent: !real_node,
                run_dns_and_proxy: !real_node,
                logs_dir: opts.state_dir.join("node/logs"),
                tools_dir: opts.tools_dir.clone(),
                image_map: opts.image_map.clone(),
                node: crate::components::NodeIdentity {
                    kubelet_version,
                    cpu: opts.node_cpu.clone(),
                    kubelet_tls: localkube_node::kubelet_api::KubeletTls {
                        ca_pem: pki.ca_cert.clone(),
                        cert_pem: pki.kubelet_serving_cert.clone(),
                        key_pem: pki.kubelet_serving_key.clone(),
                    },
                },
            })
            .await?,
        ),
        None => None,
    };
    let started = match &components {
        Some(components) if real_node => {
            let network = components.network();
            let options = crate::realnode::RealNodeOptions {
                state_dir: opts.state_dir.clone(),
                bin_dir: node_bin_dir.clone(),
                images: opts.node_images.clone(),
                bridge: network.bridge_name(),
                addresses: crate::realnode::NodeAddresses::new(network.gateway()),
                service_cidr: service_cidr.to_string(),
                index: network.index(),
                node_name: crate::components::NODE_NAME.to_string(),
                cluster_domain: crate::components::CLUSTER_DOMAIN.to_string(),
                kubeconfig: kubeconfig_for(&pki, &url, "node", &pki.node_cert, &pki.node_key),
                proxy_kubeconfig: kubeconfig_for(
                    &pki,
                    &url,
                    "proxy",
                    &pki.proxy_cert,
                    &pki.proxy_key,
                ),
                dns_kubeconfig: kubeconfig_for(&pki, &url, "dns", &pki.dns_cert, &pki.dns_key),
                ca_pem: pki.ca_cert.clone(),
                serving_cert_pem: pki.kubelet_serving_cert.clone(),
                serving_key_pem: pki.kubelet_serving_key.clone(),
            };
            Some(crate::realnode::RealNode::start(options).await)
        }
        _ => None,
    };
    let mut kubelet = match started {
        Some(Ok(node)) => Some(node),
        Some(Err(e)) => {
            stop_below_the_node(components, control_plane, etcd).await;
            return Err(e);
        }
        None => None,
    };
    // fsGroup on the claims' host-path volumes (what the kubelet leaves to the volume driver).
    let claim_ownership = kubelet.as_ref().map(|_| {
        tokio::spawn(crate::realnode::own_claimed_volumes(
            client.clone(),
            crate::components::NODE_NAME.to_string(),
            opts.state_dir.clone(),
        ))
    });
    write_atomically(&kubeconfig_path, &admin_kubeconfig)?;
    tracing::info!(%url, kubeconfig = %kubeconfig_path.display(), "localkube is serving (upstream control plane)");
    println!(
        "localkube is serving at {url}\nexport KUBECONFIG={}",
        kubeconfig_path.display()
    );

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut check = tokio::time::interval(std::time::Duration::from_secs(1));
    let failure = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break None,
            _ = term.recv() => break None,
            _ = check.tick() => {
                if let Some(exited) = control_plane.check_running() {
                    tracing::error!(component = %exited, "a control plane component exited; stopping");
                    break Some(exited);
                }
                if let Some(exited) = kubelet.as_mut().and_then(|k| k.check_running()) {
                    tracing::error!(component = %exited, "a node component exited; stopping");
                    break Some(exited);
                }
            }
        }
    };
    tracing::info!("stopping");
    let _ = std::fs::remove_file(&kubeconfig_path);
    if let Some(task) = claim_ownership {
        task.abort();
    }
    if let Some(kubelet) = kubelet {
        kubelet.stop().await;
    }
    stop_below_the_node(components, control_plane, etcd).await;
    match failure {
        Some(exited) => {
            Err(format!("{exited}; see {}", opts.state_dir.join("logs").display()).into())
        }
        None => Ok(()),
    }
}
