//! The localkube workload controllers: scheduler, ReplicaSet, Deployment, Job and CronJob.
//!
//! Each controller is a kube-runtime `Controller` talking to the API server through kube-rs,
//! exactly as the project's operators do, and mirrors the kube-controller-manager (or
//! kube-scheduler) behaviour that kubectl, helm and client libraries observe: object names,
//! labels, annotations, status fields, condition reasons and event reasons. Decisions are pure
//! functions (`decide` / `rollout` / `schedule` modules) over the observed objects and the time;
//! the controller modules only read, call them, and write.

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
pub use job::run_jobs;
pub use replicaset::run_replicasets;
pub use scheduler::{DEFAULT_SCHEDULER, run_scheduler};
