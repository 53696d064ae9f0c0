//! `localkube up --state-dir DIR`: the local Kubernetes control plane of the e2e tests and demo.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "localkube",
    about = "The local Kubernetes of the e2e tests: etcd, the upstream control plane, our node agent"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane in the foreground; writes DIR/kubeconfig once it serves, stops
    /// everything it started on SIGINT/SIGTERM.
    Up {
        /// Where etcd's data, the certificates and the kubeconfig live (kept across restarts).
        #[arg(long)]
        state_dir: PathBuf,
        /// The address the API server and etcd listen on (use a private 127.x.y.z per instance).
        #[arg(long, default_value = "127.0.0.1")]
        address: IpAddr,
        /// The API server port (0 = any free port).
        #[arg(long, default_value_t = 6443)]
        port: u16,
        /// The etcd binary to run.
        #[arg(long, env = "LOCALKUBE_ETCD", default_value = "etcd")]
        etcd_binary: PathBuf,
        /// Serve the API alone: no controllers, node agent, DNS or Service proxy (for tests
        /// that run one of those components themselves against the API).
        #[arg(long)]
        api_only: bool,
        /// Where the installed etcd binaries are (`etcd-3.5`, `etcdctl-3.5`, `etcdutl-3.5`,
        /// `etcd-3.4`, `etcdctl-3.4`): the default image map serves the etcd images from them.
        #[arg(long, env = "LOCALKUBE_TOOLS_DIR")]
        tools_dir: Option<PathBuf>,
        /// An image map file (YAML) to use instead of the default one.
        #[arg(long)]
        image_map: Option<PathBuf>,
        /// Where kube-apiserver, kube-controller-manager and kube-scheduler are (default:
        /// --tools-dir, where `make deps` builds them).
        #[arg(long, env = "LOCALKUBE_KUBE_BIN_DIR")]
        kube_bin_dir: Option<PathBuf>,
        /// The CPUs the node advertises to the scheduler (default: the machine's). Tests set
        /// more: their one node stands in for the several nodes a production cluster uses.
        #[arg(long, env = "LOCALKUBE_NODE_CPU")]
        node_cpu: Option<String>,
        /// Which node runs the pods: `agent` (our node agent, e2e/node) or `kubelet` (the
        /// upstream kubelet with containerd and runc, built by `make node-deps`; e2e/README.md
        /// "Real node"). `LOCALKUBE_NODE` lets a harness that starts localkube choose it.
        #[arg(long, value_enum, default_value = "agent", env = "LOCALKUBE_NODE")]
        node: localkube::up::NodeKind,
        /// With `--node kubelet`: where containerd, containerd-shim-runc-v2, runc, ctr and the
        /// kubelet are (default: --tools-dir).
        #[arg(long, env = "LOCALKUBE_NODE_BIN_DIR")]
        node_bin_dir: Option<PathBuf>,
        /// With `--node kubelet`: an OCI image tarball to import into containerd (repeatable;
        /// the pause image of make node-deps is required). `LOCALKUBE_NODE_IMAGES`: a
        /// colon-separated list.
        #[arg(long, env = "LOCALKUBE_NODE_IMAGES", value_delimiter = ':')]
        node_image: Vec<PathBuf>,
    },
    /// Run a host command with the cluster's DNS (e.g. an operator under `cargo run`, which then
    /// resolves `<pod>.<service>.<ns>.svc` names as it would inside a Pod).
    Run {
        /// The state directory of the running `localkube up`.
        #[arg(long, default_value = ".localkube")]
        state_dir: PathBuf,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Internal: the node agent's sandbox shim.
    #[command(hide = true)]
    SandboxShim {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Internal: an in-cluster kube-rs client (tests run it inside pods).
    #[command(hide = true)]
    InCluster {
        /// What to do: `list-pods` (in the pod's namespace).
        action: String,
    },
    /// Internal: run PROGRAM so that it dies with the process whose pid is given.
    #[command(hide = true)]
    Shim {
        #[arg(long)]
        parent: u32,
        /// `SOURCE:TARGET` (repeatable): run PROGRAM in a private mount namespace where each
        /// SOURCE is bind-mounted on TARGET.
        #[arg(long)]
        bind: Vec<String>,
        /// Run PROGRAM in a network namespace of its own.
        #[arg(long)]
        new_net: bool,
        program: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// The shims run before any thread exists: entering namespaces (unshare/setns of the mount
/// namespace) is refused to multi-threaded processes, so no tokio runtime is built for them.
/// The log filter without `LOCALKUBE_LOG`: info, but not a line per DNS query (hickory-server
/// logs each at info; CoreDNS logs none unless its `log` plugin is on). Every peer dial of every
/// etcd member is six queries (the search list, A and AAAA), megabytes of log per test written by
/// the process that serves DNS and the Service proxy.
const DEFAULT_LOG_FILTER: &str = "info,hickory_server=warn";

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::SandboxShim { args } => localkube_sandbox::shim_main(args),
        Command::Shim {
            parent,
            bind,
            new_net,
            program,
            args,
        } => {
            let err = localkube::shim::exec(parent, &bind, new_net, &program, &args);
            eprintln!("localkube shim: {program}: {err}");
            std::process::ExitCode::from(127)
        }
        command => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_env("LOCALKUBE_LOG")
                        .unwrap_or_else(|_| DEFAULT_LOG_FILTER.into()),
                )
                .with_writer(std::io::stderr)
                .init();
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("localkube: starting the async runtime: {e}");
                    return std::process::ExitCode::FAILURE;
                }
            };
            match runtime.block_on(run_command(command)) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("localkube: {e}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
    }
}

async fn run_command(command: Command) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // The graph has more than one rustls crypto provider; the in-process kube-rs clients of the
    // node agent, DNS and proxy need one chosen process-wide.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match command {
        Command::Up {
            state_dir,
            address,
            port,
            etcd_binary,
            api_only,
            tools_dir,
            image_map,
            kube_bin_dir,
            node_cpu,
            node,
            node_bin_dir,
            node_image,
        } => {
            localkube::up::up(localkube::up::UpOptions {
                state_dir,
                address,
                port,
                etcd_binary,
                api_only,
                tools_dir,
                image_map,
                kube_bin_dir,
                node_cpu,
                node,
                node_bin_dir,
                node_images: node_image,
            })
            .await
        }
        Command::Run { state_dir, command } => localkube::run::run(&state_dir, &command).await,
        Command::InCluster { action } => localkube::run::in_cluster(&action).await,
        Command::Shim { .. } | Command::SandboxShim { .. } => Ok(()),
    }
}
