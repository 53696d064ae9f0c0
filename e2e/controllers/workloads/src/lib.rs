//! The localkube workload controllers: scheduler, ReplicaSet, Deployment, Job and CronJob
