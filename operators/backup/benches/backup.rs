//! `make bench` (backup part): the operator's backup path (member probe and selection, etcd's
//! snapshot stream straight into an S3 multipart upload, trailer verification; `execute::execute`)
//! against the usual two-step way (`etcdctl snapshot save` to a file, then `aws s3 cp`) and
//! against the floor (that `aws s3 cp` alone), on the same ~1 GiB etcd DB and the same SeaweedFS
//! in the same run; plus the backup's peak RSS at ~100 MiB and ~1 GiB, which must stay flat
//! (bounded by the part size, not the DB size).
//!
//! Does I/O: starts one etcd 3.6 member (`--quota-backend-bytes` 4 GiB) and `weed mini`, writes
//! 1 GiB of random values, runs etcdctl and the aws CLI. Every operator backup runs in a child
//! process (this binary re-executed with [`CHILD_ENV`] set) so that its VmHWM is its own; all
//! three timings are wall times of processes (start-up included), so they compare like for like.
//! `BENCH_ROUNDS` (default 3, as the other benches: one round swung the ratios by ±10 %) repeats
//! the three timings (medians printed) and the RSS samples (maxima printed). `BENCH_DB_MIB`
//! (default 1024) and `BENCH_SMALL_DB_MIB` (default 100) set the two DB sizes (MiB of 1 MiB
//! values; the small one below the large one): small values make a quick check of the bench,
//! not figures. With `BENCH_RESULTS` set (as `make bench` does), the
//! ratios are appended there for the combined table (`test_support::bench`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use etcd_backup_operator::credentials::S3Credentials;
use etcd_backup_operator::execute::{BackupJob, S3Target, execute};
use futures_util::StreamExt;
use test_support::bench::{self, Figure, Part, Unit};
use test_support::process::TestDir;
use test_support::{
    AddressBlock, ClusterState, EtcdMember, EtcdMemberConfig, EtcdVersion, S3Server, Tools,
};
use tokio_util::sync::CancellationToken;

/// Set (to anything) in the child process: run one backup and report.
const CHILD_ENV: &str = "BACKUP_BENCH_CHILD";
const BUCKET: &str = "bench";
const MIB: usize = 1024 * 1024;
/// One value; `BENCH_DB_MIB` (default 1024) of them make the 1 GiB DB.
const VALUE_LEN: usize = MIB;
/// The DB sizes (in values) without `BENCH_SMALL_DB_MIB` and `BENCH_DB_MIB`.
const SMALL_KEYS: usize = 100;
const LARGE_KEYS: usize = 1024;
/// Puts in flight while filling (etcd batches them into fewer fsyncs).
const PIPELINE: usize = 4;
/// What the child prints before its figures.
const CHILD_MARK: &str = "BACKUP_BENCH_RESULT";

/// Incompressible bytes (xorshift64), different for each `seed`.
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

/// Writes keys `from..to` with random 1 MiB values, [`PIPELINE`] at a time.
async fn fill(client: &etcd_client::Client, from: usize, to: usize) {
    futures_util::stream::iter(from..to)
        .map(|i| {
            let mut client = client.clone();
            async move {
                client
                    .put(
                        format!("/bench/{i:05}"),
                        random_bytes(VALUE_LEN, i as u64),
                        None,
                    )
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(PIPELINE)
        .collect::<Vec<()>>()
        .await;
}

/// Child mode: one backup with `execute`, then its size and the process's peak RSS. Its log
/// (text, to stdout) carries the executor's "snapshot uploaded" line with the upload's timing.
async fn child() {
    operator_runtime::logging::init_logging("info", operator_runtime::logging::LogFormat::Text)
        .unwrap();
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let job = BackupJob {
        cluster: "bench".into(),
        uid: env("BENCH_UID"),
        backup: "bench/backup".into(),
        endpoints: vec![env("BENCH_ETCD")],
        tls: None,
        s3: S3Target {
            bucket: BUCKET.into(),
            prefix: "operator/".into(),
            endpoint: Some(env("BENCH_S3")),
            region: "us-east-1".into(),
            force_path_style: true,
            credentials: Some(S3Credentials {
                access_key_id: env("BENCH_S3_ACCESS"),
                secret_access_key: env("BENCH_S3_SECRET"),
                session_token: None,
            }),
            credentials_source: "the bench".into(),
        },
        timeout: Duration::from_secs(600),
    };
    let artifact = execute(&job, &CancellationToken::new()).await.unwrap();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/self/status");
    println!(
        "{CHILD_MARK} {} {hwm_kib} {}",
        artifact.size_bytes, artifact.uri
    );
}

/// One operator backup in a child process.
struct ChildRun {
    wall: Duration,
    size_bytes: u64,
    hwm_kib: u64,
    uri: String,
    /// The executor's "snapshot uploaded" log line: where the upload's time went.
    timing: String,
}

fn run_child(etcd: &str, s3: &S3Server, uid: &str) -> ChildRun {
    let start = Instant::now();
    let out = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, "1")
        .env("BENCH_UID", uid)
        .env("BENCH_ETCD", etcd)
        .env("BENCH_S3", s3.endpoint())
        .env("BENCH_S3_ACCESS", s3.access_key())
        .env("BENCH_S3_SECRET", s3.secret_key())
        .output()
        .unwrap();
    let wall = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "operator backup child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let fields: Vec<&str> = stdout
        .lines()
        .find_map(|l| l.strip_prefix(CHILD_MARK))
        .expect("child result line")
        .split_whitespace()
        .collect();
    ChildRun {
        wall,
        size_bytes: fields[0].parse().unwrap(),
        hwm_kib: fields[1].parse().unwrap(),
        uri: fields[2].to_owned(),
        timing: stdout
            .lines()
            .find(|l| l.contains("snapshot uploaded"))
            .map(|l| {
                l.split_whitespace()
                    .filter(|w| {
                        ["total", "preparing", "waiting_for", "finishing"]
                            .iter()
                            .any(|p| w.starts_with(p))
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default(),
    }
}

/// Runs `command` to success and returns its wall time.
fn timed(mut command: Command, what: &str) -> Duration {
    let start = Instant::now();
    let out = command.output().unwrap();
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    wall
}

/// `aws s3 cp file s3://BUCKET/key` against `s3`, nothing read from `~/.aws` or the environment.
fn aws_cp(tools: &Tools, s3: &S3Server, dir: &Path, file: &Path, key: &str) -> Command {
    let to = format!("s3://{BUCKET}/{key}");
    let credentials = (s3.access_key(), s3.secret_key(), s3.region());
    test_support::s3::aws_s3_cp(
        tools,
        dir,
        s3.endpoint(),
        credentials,
        file.as_os_str(),
        to.as_ref(),
    )
    .expect("the aws CLI (make deps)")
}

async fn object_size(s3: &S3Server, key: &str) -> u64 {
    let head = s3
        .client()
        .head_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .unwrap();
    u64::try_from(head.content_length().unwrap()).unwrap()
}

/// Deletes every object so that rounds do not pile up gigabytes in SeaweedFS.
async fn empty_bucket(s3: &S3Server) {
    let client = s3.client();
    let listed = client
        .list_objects_v2()
        .bucket(BUCKET)
        .send()
        .await
        .unwrap();
    for object in listed.contents() {
        client
            .delete_object()
            .bucket(BUCKET)
            .key(object.key().unwrap())
            .send()
            .await
            .unwrap();
    }
}

/// CPU seconds (user + system) used so far by the etcd member, the S3 server, and this
/// process's finished children (the operator's child, etcdctl, the aws CLI), from /proc.
#[derive(Clone, Copy, Default)]
struct Cpu {
    etcd: f64,
    s3: f64,
    client: f64,
}

impl Cpu {
    fn now(etcd_pid: u32, s3_pid: u32) -> Cpu {
        let ticks = clock_ticks();
        // Fields after the command's ")": utime, stime are the 12th and 13th, the waited-for
        // children's cutime, cstime the 14th and 15th (proc(5), fields 14-17).
        let fields = |pid: &str| -> Vec<f64> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after
                .split_whitespace()
                .skip(11)
                .take(4)
                .map(|f| f.parse::<f64>().unwrap() / ticks)
                .collect()
        };
        let own = |pid: u32| {
            let f = fields(&pid.to_string());
            f[0] + f[1]
        };
        let children = fields("self");
        Cpu {
            etcd: own(etcd_pid),
            s3: own(s3_pid),
            client: children[2] + children[3],
        }
    }

    fn since(self, start: Cpu) -> Cpu {
        Cpu {
            etcd: self.etcd - start.etcd,
            s3: self.s3 - start.s3,
            client: self.client - start.client,
        }
    }

    fn total(self) -> f64 {
        self.etcd + self.s3 + self.client
    }
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`, 100 on Linux).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mb_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

struct Round {
    operator: Duration,
    save: Duration,
    upload: Duration,
    operator_cpu: Cpu,
    save_cpu: Cpu,
    upload_cpu: Cpu,
}

#[tokio::main]
async fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return child().await;
    }
    let env_number = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} is a number")))
            .unwrap_or(default)
    };
    let rounds = env_number("BENCH_ROUNDS", 3).max(1);
    let small_keys = env_number("BENCH_SMALL_DB_MIB", SMALL_KEYS);
    let large_keys = env_number("BENCH_DB_MIB", LARGE_KEYS);
    assert!(
        0 < small_keys && small_keys < large_keys,
        "need 0 < BENCH_SMALL_DB_MIB ({small_keys}) < BENCH_DB_MIB ({large_keys})"
    );
    let tools = Tools::from_env();
    let total = Instant::now();

    // Dropped in reverse order: etcd dies before its address block and dir go.
    let block = AddressBlock::claim().unwrap();
    let dir = TestDir::new("backup-bench-").unwrap();
    let ip = block.ip(1);
    let config = EtcdMemberConfig {
        name: "m1".into(),
        ip,
        data_dir: dir.path().join("m1"),
        log_path: dir.path().join("m1.log"),
        initial_cluster: format!("m1=http://{ip}:2380"),
        initial_cluster_state: ClusterState::New,
        initial_cluster_token: format!("backup-bench-{}", std::process::id()),
        // The default 2 GiB quota is too tight for 1 GiB of values plus bbolt's free pages.
        extra_args: vec![format!("--quota-backend-bytes={}", 4u64 << 30)],
    };
    let mut member = EtcdMember::spawn(&tools, EtcdVersion::V3_6, config).unwrap();
    member
        .wait_ready(None, Duration::from_secs(30))
        .await
        .unwrap();
    let etcd = member.client_url();
    let s3 = S3Server::start_with(&tools).await.unwrap();
    s3.create_bucket(BUCKET).await.unwrap();
    let client = member.client().await.unwrap();
    let pids = (member.pid().expect("etcd runs"), s3.pid());
    let cpu = || Cpu::now(pids.0, pids.1);

    // Peak RSS at ~100 MiB, then grow the same DB to ~1 GiB.
    let t = Instant::now();
    fill(&client, 0, small_keys).await;
    let fill_small = t.elapsed();
    // As many samples as the 1 GiB side gets, both sides their maximum: like against like.
    let mut small_hwm_kib = 0;
    for round in 0..rounds {
        let small = run_child(&etcd, &s3, &format!("rss-small-{round}"));
        assert!(small.size_bytes >= (small_keys * VALUE_LEN) as u64);
        small_hwm_kib = small_hwm_kib.max(small.hwm_kib);
    }
    empty_bucket(&s3).await;
    let t = Instant::now();
    fill(&client, small_keys, large_keys).await;
    let fill_time = fill_small + t.elapsed();
    let data_bytes = (large_keys * VALUE_LEN) as u64;

    let snapshot = dir.path().join("snapshot.db");
    let mut results = Vec::new();
    let mut large_hwm_kib = 0;
    let mut size_bytes = 0;
    for round in 0..rounds {
        // (1) the operator's path, in a child process.
        let cpu_start = cpu();
        let op = run_child(&etcd, &s3, &format!("round-{round}"));
        let operator_cpu = cpu().since(cpu_start);
        assert!(
            op.size_bytes >= data_bytes,
            "snapshot smaller than the data"
        );
        large_hwm_kib = large_hwm_kib.max(op.hwm_kib);
        println!(
            "round {round}: operator {:.1} s, {}",
            op.wall.as_secs_f64(),
            op.timing
        );
        size_bytes = op.size_bytes;
        let op_key = op.uri.trim_start_matches(&format!("s3://{BUCKET}/"));
        assert_eq!(object_size(&s3, op_key).await, op.size_bytes);

        // (2) etcdctl snapshot save, then (3) aws s3 cp of that file (the upload alone).
        let mut save = Command::new(tools.etcdctl(EtcdVersion::V3_6).unwrap());
        save.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={etcd}"))
            .args(["snapshot", "save"])
            .arg(&snapshot);
        let cpu_start = cpu();
        let save_time = timed(save, "etcdctl snapshot save");
        let save_cpu = cpu().since(cpu_start);
        let file_size = std::fs::metadata(&snapshot).unwrap().len();
        let key = format!("baseline/round-{round}.db");
        let cpu_start = cpu();
        let upload_time = timed(
            aws_cp(&tools, &s3, dir.path(), &snapshot, &key),
            "aws s3 cp",
        );
        let upload_cpu = cpu().since(cpu_start);
        assert_eq!(object_size(&s3, &key).await, file_size);
        std::fs::remove_file(&snapshot).unwrap();
        empty_bucket(&s3).await;
        results.push(Round {
            operator: op.wall,
            save: save_time,
            upload: upload_time,
            operator_cpu,
            save_cpu,
            upload_cpu,
        });
    }

    let operator = median(results.iter().map(|r| r.operator).collect());
    let two_step = median(results.iter().map(|r| r.save + r.upload).collect());
    let upload = median(results.iter().map(|r| r.upload).collect());
    let secs = |d: Duration| d.as_secs_f64();
    println!(
        "\nbackup: etcd 3.6 (1 member), SeaweedFS weed mini, {} MiB of random 1 MiB values \
         (filled in {:.1} s), snapshot {:.0} MB, {rounds} round(s), medians, same run",
        data_bytes / MIB as u64,
        secs(fill_time),
        size_bytes as f64 / 1e6,
    );
    println!(
        "backup {large_keys} MiB  operator  {:.1} s  ({:.0} MB/s) | save+upload {:.1} s | upload alone {:.1} s | ratio {:.2} {:.2}",
        secs(operator),
        mb_per_s(size_bytes, operator),
        secs(two_step),
        secs(upload),
        secs(operator) / secs(two_step),
        secs(operator) / secs(upload),
    );
    let save = median(results.iter().map(|r| r.save).collect());
    println!(
        "  MB/s: operator {:.0} | save+upload {:.0} | upload alone {:.0} | save alone {:.1} s ({:.0} MB/s)",
        mb_per_s(size_bytes, operator),
        mb_per_s(size_bytes, two_step),
        mb_per_s(size_bytes, upload),
        secs(save),
        mb_per_s(size_bytes, save),
    );
    println!("  ratio = operator / save+upload, operator / upload alone (time; below 1 is faster)");
    // Where the time goes: on this machine's cores no path finishes faster than the CPU its
    // processes need divided by the cores (its floor), so operator / upload alone cannot go
    // below the operator's floor over the upload's wall time, whatever the operator overlaps.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cpu_of = |pick: fn(&Round) -> Cpu| -> Cpu {
        let mut v: Vec<Cpu> = results.iter().map(pick).collect();
        v.sort_by(|a, b| a.total().total_cmp(&b.total()));
        v[v.len() / 2]
    };
    let operator_cpu = cpu_of(|r| r.operator_cpu);
    let save_cpu = cpu_of(|r| r.save_cpu);
    let upload_cpu = cpu_of(|r| r.upload_cpu);
    println!(
        "  CPU s (median of {rounds}; etcd + S3 server + client = total, floor = total / {cores} cores):"
    );
    for (name, c, wall) in [
        ("operator", operator_cpu, operator),
        ("save", save_cpu, save),
        ("upload alone", upload_cpu, upload),
    ] {
        println!(
            "    {name:<12} {:.1} + {:.1} + {:.1} = {:.1} | floor {:.1} s | wall {:.1} s",
            c.etcd,
            c.s3,
            c.client,
            c.total(),
            c.total() / cores,
            secs(wall),
        );
    }
    println!(
        "    the operator's floor / the upload alone's wall = {:.2}: its ratio cannot go below that on {cores} cores",
        operator_cpu.total() / cores / secs(upload)
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "backup peak RSS (max of {rounds})  {small_keys} MiB DB {:.1} MiB | {large_keys} MiB DB {:.1} MiB | ratio {:.2}  (part size {} MiB)",
        mib(small_hwm_kib),
        mib(large_hwm_kib),
        large_hwm_kib as f64 / small_hwm_kib as f64,
        etcd_snapshot::DEFAULT_PART_SIZE / MIB,
    );
    println!("total {:.0} s", secs(total.elapsed()));

    let measured = format!(
        "operator: backup to S3 (etcd's snapshot stream → multipart upload), {large_keys} MiB of \
         random values, snapshot {:.0} MB ({rounds} round(s), median)",
        size_bytes as f64 / 1e6
    );
    let figures = [
        Figure::new(
            Part::Backup,
            Unit::Seconds,
            (&measured, secs(operator)),
            ("`etcdctl snapshot save` + `aws s3 cp`", secs(two_step)),
        ),
        Figure::new(
            Part::Backup,
            Unit::Seconds,
            (&measured, secs(operator)),
            ("the upload alone (`aws s3 cp`)", secs(upload)),
        ),
        Figure::new(
            Part::Backup,
            Unit::Mebibytes,
            (
                &format!("peak RSS of the backup, {large_keys} MiB DB (max of {rounds})"),
                mib(large_hwm_kib),
            ),
            (&format!("the same at {small_keys} MiB"), mib(small_hwm_kib)),
        ),
    ];
    if let Some(path) = bench::record(&figures).expect("recording the figures") {
        println!("figures appended to {}", path.display());
    }
    drop(client);
    drop(s3);
    drop(member);
}
