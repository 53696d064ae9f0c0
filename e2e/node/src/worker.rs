//! One pod's life on the node: sandbox, volumes, init containers in order, containers with
//! their restart policy, back-off and probes, graceful termination, and the status it reports.
//! Each `sync` computes the next steps from what it observes (the latest Pod, the processes),
//! so a missed event is repaired by the next tick.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};
use localkube_podspec::backoff::{Backoff, crash_loop_event_message, crash_loop_message};
use localkube_podspec::image_map::ImageEntry;
use localkube_podspec::probes::{
    ContainerProbes, ProbeKind, ProbeOutcome, ProbeSettings, kill_message, probe_action,
    unhealthy_message,
};
use localkube_podspec::status::{
    ObservedContainer, ObservedState, ObservedTerminated, PodObservation,
};
use localkube_sandbox::{
    BindMount, Confinement, ContainerSpec, PodSandbox, SandboxSpec, SpawnError,
};
use tokio::sync::{mpsc, oneshot};

use crate::NodeOptions;
use crate::lookups::Snapshot;
use crate::probe;

pub enum WorkerMessage {
    Update(Box<Pod>),
    /// The pod left the API (force-deleted, or deleted while the agent was away).
    Gone,
    /// localkube is stopping.
    Shutdown,
}

/// How often a pod is re-synced without news (probes with `periodSeconds: 1` need this).
const TICK: Duration = Duration::from_millis(500);
/// Stopping localkube waits at most this long per pod before SIGKILL.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

struct Exit {
    container: String,
    seq: u64,
    status: localkube_sandbox::ExitStatus,
    finished_at: jiff::Timestamp,
}

struct Running {
    seq: u64,
    id: String,
    image: String,
    pid: u32,
    started_at: jiff::Timestamp,
    started_instant: Instant,
    env: Vec<(String, String)>,
    stop: Option<oneshot::Sender<Duration>>,
    /// Why it is being stopped (a liveness failure or an image change restarts it whatever the
    /// restart policy).
    restart_anyway: bool,
    /// An image change is not a failure: no back-off for the restart it causes.
    skip_backoff: bool,
}

#[derive(Clone)]
struct Terminated {
    exit_code: i32,
    signal: Option<i32>,
    reason: String,
    message: Option<String>,
    started_at: jiff::Timestamp,
    finished_at: jiff::Timestamp,
    id: String,
}

struct ContainerRuntime {
    running: Option<Running>,
    seq: u64,
    restart_count: i32,
    last_state: Option<Terminated>,
    terminated: Option<Terminated>,
    waiting: Option<(String, Option<String>)>,
    /// The next start restarts whatever the policy says (liveness failure, image change).
    restart_anyway: bool,
    /// The running instance's probes (new for each instance).
    probes: ContainerProbes,
    /// CrashLoopBackOff between restarts, ImagePullBackOff between pulls.
    crash: Backoff,
    pull: Backoff,
    /// The last Warning message published, so a retried failure does not flood events.
    last_warning: Option<String>,
}

impl Default for ContainerRuntime {
    fn default() -> Self {
        ContainerRuntime {
            running: None,
            seq: 0,
            restart_count: 0,
            last_state: None,
            terminated: None,
            waiting: None,
            restart_anyway: false,
            probes: ContainerProbes::default(),
            crash: Backoff::crash_loop(),
            pull: Backoff::image_pull(),
            last_warning: None,
        }
    }
}

pub struct PodWorker {
    client: Client,
    options: Arc<NodeOptions>,
    pod: Pod,
    uid: String,
    ns: String,
    name: String,
    pod_dir: PathBuf,
    sandbox: Option<PodSandbox>,
    volumes: Option<BTreeMap<String, PathBuf>>,
    volume_error: Option<String>,
    containers: BTreeMap<String, ContainerRuntime>,
    start_time: jiff::Timestamp,
    recorder: Recorder,
    last_status: Option<serde_json::Value>,
    /// Once the pod reached Succeeded/Failed, nothing runs again.
    finished: bool,
}

enum Flow {
    Continue,
    Done,
}

impl PodWorker {
    pub fn new(client: Client, options: Arc<NodeOptions>, pod: Pod) -> PodWorker {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "kubelet".into(),
                instance: Some(options.node_name.clone()),
            },
        );
        let pod_dir = options.root.join("pods").join(&uid);
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        PodWorker {
            client,
            pod_dir,
            options,
            pod,
            uid,
            ns,
            name,
            sandbox: None,
            volumes: None,
            volume_error: None,
            containers: BTreeMap::new(),
            start_time: jiff::Timestamp::now(),
            recorder,
            last_status: None,
            finished,
        }
    }

    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<WorkerMessage>) {
        let (exit_tx, mut exit_rx) = mpsc::unbounded_channel::<Exit>();
        if let Some(start) = self.pod.status.as_ref().and_then(|s| s.start_time.as_ref()) {
            self.start_time = start.0;
        }
        loop {
            if let Flow::Done = self.sync(&exit_tx).await {
                break;
            }
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(WorkerMessage::Update(pod)) => self.pod = *pod,
                    Some(WorkerMessage::Gone) | None => {
                        self.teardown(Duration::from_secs(2)).await;
                        break;
                    }
                    Some(WorkerMessage::Shutdown) => {
                        let grace = self.grace().min(SHUTDOWN_GRACE);
                        self.teardown(grace).await;
                        break;
                    }
                },
                Some(exit) = exit_rx.recv() => self.record_exit(exit),
                _ = tokio::time::sleep(TICK) => {}
            }
        }
    }

    fn spec_containers(&self, init: bool) -> Vec<Container> {
        let spec = self.pod.spec.as_ref();
        if init {
            spec.and_then(|s| s.init_containers.clone())
                .unwrap_or_default()
        } else {
            spec.map(|s| s.containers.clone()).unwrap_or_default()
        }
    }

    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    fn grace(&self) -> Duration {
        let secs = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(secs.max(0) as u64)
    }

    fn object_ref(&self) -> ObjectReference {
        self.pod.object_ref(&())
    }

    async fn event(&self, type_: EventType, reason: &str, note: String) {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &self.object_ref()).await {
            tracing::debug!(pod = %self.name, error = %e, "publishing an event");
        }
    }

    /// A Warning once per distinct message (the kubelet aggregates repeats into a count).
    async fn warn_once(&mut self, container: &str, reason: &str, message: String) {
        let rt = self.containers.entry(container.to_string()).or_default();
        if rt.last_warning.as_deref() == Some(message.as_str()) {
            return;
        }
        rt.last_warning = Some(message.clone());
        self.event(EventType::Warning, reason, message).await;
    }

    fn record_exit(&mut self, exit: Exit) {
        let Some(rt) = self.containers.get_mut(&exit.container) else {
            return;
        };
        let Some(running) = rt.running.take_if(|r| r.seq == exit.seq) else {
            return;
        };
        let ran = running.started_instant.elapsed();
        let reason = if exit.status.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        };
        rt.terminated = Some(Terminated {
            exit_code: exit.status.exit_code,
            signal: exit.status.signal,
            reason: reason.into(),
            message: None,
            started_at: running.started_at,
            finished_at: exit.finished_at,
            id: running.id,
        });
        rt.restart_anyway = running.restart_anyway;
        rt.probes = ContainerProbes::default();
        if !running.skip_backoff {
            rt.crash.on_exit(exit.finished_at, ran);
        }
    }

    async fn sync(&mut self, exit_tx: &mpsc::UnboundedSender<Exit>) -> Flow {
        if self.pod.metadata.deletion_timestamp.is_some() {
            return self.finish_deletion().await;
        }
        if self.finished {
            self.stop_sandbox().await;
            self.publish_status().await;
            return Flow::Continue;
        }
        if self.sandbox.is_none() && !self.create_sandbox().await {
            return Flow::Continue;
        }
        if self.volumes.is_none() && !self.prepare_volumes().await {
            self.publish_status().await;
            return Flow::Continue;
        }
        if self.run_init_containers(exit_tx).await {
            self.run_containers(exit_tx).await;
        }
        self.run_probes().await;
        if let Some(phase) = self.terminal_phase() {
            tracing::info!(pod = %self.name, phase, "pod finished");
            self.finished = true;
        }
        self.publish_status().await;
        Flow::Continue
    }

    async fn create_sandbox(&mut self) -> bool {
        let hostname = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| self.name.clone());
        let hostname: String = hostname.chars().take(63).collect();
        let spec = SandboxSpec {
            id: format!("{}_{}_{}", self.ns, self.name, self.uid),
            hostname: hostname.clone(),
        };
        match self.options.network.create_sandbox(spec).await {
            Ok(sandbox) => {
                if let Err(e) = self.write_pod_files(&hostname, &sandbox.ip().to_string()) {
                    self.warn_once("", "FailedCreatePodSandBox", e).await;
                    let _ = sandbox.destroy().await;
                    return false;
                }
                self.sandbox = Some(sandbox);
                true
            }
            Err(e) => {
                self.warn_once(
                    "",
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: {e}"),
                )
                .await;
                false
            }
        }
    }

    /// /etc/hosts, /etc/resolv.conf and /etc/hostname as the kubelet writes them.
    fn write_pod_files(&self, hostname: &str, ip: &str) -> Result<(), String> {
        use localkube_podspec::dns;
        let etc = self.pod_dir.join("etc");
        std::fs::create_dir_all(&etc).map_err(|e| format!("creating {}: {e}", etc.display()))?;
        let settings = dns::DnsSettings {
            cluster_dns: vec![self.options.dns_server.into()],
            cluster_domain: self.options.cluster_domain.clone(),
            host_resolv_conf: None,
        };
        let resolv = dns::resolv_conf(&self.pod, &settings).map_err(|e| e.to_string())?;
        let hosts = dns::etc_hosts(&self.pod, &[ip.to_string()], &self.options.cluster_domain)
            .map_err(|e| e.to_string())?;
        for (file, content) in [
            ("resolv.conf", resolv.render()),
            ("hosts", hosts),
            ("hostname", format!("{hostname}\n")),
        ] {
            let path = etc.join(file);
            std::fs::write(&path, content)
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        Ok(())
    }

    fn pod_context(&self) -> localkube_podspec::PodContext {
        localkube_podspec::PodContext {
            pod_ips: self.sandbox.iter().map(|s| s.ip().to_string()).collect(),
            host_ips: vec![self.options.host_ip.to_string()],
            node_allocatable: Default::default(),
        }
    }

    async fn prepare_volumes(&mut self) -> bool {
        let lookups = match Snapshot::fetch(&self.client, &self.pod).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(pod = %self.name, error = %e, "reading secrets/configmaps");
                return false;
            }
        };
        let ctx = self.pod_context();
        let dirs = crate::volumes::Dirs {
            pod: &self.pod_dir,
            volumes: &self.options.volume_dirs,
        };
        match crate::volumes::prepare(&self.client, &self.pod, dirs, &lookups, &ctx).await {
            Ok(v) => {
                self.volumes = Some(v);
                self.volume_error = None;
                true
            }
            Err(e) => {
                self.volume_error = Some(e.0.clone());
                self.warn_once("", "FailedMount", e.0).await;
                false
            }
        }
    }

    /// Runs the init containers in order; true once all have succeeded.
    async fn run_init_containers(&mut self, exit_tx: &mpsc::UnboundedSender<Exit>) -> bool {
        let never = self.restart_policy() == "Never";
        for c in self.spec_containers(true) {
            let rt = self.containers.entry(c.name.clone()).or_default();
            if rt.running.is_some() {
                return false;
            }
            match &rt.terminated {
                Some(t) if t.exit_code == 0 => continue,
                Some(_) if never => return false,
                _ => {}
            }
            self.start_if_due(&c, exit_tx).await;
            return false;
        }
        true
    }

    async fn run_containers(&mut self, exit_tx: &mpsc::UnboundedSender<Exit>) {
        let policy = self.restart_policy();
        for c in self.spec_containers(false) {
            let rt = self.containers.entry(c.name.clone()).or_default();
            if let Some(running) = rt.running.as_mut() {
                // An in-place image change restarts the container with the new image.
                if running.image != c.image.clone().unwrap_or_default() && running.stop.is_some() {
                    running.restart_anyway = true;
                    running.skip_backoff = true;
                    if let Some(stop) = running.stop.take() {
                        let _ = stop.send(Duration::from_secs(30));
                    }
                    let note =
                        format!("Container {} definition changed, will be restarted", c.name);
                    self.event(EventType::Normal, "Killing", note).await;
                }
                continue;
            }
            let restart = match &rt.terminated {
                None => true,
                Some(_) if rt.restart_anyway => true,
                Some(t) => match policy.as_str() {
                    "Always" => true,
                    "OnFailure" => t.exit_code != 0,
                    _ => false,
                },
            };
            if restart {
                self.start_if_due(&c, exit_tx).await;
            }
        }
    }

    /// Start `c` unless its back-off has not expired (then it waits in CrashLoopBackOff).
    async fn start_if_due(&mut self, c: &Container, exit_tx: &mpsc::UnboundedSender<Exit>) {
        // An image that does not resolve waits in ImagePullBackOff, not CrashLoopBackOff.
        let image = c.image.clone().unwrap_or_default();
        if self.options.images.resolve(&image).is_none() {
            self.image_pull_failed(c, &image).await;
            return;
        }
        let rt = self.containers.entry(c.name.clone()).or_default();
        if !rt.crash.ready_to_restart(jiff::Timestamp::now()) {
            let delay = rt.crash.delay().unwrap_or_default();
            let message = crash_loop_message(delay, &c.name, &self.pod);
            self.set_waiting(&c.name, "CrashLoopBackOff", Some(message));
            let event = crash_loop_event_message(&c.name, &self.pod);
            self.warn_once(&c.name, "BackOff", event).await;
            return;
        }
        self.start(c, exit_tx).await;
    }

    async fn start(&mut self, c: &Container, exit_tx: &mpsc::UnboundedSender<Exit>) {
        let image_name = c.image.clone().unwrap_or_default();
        let Some(image) = self.options.images.resolve(&image_name).cloned() else {
            self.image_pull_failed(c, &image_name).await;
            return;
        };
        let lookups = match Snapshot::fetch(&self.client, &self.pod).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(pod = %self.name, error = %e, "reading secrets/configmaps");
                return;
            }
        };
        let ctx = self.pod_context();
        let env = match localkube_podspec::env::container_env(
            &self.pod,
            c,
            &lookups,
            &ctx,
            &lookups.services,
        ) {
            Ok(env) => env,
            Err(e) => {
                self.set_waiting(&c.name, e.reason(), Some(e.to_string()));
                self.warn_once(&c.name, "Failed", format!("Error: {e}"))
                    .await;
                return;
            }
        };
        let hostname = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| self.name.clone());
        let mut process_env = env.process_env(&hostname, Some(&image));
        let argv = match localkube_podspec::command::container_argv(c, Some(&image), &env.vars) {
            Ok(argv) => argv,
            Err(e) => {
                self.set_waiting(&c.name, e.reason(), Some(e.to_string()));
                self.warn_once(&c.name, "Failed", format!("Error: {e}"))
                    .await;
                return;
            }
        };
        let confinement =
            match localkube_podspec::security::container_security(&self.pod, c, &image) {
                Ok(s) => Confinement {
                    uid: s.uid,
                    gid: s.gid,
                    supplementary_groups: s.supplementary_groups,
                    no_new_privileges: s.no_new_privileges,
                    read_only_root: s.read_only_root_filesystem,
                },
                Err(e) => {
                    self.set_waiting(&c.name, e.reason(), Some(e.to_string()));
                    self.warn_once(&c.name, "Failed", format!("Error: {e}"))
                        .await;
                    return;
                }
            };
        // runc gives a process without HOME the home directory of its user: /root for root, and
        // / for a uid the image's /etc/passwd does not list (localkube's images have none).
        if !process_env.iter().any(|(k, _)| k == "HOME") {
            let home = if confinement.uid == 0 { "/root" } else { "/" };
            process_env.push(("HOME".into(), home.into()));
        }
        let mounts = match self.mounts_for(c, &image, &env.vars) {
            Ok(m) => m,
            Err(message) => {
                self.set_waiting(&c.name, "CreateContainerConfigError", Some(message.clone()));
                self.warn_once(&c.name, "Failed", format!("Error: {message}"))
                    .await;
                return;
            }
        };
        let rt = self.containers.entry(c.name.clone()).or_default();
        let restart_count = rt.restart_count + i32::from(rt.terminated.is_some());
        let log_path = self
            .options
            .logs_dir
            .join(format!("{}_{}_{}", self.ns, self.name, self.uid))
            .join(&c.name)
            .join(format!("{restart_count}.log"));
        let spec = ContainerSpec {
            name: c.name.clone(),
            argv,
            env: process_env.clone(),
            working_dir: c
                .working_dir
                .clone()
                .or(image.working_dir.clone())
                .map(PathBuf::from),
            mounts,
            log_path,
            confinement,
        };
        let Some(sandbox) = self.sandbox.as_ref() else {
            return;
        };
        self.event(
            EventType::Normal,
            "Pulled",
            format!("Container image \"{image_name}\" already present on machine"),
        )
        .await;
        let spawned = sandbox.spawn(spec).await;
        let rt = self.containers.entry(c.name.clone()).or_default();
        rt.seq += 1;
        let seq = rt.seq;
        let id = format!("{:016x}", hash(&(self.uid.clone(), c.name.clone(), seq)));
        if let Some(previous) = rt.terminated.take() {
            rt.restart_count += 1;
            rt.last_state = Some(previous);
        }
        rt.waiting = None;
        rt.restart_anyway = false;
        rt.probes = ContainerProbes::default();
        match spawned {
            Ok(mut container) => {
                let now = jiff::Timestamp::now();
                rt.probes = ContainerProbes::for_container(c);
                rt.last_warning = None;
                let (stop_tx, stop_rx) = oneshot::channel::<Duration>();
                rt.running = Some(Running {
                    seq,
                    id,
                    image: image_name.clone(),
                    pid: container.pid(),
                    started_at: now,
                    started_instant: Instant::now(),
                    env: process_env,
                    stop: Some(stop_tx),
                    restart_anyway: false,
                    skip_backoff: false,
                });
                let exits = exit_tx.clone();
                let name = c.name.clone();
                tokio::spawn(async move {
                    let status = tokio::select! {
                        status = container.wait() => status,
                        grace = stop_rx => match grace {
                            Ok(grace) => container.stop(grace).await,
                            Err(_) => container.wait().await,
                        },
                    };
                    let _ = exits.send(Exit {
                        container: name,
                        seq,
                        status,
                        finished_at: jiff::Timestamp::now(),
                    });
                });
                self.event(
                    EventType::Normal,
                    "Created",
                    format!("Created container: {}", c.name),
                )
                .await;
                self.event(
                    EventType::Normal,
                    "Started",
                    format!("Started container {}", c.name),
                )
                .await;
            }
            Err(e) => {
                let message = match &e {
                    SpawnError::NotFound { .. } | SpawnError::NotExecutable { .. } => format!(
                        "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: {e}: unknown"
                    ),
                    other => other.to_string(),
                };
                let now = jiff::Timestamp::now();
                rt.terminated = Some(Terminated {
                    exit_code: 128,
                    signal: None,
                    reason: "StartError".into(),
                    message: Some(message.clone()),
                    started_at: now,
                    finished_at: now,
                    id,
                });
                rt.crash.on_exit(now, Duration::ZERO);
                self.warn_once(&c.name, "Failed", format!("Error: {message}"))
                    .await;
            }
        }
    }

    async fn image_pull_failed(&mut self, c: &Container, image: &str) {
        let now = jiff::Timestamp::now();
        let rt = self.containers.entry(c.name.clone()).or_default();
        if !rt.pull.ready_to_restart(now) {
            rt.waiting = Some((
                "ImagePullBackOff".into(),
                Some(localkube_podspec::image_map::pull_backoff_message(image)),
            ));
            self.warn_once(
                &c.name,
                "BackOff",
                format!("Back-off pulling image \"{image}\""),
            )
            .await;
            return;
        }
        rt.pull.on_exit(now, Duration::ZERO);
        let message = localkube_podspec::image_map::pull_error_message(image);
        rt.waiting = Some(("ErrImagePull".into(), Some(message.clone())));
        rt.last_warning = None;
        self.warn_once(
            &c.name,
            "Failed",
            format!("Failed to pull image \"{image}\": {message}"),
        )
        .await;
    }

    fn set_waiting(&mut self, container: &str, reason: &str, message: Option<String>) {
        let rt = self.containers.entry(container.to_string()).or_default();
        rt.waiting = Some((reason.to_string(), message));
    }

    /// The image's binaries, the pod's /etc files, then the container's volume mounts.
    fn mounts_for(
        &self,
        c: &Container,
        image: &ImageEntry,
        env: &[(String, String)],
    ) -> Result<Vec<BindMount>, String> {
        let mut mounts: Vec<BindMount> = image
            .mounts
            .iter()
            .map(|m| BindMount {
                source: PathBuf::from(&m.host_path),
                target: PathBuf::from(&m.mount_path),
                read_only: true,
            })
            .collect();
        let etc = self.pod_dir.join("etc");
        for file in ["hosts", "resolv.conf", "hostname"] {
            mounts.push(BindMount {
                source: etc.join(file),
                target: PathBuf::from("/etc").join(file),
                read_only: false,
            });
        }
        let dirs = self.volumes.as_ref().ok_or("volumes are not ready")?;
        let volumes = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        let wanted =
            localkube_podspec::volumes::mounts_for(c, &volumes, env).map_err(|e| e.to_string())?;
        for m in wanted {
            let root = dirs
                .get(&m.volume)
                .ok_or_else(|| format!("volume {:?} is not prepared", m.volume))?;
            let source = match &m.sub_path {
                Some(sub) => {
                    let p = root.join(sub);
                    if !p.exists() {
                        std::fs::create_dir_all(&p)
                            .map_err(|e| format!("creating subPath {}: {e}", p.display()))?;
                    }
                    p
                }
                None => root.clone(),
            };
            mounts.push(BindMount {
                source,
                target: PathBuf::from(&m.mount_path),
                read_only: m.read_only,
            });
        }
        Ok(mounts)
    }

    /// Run the probes that are due; a failed liveness or startup probe restarts the container.
    async fn run_probes(&mut self) {
        let Some(sandbox) = self.sandbox.as_ref() else {
            return;
        };
        let pod_ip = sandbox.ip().to_string();
        let containers = self.spec_containers(false);
        let mut events: Vec<(EventType, &'static str, String)> = Vec::new();
        for c in &containers {
            let Some(rt) = self.containers.get_mut(&c.name) else {
                continue;
            };
            let Some(running) = rt.running.as_ref() else {
                continue;
            };
            let (pid, env, started_at) = (running.pid, running.env.clone(), running.started_at);
            let now = jiff::Timestamp::now();
            for kind in rt.probes.due(now, started_at) {
                let spec = match kind {
                    ProbeKind::Startup => c.startup_probe.as_ref(),
                    ProbeKind::Readiness => c.readiness_probe.as_ref(),
                    ProbeKind::Liveness => c.liveness_probe.as_ref(),
                };
                let Some(spec) = spec else {
                    continue;
                };
                let timeout = ProbeSettings::from_probe(spec).timeout;
                let outcome = match probe_action(spec, kind, c, &pod_ip) {
                    Ok(action) => probe::perform(&action, sandbox, pid, &env, timeout).await,
                    Err(e) => ProbeOutcome::Failure(e.to_string()),
                };
                if let ProbeOutcome::Failure(output) = &outcome {
                    events.push((
                        EventType::Warning,
                        "Unhealthy",
                        unhealthy_message(kind, output),
                    ));
                }
                rt.probes.record(kind, now, &outcome);
            }
            if let Some(kind) = rt.probes.failed()
                && let Some(running) = rt.running.as_mut()
                && let Some(stop) = running.stop.take()
            {
                running.restart_anyway = true;
                let _ = stop.send(Duration::from_secs(30));
                events.push((EventType::Normal, "Killing", kill_message(kind, &c.name)));
            }
        }
        for (t, reason, note) in events {
            self.event(t, reason, note).await;
        }
    }

    /// Succeeded/Failed once nothing will run again (kubelet's getPhase for terminal pods).
    fn terminal_phase(&self) -> Option<&'static str> {
        let policy = self.restart_policy();
        let inits = self.spec_containers(true);
        // A failed init container with restartPolicy Never fails the pod.
        if policy == "Never"
            && inits.iter().any(|c| {
                self.containers
                    .get(&c.name)
                    .and_then(|rt| rt.terminated.as_ref())
                    .is_some_and(|t| t.exit_code != 0)
            })
        {
            return Some("Failed");
        }
        if policy == "Always" {
            return None;
        }
        let containers = self.spec_containers(false);
        let mut all_ok = true;
        for c in &containers {
            let rt = self.containers.get(&c.name)?;
            if rt.running.is_some() {
                return None;
            }
            let t = rt.terminated.as_ref()?;
            if t.exit_code != 0 {
                if policy == "OnFailure" {
                    return None;
                }
                all_ok = false;
            }
        }
        Some(if all_ok { "Succeeded" } else { "Failed" })
    }

    /// Graceful deletion: stop the containers within the grace period, tear the sandbox down,
    /// then remove the Pod object (grace 0, uid precondition) as the kubelet does.
    async fn finish_deletion(&mut self) -> Flow {
        let grace = self.grace();
        self.stop_all(grace).await;
        self.stop_sandbox().await;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match pods.delete(&self.name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => {
                tracing::warn!(pod = %self.name, error = %e, "deleting the stopped pod; retrying");
                return Flow::Continue;
            }
        }
        let _ = std::fs::remove_dir_all(&self.pod_dir);
        Flow::Done
    }

    /// Stop every running container (SIGTERM, SIGKILL after `grace`) and wait for them.
    async fn stop_all(&mut self, grace: Duration) {
        let mut waiting = Vec::new();
        for (name, rt) in self.containers.iter_mut() {
            if let Some(running) = rt.running.as_mut()
                && let Some(stop) = running.stop.take()
            {
                let _ = stop.send(grace);
                waiting.push((name.clone(), running.pid));
            }
        }
        let deadline = Instant::now() + grace + Duration::from_secs(5);
        for (_, pid) in waiting {
            while std::path::Path::new(&format!("/proc/{pid}")).exists()
                && Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        for rt in self.containers.values_mut() {
            rt.running = None;
        }
    }

    async fn stop_sandbox(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            self.stop_all(Duration::from_secs(2)).await;
            if let Err(e) = sandbox.destroy().await {
                tracing::warn!(pod = %self.name, error = %e, "destroying the pod sandbox");
            }
        }
    }

    async fn teardown(&mut self, grace: Duration) {
        self.stop_all(grace).await;
        self.stop_sandbox().await;
    }

    async fn publish_status(&mut self) {
        let status = self.compute_status();
        let value = match serde_json::to_value(&status) {
            Ok(v) => v,
            Err(_) => return,
        };
        if self.last_status.as_ref() == Some(&value) {
            return;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        match crate::status_report::patch_pod_status(&pods, &self.name, &status).await {
            Ok(pod) => {
                self.last_status = Some(value);
                if pod.metadata.uid.as_deref() == Some(self.uid.as_str()) {
                    self.pod.status = pod.status;
                }
            }
            Err(e) => tracing::debug!(pod = %self.name, error = %e, "status update; retrying"),
        }
    }

    /// What the node observes of one container, for `localkube_podspec::status`.
    fn observe(&self, c: &Container) -> ObservedContainer {
        let rt = self.containers.get(&c.name);
        let image = c.image.clone().unwrap_or_default();
        let image_id = self
            .options
            .images
            .resolve(&image)
            .map(|e| e.image_id(&image))
            .unwrap_or_default();
        let not_created = if self.volume_error.is_some() || self.sandbox.is_none() {
            "ContainerCreating"
        } else {
            "PodInitializing"
        };
        let (state, container_id) = match rt {
            Some(rt) => match (&rt.running, &rt.waiting, &rt.terminated) {
                (Some(r), _, _) => (
                    ObservedState::Running {
                        started_at: r.started_at,
                        started: rt.probes.started(),
                        ready: rt.probes.ready(),
                    },
                    Some(r.id.clone()),
                ),
                (None, Some((reason, message)), last) => (
                    ObservedState::Waiting {
                        reason: reason.clone(),
                        message: message.clone(),
                    },
                    last.as_ref().map(|t| t.id.clone()),
                ),
                (None, None, Some(t)) => {
                    (ObservedState::Terminated(observed(t)), Some(t.id.clone()))
                }
                (None, None, None) => (
                    ObservedState::Waiting {
                        reason: "ContainerCreating".into(),
                        message: None,
                    },
                    None,
                ),
            },
            None => (
                ObservedState::Waiting {
                    reason: not_created.into(),
                    message: None,
                },
                None,
            ),
        };
        ObservedContainer {
            name: c.name.clone(),
            image: None,
            image_id,
            container_id,
            state,
            restart_count: rt.map(|r| r.restart_count).unwrap_or(0),
            last_state: rt.and_then(|r| r.last_state.as_ref()).map(observed),
        }
    }

    fn compute_status(&self) -> PodStatus {
        let containers = self
            .spec_containers(true)
            .iter()
            .chain(self.spec_containers(false).iter())
            .map(|c| self.observe(c))
            .collect();
        let observation = PodObservation {
            containers,
            sandbox_ready: self.sandbox.is_some(),
            pod_ips: self.sandbox.iter().map(|s| s.ip().to_string()).collect(),
            host_ips: vec![self.options.host_ip.to_string()],
            pod_is_terminal: self.finished,
        };
        let mut status =
            localkube_podspec::status::pod_status(&self.pod, &observation, jiff::Timestamp::now());
        status.start_time = Some(Time(self.start_time));
        status
    }
}

fn observed(t: &Terminated) -> ObservedTerminated {
    ObservedTerminated {
        exit_code: t.exit_code,
        signal: t.signal,
        reason: Some(t.reason.clone()),
        message: t.message.clone(),
        started_at: Some(t.started_at),
        finished_at: Some(t.finished_at),
        container_id: Some(t.id.clone()),
    }
}

fn hash<T: std::hash::Hash>(value: &T) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}
