//! The localkube core controllers: EndpointSlices and Endpoints, PV provisioner, garbage
//! collector, namespace deletion, ServiceAccounts and root CA, PodDisruptionBudget status.
//!
//! Each controller talks to the API server only through kube-rs (kube-runtime `Controller`,
//! `watcher`, reflector stores), as the project's operators do, so they exercise the same
//! list/watch paths. Decisions are pure functions over observed objects (unit-tested without a
//! server); the I/O around them is thin. Names, reasons and messages follow
//! kube-controller-manager, because real clients and tests compare them.

mod discovery;
pub mod disruption;
pub mod endpoints;
mod error;
mod finalizers;
pub mod gc;
pub mod namespaces;
mod pods;
mod retry;
mod runner;
pub mod serviceaccounts;
pub mod volumes;

use std::path::PathBuf;

pub use disruption::run_disruption;
pub use endpoints::run_endpoints;
pub use error::Error;
pub use gc::run_gc;
pub use namespaces::run_namespaces;
pub use serviceaccounts::run_service_accounts;
pub use volumes::run_volumes;

/// What `localkube up` tells the core controllers.
#[derive(Clone, Debug)]
pub struct CoreOptions {
    /// The single node's name (`localkube`): provisioned PVs are pinned to it.
    pub node_name: String,
    /// Where the provisioner makes one directory per PersistentVolume.
    pub volumes_dir: PathBuf,
    /// The cluster CA, published as ConfigMap `kube-root-ca.crt` key `ca.crt` in every namespace.
    pub root_ca_pem: String,
}

/// Run every core controller. Errors of single objects are logged and retried with per-object
/// backoff, and watch errors are retried by the watchers, so this future does not end while the
/// process runs; its `Result` is for a controller that gives up (none does today).
pub async fn run(client: kube::Client, options: CoreOptions) -> Result<(), Error> {
    tokio::try_join!(
        run_endpoints(client.clone()),
        run_volumes(client.clone(), options.node_name, options.volumes_dir),
        run_gc(client.clone()),
        run_namespaces(client.clone()),
        run_service_accounts(client.clone(), options.root_ca_pem),
        run_disruption(client),
    )?;
    Ok(())
}
