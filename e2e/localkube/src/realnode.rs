//! `localkube up --node kubelet`: the real node (issue 23). Instead of our node agent, the
//! upstream kubelet runs the pods through containerd and runc (built by `make node-deps`), with
//! Debian's CNI plugins on the instance's own bridge, so cluster DNS and the Service proxy of
//! `e2e/network` serve these pods as they serve the node agent's.
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
const BINARIES: [&str; 5] = [
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "kubelet",
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

pub struct RealNodeOptions {
    pub state_dir: PathBuf,
    /// Where `make node-deps` put containerd, containerd-shim-runc-v2, runc, ctr and the kubelet.
    pub bin_dir: PathBuf,
    /// OCI tarballs imported into containerd before the kubelet starts (the pause image first).
    pub images: Vec<PathBuf>,
    /// The instance's bridge, its gateway (the node's IP) and the pods' /24.
    pub bridge: String,
    pub gateway: Ipv4Addr,
    pub pod_cidr: String,
    /// The instance's network index: names the node's cgroup, so parallel instances differ.
    pub index: u8,
    pub node_name: String,
    pub cluster_domain: String,
    /// Kubeconfig YAML of `system:node:<name>`.
    pub kubeconfig: String,
    pub ca_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
}

pub struct RealNode {
    containerd: Child,
    /// None until it started (a failed start stops containerd alone).
    kubelet: Option<Child>,
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
                "--node kubelet: {} not found: run `make node-deps` (builds runc, containerd and the kubelet into .tools/bin), or pass --node-bin-dir",
                bin_dir.join(b).display()
            )
            .into());
        }
    }
    Ok(())
}

impl RealNode {
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
        let (out, err) = log_files(&logs.join("containerd.log"))?;
        let path_env = format!(
            "{}:{}",
            opts.bin_dir.display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into())
        );
        let mut containerd =
            crate::shim::command_with_binds(&opts.bin_dir.join("containerd"), &bind_refs)?
                .arg("--config")
                .arg(d("containerd/config.toml"))
                .env("PATH", &path_env)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("starting containerd: {e}"))?;
        let containerd_pid = containerd.id().ok_or("containerd exited at once")?;
        // Before it starts any shim (the kubelet is not running yet), so they inherit it.
        join_cgroup(&node_cgroup, containerd_pid)?;
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
            kubelet: None,
            containerd,
            cgroup,
        };
        match node.start_kubelet(&opts, &dir, &ctr, &path_env).await {
            Ok(kubelet) => {
                node.kubelet = Some(kubelet);
                Ok(node)
            }
            Err(e) => {
                node.stop().await;
                Err(e)
            }
        }
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
        let (out, err) = log_files(&logs.join("kubelet.log"))?;
        let containerd_pid = self.containerd.id().ok_or("containerd exited")?;
        // The kubelet joins containerd's mount namespace (nsenter, single-threaded, before the
        // kubelet's Go runtime starts threads).
        let kubelet = crate::shim::command(Path::new("nsenter"))?
            .arg(format!("--mount=/proc/{containerd_pid}/ns/mnt"))
            .arg("--")
            .arg(opts.bin_dir.join("kubelet"))
            .arg(format!("--config={}", d("kubelet/config.yaml").display()))
            .arg(format!(
                "--kubeconfig={}",
                d("kubelet/kubeconfig").display()
            ))
            .arg(format!("--root-dir={}", d("kubelet/root").display()))
            .arg(format!("--hostname-override={}", opts.node_name))
            .arg(format!("--node-ip={}", opts.gateway))
            .arg("--v=1")
            .env("PATH", path_env)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting the kubelet: {e}"))?;
        if let Some(pid) = kubelet.id() {
            join_cgroup(
                &Path::new(PIDS_HIERARCHY).join(&self.cgroup).join("node"),
                pid,
            )?;
        }
        Ok(kubelet)
    }

    /// The component that exited, if one did (both must run as long as the instance).
    pub fn check_running(&mut self) -> Option<String> {
        let mut children = vec![("containerd", &mut self.containerd)];
        if let Some(kubelet) = self.kubelet.as_mut() {
            children.push(("kubelet", kubelet));
        }
        for (name, child) in children {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(format!("{name} exited ({status})"));
            }
        }
        None
    }

    /// The kubelet first (SIGTERM, then SIGKILL after 10 s), then every process of the node's
    /// cgroup ([`stop_cgroup`]). Pods stop with the node, as with the node agent.
    pub async fn stop(mut self) {
        if let Some(kubelet) = self.kubelet.as_mut() {
            terminate(kubelet, Duration::from_secs(10)).await;
        }
        stop_cgroup(&self.cgroup).await;
        let _ = self.containerd.wait().await;
    }
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

fn log_files(path: &Path) -> Result<(Stdio, Stdio), BoxError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let err = log.try_clone()?;
    Ok((Stdio::from(log), Stdio::from(err)))
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

/// The pods join the instance's bridge (where DNS and the Service proxy listen) with addresses
/// from its /24; the bridge plugin leaves the bridge's own address alone (`isGateway: false`) and
/// the pods route through the gateway.
fn cni_config(opts: &RealNodeOptions, ipam_dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "localkube",
        "plugins": [
            {
                "type": "bridge",
                "bridge": opts.bridge,
                "isGateway": false,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": opts.pod_cidr, "gateway": opts.gateway.to_string() }]],
                    "routes": [{ "dst": "0.0.0.0/0", "gw": opts.gateway.to_string() }],
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
        "address": opts.gateway.to_string(),
        "port": crate::components::KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "tlsCertFile": d("kubelet/pki/kubelet.crt"),
        "tlsPrivateKeyFile": d("kubelet/pki/kubelet.key"),
        "clusterDNS": [opts.gateway.to_string()],
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

#[cfg(test)]
mod tests {
    use super::*;

    fn options(state_dir: &Path) -> RealNodeOptions {
        RealNodeOptions {
            state_dir: state_dir.into(),
            bin_dir: "/opt/node/bin".into(),
            images: Vec::new(),
            bridge: "lkbr7".into(),
            gateway: Ipv4Addr::new(10, 244, 7, 1),
            pod_cidr: "10.244.7.0/24".into(),
            index: 7,
            node_name: "localkube".into(),
            cluster_domain: "cluster.local".into(),
            kubeconfig: String::new(),
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
        assert_eq!(config["address"], "10.244.7.1");
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

    /// The bridge plugin must leave the bridge's own address (the gateway, where DNS, the
    /// Service proxy and kube-apiserver listen) alone and route the pods through it.
    #[test]
    fn cni_config_joins_the_instance_bridge_without_touching_its_address() {
        let cni: serde_json::Value = serde_json::from_str(&cni_config(
            &options(Path::new("/state")),
            Path::new("/ipam"),
        ))
        .unwrap();
        let bridge = &cni["plugins"][0];
        assert_eq!(bridge["bridge"], "lkbr7");
        assert_eq!(bridge["isGateway"], false);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.244.7.0/24");
        assert_eq!(bridge["ipam"]["routes"][0]["gw"], "10.244.7.1");
        assert_eq!(cni["plugins"][1]["type"], "portmap");
    }
}
