//! `etcd-cluster-operator`: flags and wiring. The loop itself is in the library's `controller`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use etcd_cluster_operator::controller::{self, Context};
use etcd_cluster_operator::execute::NetworkSettings;
use etcd_cluster_operator::metrics::Metrics;
use etcd_cluster_operator::observe::UnhealthySince;
use etcd_cluster_operator::plan::Policy;
use operator_runtime::{
    Events, FailureBackoff, LogArgs, NamespaceClaims, ShellArgs, run_elected_with_metrics,
};
use tracing::error;

/// The Lease's name unless `--lease-name` says otherwise.
const LEASE_NAME: &str = "etcd-cluster-operator";

/// The EtcdCluster operator: quorum-safe membership, scaling, replacement and upgrades.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    log: LogArgs,
    #[command(flatten)]
    shell: ShellArgs,
    /// How long a voting member may be unhealthy before it is replaced.
    #[arg(long, default_value = "300", value_name = "SECONDS")]
    dead_member_after_seconds: u64,
    /// How long a learner may go without answering (not started, not caught up) before it is
    /// removed and replaced. It holds no vote: removing it never touches quorum.
    #[arg(long, default_value = "600", value_name = "SECONDS")]
    learner_deadline_seconds: u64,
    /// Timeout of each etcd call.
    #[arg(long, default_value = "5", value_name = "SECONDS")]
    etcd_timeout_seconds: u64,
    /// Lifetime of the member and client certificates the operator issues (renewed once a
    /// third of it is left). To watch renewals by hand; the default is three years.
    #[arg(long, hide = true, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(60..))]
    certificate_validity_seconds: Option<u32>,
    /// Which clusters without `spec.networkPolicy.enabled` get a NetworkPolicy: `tls` (those
    /// with `spec.tls`), `always` or `never`.
    #[arg(long, default_value = "tls", value_name = "tls|always|never")]
    network_policy: etcd_api::network::NetworkPolicyDefault,
    /// The operators' image: `spec.backup`'s CronJobs run its `etcd-backup-operator
    /// create-backup`. The chart sets it to the image it runs the operators from; without it a
    /// cluster with `spec.backup` reports BackupScheduleFailed.
    #[arg(long, env = "BACKUP_IMAGE", value_name = "IMAGE")]
    backup_image: Option<String>,
    /// How many clusters are reconciled at once; the others wait their turn. Bounds the load
    /// a burst (100 clusters applied at once) puts on the API server, on etcd and on this
    /// process. 0: no limit.
    #[arg(long, default_value = "16", value_name = "N")]
    max_concurrent_reconciles: u16,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = args.log.init() {
        eprintln!("etcd-cluster-operator: --log-level: {e}");
        return ExitCode::from(2);
    }
    // Says on stderr which failpoint ETCD_OPERATOR_FAILPOINT arms, if any (tests only).
    failpoint::announce();
    run(args).await
}

async fn run(args: Args) -> ExitCode {
    // kube-rs and etcd-client bring two rustls crypto providers; pick one for the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (kube_config, client, identity) = match connect(&args).await {
        Ok(connected) => connected,
        Err(error) => {
            error!(%error, "exiting");
            return ExitCode::FAILURE;
        }
    };
    let election = args.shell.election(LEASE_NAME, &identity);
    let mut registry = operator_runtime::metrics::new_registry();
    let metrics = Metrics::register(&mut registry);
    let claims = NamespaceClaims::new(
        client.clone(),
        LEASE_NAME,
        args.shell.install_identity(LEASE_NAME),
    );
    let ctx = Arc::new(Context {
        events: Events::new(client.clone(), "etcd-cluster-operator", Some(identity)),
        client,
        backoff: FailureBackoff::new(Duration::from_secs(1), Duration::from_secs(300)),
        refusals: controller::refusal_backoff(),
        policy: Policy {
            dead_after: Duration::from_secs(args.dead_member_after_seconds),
            learner_deadline: Duration::from_secs(args.learner_deadline_seconds),
        },
        etcd_timeout: Duration::from_secs(args.etcd_timeout_seconds),
        certificate_validity: args
            .certificate_validity_seconds
            .map_or(etcd_cluster_operator::certs::LEAF_VALIDITY, |s| {
                time::Duration::seconds(i64::from(s))
            }),
        unhealthy: UnhealthySince::default(),
        compactions: Default::default(),
        etcd_clients: {
            let dials = metrics.etcd_dials.clone();
            etcd_admin::ClientPool::with_dial_hook(Arc::new(move || {
                dials.inc();
            }))
        },
        metrics,
        claims,
        member_stores: Default::default(),
        member_watches: Default::default(),
        cluster_objects: Default::default(),
        network: NetworkSettings {
            default_policy: args.network_policy,
            // The operators' namespace: where the Lease is, the Pod's own (POD_NAMESPACE).
            operator_namespace: args.shell.lease_namespace.clone(),
        },
        backup_image: args.backup_image.clone().filter(|image| !image.is_empty()),
    });
    let namespace = args.shell.watch_namespace();
    // The Lease on its own thread and the stale-leader fence, the probes and metrics, SIGTERM:
    // the same shell as the backup and restore operators (`run_elected`).
    run_elected_with_metrics(
        kube_config,
        args.shell.probe_addr,
        Some(Arc::new(registry)),
        election,
        move |stop, readiness| async move {
            let stopping = ctx.clone();
            controller::run(
                ctx,
                namespace,
                args.max_concurrent_reconciles,
                stop,
                readiness,
            )
            .await;
            // On a clean stop the namespaces are let go at once, so another install can take
            // them.
            stopping.claims.release_all().await;
        },
    )
    .await
}

/// The API server's configuration, a client, and this replica's identity: the Pod name, else
/// the hostname; never the PID (1 in every container), or two replicas could share an identity
/// and both hold the Lease.
async fn connect(
    args: &Args,
) -> Result<(kube::Config, kube::Client, String), Box<dyn std::error::Error>> {
    let kube_config = kube::Config::infer().await?;
    let client = kube::Client::try_from(kube_config.clone())?;
    let identity = args.shell.identity()?;
    Ok((kube_config, client, identity))
}
