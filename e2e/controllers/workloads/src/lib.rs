//! The localkube workload controllers: scheduler, ReplicaSet, Deployment, Job and CronJob.
//!
//! Each controller is a kube-runtime `Controller` talking to the API server through kube-rs,
//! exactly as the project's operators do, and mirrors the kube-controller-manager (or
//! kube-scheduler) behaviour that kubectl, helm and client libraries observe: object names,
//! labels, annotations, status fields, condition reasons and event reasons. Decisions are pure
//! functions (`decide` / `rollout` / `schedule` modules) over the observed objects and the time;
//! the controller modules only read, call them, and write.

mod cronjob;
mod deployment;
mod error;
mod hash;
mod intstr;
mod io;
mod job;
mod labels;
mod pods;
mod replicaset;
mod runner;
mod scheduler;

pub use deployment::run_deployments;
pub use error::Error;

/// What `localkube up` tells the workload controllers.
#[derive(Clone, Debug)]
pub struct WorkloadOptions {
    /// The node pods are bound to (`localkube`).
    pub node_name: String,
}

/// Run every controller of this crate until the future is dropped. A failing object is logged
/// and retried with backoff; watch errors are retried by the watchers. The controllers only end
/// if their watch streams do, which is reported as [`Error::Stopped`].
pub async fn run(client: kube::Client, options: WorkloadOptions) -> Result<(), Error> {
    tokio::select! {
        () = run_scheduler(client.clone(), options.node_name) => stopped("scheduler"),
        () = run_replicasets(client.clone()) => stopped("replicaset"),
        () = run_deployments(client.clone()) => stopped("deployment"),
        () = run_jobs(client.clone()) => stopped("job"),
        () = run_cronjobs(client) => stopped("cronjob"),
    }
}

fn stopped(controller: &'static str) -> Result<(), Error> {
    Err(Error::Stopped {
        controller,
        reason: "its watch streams ended".into(),
    })
}
pub use cronjob::run_cronjobs;
pub use job::run_jobs;
pub use replicaset::run_replicasets;
pub use scheduler::{DEFAULT_SCHEDULER, run_scheduler};
