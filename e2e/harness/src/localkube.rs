//! [`LocalKube`]: the project's local control plane (`e2e/localkube`) started for one test, on
//! its own loopback address block with its own etcd and state directory, so tests run in
//! parallel; stopped (SIGTERM, then SIGKILL) when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use test_support::HarnessError;
use test_support::addr::AddressBlock;
use test_support::kube_tools::KubeClients;
use test_support::process::{
    ProcessGuard, TestDir, log_tail_section, print_log_tail_if_panicking, run_output,
};
use test_support::tools::Tools;

/// The API server port inside the instance's private address block.
const API_PORT: u16 = 6443;
/// The CPUs the test node advertises (see [`LocalKube::spawn`]).
const NODE_CPU: &str = "16";
/// kube-apiserver's start (post-start hooks, bootstrap RBAC) takes seconds on an idle machine
/// and much longer on a loaded 2-core one.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

pub struct LocalKube {
    process: ProcessGuard,
    dir: TestDir,
    _block: AddressBlock,
    kubeconfig: PathBuf,
    binary: PathBuf,
    etcd_binary: PathBuf,
    address: std::net::Ipv4Addr,
    api_only: bool,
}

/// The localkube binary: `$LOCALKUBE_BIN`, else the workspace's `target/debug/localkube`.
pub fn localkube_binary() -> Result<PathBuf, HarnessError> {
    if let Some(path) = std::env::var_os("LOCALKUBE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let path = target.join("debug/localkube");
    if path.exists() {
        Ok(path)
    } else {
        Err(HarnessError::Claim {
            what: "the localkube binary".into(),
            detail: format!(
                "{} does not exist: build it with `cargo build -p localkube` or set LOCALKUBE_BIN",
                path.display()
            ),
        })
    }
}

impl LocalKube {
    /// Start a control plane with the workspace's localkube binary and etcd 3.5.
    pub async fn start() -> Result<LocalKube, HarnessError> {
        Self::start_with(&localkube_binary()?).await
    }

    pub async fn start_with(binary: &Path) -> Result<LocalKube, HarnessError> {
        Self::start_mode(binary, false).await
    }

    /// Start the API server alone (`localkube up --api-only`): no controllers, node agent, DNS or
    /// proxy. For tests of one component that run it in-process against the API.
    pub async fn start_api_only(binary: &Path) -> Result<LocalKube, HarnessError> {
        Self::start_mode(binary, true).await
    }

    async fn start_mode(binary: &Path, api_only: bool) -> Result<LocalKube, HarnessError> {
        let tools = Tools::from_env();
        let etcd_binary = tools.etcd(test_support::EtcdVersion::V3_5)?;
        let block = AddressBlock::claim_checking(&[API_PORT], 1)?;
        let dir = TestDir::new("localkube")?;
        let address = block.ip(1);
        let process = Self::spawn(binary, &etcd_binary, dir.path(), address, api_only)?;
        let kubeconfig = dir.path().join("state/kubeconfig");
        let mut lk = LocalKube {
            process,
            dir,
            _block: block,
            kubeconfig,
            binary: binary.to_path_buf(),
            etcd_binary,
            address,
            api_only,
        };
        lk.wait_ready().await?;
        Ok(lk)
    }

    fn spawn(
        binary: &Path,
        etcd: &Path,
        dir: &Path,
        address: std::net::Ipv4Addr,
        api_only: bool,
    ) -> Result<ProcessGuard, HarnessError> {
        let mut command = Command::new(binary);
        command.arg("up");
        if !api_only && let Some(images) = real_node_images(binary)? {
            command.env("LOCALKUBE_NODE_IMAGES", images);
        }
        if api_only {
            command.arg("--api-only");
        }
        // The upstream control plane's binaries are there (`make deps` builds them), and the
        // node agent maps etcd images to the installed etcd binaries of this directory.
        command.arg("--tools-dir").arg(Tools::from_env().dir());
        // One node stands in for the several a production cluster spreads over: the scheduler
        // must fit e.g. examples/cluster-production.yaml's 5 × 500m CPU requests on it.
        command.arg("--node-cpu").arg(NODE_CPU);
        command
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--address")
            .arg(address.to_string())
            .arg("--port")
            .arg(API_PORT.to_string())
            .arg("--etcd-binary")
            // LOCALKUBE_LOG, when set, reaches it through the environment; unset, localkube's
            // own default filter applies.
            .arg(etcd);
        ProcessGuard::spawn("localkube", command, dir.join("localkube.log"))
    }

    async fn wait_ready(&mut self) -> Result<(), HarnessError> {
        let start = std::time::Instant::now();
        while !self.kubeconfig.exists() {
            self.process.check_running()?;
            if start.elapsed() > READY_TIMEOUT {
                return Err(HarnessError::NotReady {
                    what: format!("localkube on {}", self.address),
                    waited: READY_TIMEOUT,
                    detail: format!("{} was not written", self.kubeconfig.display()),
                    log_tails: log_tail_section("localkube", self.process.log_path(), 40),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's URL, as the kubeconfig names it: `https://10.244.N.1:6443` (the node's
    /// gateway, where kube-apiserver listens so it can be the `kubernetes` Service's endpoint),
    /// or `https://127.A.B.1:6443` with `--api-only`.
    pub fn server_url(&self) -> String {
        std::fs::read_to_string(&self.kubeconfig)
            .ok()
            .and_then(|k| {
                k.lines()
                    .find_map(|l| l.trim().strip_prefix("server: ").map(str::to_string))
            })
            .unwrap_or_else(|| format!("https://{}:{API_PORT}", self.address))
    }

    /// The endpoint of the control plane's own etcd (for tests that look underneath).
    pub fn etcd_endpoint(&self) -> Result<String, HarnessError> {
        let path = self.dir.path().join("state/etcd-endpoint");
        std::fs::read_to_string(&path)
            .map_err(|e| HarnessError::io(format!("reading {}", path.display()), e))
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The pid of the `localkube up` process (for checks that everything it started is gone).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// What `localkube up` wrote about its network (`state/network.json`: index, bridge,
    /// gateway, DNS server, pod and Service CIDRs); absent with `--api-only`.
    pub fn network(&self) -> Result<String, HarnessError> {
        let path = self.state_dir().join("network.json");
        std::fs::read_to_string(&path)
            .map_err(|e| HarnessError::io(format!("reading {}", path.display()), e))
    }

    /// Run kubectl of `clients` against this instance (own discovery cache per instance).
    pub fn kubectl(&self, clients: &KubeClients, args: &[&str]) -> Result<String, HarnessError> {
        let mut command = Command::new(clients.kubectl());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(
                self.dir
                    .path()
                    .join(format!("kubectl-cache-{}", clients.pair().kubectl_minor())),
            )
            .args(args)
            .env("HOME", self.dir.path());
        run_output(command)
    }

    /// kubectl with stdin from `input` (for `apply -f -`).
    pub fn kubectl_stdin(
        &self,
        clients: &KubeClients,
        args: &[&str],
        input: &str,
    ) -> Result<String, HarnessError> {
        let dir = self.dir.path().join("stdin");
        std::fs::create_dir_all(&dir).map_err(|e| HarnessError::io("creating stdin dir", e))?;
        let file = dir.join(format!(
            "input-{}.yaml",
            std::process::id() as u64 * 1000 + rand_suffix()
        ));
        std::fs::write(&file, input).map_err(|e| HarnessError::io("writing kubectl input", e))?;
        let mut all: Vec<&str> = args.to_vec();
        let path = file.to_string_lossy().into_owned();
        all.push("-f");
        all.push(&path);
        self.kubectl(clients, &all)
    }

    /// Run helm of `clients` against this instance (own helm home per instance).
    pub fn helm(&self, clients: &KubeClients, args: &[&str]) -> Result<String, HarnessError> {
        let home = self
            .dir
            .path()
            .join(format!("helm-{}", clients.pair().helm_minor()));
        let mut command = Command::new(clients.helm());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", &home)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"));
        run_output(command)
    }

    /// Stop gracefully (SIGTERM) and start again on the same state directory and address.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.process.terminate(Duration::from_secs(20)).await?;
        self.process = Self::spawn(
            &self.binary,
            &self.etcd_binary,
            self.dir.path(),
            self.address,
            self.api_only,
        )?;
        self.wait_ready().await
    }

    /// Stop gracefully; returns once every process it started is gone.
    pub async fn stop(mut self) -> Result<(), HarnessError> {
        self.process
            .terminate(Duration::from_secs(20))
            .await
            .map(|_| ())
    }
}

/// The images the scenarios' Pods run, for the real node (`LOCALKUBE_NODE=kubelet`, e2e/README.md
/// "Real node"): the pause image of `make node-deps` and what `make node-images` packs into
/// target/image (the operators' image of the workspace's debug binaries, etcd 3.4-3.7,
/// SeaweedFS), as `LOCALKUBE_NODE_IMAGES`. None on our node agent, or when the caller set
/// `LOCALKUBE_NODE_IMAGES` itself. Fails, naming `make node-images`, when one is missing or the
/// operators' image is older than the binaries it stands for (the Pods would run stale code).
fn real_node_images(binary: &Path) -> Result<Option<String>, HarnessError> {
    if std::env::var("LOCALKUBE_NODE").ok().as_deref() != Some("kubelet")
        || std::env::var_os("LOCALKUBE_NODE_IMAGES").is_some()
    {
        return Ok(None);
    }
    let missing = |what: &str, detail: String| HarnessError::Claim {
        what: what.into(),
        detail,
    };
    let bin_dir = binary.parent().unwrap_or(Path::new("."));
    let node_bin = std::env::var_os("LOCALKUBE_NODE_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Tools::from_env().dir().to_path_buf());
    let pause = node_bin.join("../node/pause.tar");
    let image_dir = bin_dir.join("../image");
    let mut images = vec![pause];
    images.extend(
        REAL_NODE_IMAGES
            .iter()
            .map(|name| image_dir.join(format!("{name}.tar"))),
    );
    for image in &images {
        if !image.is_file() {
            return Err(missing(
                "an image of the real node",
                format!(
                    "{} does not exist: run `make node-images` (and `make node-deps` for the pause image)",
                    image.display()
                ),
            ));
        }
    }
    let built = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let operator_image = image_dir.join("etcd-operator.tar");
    for operator in [
        "etcd-cluster-operator",
        "etcd-backup-operator",
        "etcd-restore-operator",
    ] {
        let binary = bin_dir.join(operator);
        if built(&binary) > built(&operator_image) {
            return Err(missing(
                "the operators' image of the real node",
                format!(
                    "{} is newer than {}: run `make node-images` to pack the new build",
                    binary.display(),
                    operator_image.display()
                ),
            ));
        }
    }
    let joined: Vec<String> = images.iter().map(|p| p.display().to_string()).collect();
    Ok(Some(joined.join(":")))
}

/// target/image/<name>.tar of `make node-images` (e2e/realnode/build-images.sh).
const REAL_NODE_IMAGES: [&str; 6] = [
    "etcd-operator",
    "etcd-3.4",
    "etcd-3.5",
    "etcd-3.6",
    "etcd-3.7",
    "seaweedfs",
];

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0)
}

impl LocalKube {
    /// Keep this instance's audit events of ServiceAccounts for the RBAC usage check
    /// (`crate::rbac_usage`): copied under [`crate::rbac_usage::audit_dir`], one file per
    /// instance, before the state directory goes.
    fn keep_audit_log(&self) {
        let source = self.dir.path().join("state/logs/audit.log");
        let Ok(text) = std::fs::read_to_string(&source) else {
            return;
        };
        let dir = crate::rbac_usage::audit_dir();
        if std::fs::create_dir_all(&dir).is_err() {
            return;
        }
        let name = format!(
            "{}-{}-{}.jsonl",
            std::process::id(),
            self.address,
            rand_suffix()
        );
        let _ = std::fs::write(dir.join(name), text);
    }
}

impl Drop for LocalKube {
    fn drop(&mut self) {
        self.keep_audit_log();
        print_log_tail_if_panicking("localkube", self.process.log_path());
        let etcd_log = self.dir.path().join("state/etcd.log");
        print_log_tail_if_panicking("localkube etcd", &etcd_log);
        for component in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            let log = self.dir.path().join(format!("state/logs/{component}.log"));
            if log.exists() {
                print_log_tail_if_panicking(component, &log);
            }
        }
        // SIGTERM first so localkube stops its etcd; the guard SIGKILLs whatever is left (and
        // etcd dies with localkube through its parent-death signal).
        if self.process.is_running() {
            if let Some(pid) = rustix::process::Pid::from_raw(self.process.pid() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(15);
            while self.process.is_running() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
