//! The upstream control plane: kube-apiserver, kube-controller-manager and kube-scheduler as
//! `make deps` builds them from `k8s.io/kubernetes` (e2e/upstream/build-kubernetes.sh), started
//! the way envtest and `hack/local-up-cluster.sh` start them: secure serving with this state
//! directory's CA, client certificates per component, ServiceAccount keys, `Node,RBAC`
//! authorization, upstream's default admission plugins plus NodeRestriction, and an audit log of
//! every request made by a ServiceAccount (the RBAC usage test reads it).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

use crate::pki::Pki;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The binaries `make deps` builds, in the tools directory.
pub const BINARIES: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];
/// The StorageClass every instance starts with, served by kube-controller-manager's host-path
/// provisioner (`--enable-hostpath-provisioner`: upstream's provisioner for single-node test
/// clusters, so PV provisioning, binding and deletion are upstream's code too).
pub const DEFAULT_STORAGE_CLASS: &str = "standard";
/// Where upstream's host-path provisioner creates each volume's directory (hard-coded in
/// kube-controller-manager: `/tmp/hostpath_pv/<uuid>`).
pub const HOSTPATH_PROVISIONER_DIR: &str = "/tmp/hostpath_pv";

/// Where an instance's provisioned volumes really are: kube-controller-manager runs with this
/// directory mounted on [`HOSTPATH_PROVISIONER_DIR`] in its own mount namespace, so instances do
/// not share volumes and a removed state directory leaves no volume behind on the host.
pub fn provisioned_volumes_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("hostpath_pv")
}
/// How long the API server may take to answer `/readyz` (its post-start hooks: RBAC bootstrap
/// roles, priority levels, the `kubernetes` Service) on a loaded 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Audit policy: metadata of every request a workload's ServiceAccount makes (who, verb,
/// resource, namespace, response code); nothing from the control plane's own components (the
/// controllers' accounts in kube-system, the node, the admin).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: [\"system:serviceaccounts:kube-system\"]
- level: Metadata
  userGroups: [\"system:serviceaccounts\"]
- level: None
";

pub struct UpstreamOptions {
    /// Where kube-apiserver, kube-controller-manager and kube-scheduler are.
    pub bin_dir: PathBuf,
    pub state_dir: PathBuf,
    pub etcd_endpoint: String,
    /// The API server's address and port. With a node network this is the node's gateway (a
    /// non-loopback address: kube-apiserver publishes it as the `kubernetes` Service's endpoint,
    /// which Endpoints validation refuses for loopback addresses), without one the loopback.
    pub address: IpAddr,
    pub port: u16,
    /// Publish `address` as the `kubernetes` Service's endpoint (false: no endpoint reconciler).
    pub advertise: bool,
    /// The instance's own loopback address, where the controller manager and scheduler serve
    /// their health endpoints (ports 10257/10259, as upstream) without clashing with other
    /// instances.
    pub component_address: IpAddr,
    pub service_cidr: String,
    /// Start the API server alone (no controller manager, no scheduler).
    pub api_only: bool,
}

pub struct ControlPlane {
    processes: Vec<(&'static str, Child)>,
    pub url: String,
}

/// The binaries' paths, or an error naming what is missing and how to get it.
pub fn binaries(bin_dir: &Path) -> Result<[PathBuf; 3], BoxError> {
    let paths = BINARIES.map(|b| bin_dir.join(b));
    if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
        return Err(format!(
            "{} does not exist: `make deps` builds the upstream control plane (e2e/upstream/build-kubernetes.sh)",
            missing.display()
        )
        .into());
    }
    Ok(paths)
}

/// A kubeconfig for `user` authenticating with a client certificate file pair.
pub fn kubeconfig_file(server: &str, ca: &Path, user: &str, cert: &Path, key: &Path) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: {user}\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: {user}\ncurrent-context: local\n",
        ca.display(),
        cert.display(),
        key.display(),
    )
}

/// A log file opened for appending, as both stdout and stderr of a process.
pub(crate) fn log_file(path: &Path) -> Result<(Stdio, Stdio), BoxError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let err = log.try_clone()?;
    Ok((Stdio::from(log), Stdio::from(err)))
}

fn spawn(binary: &Path, args: Vec<String>, log: &Path) -> Result<Child, BoxError> {
    spawn_with_bind(binary, None, args, log)
}

fn spawn_with_bind(
    binary: &Path,
    bind: Option<(&Path, &Path)>,
    args: Vec<String>,
    log: &Path,
) -> Result<Child, BoxError> {
    let (out, err) = log_file(log)?;
    let child = crate::shim::command_with_bind(binary, bind)?
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", binary.display()))?;
    Ok(child)
}

impl ControlPlane {
    pub async fn start(opts: &UpstreamOptions, pki: &Pki) -> Result<ControlPlane, BoxError> {
        let [apiserver, controller_manager, scheduler] = binaries(&opts.bin_dir)?;
        let pki_dir = opts.state_dir.join("pki");
        let p = |f: &str| pki_dir.join(f).display().to_string();
        let url = format!("https://{}:{}", opts.address, opts.port);
        let audit_policy = opts.state_dir.join("audit-policy.yaml");
        std::fs::write(&audit_policy, AUDIT_POLICY)?;
        let logs = opts.state_dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let mut args = vec![
            format!("--etcd-servers={}", opts.etcd_endpoint),
            format!("--bind-address={}", opts.address),
            format!("--secure-port={}", opts.port),
            format!(
                "--cert-dir={}",
                pki_dir.join("apiserver-generated").display()
            ),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            format!("--service-cluster-ip-range={}", opts.service_cidr),
            "--allow-privileged=true".into(),
            format!(
                "--kubelet-client-certificate={}",
                p("apiserver-kubelet-client.crt")
            ),
            format!("--kubelet-client-key={}", p("apiserver-kubelet-client.key")),
            format!("--kubelet-certificate-authority={}", p("ca.crt")),
            "--kubelet-preferred-address-types=InternalIP".into(),
            format!("--audit-policy-file={}", audit_policy.display()),
            format!("--audit-log-path={}", logs.join("audit.log").display()),
            "--audit-log-maxsize=0".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        // Always explicit: without it kube-apiserver derives one from the default route and
        // fails where there is none (a test's private network namespace).
        args.push(format!("--advertise-address={}", opts.address));
        if !opts.advertise {
            args.push("--endpoint-reconciler-type=none".into());
        }
        let mut processes = vec![(
            "kube-apiserver",
            spawn(&apiserver, args, &logs.join("kube-apiserver.log"))?,
        )];
        let mut plane = ControlPlane {
            processes: Vec::new(),
            url,
        };
        plane.processes.append(&mut processes);
        plane
            .wait_ready(pki, &logs.join("kube-apiserver.log"))
            .await?;
        if opts.api_only {
            return Ok(plane);
        }

        let ca = pki_dir.join("ca.crt");
        let kcm_kubeconfig = opts.state_dir.join("controller-manager.kubeconfig");
        std::fs::write(
            &kcm_kubeconfig,
            kubeconfig_file(
                &plane.url,
                &ca,
                "system:kube-controller-manager",
                &pki_dir.join("controller-manager.crt"),
                &pki_dir.join("controller-manager.key"),
            ),
        )?;
        let kcm = kcm_kubeconfig.display().to_string();
        let kcm_args = vec![
            format!("--kubeconfig={kcm}"),
            format!("--authentication-kubeconfig={kcm}"),
            format!("--authorization-kubeconfig={kcm}"),
            format!("--bind-address={}", opts.component_address),
            format!(
                "--cert-dir={}",
                pki_dir.join("controller-manager-generated").display()
            ),
            format!("--service-account-private-key-file={}", p("sa.key")),
            format!("--root-ca-file={}", p("ca.crt")),
            format!("--cluster-signing-cert-file={}", p("ca.crt")),
            format!("--cluster-signing-key-file={}", p("ca.key")),
            format!("--service-cluster-ip-range={}", opts.service_cidr),
            "--use-service-account-credentials=true".into(),
            "--controllers=*".into(),
            "--leader-elect=false".into(),
            "--enable-hostpath-provisioner=true".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        plane.processes.push((
            "kube-controller-manager",
            spawn_with_bind(
                &controller_manager,
                Some((
                    &provisioned_volumes_dir(&opts.state_dir),
                    Path::new(HOSTPATH_PROVISIONER_DIR),
                )),
                kcm_args,
                &logs.join("kube-controller-manager.log"),
            )?,
        ));

        let scheduler_kubeconfig = opts.state_dir.join("scheduler.kubeconfig");
        std::fs::write(
            &scheduler_kubeconfig,
            kubeconfig_file(
                &plane.url,
                &ca,
                "system:kube-scheduler",
                &pki_dir.join("scheduler.crt"),
                &pki_dir.join("scheduler.key"),
            ),
        )?;
        let scheduler_config = opts.state_dir.join("scheduler-config.yaml");
        std::fs::write(
            &scheduler_config,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: {}\nleaderElection:\n  leaderElect: false\n",
                scheduler_kubeconfig.display()
            ),
        )?;
        let sch = scheduler_kubeconfig.display().to_string();
        let scheduler_args = vec![
            format!("--config={}", scheduler_config.display()),
            format!("--authentication-kubeconfig={sch}"),
            format!("--authorization-kubeconfig={sch}"),
            format!("--bind-address={}", opts.component_address),
            format!(
                "--cert-dir={}",
                pki_dir.join("scheduler-generated").display()
            ),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        plane.processes.push((
            "kube-scheduler",
            spawn(&scheduler, scheduler_args, &logs.join("kube-scheduler.log"))?,
        ));
        Ok(plane)
    }

    /// Poll `/readyz` with the admin certificate until it answers 200.
    async fn wait_ready(&mut self, pki: &Pki, log: &Path) -> Result<(), BoxError> {
        let admin = crate::up::kubeconfig(pki, &self.url);
        let client = crate::components::kube_client(&admin).await?;
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        let mut last;
        loop {
            if let Some((name, child)) = self.processes.first_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                // The state directory may be a test's temporary one: say why here.
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(15)..].join("\n");
                return Err(format!(
                    "{name} exited ({status}) before it was ready; see {}:\n{tail}",
                    log.display()
                )
                .into());
            }
            let request = http::Request::get("/readyz").body(Vec::new())?;
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => last = format!("/readyz answered {body}"),
                Err(e) => last = e.to_string(),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "kube-apiserver at {} was not ready within {READY_TIMEOUT:?} ({last}); see {}",
                    self.url,
                    log.display()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Any component that exited, with its status (they must run as long as the instance).
    pub fn check_running(&mut self) -> Option<String> {
        self.processes.iter_mut().find_map(|(name, child)| {
            child
                .try_wait()
                .ok()
                .flatten()
                .map(|status| format!("{name} exited ({status})"))
        })
    }

    /// SIGTERM to each (scheduler and controller manager first), then SIGKILL after 10 s.
    pub async fn stop(mut self) {
        while let Some((_, mut child)) = self.processes.pop() {
            if let Some(pid) = child.id() {
                let _ = std::process::Command::new("kill")
                    .arg("-TERM")
                    .arg(pid.to_string())
                    .status();
                if tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_ok()
                {
                    continue;
                }
            }
            let _ = child.kill().await;
        }
    }
}

/// Objects every instance starts with that no upstream component creates: the default
/// StorageClass, served by kube-controller-manager's host-path provisioner. Created only when
/// missing, so a restart on the same state keeps user changes.
pub async fn bootstrap(client: &kube::Client) -> Result<(), BoxError> {
    dns_role(client).await?;
    default_storage_class(client).await
}

/// Cluster DNS reads what CoreDNS's ClusterRole lets it (kubeadm's `system:coredns`): Services,
/// EndpointSlices, Pods and Namespaces.
async fn dns_role(client: &kube::Client) -> Result<(), BoxError> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "localkube:dns" },
        "rules": [
            { "apiGroups": [""], "resources": ["services", "pods", "namespaces"],
              "verbs": ["list", "watch"] },
            { "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
              "verbs": ["list", "watch"] },
        ],
    }))?;
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "localkube:dns" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "localkube:dns" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": crate::pki::DNS_USER }],
    }))?;
    let roles: kube::Api<ClusterRole> = kube::Api::all(client.clone());
    let bindings: kube::Api<ClusterRoleBinding> = kube::Api::all(client.clone());
    for result in [
        roles.create(&Default::default(), &role).await.map(|_| ()),
        bindings
            .create(&Default::default(), &binding)
            .await
            .map(|_| ()),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(format!("creating cluster DNS's ClusterRole: {e}").into()),
        }
    }
    Ok(())
}

async fn default_storage_class(client: &kube::Client) -> Result<(), BoxError> {
    use k8s_openapi::api::storage::v1::StorageClass;
    let classes: kube::Api<StorageClass> = kube::Api::all(client.clone());
    let class: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": { "name": DEFAULT_STORAGE_CLASS,
                      "annotations": { "storageclass.kubernetes.io/is-default-class": "true" } },
        "provisioner": "kubernetes.io/host-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }))?;
    match classes.create(&Default::default(), &class).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(format!("creating the default StorageClass: {e}").into()),
    }
}
