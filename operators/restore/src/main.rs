//! `etcd-restore-operator`: flags and wiring only (see the library for what it does).
//!
//! - `run`: the EtcdRestore controller (the chart's Deployment).
//! - `prepare-seed`: the seed Pod's init container; prepares etcd's data directory from a
//!   snapshot in S3 (exits 0 if it already holds a member).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use etcd_restore_operator::controller::{self, Settings};
use etcd_restore_operator::metrics::Metrics;
use etcd_restore_operator::seed::{SeedOutcome, SeedSpec, prepare_seed, s3_client};
use operator_runtime::{LogArgs, ShellArgs, run_elected_with_metrics};

#[derive(Parser, Debug)]
#[command(
    name = "etcd-restore-operator",
    version,
    about = "Rebuilds a lost etcd cluster from a snapshot in S3"
)]
struct Cli {
    #[command(flatten)]
    log: LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the EtcdRestore controller.
    Run(RunArgs),
    /// Prepare a seed member's data directory from a snapshot in S3 (an init container).
    /// Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) or the
    /// ambient AWS chain.
    PrepareSeed(PrepareSeedArgs),
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    shell: ShellArgs,
    /// The image of this operator: seed Pods run its `prepare-seed` (and its etcdutl).
    #[arg(long, env = "SEED_IMAGE")]
    seed_image: String,
    /// The seed Pods' ServiceAccount in the cluster's namespace (workload identity for S3);
    /// default: that namespace's `default`.
    #[arg(long, env = "SEED_SERVICE_ACCOUNT")]
    seed_service_account: Option<String>,
    /// An image pull secret (in the cluster's namespace) for the seed Pods; repeatable.
    #[arg(long = "seed-image-pull-secret")]
    seed_image_pull_secrets: Vec<String>,
    /// Timeout of each etcd call.
    #[arg(long, default_value = "5", value_name = "SECONDS")]
    etcd_timeout_seconds: u64,
}

#[derive(Args, Debug)]
struct PrepareSeedArgs {
    /// Bucket of the snapshot.
    #[arg(long)]
    bucket: String,
    /// Object key of the snapshot.
    #[arg(long)]
    key: String,
    /// S3-compatible endpoint URL (default: AWS).
    #[arg(long)]
    endpoint: Option<String>,
    /// Region to sign for.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// Path-style bucket addressing (MinIO, SeaweedFS, Ceph).
    #[arg(long)]
    force_path_style: bool,
    /// The recorded SHA-256 of the whole object (hex). Without it only etcd's trailer is checked.
    #[arg(long)]
    sha256: Option<String>,
    /// The seed member's name.
    #[arg(long)]
    name: String,
    /// `NAME=PEERURL` of the seed.
    #[arg(long)]
    initial_cluster: String,
    /// The seed's peer URL.
    #[arg(long)]
    initial_advertise_peer_urls: String,
    /// The restored cluster's new token.
    #[arg(long)]
    initial_cluster_token: String,
    /// etcd's data directory.
    #[arg(long)]
    data_dir: PathBuf,
    /// The etcdutl binary.
    #[arg(long)]
    etcdutl: PathBuf,
    /// Where to download the snapshot (default: the data directory's parent).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

impl From<PrepareSeedArgs> for SeedSpec {
    fn from(a: PrepareSeedArgs) -> Self {
        SeedSpec {
            bucket: a.bucket,
            key: a.key,
            endpoint: a.endpoint,
            region: a.region,
            force_path_style: a.force_path_style,
            sha256: a.sha256,
            name: a.name,
            initial_cluster: a.initial_cluster,
            initial_advertise_peer_urls: a.initial_advertise_peer_urls,
            initial_cluster_token: a.initial_cluster_token,
            data_dir: a.data_dir,
            etcdutl: a.etcdutl,
            work_dir: a.work_dir,
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = cli.log.init() {
        eprintln!("etcd-restore-operator: {error}");
        return ExitCode::from(2);
    }
    // Says on stderr which failpoint ETCD_OPERATOR_FAILPOINT arms, if any (tests only).
    failpoint::announce();
    match cli.command {
        Command::Run(args) => run(args).await,
        Command::PrepareSeed(args) => prepare(args.into()).await,
    }
}

async fn run(args: RunArgs) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube_config = match kube::Config::infer().await {
        Ok(config) => config,
        Err(error) => {
            tracing::error!(%error, "no Kubernetes client configuration");
            return ExitCode::FAILURE;
        }
    };
    let client = match kube::Client::try_from(kube_config.clone()) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "no Kubernetes client");
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
    let election = args.shell.election("etcd-restore-operator", &pod_name);
    let settings = Settings {
        namespace: args.shell.watch_namespace(),
        seed_image: args.seed_image,
        seed_service_account: args.seed_service_account,
        seed_image_pull_secrets: args.seed_image_pull_secrets,
        etcd_timeout: Duration::from_secs(args.etcd_timeout_seconds),
        pod_name: Some(pod_name),
        install: args.shell.install_identity("etcd-restore-operator"),
    };
    let mut registry = operator_runtime::metrics::new_registry();
    let metrics = Metrics::register(&mut registry);
    run_elected_with_metrics(
        kube_config,
        args.shell.probe_addr,
        Some(Arc::new(registry)),
        election,
        |stop, readiness| controller::run_with_metrics(client, settings, stop, readiness, metrics),
    )
    .await
}

async fn prepare(spec: SeedSpec) -> ExitCode {
    let s3 = s3_client(&spec).await;
    match prepare_seed(&spec, &s3).await {
        Ok(SeedOutcome::AlreadyPrepared) => {
            tracing::info!(data_dir = %spec.data_dir.display(), "data directory already holds a member; left untouched");
            ExitCode::SUCCESS
        }
        Ok(SeedOutcome::Restored(info)) => {
            // One plain line the restore operator reads from this container's log, whatever the
            // log format: the revision the seed starts at.
            println!(
                "{}",
                etcd_restore_operator::seed::restored_line(info.revision)
            );
            tracing::info!(
                uri = %spec.uri(),
                data_dir = %spec.data_dir.display(),
                revision = info.revision,
                size_bytes = info.size_bytes,
                sha256 = %info.sha256,
                "seed prepared"
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(reason = error.reason(), "{error}");
            // One line on stderr too: the init container's termination message.
            eprintln!("{}", etcd_restore_operator::seed::failure_line(&error));
            ExitCode::FAILURE
        }
    }
}
