//! Real etcd clusters for tests: [`EtcdCluster`] starts `size` members of etcd 3.4 or 3.5 on a
//! claimed loopback block (member `i` is `m{i}` on `http://127.A.B.i:2379`, peer port 2380), data
//! in a temp dir, one log file per member, and waits until every member is verifiably part of the
//! same cluster. [`EtcdMember`] is the lower-level API: one etcd process from an
//! [`EtcdMemberConfig`], e.g. to join an existing cluster after `member add`.
//!
//! Members are SIGKILLed on drop (SIGTERM to a member without quorum takes ~10 s).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, MemberAddOptions};

use crate::addr::{AddressBlock, MAX_HOSTS, random_hex};
use crate::error::HarnessError;
use crate::process::{
    PANIC_LOG_LINES, ProcessGuard, TestDir, log_tail_section, pid_listens_on,
    print_log_tail_if_panicking, remove_env_prefixed, run_output,
};
use crate::tools::{EtcdVersion, Tools};

/// Client port of every member (on the member's own address).
pub const CLIENT_PORT: u16 = 2379;
/// Peer port of every member (on the member's own address).
pub const PEER_PORT: u16 = 2380;
/// How long [`EtcdCluster::start`] and member restarts wait for readiness.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Per-request timeout of the harness's own readiness probes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Connect and per-request timeout of the clients handed out ([`connect`]): long enough to ride
/// out a leader election on a loaded machine, short enough that a dead cluster fails the test.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(100);

/// `--initial-cluster-state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    /// Founding member of a new cluster.
    New,
    /// Member of an existing cluster (restart, or join after `member add`).
    Existing,
}

impl ClusterState {
    /// The flag value, `new` or `existing`.
    pub fn as_flag(self) -> &'static str {
        match self {
            ClusterState::New => "new",
            ClusterState::Existing => "existing",
        }
    }
}

/// Everything needed to run one etcd process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMemberConfig {
    /// `--name`.
    pub name: String,
    /// The member's own loopback address (client port 2379, peer port 2380).
    pub ip: Ipv4Addr,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// Where stdout and stderr go (appended to across restarts).
    pub log_path: PathBuf,
    /// `--initial-cluster`, e.g. `m1=http://127.130.4.1:2380,m2=...`.
    pub initial_cluster: String,
    /// `--initial-cluster-state`.
    pub initial_cluster_state: ClusterState,
    /// `--initial-cluster-token` (identical on every founding member).
    pub initial_cluster_token: String,
    /// More flags, appended as given.
    pub extra_args: Vec<String>,
}

impl EtcdMemberConfig {
    /// `http://IP:2379`.
    pub fn client_url(&self) -> String {
        format!("http://{}:{CLIENT_PORT}", self.ip)
    }

    /// `http://IP:2380`.
    pub fn peer_url(&self) -> String {
        format!("http://{}:{PEER_PORT}", self.ip)
    }

    /// The command line arguments for `version` (3.4 gets `--logger=zap` for JSON logs like 3.5).
    pub fn args(&self, version: EtcdVersion) -> Vec<String> {
        let client = self.client_url();
        let peer = self.peer_url();
        let mut args = vec![
            format!("--name={}", self.name),
            format!("--data-dir={}", self.data_dir.display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster={}", self.initial_cluster),
            format!(
                "--initial-cluster-state={}",
                self.initial_cluster_state.as_flag()
            ),
            format!("--initial-cluster-token={}", self.initial_cluster_token),
        ];
        if version == EtcdVersion::V3_4 {
            args.push("--logger=zap".into());
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// One etcd process (running or stopped) and its configuration. Dropping it SIGKILLs the process;
/// if the thread is panicking, the last lines of its log are printed first.
#[derive(Debug)]
pub struct EtcdMember {
    config: EtcdMemberConfig,
    version: EtcdVersion,
    process: Option<ProcessGuard>,
}

impl EtcdMember {
    /// Starts etcd `version` with `config`. Only spawns: see [`EtcdMember::wait_ready`].
    pub fn spawn(
        tools: &Tools,
        version: EtcdVersion,
        config: EtcdMemberConfig,
    ) -> Result<EtcdMember, HarnessError> {
        let mut member = EtcdMember {
            config,
            version,
            process: None,
        };
        member.spawn_process(tools, version)?;
        Ok(member)
    }

    fn spawn_process(&mut self, tools: &Tools, version: EtcdVersion) -> Result<(), HarnessError> {
        // etcd creates the data dir itself, with the 0700 mode it wants.
        let binary = tools.etcd(version)?;
        let mut command = Command::new(binary);
        remove_env_prefixed(&mut command, &["ETCD_", "ETCDCTL_"]);
        command.args(self.config.args(version));
        let name = format!("etcd {} {}", version.as_minor(), self.config.name);
        self.process = Some(ProcessGuard::spawn(name, command, &self.config.log_path)?);
        self.version = version;
        Ok(())
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &EtcdMemberConfig {
        &self.config
    }

    /// The configuration the next (re)start uses, e.g. to add a flag.
    pub fn config_mut(&mut self) -> &mut EtcdMemberConfig {
        &mut self.config
    }

    /// `--name`, e.g. `m1`.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its address.
    pub fn ip(&self) -> Ipv4Addr {
        self.config.ip
    }

    /// `http://IP:2379`.
    pub fn client_url(&self) -> String {
        self.config.client_url()
    }

    /// `http://IP:2380`.
    pub fn peer_url(&self) -> String {
        self.config.peer_url()
    }

    /// `--data-dir`.
    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    /// The log file (all runs of this member, each starting with a `### test-support` header).
    pub fn log_path(&self) -> &Path {
        &self.config.log_path
    }

    /// The etcd version it was last started with.
    pub fn version(&self) -> EtcdVersion {
        self.version
    }

    /// The OS process id while a process was started and not yet killed.
    pub fn pid(&mut self) -> Option<u32> {
        if self.is_running() {
            self.process.as_ref().map(ProcessGuard::pid)
        } else {
            None
        }
    }

    /// True while its process runs.
    pub fn is_running(&mut self) -> bool {
        self.process.as_mut().is_some_and(ProcessGuard::is_running)
    }

    /// [`HarnessError::ExitedEarly`] (with the log tail) if the process has exited.
    pub fn check_running(&mut self) -> Result<(), HarnessError> {
        match self.process.as_mut() {
            Some(p) => p.check_running(),
            None => Err(HarnessError::InvalidArgument(format!(
                "etcd {} was never started",
                self.config.name
            ))),
        }
    }

    /// SIGKILL and reap (no-op if not running).
    pub fn kill(&mut self) -> Result<(), HarnessError> {
        if let Some(p) = self.process.as_mut() {
            p.kill()?;
        }
        Ok(())
    }

    /// SIGTERM and wait up to `grace` (then SIGKILL): a graceful stop, e.g. for rolling upgrades.
    pub async fn terminate(&mut self, grace: Duration) -> Result<Option<ExitStatus>, HarnessError> {
        match self.process.as_mut() {
            Some(p) => Ok(Some(p.terminate(grace).await?)),
            None => Ok(None),
        }
    }

    /// Kills the process if it runs, then starts `version` again on the same data dir with
    /// `--initial-cluster-state=state`. Only spawns: see [`EtcdMember::wait_ready`].
    pub fn restart(
        &mut self,
        tools: &Tools,
        version: EtcdVersion,
        state: ClusterState,
    ) -> Result<(), HarnessError> {
        self.kill()?;
        self.config.initial_cluster_state = state;
        self.spawn_process(tools, version)
    }

    /// Replaces the extra flags the member starts with from its next (re)start on.
    pub fn set_extra_args(&mut self, args: Vec<String>) {
        self.config.extra_args = args;
    }

    /// A client for this member's endpoint only.
    pub async fn client(&self) -> Result<Client, HarnessError> {
        connect(&[self.client_url()]).await
    }

    /// Waits until this member alone is ready: its process runs, its endpoint answers `status`
    /// (with `expected_cluster_id` if given, and a known leader), the member id it reports has
    /// this member's name and URLs in its member list, and a linearizable get succeeds.
    /// Returns the cluster id.
    pub async fn wait_ready(
        &mut self,
        expected_cluster_id: Option<u64>,
        timeout: Duration,
    ) -> Result<u64, HarnessError> {
        let expected = BTreeMap::from([(
            self.config.name.clone(),
            (self.peer_url(), self.client_url()),
        )]);
        let what = format!(
            "etcd {} member {} at {}",
            self.version,
            self.name(),
            self.client_url()
        );
        let start = Instant::now();
        let mut client: Option<Client> = None;
        let mut detail = String::from("no check ran");
        while start.elapsed() < timeout {
            self.check_running()?;
            match probe(&mut client, self, &expected, false).await {
                Ok(p) if expected_cluster_id.is_none_or(|id| id == p.cluster_id) => {
                    return Ok(p.cluster_id);
                }
                Ok(p) => {
                    detail = format!(
                        "{} reports cluster id {:x}, expected {:x}",
                        self.client_url(),
                        p.cluster_id,
                        expected_cluster_id.unwrap_or_default()
                    );
                }
                Err(d) => detail = d,
            }
            tokio::time::sleep(POLL).await;
        }
        Err(HarnessError::NotReady {
            what,
            waited: start.elapsed(),
            detail,
            log_tails: log_tail_section(self.name(), self.log_path(), PANIC_LOG_LINES),
        })
    }
}

impl Drop for EtcdMember {
    fn drop(&mut self) {
        print_log_tail_if_panicking(
            &format!("etcd {} {}", self.version, self.config.name),
            &self.config.log_path,
        );
        // The ProcessGuard field SIGKILLs and reaps the process when dropped right after this.
    }
}

/// What one endpoint reported during a readiness probe.
struct Probe {
    cluster_id: u64,
}

/// Checks one member against the expected membership: `status` answers with a header and a known
/// leader, `member_list` matches `expected` (name -> (peer URL, client URL)) exactly when
/// `exact_membership` (else it only has to contain this member), the reporting member id is this
/// member's, and a linearizable get succeeds. Returns a description of the first failed check.
async fn probe(
    client: &mut Option<Client>,
    member: &EtcdMember,
    expected: &BTreeMap<String, (String, String)>,
    exact_membership: bool,
) -> Result<Probe, String> {
    let url = member.client_url();
    // Our process must hold both listeners: a foreign server on a clashing address cannot pass.
    let pid = member
        .process
        .as_ref()
        .map(ProcessGuard::pid)
        .ok_or_else(|| format!("{} was never started", member.name()))?;
    for port in [CLIENT_PORT, PEER_PORT] {
        match pid_listens_on(pid, member.ip(), port) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "{}:{port} is not (yet) listened on by {} (pid {pid})",
                    member.ip(),
                    member.name()
                ));
            }
            Err(e) => return Err(format!("cannot inspect the sockets of pid {pid}: {e}")),
        }
    }
    if client.is_none() {
        *client = Some(
            connect_with_timeout(std::slice::from_ref(&url), PROBE_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let Some(c) = client.as_mut() else {
        return Err(format!("{url}: no client"));
    };
    let status = c
        .status()
        .await
        .map_err(|e| format!("{url}: status: {e}"))?;
    let header = status
        .header()
        .ok_or_else(|| format!("{url}: status without header"))?;
    let (cluster_id, member_id) = (header.cluster_id(), header.member_id());
    if status.leader() == 0 {
        return Err(format!("{url}: no leader yet"));
    }
    let list = c
        .member_list()
        .await
        .map_err(|e| format!("{url}: member list: {e}"))?;
    let listed: BTreeMap<&str, (&[String], &[String])> = list
        .members()
        .iter()
        .map(|m| (m.name(), (m.peer_urls(), m.client_urls())))
        .collect();
    let describe = || {
        list.members()
            .iter()
            .map(|m| {
                format!(
                    "{:x} name={:?} peers={:?} clients={:?}",
                    m.id(),
                    m.name(),
                    m.peer_urls(),
                    m.client_urls()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    if exact_membership {
        let names: BTreeSet<&str> = listed.keys().copied().collect();
        let want: BTreeSet<&str> = expected.keys().map(String::as_str).collect();
        if names != want || list.members().len() != expected.len() {
            return Err(format!(
                "{url}: member list is [{}], expected names {want:?}",
                describe()
            ));
        }
    }
    for (name, (peer, client_url)) in expected {
        match listed.get(name.as_str()) {
            Some((peers, clients))
                if matches!(peers, [p] if p == peer)
                    && matches!(clients, [c] if c == client_url) => {}
            _ => {
                return Err(format!(
                    "{url}: member list [{}] lacks {name} with peer {peer} and client {client_url}",
                    describe()
                ));
            }
        }
    }
    let own = list.members().iter().find(|m| m.id() == member_id);
    if own.is_none_or(|m| m.name() != member.name()) {
        return Err(format!(
            "{url}: answered as member {member_id:x}, which is not {} in [{}]",
            member.name(),
            describe()
        ));
    }
    c.get("test-support/health", None)
        .await
        .map_err(|e| format!("{url}: linearizable get: {e}"))?;
    Ok(Probe { cluster_id })
}

/// Connects an etcd client to `endpoints` with [`CLIENT_TIMEOUT`] as connect and request timeout.
pub async fn connect(endpoints: &[String]) -> Result<Client, HarnessError> {
    connect_with_timeout(endpoints, CLIENT_TIMEOUT).await
}

/// What `etcdctl member add` prints as ETCD_INITIAL_CLUSTER: every member of the answer's list
/// as `name=peerURL`, the added member (`new_id`, not started, so still unnamed) as `new_name`.
pub fn initial_cluster_after_add(
    response: &etcd_client::MemberAddResponse,
    new_id: u64,
    new_name: &str,
) -> String {
    response
        .member_list()
        .iter()
        .flat_map(|m| {
            let name = if m.id() == new_id { new_name } else { m.name() };
            m.peer_urls()
                .iter()
                .map(move |u| format!("{name}={u}"))
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Connects an etcd client to `endpoints` with `timeout` as connect and request timeout.
pub async fn connect_with_timeout(
    endpoints: &[String],
    timeout: Duration,
) -> Result<Client, HarnessError> {
    let options = ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_timeout(timeout);
    Client::connect(endpoints, Some(options))
        .await
        .map_err(|e| HarnessError::etcd(format!("connecting to {}", endpoints.join(",")), e))
}

/// A running etcd cluster of real processes. Dropping it SIGKILLs every member, prints their log
/// tails if the test is panicking, and removes the data (unless `KEEP_TEST_DIRS=1`).
#[derive(Debug)]
pub struct EtcdCluster {
    // Field order is drop order: processes die before the address lock and the dir go.
    members: BTreeMap<usize, EtcdMember>,
    tools: Tools,
    version: EtcdVersion,
    token: String,
    cluster_id: u64,
    block: AddressBlock,
    dir: TestDir,
}

impl EtcdCluster {
    /// Starts a new cluster of `size` (1..=9) members of `version` with the tools of
    /// [`Tools::from_env`] and waits until it is ready.
    pub async fn start(version: EtcdVersion, size: usize) -> Result<EtcdCluster, HarnessError> {
        Self::start_with(&Tools::from_env(), version, size).await
    }

    /// [`EtcdCluster::start`] with explicit tools.
    ///
    /// Ready means: every process still runs, and each endpoint separately answers `status` with
    /// a leader and the same cluster id as the others, lists exactly the expected members with
    /// their peer and client URLs, reports its own member id under the expected name, and
    /// serves a linearizable get (a foreign server on a clashing address cannot pass).
    pub async fn start_with(
        tools: &Tools,
        version: EtcdVersion,
        size: usize,
    ) -> Result<EtcdCluster, HarnessError> {
        if size == 0 || size > usize::from(MAX_HOSTS) {
            return Err(HarnessError::InvalidArgument(format!(
                "an etcd test cluster has 1..={MAX_HOSTS} members, not {size}"
            )));
        }
        // Fail on a missing binary before claiming anything.
        tools.etcd(version)?;
        let block = AddressBlock::claim()?;
        let dir = TestDir::new(&format!("etcd-{}-", block.prefix()))?;
        let token = format!(
            "test-{}-{}-{}",
            block.prefix(),
            std::process::id(),
            random_hex(8)
        );
        let mut cluster = EtcdCluster {
            members: BTreeMap::new(),
            tools: tools.clone(),
            version,
            token,
            cluster_id: 0,
            block,
            dir,
        };
        let initial_cluster = (1..=size)
            .map(|i| cluster.member_config(i, ClusterState::New, ""))
            .map(|c| c.map(|c| format!("{}={}", c.name, c.peer_url())))
            .collect::<Result<Vec<_>, _>>()?
            .join(",");
        for i in 1..=size {
            let config = cluster.member_config(i, ClusterState::New, &initial_cluster)?;
            let member = EtcdMember::spawn(&cluster.tools, version, config)?;
            cluster.members.insert(i, member);
        }
        let indexes: Vec<usize> = cluster.members.keys().copied().collect();
        cluster.cluster_id = cluster.wait_ready(&indexes, None, READY_TIMEOUT).await?;
        Ok(cluster)
    }

    /// The configuration member `i` (1..=9) of this cluster has or would have: name `m{i}`,
    /// address `127.A.B.i`, data dir and log in the cluster's temp dir, the cluster's token.
    pub fn member_config(
        &self,
        i: usize,
        state: ClusterState,
        initial_cluster: &str,
    ) -> Result<EtcdMemberConfig, HarnessError> {
        let host = u8::try_from(i)
            .ok()
            .filter(|h| (1..=MAX_HOSTS).contains(h))
            .ok_or_else(|| {
                HarnessError::InvalidArgument(format!(
                    "etcd member index {i} is outside 1..={MAX_HOSTS}"
                ))
            })?;
        let name = format!("m{i}");
        Ok(EtcdMemberConfig {
            data_dir: self.dir.path().join(&name),
            log_path: self.dir.path().join(format!("{name}.log")),
            name,
            ip: self.block.ip(host),
            initial_cluster: initial_cluster.to_owned(),
            initial_cluster_state: state,
            initial_cluster_token: self.token.clone(),
            extra_args: Vec::new(),
        })
    }

    /// Client URLs of all members (running or not), in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.values().map(EtcdMember::client_url).collect()
    }

    /// Client URLs of the members whose process runs.
    pub fn running_endpoints(&mut self) -> Vec<String> {
        self.members
            .values_mut()
            .filter_map(|m| m.is_running().then(|| m.client_url()))
            .collect()
    }

    /// Member indexes (1-based), in order.
    pub fn member_indexes(&self) -> Vec<usize> {
        self.members.keys().copied().collect()
    }

    /// Member `i` (1-based).
    pub fn member(&self, i: usize) -> Result<&EtcdMember, HarnessError> {
        self.members.get(&i).ok_or_else(|| self.no_such_member(i))
    }

    /// Member `i` (1-based), mutable: for the lower-level [`EtcdMember`] operations.
    pub fn member_mut(&mut self, i: usize) -> Result<&mut EtcdMember, HarnessError> {
        let err = self.no_such_member(i);
        self.members.get_mut(&i).ok_or(err)
    }

    /// Puts `member` (started by the caller, e.g. after its own `member add`) in place of member
    /// `old`, which etcd no longer lists (removed by the caller); returns `old`, whose process
    /// is killed when it is dropped.
    pub fn replace_member(
        &mut self,
        old: usize,
        new: usize,
        member: EtcdMember,
    ) -> Option<EtcdMember> {
        self.members.insert(new, member);
        self.members.remove(&old)
    }

    fn no_such_member(&self, index: usize) -> HarnessError {
        HarnessError::NoSuchMember {
            index,
            known: self.members.keys().copied().collect(),
        }
    }

    /// A client for all endpoints.
    pub async fn client(&self) -> Result<Client, HarnessError> {
        connect(&self.endpoints()).await
    }

    /// A client for member `i`'s endpoint only.
    pub async fn member_client(&self, i: usize) -> Result<Client, HarnessError> {
        self.member(i)?.client().await
    }

    /// The cluster id all members reported at start.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// The version the cluster was started with.
    pub fn version(&self) -> EtcdVersion {
        self.version
    }

    /// The `--initial-cluster-token`.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The claimed address block.
    pub fn address_block(&self) -> &AddressBlock {
        &self.block
    }

    /// The temp dir holding data dirs and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The tools used to start members.
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// SIGKILLs member `i` and reaps it. Its data dir stays for [`EtcdCluster::start_member`].
    pub fn kill_member(&mut self, i: usize) -> Result<(), HarnessError> {
        self.member_mut(i)?.kill()
    }

    /// SIGTERMs member `i` and waits up to `grace` for it to exit (then SIGKILL).
    pub async fn terminate_member(
        &mut self,
        i: usize,
        grace: Duration,
    ) -> Result<Option<ExitStatus>, HarnessError> {
        self.member_mut(i)?.terminate(grace).await
    }

    /// Restarts the stopped (or killed) member `i` with the cluster's version on its data dir,
    /// with the same flags but `--initial-cluster-state=existing`, and waits until it is ready.
    pub async fn start_member(&mut self, i: usize) -> Result<(), HarnessError> {
        self.start_member_with_version(i, self.version).await
    }

    /// [`EtcdCluster::start_member`] with another etcd version (rolling upgrade or downgrade).
    pub async fn start_member_with_version(
        &mut self,
        i: usize,
        version: EtcdVersion,
    ) -> Result<(), HarnessError> {
        let tools = self.tools.clone();
        self.member_mut(i)?
            .restart(&tools, version, ClusterState::Existing)?;
        self.wait_ready(&[i], Some(self.cluster_id), READY_TIMEOUT)
            .await?;
        Ok(())
    }

    /// Starts member `i` as a new process joining this cluster with `--initial-cluster-state=existing`
    /// and the given `--initial-cluster` (as printed by `member add`), then waits until it is ready.
    /// The member must already have been added with `member add` (see [`EtcdCluster::add_member`]).
    pub async fn start_joining_member(
        &mut self,
        i: usize,
        initial_cluster: &str,
    ) -> Result<(), HarnessError> {
        if self.members.contains_key(&i) {
            return Err(HarnessError::InvalidArgument(format!(
                "etcd member {i} already exists in this cluster"
            )));
        }
        let config = self.member_config(i, ClusterState::Existing, initial_cluster)?;
        let member = EtcdMember::spawn(&self.tools, self.version, config)?;
        self.members.insert(i, member);
        self.wait_ready(&[i], Some(self.cluster_id), READY_TIMEOUT)
            .await?;
        Ok(())
    }

    /// `member add` of `m{i}` (retrying while etcd answers "unhealthy cluster", which it does for
    /// ~5 s after a start or a membership change), then [`EtcdCluster::start_joining_member`].
    /// Returns the new member's id.
    ///
    /// Growing a 1-member cluster this way takes ~10 s with etcd 3.5.1: the cluster has no quorum
    /// until the new voter runs, and the new member's start-up check (a linearizable read of the
    /// downgrade status) waits out its 7 s timeout first.
    pub async fn add_member(&mut self, i: usize) -> Result<u64, HarnessError> {
        let config = self.member_config(i, ClusterState::Existing, "")?;
        if self.members.contains_key(&i) {
            return Err(HarnessError::InvalidArgument(format!(
                "etcd member {i} already exists in this cluster"
            )));
        }
        let peer = config.peer_url();
        let mut client = connect(&self.running_endpoints()).await?;
        let start = Instant::now();
        let response = loop {
            match client
                .member_add([peer.as_str()], Some(MemberAddOptions::new()))
                .await
            {
                Ok(r) => break r,
                Err(e) if start.elapsed() < READY_TIMEOUT && is_retryable_membership_error(&e) => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(HarnessError::etcd(format!("member add {peer}"), e)),
            }
        };
        let id = response
            .member()
            .map(|m| m.id())
            .ok_or_else(|| HarnessError::Etcd {
                context: format!("member add {peer}"),
                source: etcd_client::Error::InvalidArgs("response without the new member".into()),
            })?;
        let initial_cluster = initial_cluster_after_add(&response, id, &config.name);
        self.start_joining_member(i, &initial_cluster).await?;
        Ok(id)
    }

    /// `member remove` of member `i` (retrying while etcd answers "unhealthy cluster"), then kills
    /// its process (3.5 exits by itself, 3.4 may not) and forgets it.
    pub async fn remove_member(&mut self, i: usize) -> Result<(), HarnessError> {
        let peer = self.member(i)?.peer_url();
        let others: Vec<String> = self
            .members
            .iter_mut()
            .filter(|(k, _)| **k != i)
            .filter_map(|(_, m)| m.is_running().then(|| m.client_url()))
            .collect();
        let mut client = connect(&others).await?;
        let list = client
            .member_list()
            .await
            .map_err(|e| HarnessError::etcd("member list", e))?;
        let id = list
            .members()
            .iter()
            .find(|m| m.peer_urls().contains(&peer))
            .map(|m| m.id())
            .ok_or_else(|| HarnessError::Etcd {
                context: format!("member remove {peer}"),
                source: etcd_client::Error::InvalidArgs("not in the member list".into()),
            })?;
        let start = Instant::now();
        loop {
            match client.member_remove(id).await {
                Ok(_) => break,
                Err(e) if start.elapsed() < READY_TIMEOUT && is_retryable_membership_error(&e) => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(HarnessError::etcd(format!("member remove {peer}"), e)),
            }
        }
        if let Some(mut member) = self.members.remove(&i) {
            member.kill()?;
        }
        Ok(())
    }

    /// Waits until the members `probe` are ready (see [`EtcdCluster::start_with`]): every running
    /// member's process is alive, each probed endpoint answers with a leader, the same cluster id
    /// (`expected_cluster_id` if given), the exact expected member list (all members of this
    /// cluster, stopped ones included), its own member id under its name, and a linearizable get.
    /// Returns the cluster id.
    pub async fn wait_ready(
        &mut self,
        probe_members: &[usize],
        expected_cluster_id: Option<u64>,
        timeout: Duration,
    ) -> Result<u64, HarnessError> {
        let expected: BTreeMap<String, (String, String)> = self
            .members
            .values()
            .map(|m| (m.name().to_owned(), (m.peer_url(), m.client_url())))
            .collect();
        for i in probe_members {
            self.member(*i)?;
        }
        let what = format!(
            "etcd {} cluster of {} members on {}.x (probing {:?})",
            self.version,
            self.members.len(),
            self.block.prefix(),
            probe_members
        );
        let start = Instant::now();
        let mut clients: BTreeMap<usize, Option<Client>> = BTreeMap::new();
        let mut detail = String::from("no check ran");
        'poll: while start.elapsed() < timeout {
            // A member that cannot bind (or crashed) exits at once: fail fast with its log.
            for i in probe_members {
                self.member_mut(*i)?.check_running()?;
            }
            let mut cluster_id = expected_cluster_id;
            for i in probe_members {
                let client = clients.entry(*i).or_default();
                let member = self.member(*i)?;
                match probe(client, member, &expected, true).await {
                    Ok(p) => match cluster_id {
                        Some(id) if id != p.cluster_id => {
                            detail = format!(
                                "{} reports cluster id {:x}, expected {id:x}",
                                member.client_url(),
                                p.cluster_id
                            );
                            tokio::time::sleep(POLL).await;
                            continue 'poll;
                        }
                        _ => cluster_id = Some(p.cluster_id),
                    },
                    Err(d) => {
                        detail = d;
                        tokio::time::sleep(POLL).await;
                        continue 'poll;
                    }
                }
            }
            if let Some(id) = cluster_id {
                return Ok(id);
            }
            detail = "no member probed".into();
            tokio::time::sleep(POLL).await;
        }
        Err(HarnessError::NotReady {
            what,
            waited: start.elapsed(),
            detail,
            log_tails: self.log_tails(PANIC_LOG_LINES),
        })
    }

    /// The index of the current leader, as reported by the running members: `Some(i)` if a
    /// running member reports member `i` (which answers too) as leader, `None` during an election.
    pub async fn leader(&mut self) -> Result<Option<usize>, HarnessError> {
        let mut ids = BTreeMap::new();
        let mut leaders = BTreeSet::new();
        let running: Vec<(usize, String)> = self
            .members
            .iter_mut()
            .filter_map(|(i, m)| m.is_running().then(|| (*i, m.client_url())))
            .collect();
        for (i, url) in running {
            let Ok(mut client) = connect_with_timeout(&[url], PROBE_TIMEOUT).await else {
                continue;
            };
            if let Ok(status) = client.status().await
                && let Some(header) = status.header()
            {
                ids.insert(header.member_id(), i);
                if status.leader() != 0 {
                    leaders.insert(status.leader());
                }
            }
        }
        Ok(leaders.iter().find_map(|id| ids.get(id).copied()))
    }

    /// Polls [`EtcdCluster::leader`] until there is one (e.g. after killing the leader).
    pub async fn wait_for_leader(&mut self, timeout: Duration) -> Result<usize, HarnessError> {
        let start = Instant::now();
        loop {
            if let Some(i) = self.leader().await? {
                return Ok(i);
            }
            if start.elapsed() > timeout {
                return Err(HarnessError::NotReady {
                    what: format!("a leader in etcd cluster {}.x", self.block.prefix()),
                    waited: start.elapsed(),
                    detail: "no running member reports a running leader".into(),
                    log_tails: self.log_tails(PANIC_LOG_LINES),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Runs the cluster's etcdctl (`etcdctl-3.4`/`etcdctl-3.5`) with
    /// `--endpoints=<running members>` and `args`; returns stdout (an error with stderr if it fails).
    pub fn etcdctl(&mut self, args: &[&str]) -> Result<String, HarnessError> {
        let binary = self.tools.etcdctl(self.version)?;
        let mut command = Command::new(binary);
        remove_env_prefixed(&mut command, &["ETCD_", "ETCDCTL_"]);
        command
            .env("ETCDCTL_API", "3")
            .arg(format!(
                "--endpoints={}",
                self.running_endpoints().join(",")
            ))
            .args(args);
        run_output(command)
    }

    /// The last `lines` lines of every member's log, each under a header.
    pub fn log_tails(&self, lines: usize) -> String {
        self.members
            .values()
            .map(|m| log_tail_section(&format!("etcd {}", m.name()), m.log_path(), lines))
            .collect()
    }
}

/// Errors etcd returns before applying a membership change, so retrying cannot apply it twice.
fn is_retryable_membership_error(e: &etcd_client::Error) -> bool {
    let text = e.to_string();
    text.contains("unhealthy cluster") || text.contains("no leader")
}
