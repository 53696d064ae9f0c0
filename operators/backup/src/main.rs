//! `etcd-backup-operator`: flags and wiring only (see the library for what it does).
//!
//! - `run`: the EtcdBackup controller (the chart's Deployment).
//! - `create-backup`: create one EtcdBackup, optionally wait for it and apply retention (the
//!   chart's CronJob).
//! - `self-test`: the chart's `helm test` hook (operators answer, CRDs served).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use etcd_api::{LocalObjectReference, S3Connection, S3Destination};
use etcd_backup_operator::controller::{self, Settings};
use etcd_backup_operator::create::{CreateBackup, create_backup};
use etcd_backup_operator::metrics::Metrics;
use operator_runtime::{LogArgs, ShellArgs, run_elected_with_metrics};

#[derive(Parser, Debug)]
#[command(
    name = "etcd-backup-operator",
    version,
    about = "Verified, streaming etcd snapshots to S3"
)]
struct Cli {
    #[command(flatten)]
    log: LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the EtcdBackup controller.
    Run(RunArgs),
    /// Create one EtcdBackup of a cluster; optionally wait for it and delete old ones.
    CreateBackup(CreateArgs),
    /// The chart's `helm test`: each `--url` answers 200 and the API server serves the
    /// EtcdCluster, EtcdBackup and EtcdRestore kinds. Exits non-zero naming what failed.
    SelfTest(SelfTestArgs),
}

#[derive(Args, Debug)]
struct SelfTestArgs {
    /// A probe endpoint that must answer 200, e.g. `http://rel-etcd-operator-cluster-metrics:8080/healthz`.
    #[arg(long = "url")]
    urls: Vec<String>,
    /// How long each endpoint may take to answer 200.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    within_seconds: u64,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    shell: ShellArgs,
    /// Backups running at once; more stay Pending until a slot frees.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    max_concurrent_backups: u16,
}

#[derive(Args, Debug)]
struct CreateArgs {
    /// The EtcdCluster to back up.
    #[arg(long)]
    cluster: String,
    /// Its namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: String,
    /// S3 bucket (must exist).
    #[arg(long)]
    bucket: String,
    /// Key prefix, e.g. `prod/etcd/`.
    #[arg(long)]
    prefix: Option<String>,
    /// S3-compatible endpoint URL (default: AWS).
    #[arg(long)]
    endpoint: Option<String>,
    /// Region to sign for.
    #[arg(long)]
    region: Option<String>,
    /// Path-style bucket addressing (MinIO, SeaweedFS, Ceph).
    #[arg(long)]
    force_path_style: bool,
    /// Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (default: the ambient AWS chain).
    #[arg(long)]
    credentials_secret: Option<String>,
    /// spec.timeoutSeconds of the backup.
    #[arg(long)]
    timeout_seconds: Option<i64>,
    /// Wait until the backup finished; exit non-zero unless it Succeeded.
    #[arg(long)]
    wait: bool,
    /// How long --wait waits, in seconds.
    #[arg(long, default_value_t = 2100)]
    wait_timeout_seconds: u64,
    /// Keep this many Succeeded scheduled backups of the cluster; delete older ones.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    retain: Option<u32>,
    /// With --retain: also delete the deleted backups' S3 objects.
    #[arg(long, requires = "retain")]
    delete_objects: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    if let Err(error) = cli.log.init() {
        eprintln!("etcd-backup-operator: {error}");
        return ExitCode::from(2);
    }
    // Says on stderr which failpoint ETCD_OPERATOR_FAILPOINT arms, if any (tests only).
    failpoint::announce();
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "no Kubernetes client configuration");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Run(args) => run(client, args).await,
        Command::CreateBackup(args) => create(client, args).await,
        Command::SelfTest(args) => self_test(client, args).await,
    }
}

async fn run(client: kube::Client, args: RunArgs) -> ExitCode {
    // For the leader election's own client (its own connections; see run_elected).
    let kube_config = match kube::Config::infer().await {
        Ok(config) => config,
        Err(error) => {
            tracing::error!(%error, "no Kubernetes client configuration");
            return ExitCode::FAILURE;
        }
    };
    // Never a shared default: two replicas with one identity would both hold the Lease.
    let pod_name = match args.shell.identity() {
        Ok(name) => name,
        Err(error) => {
            tracing::error!(%error, "no identity for this replica");
            return ExitCode::FAILURE;
        }
    };
    let election = args.shell.election("etcd-backup-operator", &pod_name);
    let settings = Settings {
        namespace: args.shell.watch_namespace(),
        max_concurrent_backups: usize::from(args.max_concurrent_backups),
        pod_name: Some(pod_name),
        install: args.shell.install_identity("etcd-backup-operator"),
    };
    let mut registry = operator_runtime::metrics::new_registry();
    let metrics = Metrics::register(&mut registry);
    // On stop the running backups abort their uploads and record the outcome.
    run_elected_with_metrics(
        kube_config,
        args.shell.probe_addr,
        Some(Arc::new(registry)),
        election,
        |stop, readiness| controller::run_with_metrics(client, settings, stop, readiness, metrics),
    )
    .await
}

async fn self_test(client: kube::Client, args: SelfTestArgs) -> ExitCode {
    use operator_runtime::selftest;
    let mut failed = false;
    for url in &args.urls {
        match selftest::check_endpoint(url, Duration::from_secs(args.within_seconds)).await {
            Ok(()) => tracing::info!(%url, "answers"),
            Err(error) => {
                tracing::error!(%error, "operator does not answer");
                failed = true;
            }
        }
    }
    match selftest::check_crds_served(&client).await {
        Ok(()) => tracing::info!(kinds = ?selftest::RESOURCES, "served"),
        Err(error) => {
            tracing::error!(%error, "CRDs not served");
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

async fn create(client: kube::Client, args: CreateArgs) -> ExitCode {
    let request = CreateBackup {
        cluster: args.cluster,
        namespace: args.namespace,
        s3: S3Destination {
            connection: S3Connection {
                bucket: args.bucket,
                endpoint: args.endpoint,
                region: args.region,
                force_path_style: args.force_path_style,
                credentials_secret_ref: args
                    .credentials_secret
                    .map(|name| LocalObjectReference { name }),
            },
            prefix: args.prefix,
        },
        timeout_seconds: args.timeout_seconds,
        wait: args
            .wait
            .then(|| Duration::from_secs(args.wait_timeout_seconds)),
        retain: args.retain.map(|n| n as usize),
        delete_objects: args.delete_objects,
    };
    match create_backup(&client, &request).await {
        Ok(outcome) => {
            tracing::info!(
                name = %outcome.name,
                phase = ?outcome.phase,
                message = outcome.message.as_deref().unwrap_or_default(),
                deleted = ?outcome.retention.delete.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
                "create-backup done"
            );
            if outcome.succeeded(args.wait) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            tracing::error!(%error, "create-backup failed");
            ExitCode::FAILURE
        }
    }
}
