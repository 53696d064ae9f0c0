//! Jobs, CronJobs and the scheduler against a real localkube API server, with this crate's
//! controllers in-process and the test playing kubelet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

fn job(name: &str, completions: i32, backoff_limit: i32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": 1,
            "backoffLimit": backoff_limit,
            "template": {"spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "containers": [{"name": "main", "image": "busybox"}],
            }},
        },
    }))
    .unwrap()
}

fn condition(job: &Job, type_: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// The one pod of the job that is neither finished nor terminating, once it exists.
async fn running_pod(pods: &Api<Pod>, job: &str) -> Pod {
    eventually("a pod of the job", TIMEOUT, || async {
        let list = pods
            .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
            .await
            .ok()?;
        list.items.into_iter().find(|p| {
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Pending");
            p.metadata.deletion_timestamp.is_none() && !matches!(phase, "Succeeded" | "Failed")
        })
    })
    .await
}

async fn reasons(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

#[tokio::test]
async fn job_completes_after_two_successes_and_a_failing_job_hits_its_backoff_limit() {
    let (_lk, client) = start().await;
    namespace(&client, "batch").await;
    let _jobs = spawn(localkube_workloads::run_jobs(client.clone()));
    let jobs: Api<Job> = Api::namespaced(client.clone(), "batch");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "batch");

    jobs.create(&PostParams::default(), &job("pi", 2, 6))
        .await
        .unwrap();
    let uid = jobs.get("pi").await.unwrap().uid().unwrap();
    for _ in 0..2 {
        let pod = running_pod(&pods, "pi").await;
        assert!(pod.name_any().starts_with("pi-"));
        assert_eq!(pod.finalizers(), ["batch.kubernetes.io/job-tracking"]);
        for label in ["batch.kubernetes.io/controller-uid", "controller-uid"] {
            assert_eq!(pod.labels().get(label), Some(&uid), "{label}");
        }
        assert_eq!(pod.labels().get("job-name").map(String::as_str), Some("pi"));
        make_ready(&pods, &pod.name_any()).await;
        finish(&pods, &pod.name_any(), 0).await;
        let name = pod.name_any();
        eventually("the pod to be counted", TIMEOUT, || async {
            pods.get(&name)
                .await
                .ok()?
                .finalizers()
                .is_empty()
                .then_some(())
        })
        .await;
    }
    let done = eventually("pi to complete", TIMEOUT, || async {
        let j = jobs.get("pi").await.ok()?;
        condition(&j, "Complete").map(|_| j)
    })
    .await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        (status.succeeded, status.failed, status.active),
        (Some(2), None, None)
    );
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    assert_eq!(
        condition(&done, "SuccessCriteriaMet"),
        Some((
            "CompletionsReached".into(),
            "Reached expected number of succeeded pods".into()
        ))
    );
    assert_eq!(
        condition(&done, "Complete"),
        Some((
            "CompletionsReached".into(),
            "Reached expected number of succeeded pods".into()
        ))
    );
    let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
    assert!(uncounted.succeeded.unwrap_or_default().is_empty());
    eventually("the Completed event", TIMEOUT, || async {
        let r = reasons(&client, "batch", "pi").await;
        (r.contains(&"Completed".to_string()) && r.contains(&"SuccessfulCreate".to_string()))
            .then_some(())
    })
    .await;

    // backoffLimit 0: the first failure fails the job, with no replacement pod.
    jobs.create(&PostParams::default(), &job("doomed", 1, 0))
        .await
        .unwrap();
    let pod = running_pod(&pods, "doomed").await;
    finish(&pods, &pod.name_any(), 1).await;
    let failed = eventually("doomed to fail", TIMEOUT, || async {
        let j = jobs.get("doomed").await.ok()?;
        condition(&j, "Failed").map(|_| j)
    })
    .await;
    let backoff = (
        "BackoffLimitExceeded".to_string(),
        "Job has reached the specified backoff limit".to_string(),
    );
    assert_eq!(condition(&failed, "FailureTarget"), Some(backoff.clone()));
    assert_eq!(condition(&failed, "Failed"), Some(backoff));
    let status = failed.status.clone().unwrap();
    assert_eq!(
        (status.failed, status.succeeded, status.completion_time),
        (Some(1), None, None)
    );
    let all = pods
        .list(&ListParams::default().labels("job-name=doomed"))
        .await
        .unwrap()
        .items;
    assert_eq!(all.len(), 1, "no pod replaced a failure beyond the limit");
    eventually("the BackoffLimitExceeded event", TIMEOUT, || async {
        reasons(&client, "batch", "doomed")
            .await
            .contains(&"BackoffLimitExceeded".to_string())
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn cronjob_every_minute_runs_a_job_that_completes_and_history_is_capped() {
    let (_lk, client) = start().await;
    namespace(&client, "cron").await;
    let _jobs = spawn(localkube_workloads::run_jobs(client.clone()));
    let _cron = spawn(localkube_workloads::run_cronjobs(client.clone()));
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), "cron");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "cron");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "cron");

    // Two finished Jobs of an earlier life of this CronJob, to be capped to one.
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 1,
            "jobTemplate": {"metadata": {"labels": {"app": "tick"}}, "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "containers": [{"name": "main", "image": "busybox"}],
            }}}},
        },
    }))
    .unwrap();
    let cj = cronjobs.create(&PostParams::default(), &cj).await.unwrap();

    let job = eventually(
        "the first scheduled Job",
        Duration::from_secs(70),
        || async {
            jobs.list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .next()
        },
    )
    .await;
    let scheduled = job
        .annotations()
        .get("batch.kubernetes.io/cronjob-scheduled-timestamp")
        .cloned()
        .unwrap();
    let at: jiff::Timestamp = scheduled.parse().unwrap();
    assert_eq!(at.as_second() % 60, 0, "{scheduled}");
    assert!(scheduled.ends_with('Z'), "{scheduled}");
    assert_eq!(job.name_any(), format!("tick-{}", at.as_second() / 60));
    assert_eq!(job.labels().get("app").map(String::as_str), Some("tick"));
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("CronJob", cj.uid().unwrap().as_str(), Some(true))
    );
    let status = eventually("the CronJob status to list the Job", TIMEOUT, || async {
        let s = cronjobs.get("tick").await.ok()?.status?;
        s.last_schedule_time.is_some().then_some(s)
    })
    .await;
    assert_eq!(status.last_schedule_time.map(|t| t.0), Some(at));
    let active = status.active.unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(
        (active[0].kind.as_deref(), active[0].name.as_deref()),
        (Some("Job"), Some(job.name_any().as_str()))
    );

    // The kubelet completes it; the CronJob notices.
    let pod = running_pod(&pods, &job.name_any()).await;
    finish(&pods, &pod.name_any(), 0).await;
    let status = eventually("lastSuccessfulTime", TIMEOUT, || async {
        let s = cronjobs.get("tick").await.ok()?.status?;
        (s.last_successful_time.is_some() && s.active.as_ref().is_none_or(Vec::is_empty))
            .then_some(s)
    })
    .await;
    assert!(status.last_successful_time.unwrap().0 >= at);
    eventually("the SawCompletedJob event", TIMEOUT, || async {
        reasons(&client, "cron", "tick")
            .await
            .contains(&"SawCompletedJob".to_string())
            .then_some(())
    })
    .await;

    // Another successful Job of this CronJob, started later: with successfulJobsHistoryLimit 1
    // the earlier one (by start time, as upstream sorts) is deleted.
    let mut extra = job.clone();
    extra.metadata = kube::api::ObjectMeta {
        name: Some("tick-extra".into()),
        labels: job.metadata.labels.clone(),
        owner_references: job.metadata.owner_references.clone(),
        ..Default::default()
    };
    if let Some(spec) = extra.spec.as_mut() {
        spec.selector = None;
        if let Some(meta) = spec.template.metadata.as_mut() {
            meta.labels = None;
        }
    }
    extra.status = None;
    jobs.create(&PostParams::default(), &extra).await.unwrap();
    let extra_pod = running_pod(&pods, "tick-extra").await;
    finish(&pods, &extra_pod.name_any(), 0).await;
    eventually("history capped at one successful Job", TIMEOUT, || async {
        let complete: Vec<String> = jobs
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .filter(|j| {
                j.metadata.deletion_timestamp.is_none() && condition(j, "Complete").is_some()
            })
            .map(|j| j.name_any())
            .collect();
        (complete == ["tick-extra"]).then_some(())
    })
    .await;
    assert!(
        reasons(&client, "cron", "tick")
            .await
            .contains(&"SuccessfulDelete".to_string())
    );
}

#[tokio::test]
async fn scheduler_binds_pods_to_the_node_and_records_the_event() {
    let (_lk, client) = start().await;
    namespace(&client, "sched").await;
    let c = client.clone();
    let _s = spawn(async move {
        let _ = localkube_workloads::run(
            c,
            localkube_workloads::WorkloadOptions {
                node_name: "localkube".into(),
            },
        )
        .await;
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), "sched");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "solo"},
        "spec": {"automountServiceAccountToken": false, "containers": [{"name": "main", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let bound = eventually("the pod to be bound", TIMEOUT, || async {
        let p = pods.get("solo").await.ok()?;
        p.spec
            .as_ref()?
            .node_name
            .clone()
            .filter(|n| n == "localkube")
            .map(|_| p)
    })
    .await;
    let scheduled = bound
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| c.status);
    assert_eq!(scheduled.as_deref(), Some("True"));
    let event = eventually("the Scheduled event", TIMEOUT, || async {
        Api::<Event>::namespaced(client.clone(), "sched")
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Scheduled"))
    })
    .await;
    assert_eq!(
        event.message.as_deref(),
        Some("Successfully assigned sched/solo to localkube")
    );
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("default-scheduler")
    );
    assert_eq!(event.involved_object.name.as_deref(), Some("solo"));
}
