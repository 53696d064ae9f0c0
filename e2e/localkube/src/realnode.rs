//! `localkube up --node kubelet`: the real node (issue 23). Instead of our node agent, DNS and
//! Service proxy, the upstream kubelet runs the pods through containerd and runc, kube-proxy
//! (nftables mode) serves the Services and CoreDNS the cluster DNS, all built by `make node-deps`.
//!
//! The node has a network namespace of its own (containerd's, which the kubelet, kube-proxy and
//! the shims share), so kube-proxy's nftables rules and the pods' bridge never touch the host's
//! tables. It is joined to the instance's bridge by a veth (`eth0`, the node's IP
//! `10.244.<N>.2`); the pods get `10.244.<N>.128/25` on the bridge `cni0` inside it, routed from
//! the host through the node's IP, as is the Service CIDR (so the host reaches ClusterIPs through
//! kube-proxy too). CoreDNS runs on the host, on the instance's gateway `10.244.<N>.1:53` (where
//! kube-apiserver listens too), the pods' `clusterDNS`. See [`NodeAddresses`].
//!
//! Two workarounds for these machines (e2e/README.md, "Real node"):
//! - root here lacks CAP_SYS_RESOURCE, so runc cannot lower a sandbox's oom_score_adj below
//!   containerd's: containerd runs with `restrict_oom_score_adj`;
//! - the kubelet would set `vm.overcommit_memory`, `kernel.panic`, `kernel.panic_on_oops` for the
//!   whole machine: it runs with `protectKernelDefaults` in a mount namespace of its own where
//!   those /proc/sys files are files holding the values it wants, so the host's stay as they are.
//!
//! containerd and the kubelet share that one private mount namespace (containerd bind-mounts the
//! kubelet's volume mounts into containers, so it must see them); everything the node mounts
//! (overlay snapshots, secret tmpfs, network namespaces) lives and dies with it. All the node's
//! processes are in one cgroup, `localkube-<index>` (containerd, the kubelet and the shims in its
//! `node` child, the pods in its `kubepods`), which stopping empties and removes: nothing is left
//! running or mounted, and the host's /proc/sys is never written. cgroup v1 hierarchies only (these
//! machines').

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Child;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The sandbox image containerd pins; `make node-deps` builds it (e2e/upstream/pause).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The binaries `make node-deps` builds into .tools/bin.
const BINARIES: [&str; 7] = [
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "kubelet",
    "kube-proxy",
    "coredns",
];
/// What the kubelet's `protectKernelDefaults` requires (upstream `setupKernelTunables`), served
/// to it from files in its mount namespace.
const KERNEL_TUNABLES: [(&str, &str); 4] = [
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
];
/// The cgroup v1 hierarchies the kubelet and runc use (the node's cgroups are removed on stop).
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The hierarchy that lists the node's processes.
const PIDS_HIERARCHY: &str = "/sys/fs/cgroup/pids";

/// The node's addresses on the instance's network `10.244.<N>.0/24` (the host's bridge holds
/// the gateway `.1`): the node's own IP `.2` (its veth `eth0`), and the pods' half `.128/25`
/// behind it (the bridge `cni0` in the node's namespace, gateway `.129`). Our node agent would
/// hand out the whole /24, but it does not run beside the kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeAddresses {
    /// The instance's gateway on the host's bridge: kube-apiserver and CoreDNS listen there.
    pub gateway: Ipv4Addr,
    /// The node's IP (the kubelet's `--node-ip` and serving address).
    pub node_ip: Ipv4Addr,
    /// The pods' range and its gateway (the node's `cni0`).
    pub pod_range: (Ipv4Addr, u8),
    pub pod_gateway: Ipv4Addr,
}

impl NodeAddresses {
    pub fn new(gateway: Ipv4Addr) -> NodeAddresses {
        let [a, b, c, _] = gateway.octets();
        NodeAddresses {
            gateway,
            node_ip: Ipv4Addr::new(a, b, c, 2),
            pod_range: (Ipv4Addr::new(a, b, c, 128), 25),
            pod_gateway: Ipv4Addr::new(a, b, c, 129),
        }
    }

    pub fn pod_cidr(&self) -> String {
        format!("{}/{}", self.pod_range.0, self.pod_range.1)
    }
}

pub struct RealNodeOptions {
    pub state_dir: PathBuf,
    /// Where `make node-deps` put containerd, containerd-shim-runc-v2, runc, ctr, the kubelet,
    /// kube-proxy and CoreDNS.
    pub bin_dir: PathBuf,
    /// OCI tarballs imported into containerd before the kubelet starts (the pause image first).
    pub images: Vec<PathBuf>,
    /// The instance's bridge on the host (the node's veth joins it) and the addresses on it.
    pub bridge: String,
    pub addresses: NodeAddresses,
    /// The instance's Service CIDR (`10.96.<N>.0/24`), routed from the host to the node.
    pub service_cidr: String,
    /// The instance's network index: names the node's cgroup, so parallel instances differ.
    pub index: u8,
    pub node_name: String,
    pub cluster_domain: String,
    /// Kubeconfig YAML of `system:node:<name>`.
    pub kubeconfig: String,
    /// Kubeconfig YAML of `system:kube-proxy` (bound to `system:node-proxier`).
    pub proxy_kubeconfig: String,
    /// Kubeconfig YAML of cluster DNS's identity (`localkube:dns`, CoreDNS's rights).
    pub dns_kubeconfig: String,
    pub ca_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
}

pub struct RealNode {
    containerd: Child,
    /// None until started (a failed start stops what did start).
    coredns: Option<Child>,
    kubelet: Option<Child>,
    kube_proxy: Option<Child>,
    /// The host's routes to the node (`ip route` arguments after `del`), removed on stop.
    host_routes: Vec<Vec<String>>,
    /// `localkube-<index>`: the node's cgroup in every hierarchy. containerd and the kubelet are in
    /// its `node` child (the shims they start too), the pods under its `kubepods`, so the pids
    /// hierarchy lists every process of the node, whichever mount namespace it is in.
    cgroup: String,
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// Fails with what to run when a binary `make node-deps` builds is missing.
pub fn check_binaries(bin_dir: &Path) -> Result<(), BoxError> {
    for b in BINARIES {
        if !bin_dir.join(b).is_file() {
            return Err(format!(
                "--node kubelet: {} not found: run `make node-deps` (builds runc, containerd, the kubelet, kube-proxy and CoreDNS into .tools/bin), or pass --node-bin-dir",
                bin_dir.join(b).display()
            )
            .into());
        }
    }
    Ok(())
}

impl RealNode {
    /// The cgroup (pids hierarchy) of the node's own processes and the shims they start.
    fn node_cgroup(&self) -> PathBuf {
        Path::new(PIDS_HIERARCHY).join(&self.cgroup).join("node")
    }

    pub async fn start(opts: RealNodeOptions) -> Result<RealNode, BoxError> {
        check_binaries(&opts.bin_dir)?;
        let dir = opts.state_dir.join("realnode");
        let logs = opts.state_dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let d = |p: &str| dir.join(p);
        // Allocations of a previous run are stale: its pods' network namespaces died with it.
        let _ = std::fs::remove_dir_all(d("cni/ipam"));
        for sub in [
            "containerd/root",
            "containerd/state",
            "containerd/run",
            "cni/net.d",
            "cni/ipam",
            "cni/cache",
            "kubelet/root",
            "kubelet/logs",
            "kubelet/manifests",
            "kubelet/pki",
            "kube-proxy",
            "coredns",
            "sysctl",
        ] {
            std::fs::create_dir_all(d(sub))?;
        }
        let socket = d("containerd/containerd.sock");
        let _ = std::fs::remove_file(&socket);
        std::fs::write(
            d("containerd/config.toml"),
            containerd_config(&dir, &opts.bin_dir),
        )?;
        std::fs::write(
            d("cni/net.d/10-localkube.conflist"),
            cni_config(&opts, &d("cni/ipam")),
        )?;

        // The node's mount namespace: the kernel tunables the kubelet checks, containerd's
        // hard-coded /run/containerd (shim sockets) and libcni's cache kept in the state dir.
        let mut binds: Vec<(PathBuf, PathBuf)> = Vec::new();
        for (name, value) in KERNEL_TUNABLES {
            let file = d(&format!("sysctl/{}", name.replace('/', "_")));
            std::fs::write(&file, format!("{value}\n"))?;
            binds.push((file, PathBuf::from("/proc/sys").join(name)));
        }
        binds.push((d("containerd/run"), "/run/containerd".into()));
        binds.push((d("cni/cache"), "/var/lib/cni".into()));
        // The host-path provisioner's PVs name /tmp/hostpath_pv/...: the instance's volumes, as
        // kube-controller-manager sees them.
        binds.push((
            crate::upstream::provisioned_volumes_dir(&opts.state_dir),
            crate::upstream::HOSTPATH_PROVISIONER_DIR.into(),
        ));
        let bind_refs: Vec<(&Path, &Path)> = binds
            .iter()
            .map(|(s, t)| (s.as_path(), t.as_path()))
            .collect();
        let cgroup = format!("localkube-{}", opts.index);
        // A node of a localkube that was SIGKILLed on this network index may have left pods
        // running (their shims outlive containerd): they are this instance's to stop.
        let stale = processes_in_cgroup(&cgroup, true);
        if !stale.is_empty() {
            tracing::warn!(pids = ?stale, "stopping the processes of a previous node on this network");
            stop_cgroup(&cgroup).await;
        }
        // The node's cgroup parent in every hierarchy: the kubelet's cgroupRoot must exist.
        for hierarchy in cgroup_hierarchies() {
            std::fs::create_dir_all(hierarchy.join(&cgroup))?;
        }
        let node_cgroup = Path::new(PIDS_HIERARCHY).join(&cgroup).join("node");
        std::fs::create_dir_all(&node_cgroup)?;
        let path_env = format!(
            "{}:{}",
            opts.bin_dir.display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into())
        );
        let mut command =
            crate::shim::command_with_binds(&opts.bin_dir.join("containerd"), &bind_refs, true)?;
        command
            .arg("--config")
            .arg(d("containerd/config.toml"))
            .env("PATH", &path_env);
        // In the node's cgroup before it starts any shim (the kubelet is not running yet), so
        // they inherit it.
        let mut containerd = spawn_node_process(
            "containerd",
            &mut command,
            &logs.join("containerd.log"),
            &node_cgroup,
        )?;
        let ctr = Ctr {
            binary: opts.bin_dir.join("ctr"),
            socket: socket.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = containerd.try_wait()? {
                return Err(format!(
                    "containerd exited ({status}); see {}",
                    logs.join("containerd.log").display()
                )
                .into());
            }
            if socket.exists() && ctr.run(&["version"]).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "containerd did not serve {} within 30 s; see {}",
                    socket.display(),
                    logs.join("containerd.log").display()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // From here on a failure must stop containerd and remove the cgroups again.
        let mut node = RealNode {
            coredns: None,
            kubelet: None,
            kube_proxy: None,
            containerd,
            cgroup,
            host_routes: Vec::new(),
        };
        match node.start_rest(&opts, &dir, &ctr, &path_env).await {
            Ok(()) => Ok(node),
            Err(e) => {
                node.stop().await;
                Err(e)
            }
        }
    }

    /// After containerd: the node's network, CoreDNS, the kubelet, kube-proxy.
    async fn start_rest(
        &mut self,
        opts: &RealNodeOptions,
        dir: &Path,
        ctr: &Ctr,
        path_env: &str,
    ) -> Result<(), BoxError> {
        let netns = format!(
            "/proc/{}/ns/net",
            self.containerd.id().ok_or("containerd exited")?
        );
        self.host_routes = node_network(opts, &netns).await?;
        self.coredns = Some(self.start_coredns(opts, dir)?);
        self.kubelet = Some(self.start_kubelet(opts, dir, ctr, path_env).await?);
        self.kube_proxy = Some(self.start_kube_proxy(opts, dir, &netns, path_env)?);
        Ok(())
    }

    /// CoreDNS on the host, on the instance's gateway (the pods' `clusterDNS`; `localkube run`
    /// uses it too), with the cluster DNS identity's kubeconfig.
    fn start_coredns(&self, opts: &RealNodeOptions, dir: &Path) -> Result<Child, BoxError> {
        let d = |p: &str| dir.join(p);
        std::fs::write(d("coredns/kubeconfig"), &opts.dns_kubeconfig)?;
        std::fs::write(
            d("coredns/Corefile"),
            corefile(
                opts.addresses.gateway,
                &opts.cluster_domain,
                &d("coredns/kubeconfig"),
            ),
        )?;
        let mut command = crate::shim::command(&opts.bin_dir.join("coredns"))?;
        command.arg("-conf").arg(d("coredns/Corefile"));
        spawn_node_process(
            "CoreDNS",
            &mut command,
            &opts.state_dir.join("logs/coredns.log"),
            &self.node_cgroup(),
        )
    }

    /// kube-proxy in the node's network namespace (nftables mode: its own `kube-proxy` tables
    /// there), as `system:kube-proxy`.
    fn start_kube_proxy(
        &self,
        opts: &RealNodeOptions,
        dir: &Path,
        netns: &str,
        path_env: &str,
    ) -> Result<Child, BoxError> {
        let d = |p: &str| dir.join(p);
        std::fs::write(d("kube-proxy/kubeconfig"), &opts.proxy_kubeconfig)?;
        std::fs::write(
            d("kube-proxy/config.yaml"),
            kube_proxy_config(opts, &d("kube-proxy/kubeconfig")),
        )?;
        let mut command = crate::shim::command(Path::new("nsenter"))?;
        command
            .arg(format!("--net={netns}"))
            .arg("--")
            .arg(opts.bin_dir.join("kube-proxy"))
            .arg(format!(
                "--config={}",
                d("kube-proxy/config.yaml").display()
            ))
            .arg("--v=1")
            .env("PATH", path_env);
        spawn_node_process(
            "kube-proxy",
            &mut command,
            &opts.state_dir.join("logs/kube-proxy.log"),
            &self.node_cgroup(),
        )
    }

    async fn start_kubelet(
        &mut self,
        opts: &RealNodeOptions,
        dir: &Path,
        ctr: &Ctr,
        path_env: &str,
    ) -> Result<Child, BoxError> {
        let d = |p: &str| dir.join(p);
        for image in &opts.images {
            let started = Instant::now();
            ctr.run(&["-n", "k8s.io", "images", "import", &path_str(image)])
                .await
                .map_err(|e| format!("importing {} into containerd: {e}", image.display()))?;
            tracing::info!(image = %image.display(), secs = started.elapsed().as_secs_f32(), "image imported");
        }
        let images = ctr.run(&["-n", "k8s.io", "images", "ls", "-q"]).await?;
        if !images.lines().any(|l| l.trim() == PAUSE_IMAGE) {
            return Err(format!(
                "the sandbox image {PAUSE_IMAGE} is not in containerd: pass --node-image .tools/node/pause.tar (built by make node-deps)"
            )
            .into());
        }
        let pki = d("kubelet/pki");
        std::fs::write(pki.join("ca.crt"), &opts.ca_pem)?;
        std::fs::write(pki.join("kubelet.crt"), &opts.serving_cert_pem)?;
        std::fs::write(pki.join("kubelet.key"), &opts.serving_key_pem)?;
        std::fs::write(d("kubelet/kubeconfig"), &opts.kubeconfig)?;
        std::fs::write(
            d("kubelet/config.yaml"),
            kubelet_config(opts, dir, &self.cgroup),
        )?;
        let logs = opts.state_dir.join("logs");
        let containerd_pid = self.containerd.id().ok_or("containerd exited")?;
        // The kubelet joins containerd's mount and network namespaces (nsenter, single-threaded,
        // before the kubelet's Go runtime starts threads).
        let mut command = crate::shim::command(Path::new("nsenter"))?;
        command
            .arg(format!("--mount=/proc/{containerd_pid}/ns/mnt"))
            .arg(format!("--net=/proc/{containerd_pid}/ns/net"))
            .arg("--")
            .arg(opts.bin_dir.join("kubelet"))
            .arg(format!("--config={}", d("kubelet/config.yaml").display()))
            .arg(format!(
                "--kubeconfig={}",
                d("kubelet/kubeconfig").display()
            ))
            .arg(format!("--root-dir={}", d("kubelet/root").display()))
            .arg(format!("--hostname-override={}", opts.node_name))
            .arg(format!("--node-ip={}", opts.addresses.node_ip))
            .arg("--v=1")
            .env("PATH", path_env);
        spawn_node_process(
            "the kubelet",
            &mut command,
            &logs.join("kubelet.log"),
            &self.node_cgroup(),
        )
    }

    /// The component that exited, if one did (all must run as long as the instance).
    pub fn check_running(&mut self) -> Option<String> {
        let mut children = vec![("containerd", &mut self.containerd)];
        for (name, child) in [
            ("CoreDNS", self.coredns.as_mut()),
            ("kubelet", self.kubelet.as_mut()),
            ("kube-proxy", self.kube_proxy.as_mut()),
        ] {
            if let Some(child) = child {
                children.push((name, child));
            }
        }
        for (name, child) in children {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(format!("{name} exited ({status})"));
            }
        }
        None
    }

    /// The kubelet first (SIGTERM, then SIGKILL after 10 s), then every process of the node's
    /// cgroup (`stop_cgroup`). Pods stop with the node, as with the node agent.
    pub async fn stop(mut self) {
        if let Some(kubelet) = self.kubelet.as_mut() {
            terminate(kubelet, Duration::from_secs(10)).await;
        }
        stop_cgroup(&self.cgroup).await;
        let _ = self.containerd.wait().await;
        // The node's namespace went with its last process (its veth too); the host's routes
        // to it go with the bridge anyway, but the bridge may outlive this node.
        for route in &self.host_routes {
            let mut args = vec!["route", "del"];
            args.extend(route.iter().map(String::as_str));
            let _ = ip_command(None, &args).await;
        }
    }
}

/// fsGroup on the host-path provisioner's volumes, as a CSI driver with `fsGroupPolicy: File`
/// gets it from the kubelet: the upstream kubelet applies a Pod's fsGroup to the volumes that
/// support ownership management, not to hostPath ones, so a non-root member (the operator's
/// default, 65532 with fsGroup 65532) could not write its claim's root-owned directory (`open
/// /var/lib/etcd/data: permission denied`). On a real cluster the default StorageClass's
/// volumes honour fsGroup; here localkube applies it (the kubelet's `SetVolumeOwnership`, shared
/// with our node agent) to each claim's directory of each Pod bound to this node, once per Pod,
/// as soon as it sees the Pod. It races the kubelet's start of the containers (a sandbox first,
/// about a second here): a container that loses it fails once and the kubelet restarts it.
/// Polls every 250 ms until aborted.
pub async fn own_claimed_volumes(client: kube::Client, node_name: String, state_dir: PathBuf) {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
    let pods: kube::Api<Pod> = kube::Api::all(client.clone());
    let pvs: kube::Api<PersistentVolume> = kube::Api::all(client.clone());
    let provisioned = crate::upstream::provisioned_volumes_dir(&state_dir);
    let on_node = kube::api::ListParams::default().fields(&format!("spec.nodeName={node_name}"));
    // (Pod UID, volume name) already owned.
    let mut owned: std::collections::BTreeSet<(String, String)> = Default::default();
    loop {
        if let Ok(list) = pods.list(&on_node).await {
            let uids: std::collections::BTreeSet<String> = list
                .items
                .iter()
                .filter_map(|p| p.metadata.uid.clone())
                .collect();
            owned.retain(|(uid, _)| uids.contains(uid));
            for pod in &list.items {
                let Some(fs_group) = localkube_podspec::security::fs_group(pod) else {
                    continue;
                };
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                let claims: kube::Api<PersistentVolumeClaim> =
                    kube::Api::namespaced(client.clone(), &namespace);
                for (volume, claim) in pod_claims(pod) {
                    let key = (uid.clone(), volume);
                    if owned.contains(&key) {
                        continue;
                    }
                    // Unbound yet: the kubelet waits for the claim too; the next poll retries.
                    let Some(pv_name) = claims
                        .get_opt(&claim)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|c| c.spec?.volume_name)
                    else {
                        continue;
                    };
                    let Some(host_path) = pvs
                        .get_opt(&pv_name)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|pv| Some(pv.spec?.host_path?.path))
                    else {
                        continue;
                    };
                    // Not the provisioner's (another class): not ours to touch.
                    let Some(dir) = provisioned_dir(&host_path, &provisioned) else {
                        owned.insert(key);
                        continue;
                    };
                    match localkube_node::set_volume_ownership(&dir, fs_group, false) {
                        Ok(()) => {
                            tracing::info!(pod = ?pod.metadata.name, claim, dir = %dir.display(), gid = fs_group.gid, "fsGroup applied to the claim's host-path volume");
                            owned.insert(key);
                        }
                        Err(e) => tracing::warn!(error = %e.0, "applying fsGroup to a claim"),
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The Pod's claim volumes: (volume name, claim name).
fn pod_claims(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<(String, String)> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            let claim = v.persistent_volume_claim.as_ref()?;
            Some((v.name.clone(), claim.claim_name.clone()))
        })
        .collect()
}

/// Where the host-path provisioner's `/tmp/hostpath_pv/<id>` is on the host: under the
/// instance's `provisioned` directory. None for any other path (and for one that climbs out).
fn provisioned_dir(host_path: &str, provisioned: &Path) -> Option<PathBuf> {
    let rest = Path::new(host_path)
        .strip_prefix(crate::upstream::HOSTPATH_PROVISIONER_DIR)
        .ok()?;
    let plain = rest
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    (plain && rest.components().next().is_some()).then(|| provisioned.join(rest))
}

/// `ip ARGS` on the host, or in the network namespace `netns` (a `/proc/PID/ns/net` path).
async fn ip_command(netns: Option<&str>, args: &[&str]) -> Result<(), BoxError> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = tokio::process::Command::new("nsenter");
            c.arg(format!("--net={ns}")).arg("--").arg("ip");
            c
        }
        None => tokio::process::Command::new("ip"),
    };
    let out = cmd.args(args).stdin(Stdio::null()).output().await?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}{}: {}",
            args.join(" "),
            netns.map(|n| format!(" (in {n})")).unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into())
    }
}

/// Joins the node's network namespace `netns` (fresh: only `lo`, down) to the instance's
/// bridge: a veth `lknode<N>` on the bridge whose peer is the node's `eth0` with the node's IP,
/// a default route through the gateway, forwarding on (for the pods behind it); on the host,
/// routes to the pods' range and the Service CIDR through the node's IP. Returns the host's
/// routes, for [`RealNode::stop`].
async fn node_network(opts: &RealNodeOptions, netns: &str) -> Result<Vec<Vec<String>>, BoxError> {
    let a = opts.addresses;
    let host_end = format!("lknode{}", opts.index);
    let pid = netns
        .trim_start_matches("/proc/")
        .trim_end_matches("/ns/net");
    // A veth left by a SIGKILLed localkube went with its namespace; a stale name is not fatal.
    let _ = ip_command(None, &["link", "del", &host_end]).await;
    ip_command(
        None,
        &[
            "link", "add", &host_end, "type", "veth", "peer", "name", "eth0", "netns", pid,
        ],
    )
    .await?;
    ip_command(
        None,
        &["link", "set", &host_end, "master", &opts.bridge, "up"],
    )
    .await?;
    let node_cidr = format!("{}/25", a.node_ip);
    let gateway = a.gateway.to_string();
    for args in [
        vec!["link", "set", "lo", "up"],
        vec!["addr", "add", node_cidr.as_str(), "dev", "eth0"],
        vec!["link", "set", "eth0", "up"],
        vec!["route", "add", "default", "via", gateway.as_str()],
    ] {
        ip_command(Some(netns), &args).await?;
    }
    let out = tokio::process::Command::new("nsenter")
        .arg(format!("--net={netns}"))
        .args(["--", "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        .stdin(Stdio::null())
        .output()
        .await?;
    if !out.status.success() {
        return Err(format!(
            "net.ipv4.ip_forward=1 in the node's namespace: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let node_ip = a.node_ip.to_string();
    let mut routes = Vec::new();
    for cidr in [a.pod_cidr(), opts.service_cidr.clone()] {
        let route: Vec<String> = [cidr.as_str(), "via", &node_ip, "dev", &opts.bridge]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut args = vec!["route", "replace"];
        args.extend(route.iter().map(String::as_str));
        ip_command(None, &args).await?;
        routes.push(route);
    }
    Ok(routes)
}

/// Stops every process of the node's cgroup `cgroup` and removes it: the pods' processes first
/// (each container has a mount namespace of its own, but all are under `kubepods`), so that
/// their shims reap them; then containerd and the shims; then the cgroup in every hierarchy.
async fn stop_cgroup(cgroup: &str) {
    kill_until_gone("the pods' processes", || processes_in_cgroup(cgroup, false)).await;
    kill_until_gone("containerd and its shims", || {
        processes_in_cgroup(cgroup, true)
    })
    .await;
    // Empty now; a cgroup's directory goes once its children are gone, so retry briefly.
    let deadline = Instant::now() + Duration::from_secs(10);
    for hierarchy in cgroup_hierarchies() {
        let root = hierarchy.join(cgroup);
        while root.exists() {
            remove_cgroup_tree(&root);
            if Instant::now() > deadline {
                tracing::warn!(cgroup = %root.display(), "could not remove the node's cgroup");
                break;
            }
            if root.exists() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Starts one of the node's processes: stdin closed, its output appended to `log`, killed
/// with the instance, and moved into the node's cgroup at once (before it starts children, so
/// that stop finds everything the node spawned).
fn spawn_node_process(
    what: &str,
    command: &mut tokio::process::Command,
    log: &Path,
    node_cgroup: &Path,
) -> Result<Child, BoxError> {
    let (out, err) = crate::upstream::log_file(log)?;
    let child = command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {what}: {e}"))?;
    let pid = child.id().ok_or_else(|| format!("{what} exited at once"))?;
    join_cgroup(node_cgroup, pid)?;
    Ok(child)
}

fn join_cgroup(dir: &Path, pid: u32) -> Result<(), BoxError> {
    std::fs::write(dir.join("cgroup.procs"), pid.to_string())
        .map_err(|e| format!("moving {pid} into {}: {e}", dir.display()).into())
}

/// SIGKILL what `pids` lists until it lists nothing (at most 20 s).
async fn kill_until_gone(what: &str, pids: impl Fn() -> Vec<u32>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive = pids();
        if alive.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            tracing::warn!(what, pids = ?alive, "processes survived SIGKILL");
            return;
        }
        for pid in alive {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every process in the node's cgroup tree (the pids hierarchy); without `with_node`, only the
/// pods' (not containerd, the kubelet and the shims in its `node` child).
fn processes_in_cgroup(cgroup: &str, with_node: bool) -> Vec<u32> {
    fn walk(dir: &Path, pids: &mut Vec<u32>) {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            pids.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    walk(&e.path(), pids);
                }
            }
        }
    }
    let root = Path::new(PIDS_HIERARCHY).join(cgroup);
    let mut pids = Vec::new();
    if with_node {
        walk(&root, &mut pids);
    } else if let Ok(entries) = std::fs::read_dir(&root) {
        for e in entries.flatten() {
            if e.file_name() != "node" && e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(&e.path(), &mut pids);
            }
        }
    }
    pids
}

struct Ctr {
    binary: PathBuf,
    socket: PathBuf,
}

impl Ctr {
    async fn run(&self, args: &[&str]) -> Result<String, BoxError> {
        let out = tokio::process::Command::new(&self.binary)
            .arg("--address")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "ctr {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )
            .into())
        }
    }
}

async fn terminate(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

/// The cgroup v1 hierarchies mounted under /sys/fs/cgroup (cpu, memory, pids, ..., systemd).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(CGROUP_ROOT) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("cgroup.procs").exists())
        .collect()
}

/// rmdir a cgroup tree, deepest first (a cgroup directory holds only control files, which
/// rmdir removes with it; rm -r would fail on them).
fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// containerd 2.x, config version 3: everything under the state directory, cgroupfs, our runc.
fn containerd_config(dir: &Path, bin_dir: &Path) -> String {
    let d = |p: &str| path_str(&dir.join(p));
    format!(
        r#"# Written by localkube up --node kubelet (e2e/localkube/src/realnode.rs).
version = 3
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{PAUSE_IMAGE}"
  [plugins.'io.containerd.cri.v1.runtime']
    # root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below containerd's.
    restrict_oom_score_adj = true
    # The pods' network namespaces are mounted under the state directory (in the node's own
    # mount namespace), not /var/run/netns.
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "{cni_conf}"
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{runc}"
          Root = "{runc_root}"
          SystemdCgroup = false
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
"#,
        root = d("containerd/root"),
        state = d("containerd/state"),
        socket = d("containerd/containerd.sock"),
        cni_conf = d("cni/net.d"),
        runc = path_str(&bin_dir.join("runc")),
        runc_root = d("containerd/run/runc"),
    )
}

/// The pods join the bridge `cni0` in the node's network namespace (the CNI plugins run there,
/// with containerd), which is their gateway, with addresses from the node's pod range. No
/// masquerading: the host routes the pods' range to the node.
fn cni_config(opts: &RealNodeOptions, ipam_dir: &Path) -> String {
    let a = opts.addresses;
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "localkube",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": a.pod_cidr(), "gateway": a.pod_gateway.to_string() }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": path_str(ipam_dir),
                }
            },
            { "type": "portmap", "capabilities": { "portMappings": true } }
        ]
    })
    .to_string()
}

fn kubelet_config(opts: &RealNodeOptions, dir: &Path, cgroup: &str) -> String {
    let d = |p: &str| path_str(&dir.join(p));
    let socket = format!("unix://{}", d("containerd/containerd.sock"));
    // JSON is YAML; the kubelet reads either.
    serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // cgroup v1 hosts: cgroupfs (no systemd here), and 1.35+ refuses v1 unless told.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": false,
        "cgroupRoot": format!("/{cgroup}"),
        "failSwapOn": false,
        "containerRuntimeEndpoint": socket,
        "imageServiceEndpoint": socket,
        "staticPodPath": d("kubelet/manifests"),
        "podLogsDir": d("kubelet/logs"),
        // The API server's client certificate (kube-apiserver-kubelet-client, system:masters)
        // is from the cluster CA; only the CA's certificates get in.
        "authentication": {
            "anonymous": { "enabled": false },
            "webhook": { "enabled": false },
            "x509": { "clientCAFile": path_str(&dir.join("kubelet/pki/ca.crt")) }
        },
        "authorization": { "mode": "AlwaysAllow" },
        "address": opts.addresses.node_ip.to_string(),
        "port": crate::components::KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "tlsCertFile": d("kubelet/pki/kubelet.crt"),
        "tlsPrivateKeyFile": d("kubelet/pki/kubelet.key"),
        "clusterDNS": [opts.addresses.gateway.to_string()],
        "clusterDomain": opts.cluster_domain,
        "resolvConf": "/etc/resolv.conf",
        // Served from files in its own mount namespace (module docs): never the host's.
        "protectKernelDefaults": true,
        // Shared disks run at 13-18 % free: the default imagefs.available<15% would evict.
        "evictionHard": { "memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%" },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": false,
    })
    .to_string()
}

/// kube-proxy in nftables mode (its own `ip`/`ip6` `kube-proxy` tables in the node's network
/// namespace). The pods' range is the cluster CIDR: traffic from elsewhere (the host) to a
/// Service is masqueraded, so its replies come back through the node. Conntrack is left as the
/// namespace has it (no sysctl written), and no OOM score asked (root here lacks
/// CAP_SYS_RESOURCE).
fn kube_proxy_config(opts: &RealNodeOptions, kubeconfig: &Path) -> String {
    let a = opts.addresses;
    serde_json::json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "clientConnection": { "kubeconfig": path_str(kubeconfig) },
        "hostnameOverride": opts.node_name,
        "bindAddress": a.node_ip.to_string(),
        "clusterCIDR": a.pod_cidr(),
        "detectLocalMode": "ClusterCIDR",
        "nodePortAddresses": [format!("{}/32", a.node_ip)],
        // In the node's namespace only; nothing on the host listens.
        "healthzBindAddress": format!("{}:10256", a.node_ip),
        "metricsBindAddress": format!("{}:10249", a.node_ip),
        "oomScoreAdj": 0,
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
    })
    .to_string()
}

/// CoreDNS's `kubernetes` plugin for the cluster domain (and reverse zones), bound to the
/// instance's gateway only (parallel instances each have theirs); other names forwarded to the
/// host's resolvers.
fn corefile(gateway: Ipv4Addr, cluster_domain: &str, kubeconfig: &Path) -> String {
    format!(
        r#"# Written by localkube up --node kubelet (e2e/localkube/src/realnode.rs).
.:53 {{
    bind {gateway}
    errors
    kubernetes {cluster_domain} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} localkube
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    forward . /etc/resolv.conf
    cache 5
    loadbalance
}}
"#,
        kubeconfig = kubeconfig.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(state_dir: &Path) -> RealNodeOptions {
        RealNodeOptions {
            state_dir: state_dir.into(),
            bin_dir: "/opt/node/bin".into(),
            images: Vec::new(),
            bridge: "lkbr7".into(),
            addresses: NodeAddresses::new(Ipv4Addr::new(10, 244, 7, 1)),
            service_cidr: "10.96.7.0/24".into(),
            index: 7,
            node_name: "localkube".into(),
            cluster_domain: "cluster.local".into(),
            kubeconfig: String::new(),
            proxy_kubeconfig: String::new(),
            dns_kubeconfig: String::new(),
            ca_pem: String::new(),
            serving_cert_pem: String::new(),
            serving_key_pem: String::new(),
        }
    }

    #[test]
    fn missing_node_binaries_name_make_node_deps() {
        let dir = std::env::temp_dir().join(format!("realnode-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = check_binaries(&dir).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(err.contains("containerd not found"), "{err}");
        assert!(err.contains("make node-deps"), "{err}");
    }

    /// The two machine workarounds and the node's place on the instance's network.
    #[test]
    fn kubelet_config_protects_the_host_and_uses_the_instance_network() {
        let opts = options(Path::new("/state"));
        let config: serde_json::Value = serde_json::from_str(&kubelet_config(
            &opts,
            Path::new("/state/realnode"),
            "localkube-7",
        ))
        .unwrap();
        assert_eq!(config["protectKernelDefaults"], true);
        assert_eq!(config["cgroupRoot"], "/localkube-7");
        assert_eq!(config["cgroupDriver"], "cgroupfs");
        // Serving on the node's own IP; DNS (CoreDNS) on the instance's gateway.
        assert_eq!(config["address"], "10.244.7.2");
        assert_eq!(config["clusterDNS"][0], "10.244.7.1");
        assert_eq!(config["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(
            config["containerRuntimeEndpoint"],
            "unix:///state/realnode/containerd/containerd.sock"
        );
        let containerd =
            containerd_config(Path::new("/state/realnode"), Path::new("/opt/node/bin"));
        assert!(
            containerd.contains("restrict_oom_score_adj = true"),
            "{containerd}"
        );
        assert!(
            containerd.contains(r#"BinaryName = "/opt/node/bin/runc""#),
            "{containerd}"
        );
        assert!(
            containerd.contains(&format!(r#"sandbox = "{PAUSE_IMAGE}""#)),
            "{containerd}"
        );
    }

    /// The host's bridge holds the gateway `.1`; the node is `.2`; its pods the upper half,
    /// which the host routes to the node.
    #[test]
    fn node_addresses_split_the_instance_network() {
        let a = NodeAddresses::new(Ipv4Addr::new(10, 244, 7, 1));
        assert_eq!(a.node_ip, Ipv4Addr::new(10, 244, 7, 2));
        assert_eq!(a.pod_cidr(), "10.244.7.128/25");
        assert_eq!(a.pod_gateway, Ipv4Addr::new(10, 244, 7, 129));
    }

    /// The pods' bridge is the node's own (in its network namespace), their gateway; the
    /// host's bridge (lkbr7) is not touched by CNI.
    #[test]
    fn cni_config_puts_the_pods_behind_the_node() {
        let cni: serde_json::Value = serde_json::from_str(&cni_config(
            &options(Path::new("/state")),
            Path::new("/ipam"),
        ))
        .unwrap();
        let bridge = &cni["plugins"][0];
        assert_eq!(bridge["bridge"], "cni0");
        assert_eq!(bridge["isGateway"], true);
        assert_eq!(bridge["ipMasq"], false);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.244.7.128/25");
        assert_eq!(bridge["ipam"]["ranges"][0][0]["gateway"], "10.244.7.129");
        assert_eq!(cni["plugins"][1]["type"], "portmap");
    }

    /// kube-proxy: nftables, the pods' range as cluster CIDR (the host's traffic to Services is
    /// masqueraded), no conntrack sysctl written, listening on the node's IP only.
    #[test]
    fn kube_proxy_config_stays_in_the_node() {
        let config: serde_json::Value = serde_json::from_str(&kube_proxy_config(
            &options(Path::new("/state")),
            Path::new("/state/realnode/kube-proxy/kubeconfig"),
        ))
        .unwrap();
        assert_eq!(config["mode"], "nftables");
        assert_eq!(config["clusterCIDR"], "10.244.7.128/25");
        assert_eq!(config["detectLocalMode"], "ClusterCIDR");
        assert_eq!(config["hostnameOverride"], "localkube");
        assert_eq!(config["conntrack"]["maxPerCore"], 0);
        assert_eq!(config["healthzBindAddress"], "10.244.7.2:10256");
        assert_eq!(config["metricsBindAddress"], "10.244.7.2:10249");
    }

    /// Only the provisioner's own directories, mapped into the instance's copy of them.
    #[test]
    fn provisioned_dir_maps_only_the_provisioners_volumes() {
        let provisioned = Path::new("/state/hostpath_pv");
        assert_eq!(
            provisioned_dir("/tmp/hostpath_pv/3f2a", provisioned),
            Some(PathBuf::from("/state/hostpath_pv/3f2a"))
        );
        for other in [
            "/tmp/hostpath_pv",
            "/tmp/hostpath_pv/../etc",
            "/var/lib/data",
            "/tmp/hostpath_pvx/a",
        ] {
            assert_eq!(provisioned_dir(other, provisioned), None, "{other}");
        }
    }

    #[test]
    fn pod_claims_lists_the_claim_volumes_only() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m-0"},
            "spec": {
                "containers": [{"name": "etcd"}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-m-0"}},
                    {"name": "tmp", "emptyDir": {}}
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            pod_claims(&pod),
            vec![("data".to_string(), "data-m-0".to_string())]
        );
    }

    #[test]
    fn corefile_serves_the_cluster_domain_on_the_gateway_only() {
        let corefile = corefile(
            Ipv4Addr::new(10, 244, 7, 1),
            "cluster.local",
            Path::new("/k"),
        );
        assert!(corefile.contains("bind 10.244.7.1\n"), "{corefile}");
        assert!(
            corefile.contains("kubernetes cluster.local in-addr.arpa ip6.arpa {"),
            "{corefile}"
        );
        assert!(corefile.contains("kubeconfig /k localkube"), "{corefile}");
    }
}
