//! `localkube up --state-dir DIR`: the local Kubernetes control plane of the e2e tests and demo.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "localkube",
    about = "A small, faithful Kubernetes control plane on a real etcd"
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
    },
    /// Internal: run PROGRAM so that it dies with the process whose pid is given.
    #[command(hide = true)]
    Shim {
        #[arg(long)]
        parent: u32,
        program: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOCALKUBE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Command::Shim {
        parent,
        program,
        args,
    } = &cli.command
    {
        let err = localkube::shim::exec(*parent, program, args);
        eprintln!("localkube shim: {program}: {err}");
        return std::process::ExitCode::from(127);
    }
    let result = match cli.command {
        Command::Up {
            state_dir,
            address,
            port,
            etcd_binary,
            api_only,
        } => {
            localkube::up::up(localkube::up::UpOptions {
                state_dir,
                address,
                port,
                etcd_binary,
                api_only,
            })
            .await
        }
        Command::Shim { .. } => Ok(()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("localkube: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
