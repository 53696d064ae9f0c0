//! `make bench` (restore part): how long the restore operator takes from `kubectl apply` of an
//! EtcdRestore (`backupRef`) to phase Succeeded — the cluster Available at full size around the
//! seed built from a ~1 GiB snapshot — against the same steps done by hand on host processes in
//! the same run: download the same S3 object (`aws s3 cp`), `etcdutl snapshot restore`, start
//! etcd 3.6 on it, then twice `member add --learner`, start the member with `existing`,
//! `member promote` once it has caught up, until 3 healthy voters.
//!
//! Setup (not timed): the local control plane with the chart installed (as the scenarios do),
//! the S3 Pod, bucket and Secret (tests/common), an EtcdCluster of 3 members (3.6) filled
//! through its client Service with `BENCH_DB_MIB` (default 1024) incompressible 1 MiB values by
//! several writers, and one EtcdBackup: the object both sides restore. Before each operator
//! round two of the cluster's three members are deleted with their PVCs (quorum lost, as in the
//! restore scenario); the cluster restored by one round is the one the next round breaks.
//! After the steps table it prints the cluster operator's reconcile passes during each operator
//! round (its `pass` debug lines; the chart is installed with JSON logs for them): where growing
//! the seed back to full size waits, inside passes by step or between them.
//!
//! Does I/O throughout: localkube, kubectl, etcd Pods and processes, the aws CLI, etcdutl. Needs
//! the workspace's binaries built: localkube runs the operator binaries next to itself (`make
//! bench` builds them in release, as the image ships them, and points `LOCALKUBE_BIN` at
//! `target/release/localkube`; without it, `target/debug`'s). `BENCH_ROUNDS` (default 5: a round
//! pair at 1 GiB is under a minute, and one round's ratio moved by ±40% between runs: etcd's
//! publish race and a new Pod's DNS name add whole seconds to either side at random) sets the
//! rounds of each side, alternating operator, by hand; the ratio is of the medians, and also of
//! the fastest rounds (where neither side lost seconds to luck). With
//! `BENCH_RESULTS` set (as `make bench` does), the ratio is appended there for the combined table
//! (`test_support::bench`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod by_hand;
#[path = "../tests/common/mod.rs"]
mod common;
mod passes;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use by_hand::{healthy_voters, retry_later};
use common::*;
use etcd_api::{BackupArtifact, BackupPhase, EtcdBackup, EtcdCluster, EtcdRestore};
use etcd_api::{RestorePhase, restore::RESTORING_ANNOTATION};
use etcd_client::{Client, GetOptions, MemberAddOptions};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use passes::PassLine;
use test_support::bench::{self, Figure, Part, Side, Steps, Unit};
use test_support::process::TestDir;
use test_support::{AddressBlock, ClusterState, EtcdMember, EtcdMemberConfig, EtcdVersion, Tools};

const VERSION: EtcdVersion = EtcdVersion::V3_6;
const SIZE: usize = 3;
const CLUSTER: &str = "bench";
const BACKUP: &str = "bench-backup";
const PREFIX: &str = "bench/";
/// The label of every Pod and PVC of an EtcdCluster (the cluster operator's build.rs).
const CLUSTER_LABEL: &str = "etcd.operator.rs/cluster";
/// The label the restore operator puts on the old members' PVCs it keeps.
const RETAINED_LABEL: &str = "etcd.operator.rs/retained-by-restore";
/// The seed Pod's init container (operators/restore/src/seed.rs).
const INIT_CONTAINER: &str = "prepare-seed";
/// `--quota-backend-bytes` on both sides: etcd's default 2 GiB is tight for 1 GiB of values
/// plus bbolt's free pages (the backup bench uses the same).
const QUOTA: u64 = 4 << 30;
const MIB: usize = 1024 * 1024;
/// One value; `BENCH_DB_MIB` of them make the DB.
const VALUE_LEN: usize = MIB;
/// Parallel writers while filling (each its own connection through the client Service).
const WRITERS: usize = 4;
/// Both sides poll their end condition (and the by-hand side its retries) at this interval.
const POLL: Duration = Duration::from_millis(100);
/// Setup steps (cluster Available, quorum loss seen, PVCs gone).
const STEP: Duration = Duration::from_secs(300);

struct Round {
    total: Duration,
    steps: Steps,
    /// The cluster operator's reconcile passes of the cluster during the round; empty by hand.
    passes: Vec<PassLine>,
    /// etcd's `dbSize` on the restored cluster once done.
    db_size: i64,
}

/// What both sides restore.
struct Source {
    artifact: BackupArtifact,
    key: String,
    /// `http://<S3 ClusterIP>:8333`, as the host reaches it.
    endpoint: String,
}

#[tokio::main]
async fn main() {
    let env_number = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} is a number")))
            .unwrap_or(default)
    };
    let rounds = env_number("BENCH_ROUNDS", 5);
    let db_mib = env_number("BENCH_DB_MIB", 1024);
    assert!(rounds > 0, "BENCH_ROUNDS must be at least 1");
    assert!(db_mib > 0, "BENCH_DB_MIB must be at least 1");
    // A 1 GiB round on 2 cores: download, restore and two learners catching up on the DB.
    let round_timeout = Duration::from_secs(300 + db_mib as u64);
    let tools = Tools::from_env();

    let setup = Instant::now();
    // With the cluster operator's pass lines: where its part of the round (growing the seed
    // back to 3 members) goes.
    let env = start_with_restore_operator_and(&passes::DEBUG_PASS_VALUES).await;
    start_s3(&env);
    env.apply(&bench_cluster_yaml())
        .unwrap_or_else(|e| panic!("kubectl apply {CLUSTER}: {e}"));
    let _s3 = s3_from_host(&env).await;
    env.wait_available(CLUSTER, SIZE, VERSION.version_string(), STEP)
        .await;
    println!(
        "local control plane up, chart installed, {CLUSTER} Available with {SIZE} members in {:.1} s",
        setup.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    fill(&env, db_mib, round_timeout).await;
    let fill_time = t.elapsed();
    println!(
        "filled {db_mib} × 1 MiB random values through the client Service ({WRITERS} writers) in \
         {:.1} s ({:.0} MB/s)",
        fill_time.as_secs_f64(),
        (db_mib * MIB) as f64 / 1e6 / fill_time.as_secs_f64()
    );

    let t = Instant::now();
    env.apply(&backup_yaml(round_timeout))
        .unwrap_or_else(|e| panic!("kubectl apply {BACKUP}: {e}"));
    let artifact = succeeded_backup(&env, round_timeout).await;
    let key = object_key(&artifact, PREFIX, CLUSTER);
    let source = Source {
        key,
        endpoint: s3_endpoint(&env).await,
        artifact,
    };
    println!(
        "EtcdBackup {BACKUP} Succeeded in {:.1} s: {} ({:.0} MB, revision {})",
        t.elapsed().as_secs_f64(),
        source.artifact.uri,
        source.artifact.size_bytes as f64 / 1e6,
        source.artifact.revision
    );

    let mut operator = Vec::new();
    let mut by_hand = Vec::new();
    for round in 1..=rounds {
        let a = operator_round(&env, &source, round, db_mib, round_timeout).await;
        let b = by_hand_round(&tools, &source, round, db_mib, round_timeout).await;
        println!(
            "round {round}/{rounds}: operator {:.2} s, by hand {:.2} s",
            a.total.as_secs_f64(),
            b.total.as_secs_f64()
        );
        operator.push(a);
        by_hand.push(b);
    }
    let figures = report(&source, db_mib, fill_time, &operator, &by_hand);
    if let Some(path) = bench::record(&figures).expect("recording the figures") {
        println!("\nfigures appended to {}", path.display());
    }
}

/// The EtcdCluster: 3 members of 3.6, volumes and quota sized for the DB.
fn bench_cluster_yaml() -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdCluster\nmetadata: {{name: {CLUSTER}}}\n\
         spec:\n  size: {SIZE}\n  version: \"{}\"\n  storage: {{size: 8Gi}}\n  \
         etcdOptions: {{quotaBackendBytes: {QUOTA}}}\n",
        VERSION.version_string()
    )
}

/// An on-demand EtcdBackup as `common::on_demand_backup` writes one, with a timeout for the DB.
fn backup_yaml(timeout: Duration) -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdBackup\nmetadata: {{name: {BACKUP}}}\n\
         spec:\n  clusterName: {CLUSTER}\n  s3:\n    bucket: {BUCKET}\n    prefix: {PREFIX}\n    \
         endpoint: {S3_ENDPOINT}\n    region: us-east-1\n    forcePathStyle: true\n    \
         credentialsSecretRef: {{name: {S3_SECRET}}}\n  timeoutSeconds: {}\n",
        timeout.as_secs()
    )
}

fn restore_yaml(name: &str) -> String {
    format!(
        "apiVersion: etcd.operator.rs/v1alpha1\nkind: EtcdRestore\nmetadata: {{name: {name}}}\n\
         spec:\n  clusterName: {CLUSTER}\n  source:\n    backupRef: {{name: {BACKUP}}}\n"
    )
}

/// Incompressible bytes (xorshift64), different for each `seed` (as the backup bench).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn value_key(i: usize) -> String {
    format!("/bench/{i:06}")
}

/// Writes `/bench/000000..` with `db_mib` random 1 MiB values through the client Service,
/// [`WRITERS`] writers in parallel (key `i` by writer `i % WRITERS`). A put that fails (the
/// connection through the proxy dropped) is retried on a new connection with the same value.
async fn fill(env: &Env, db_mib: usize, timeout: Duration) {
    let url = env.client_url(CLUSTER).await;
    let deadline = tokio::time::Instant::now() + timeout;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = url.clone();
            tokio::spawn(async move {
                let mut client: Option<Client> = None;
                for i in (w..db_mib).step_by(WRITERS) {
                    let value = random_bytes(VALUE_LEN, i as u64);
                    let mut last = String::new();
                    loop {
                        if tokio::time::Instant::now() > deadline {
                            return Err(format!("writing {} through {url}: {last}", value_key(i)));
                        }
                        if client.is_none() {
                            let options = etcd_client::ConnectOptions::new()
                                .with_connect_timeout(Duration::from_secs(5))
                                .with_timeout(Duration::from_secs(60));
                            match Client::connect([url.as_str()], Some(options)).await {
                                Ok(c) => client = Some(c),
                                Err(e) => last = e.to_string(),
                            }
                        }
                        if let Some(c) = client.as_mut() {
                            match c.put(value_key(i), value.clone(), None).await {
                                Ok(_) => break,
                                Err(e) => {
                                    last = e.to_string();
                                    client = None;
                                }
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                Ok(())
            })
        })
        .collect();
    for writer in writers {
        if let Err(e) = writer.await.unwrap() {
            fail(env, &format!("filling {CLUSTER}: {e}"));
        }
    }
}

/// Waits for the EtcdBackup and returns its artifact, failing unless it Succeeded.
async fn succeeded_backup(env: &Env, timeout: Duration) -> BackupArtifact {
    let backups: Api<EtcdBackup> = Api::namespaced(env.client.clone(), NS);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(b) = backups.get(BACKUP).await {
            let status = b.status.unwrap_or_default();
            match (status.phase, status.artifact.clone()) {
                (Some(BackupPhase::Succeeded), Some(artifact)) => return artifact,
                (Some(phase), _) if phase.is_finished() => fail(
                    env,
                    &format!("EtcdBackup {BACKUP} did not succeed: {status:?}"),
                ),
                _ => {}
            }
        }
        if tokio::time::Instant::now() > deadline {
            fail(
                env,
                &format!("EtcdBackup {BACKUP} did not finish within {timeout:?}"),
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// (a) The operator.

/// Not timed: two of the cluster's three members go with their PVCs (one request, as the
/// restore scenario does), the loss is reported and the PVCs are gone. Then timed: the
/// EtcdRestore is applied and its status polled every [`POLL`] until Succeeded.
async fn operator_round(
    env: &Env,
    source: &Source,
    round: usize,
    db_mib: usize,
    timeout: Duration,
) -> Round {
    let name = format!("bench-restore-{round}");
    lose_quorum(env).await;

    let wall_start = jiff::Timestamp::now();
    let start = Instant::now();
    env.apply(&restore_yaml(&name))
        .unwrap_or_else(|e| panic!("kubectl apply {name}: {e}"));
    let restores: Api<EtcdRestore> = Api::namespaced(env.client.clone(), NS);
    let restore = loop {
        if let Ok(r) = restores.get(&name).await {
            match r.status.as_ref().and_then(|s| s.phase) {
                Some(RestorePhase::Succeeded) => break r,
                Some(RestorePhase::Failed) => fail(
                    env,
                    &format!("{name} Failed after {:?}: {:?}", start.elapsed(), r.status),
                ),
                _ => {}
            }
        }
        if start.elapsed() > timeout {
            fail(
                env,
                &format!("{name} not Succeeded after {timeout:?}: {:?}", {
                    restores.get(&name).await.ok().and_then(|r| r.status)
                }),
            );
        }
        tokio::time::sleep(POLL).await;
    };
    let total = start.elapsed();

    // Not timed: what Succeeded promises, checked.
    let status = restore.status.clone().unwrap_or_default();
    let cluster = env.clusters().get(CLUSTER).await.unwrap();
    if !available_at(&cluster) || has_restoring_annotation(&cluster) {
        fail(
            env,
            &format!(
                "{name} is Succeeded but {CLUSTER} is not Available with {SIZE} members and \
                 released: {:?} {:?}",
                cluster.metadata.annotations, cluster.status
            ),
        );
    }
    assert_eq!(
        status.restored_revision,
        Some(source.artifact.revision),
        "{name}: {status:?}"
    );
    let url = env.client_url(CLUSTER).await;
    let (keys, db_size) = read_back(env, &url).await;
    assert_eq!(keys, db_mib as i64, "{name}: keys under /bench/ after it");

    // The operator publishes the RestoreSucceeded event just after the status that ended the
    // wait: give it a moment to arrive.
    let mut steps = operator_steps(env, &name, wall_start).await;
    for _ in 0..50 {
        if steps.has("RestoreSucceeded") {
            break;
        }
        tokio::time::sleep(POLL).await;
        steps = operator_steps(env, &name, wall_start).await;
    }
    if let Some(seed) = &status.seed_member {
        seed_init_steps(env, seed, wall_start, &mut steps).await;
    }
    steps.sort_by_offset();
    let passes = passes::operator_passes(env, CLUSTER, wall_start, total);
    Round {
        total,
        steps,
        passes,
        db_size,
    }
}

/// Deletes the PVCs and Pods of all members but the lowest ordinal (grace 0), and waits until
/// the cluster operator reports the loss and the PVCs are gone. PVCs a previous round's restore
/// kept (labelled retained) are deleted first: they only hold an old copy of the data.
async fn lose_quorum(env: &Env) {
    env.kubectl(&[
        "delete",
        "pvc",
        "-n",
        NS,
        "-l",
        RETAINED_LABEL,
        "--ignore-not-found",
        "--wait=true",
        "--timeout=120s",
    ]);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let selector = format!("{CLUSTER_LABEL}={CLUSTER}");
    let mut members: Vec<(u32, String)> = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let name = p.metadata.name?;
            let ordinal = name.strip_prefix(&format!("{CLUSTER}-"))?.parse().ok()?;
            Some((ordinal, name))
        })
        .collect();
    members.sort();
    if members.len() != SIZE {
        fail(
            env,
            &format!("expected {SIZE} member Pods of {CLUSTER}, found {members:?}"),
        );
    }
    let gone: Vec<String> = members[1..].iter().map(|(_, n)| n.clone()).collect();
    let mut args = vec!["delete", "-n", NS];
    let targets: Vec<String> = gone
        .iter()
        .map(|n| format!("pvc/{n}"))
        .chain(gone.iter().map(|n| format!("pod/{n}")))
        .collect();
    args.extend(targets.iter().map(String::as_str));
    args.extend(["--grace-period=0", "--force", "--wait=false"]);
    env.kubectl(&args);
    env.wait_status(CLUSTER, "quorum loss reported", STEP, quorum_loss_reported)
        .await;
    let gone: Vec<&str> = gone.iter().map(String::as_str).collect();
    wait_pvcs_gone(env, &gone).await;
}

fn available_at(c: &EtcdCluster) -> bool {
    let Some(s) = &c.status else { return false };
    s.conditions
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "True")
        && s.members.iter().filter(|m| !m.learner).count() == SIZE
        && s.members.iter().filter(|m| m.healthy).count() == SIZE
        && s.ready_members as usize == SIZE
        && s.current_version.as_deref() == Some(VERSION.version_string())
}

fn has_restoring_annotation(c: &EtcdCluster) -> bool {
    c.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(RESTORING_ANNOTATION))
}

/// The count of keys under `/bench/` (linearizable, through `url`) and etcd's `dbSize` there.
async fn read_back(env: &Env, url: &str) -> (i64, i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        match count_and_size(url).await {
            Ok(read) => return read,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    fail(env, &format!("reading back through {url}: {last}"))
}

async fn count_and_size(url: &str) -> Result<(i64, i64), etcd_client::Error> {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(10));
    let mut client = Client::connect([url], Some(options)).await?;
    let count = client
        .get(
            "/bench/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await?
        .count();
    let size = client.status().await?.db_size();
    Ok((count, size))
}

/// The restore's steps from its events and the cluster operator's from the EtcdCluster's
/// (events.k8s.io/v1, times set by the operators on this machine's clock), as offsets from the
/// apply. kube-runtime's recorder folds a repeated reason about the same object into one Event
/// with a series: `eventTime` is the first occurrence, `series.lastObservedTime` the latest.
/// Occurrences before the apply (the cluster's formation, the quorum loss) are left out.
async fn operator_steps(env: &Env, restore: &str, start: jiff::Timestamp) -> Steps {
    let events: Api<Event> = Api::namespaced(env.client.clone(), NS);
    let list = events.list(&ListParams::default()).await.unwrap();
    let since = |at: jiff::Timestamp| at.duration_since(start).as_secs_f64();
    let mut timed: Vec<(f64, String)> = Vec::new();
    for e in list.items.into_iter().filter(|e| {
        let regarding = e.regarding.as_ref().and_then(|r| r.name.as_deref());
        regarding == Some(restore) || regarding == Some(CLUSTER)
    }) {
        let reason = e.reason.unwrap_or_default();
        if let Some(first) = e.event_time {
            timed.push((since(first.0), reason.clone()));
        }
        if let Some(series) = e.series {
            timed.push((since(series.last_observed_time.0), reason));
        }
    }
    timed.retain(|(offset, _)| *offset >= 0.0);
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut steps = Steps::default();
    for (offset, reason) in timed {
        steps.push(&reason, offset);
    }
    steps
}

/// The seed Pod's `prepare-seed` init container (download, SHA-256 and trailer, `etcdutl
/// snapshot status` and `restore`): its start and end from the Pod status (1 s resolution).
async fn seed_init_steps(env: &Env, seed: &str, start: jiff::Timestamp, steps: &mut Steps) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let Ok(Some(pod)) = pods.get_opt(seed).await else {
        return;
    };
    let init = pod
        .status
        .and_then(|s| s.init_container_statuses)
        .and_then(|statuses| statuses.into_iter().find(|c| c.name == INIT_CONTAINER));
    let Some(terminated) = init.and_then(|c| c.state).and_then(|s| s.terminated) else {
        return;
    };
    let since = |at: jiff::Timestamp| at.duration_since(start).as_secs_f64();
    if let Some(t) = terminated.started_at {
        steps.push("prepare-seed started", since(t.0));
    }
    // The steps inside it, from its log lines (operators/restore/src/seed.rs, `step_done`).
    let params = kube::api::LogParams {
        container: Some(INIT_CONTAINER.to_owned()),
        ..kube::api::LogParams::default()
    };
    if let Ok(log) = pods.logs(seed, &params).await {
        for (step, at) in seed_log_steps(&log) {
            steps.push(&format!("  {step}"), since(at));
        }
        // Where the download's time went inside the container (operators/restore/src/seed.rs,
        // `download`): its seconds, and how many of them hashing and writing took.
        for line in log.lines().filter(|l| l.contains("snapshot downloaded")) {
            let fields = line
                .split_once("snapshot downloaded")
                .map_or("", |(_, f)| f);
            println!("  {seed} prepare-seed: snapshot downloaded{fields}");
        }
    }
    if let Some(t) = terminated.finished_at {
        steps.push(SEED_DATA_READY, since(t.0));
    }
}

/// `(step, when)` of each "seed preparation step done" line of the init container's log, which
/// is text (`--log-format=text`, build.rs): `<RFC 3339 time>  INFO <target>: seed preparation
/// step done step="downloaded and hashed" seconds=...`.
fn seed_log_steps(log: &str) -> Vec<(String, jiff::Timestamp)> {
    log.lines()
        .filter(|line| line.contains("seed preparation step done"))
        .filter_map(|line| {
            let at = line.split_whitespace().next()?.parse().ok()?;
            let (_, rest) = line.split_once("step=\"")?;
            let (step, _) = rest.split_once('"')?;
            Some((step.to_owned(), at))
        })
        .collect()
}

/// The row both sides share for "the seed's data directory is restored": the init container's
/// end, and `etcdutl snapshot restore` returning by hand.
const SEED_DATA_READY: &str = "seed data restored";

// ---------------------------------------------------------------------------------------------
// (b) By hand.

/// The operator's steps without Kubernetes, on host processes on loopback, from the same object.
async fn by_hand_round(
    tools: &Tools,
    source: &Source,
    round: usize,
    db_mib: usize,
    timeout: Duration,
) -> Round {
    // Dropped in reverse order: etcd dies before its address block and dir go.
    let block = AddressBlock::claim().unwrap();
    let dir = TestDir::new("restore-bench-").unwrap();
    let token = format!("restore-bench-{}-{round}", std::process::id());
    let config = |i: u8, state: ClusterState, initial_cluster: String| {
        let name = format!("m{i}");
        EtcdMemberConfig {
            data_dir: dir.path().join(&name),
            log_path: dir.path().join(format!("{name}.log")),
            name,
            ip: block.ip(i),
            initial_cluster,
            initial_cluster_state: state,
            initial_cluster_token: token.clone(),
            extra_args: vec![format!("--quota-backend-bytes={QUOTA}")],
        }
    };
    let snapshot = dir.path().join("snapshot.db");
    let seed_config = {
        let c = config(1, ClusterState::New, String::new());
        let initial_cluster = format!("m1={}", c.peer_url());
        EtcdMemberConfig {
            initial_cluster,
            ..c
        }
    };

    let start = Instant::now();
    let mut steps = Steps::default();
    let offset = |start: Instant| start.elapsed().as_secs_f64();

    // 1. The object, as a human fetches it.
    run(
        aws_download(tools, &source.endpoint, &source.key, dir.path(), &snapshot),
        "aws s3 cp",
    );
    steps.push("downloaded (aws s3 cp)", offset(start));

    // 2. etcdutl snapshot restore with the seed's name, URL and a new token.
    let mut restore = Command::new(tools.etcdutl_of(VERSION).unwrap());
    restore
        .args(["snapshot", "restore"])
        .arg(&snapshot)
        .arg(format!("--name={}", seed_config.name))
        .arg(format!("--initial-cluster={}", seed_config.initial_cluster))
        .arg(format!("--initial-cluster-token={token}"))
        .arg(format!(
            "--initial-advertise-peer-urls={}",
            seed_config.peer_url()
        ))
        .arg(format!("--data-dir={}", seed_config.data_dir.display()));
    run(restore, "etcdutl snapshot restore");
    steps.push(SEED_DATA_READY, offset(start));

    // 3. etcd on it; ready when it answers with a leader and its own name in the member list.
    let mut seed = EtcdMember::spawn(tools, VERSION, seed_config).expect("seed starts");
    seed.wait_ready(None, timeout).await.expect("seed ready");
    steps.push("SeedReady", offset(start));
    let mut client = seed.client().await.expect("client for the seed");

    // 4. Twice: member add --learner, start it with `existing`, promote once caught up.
    // Dropped before `dir`, which holds their data.
    let mut joined: Vec<EtcdMember> = Vec::new();
    for i in 2..=SIZE as u8 {
        let peer = config(i, ClusterState::Existing, String::new()).peer_url();
        let added = retry_later(start, timeout, "member add --learner", || {
            let mut client = client.clone();
            let peer = peer.clone();
            async move {
                client
                    .member_add([peer], Some(MemberAddOptions::new().with_is_learner()))
                    .await
            }
        })
        .await;
        let id = added.member().expect("the added member").id();
        steps.push("MemberAdded", offset(start));

        // What `member add` prints as ETCD_INITIAL_CLUSTER, the new member named.
        let initial_cluster =
            test_support::etcd::initial_cluster_after_add(&added, id, &format!("m{i}"));
        joined.push(
            EtcdMember::spawn(
                tools,
                VERSION,
                config(i, ClusterState::Existing, initial_cluster),
            )
            .expect("member starts"),
        );
        steps.push("MemberPodCreated", offset(start));

        retry_later(start, timeout, "member promote", || {
            let mut client = client.clone();
            async move { client.member_promote(id).await }
        })
        .await;
        steps.push("LearnerPromoted", offset(start));
    }

    // Done when etcd lists SIZE voters and every one of them answers status with a leader: what
    // the operator's status calls healthy voters.
    let endpoints: Vec<String> = std::iter::once(seed.client_url())
        .chain(joined.iter().map(EtcdMember::client_url))
        .collect();
    while healthy_voters(&mut client, &endpoints).await != SIZE {
        assert!(
            start.elapsed() < timeout,
            "by hand: {SIZE} healthy voters not seen after {timeout:?}"
        );
        tokio::time::sleep(POLL).await;
    }
    let total = start.elapsed();

    // Not timed: the same checks as the operator's side.
    let (keys, db_size) = count_and_size(&seed.client_url()).await.unwrap();
    assert_eq!(keys, db_mib as i64, "by hand: keys under /bench/");
    drop(joined);
    drop(seed);
    Round {
        total,
        steps,
        passes: Vec::new(),
        db_size,
    }
}

/// `aws s3 cp s3://BUCKET/key file` against `endpoint`, nothing read from `~/.aws` or the
/// environment.
fn aws_download(tools: &Tools, endpoint: &str, key: &str, dir: &Path, file: &Path) -> Command {
    let from = format!("s3://{BUCKET}/{key}");
    let credentials = ("e2e-access", "e2e-secret", "us-east-1");
    test_support::s3::aws_s3_cp(
        tools,
        dir,
        endpoint,
        credentials,
        from.as_ref(),
        file.as_os_str(),
    )
    .expect("the aws CLI (make deps)")
}

/// Runs `command` to success.
fn run(mut command: Command, what: &str) {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "by hand: {what} failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// The table.

/// A side of the table: `label`, each round's total and steps.
fn side<'a>(label: &'a str, rounds: &'a [Round]) -> Side<'a> {
    Side::new(label, rounds.iter().map(|r| (r.total, &r.steps)))
}

/// Prints (a) against (b) with the steps; returns the figures for the combined table (the
/// medians, then the fastest rounds).
fn report(
    source: &Source,
    db_mib: usize,
    fill_time: Duration,
    operator: &[Round],
    by_hand: &[Round],
) -> Vec<Figure> {
    let a = side(
        "(a) operator: kubectl apply EtcdRestore → Succeeded",
        operator,
    );
    let b = side(
        "(b) by hand: aws s3 cp, etcdutl restore, etcd, 2× learner",
        by_hand,
    );
    let n = operator.len();
    let mb = |bytes: i64| bytes as f64 / 1e6;
    let db = |rounds: &[Round]| {
        bench::Summary::of(&rounds.iter().map(|r| mb(r.db_size)).collect::<Vec<_>>())
            .map_or(f64::NAN, |s| s.median)
    };
    println!(
        "\nEtcdRestore of a 3-member etcd {} cluster after quorum loss: {db_mib} × 1 MiB random \
         values (filled in {:.0} s), snapshot object {:.0} MB at revision {}; {n} round(s) each, \
         same run",
        VERSION.version_string(),
        fill_time.as_secs_f64(),
        mb(source.artifact.size_bytes),
        source.artifact.revision
    );
    print!("{}", bench::totals_table(&a, &b, "ratio (a)/(b), medians"));
    // Both sides lose seconds at random (etcd's publish race: a learner ready up to 7 s late;
    // a new Pod's DNS name: etcd retries its lookup every second), never gain them: the
    // fastest rounds compare the steps themselves.
    println!(
        "ratio (a)/(b), fastest rounds: {:.2}",
        a.summary().min / b.summary().min
    );
    println!(
        "DB size restored (etcd dbSize, MB, median): operator {:.0}, by hand {:.0}",
        db(operator),
        db(by_hand)
    );
    println!(
        "Both sides end with {SIZE} healthy voters holding all {db_mib} keys (counted). The \
         operator additionally hashes the object while downloading it (SHA-256 against the \
         backup's record, etcd's trailer) and runs `etcdutl snapshot status`; its download \
         streams one GET through localkube's Service proxy into the seed's volume, where `aws \
         s3 cp` downloads ranges in parallel. The ratio also contains what Kubernetes and the \
         operators add: the seed's PVC and Pod (an init container, then etcd), the hold and \
         hand-over between the two operators, each learner's Pod and DNS name, the \
         observe → act → requeue cycles, and status polling every {} ms on both sides.",
        POLL.as_millis()
    );
    println!(
        "\nsteps: median seconds since the start of the round (operator: its events' eventTime, \
         the init container's times at 1 s resolution)"
    );
    print!(
        "{}",
        bench::steps_table(&a, &b, "Succeeded / 3 voters (observed)")
    );
    let passes: Vec<(Duration, &[PassLine])> = operator
        .iter()
        .map(|r| (r.total, r.passes.as_slice()))
        .collect();
    print!("{}", passes::passes_report(&passes));
    let what = format!(
        "operator: EtcdRestore → Succeeded, {SIZE} members, from the snapshot of {db_mib} MiB \
         of values ({:.0} MB; {n} round(s)",
        mb(source.artifact.size_bytes)
    );
    let by_hand_steps = "by hand: aws s3 cp, etcdutl snapshot restore, etcd, 2× learner \
                         add/start/promote";
    vec![
        Figure::new(
            Part::Restore,
            Unit::Seconds,
            (&format!("{what}, median)"), a.summary().median),
            (by_hand_steps, b.summary().median),
        ),
        Figure::new(
            Part::Restore,
            Unit::Seconds,
            (&format!("{what}, fastest)"), a.summary().min),
            (&format!("{by_hand_steps} (fastest)"), b.summary().min),
        ),
    ]
}
