//! The CronJob controller (`cronjob-controller`): creates Job `<cronjob>-<unix minutes>` for the
//! most recent due schedule time, honours concurrencyPolicy, startingDeadlineSeconds, suspend
//! and the history limits, keeps `status.active`, `lastScheduleTime` and `lastSuccessfulTime`,
//! and sleeps until the next activation instead of polling.

mod decide;
mod schedule;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};

use crate::error::{Error, is_already_exists};
use crate::runner::{Context, drive, object_reference};
use crate::{io, pods};

pub(crate) const CONTROLLER: &str = "cronjob-controller";
/// The annotation with the schedule time a Job was created for.
pub(crate) const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Run the CronJob controller until dropped.
pub async fn run_cronjobs(client: Client) {
    let controller = Controller::new(
        Api::<CronJob>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Job>::all(client.clone()), watcher::Config::default());
    let ctx = Context::new(client, CONTROLLER, ());
    drive("cronjob", controller, ctx, reconcile).await;
}

/// The Job for `scheduled` (`getJobFromTemplate2`).
fn job_for(cj: &CronJob, scheduled: Timestamp) -> Option<Job> {
    let spec = cj.spec.as_ref()?;
    let template = &spec.job_template;
    let meta = template.metadata.clone().unwrap_or_default();
    let tz = schedule::time_zone(spec.time_zone.as_deref()).ok()?;
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP.into(),
        decide::scheduled_timestamp(scheduled, &tz),
    );
    Some(Job {
        metadata: ObjectMeta {
            name: Some(decide::job_name(&cj.name_any(), scheduled)),
            namespace: cj.namespace(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![pods::new_controller_ref(cj)?]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    })
}

async fn reconcile(cj: Arc<CronJob>, ctx: Arc<Context<()>>) -> Result<Action, Error> {
    let namespace = cj.namespace().unwrap_or_default();
    let name = cj.name_any();
    let cj_api: Api<CronJob> = Api::namespaced(ctx.client.clone(), &namespace);
    let job_api: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let uid = cj.metadata.uid.clone().unwrap_or_default();
    let jobs: Vec<Job> = job_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|j| pods::controller_ref(&j.metadata).is_some_and(|r| r.uid == uid))
        .collect();
    let now = Timestamp::now();
    let reference = object_reference(cj.as_ref());
    let mut plan = decide::plan(&cj, &jobs, now);

    for (job_name, job_uid) in &plan.delete {
        io::delete(
            &job_api,
            job_name,
            job_uid.as_deref(),
            Some(PropagationPolicy::Background),
        )
        .await?;
    }
    for (warning, reason, note) in &plan.events {
        let type_ = if *warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.event(&reference, type_, reason, "Sync", note.clone())
            .await;
    }
    if let Some(scheduled) = plan.create {
        let job = job_for(&cj, scheduled)
            .ok_or_else(|| Error::invalid("CronJob", &name, "no job template, name or uid"))?;
        let created = match job_api.create(&PostParams::default(), &job).await {
            Ok(created) => {
                let note = format!("Created job {}", created.name_any());
                ctx.event(
                    &reference,
                    EventType::Normal,
                    "SuccessfulCreate",
                    "Create",
                    note,
                )
                .await;
                created
            }
            // Created by an earlier sync whose status write was lost: adopt the record.
            Err(err) if is_already_exists(&err) => job_api.get(&job.name_any()).await?,
            Err(err) => {
                let note = format!("Error creating job: {err}");
                ctx.event(
                    &reference,
                    EventType::Warning,
                    "FailedCreate",
                    "Create",
                    note,
                )
                .await;
                return Err(err.into());
            }
        };
        decide::record_created(&mut plan.status, &created, scheduled);
    }
    if plan.status.active.as_ref().is_some_and(Vec::is_empty) {
        plan.status.active = None;
    }
    if cj.status.clone().unwrap_or_default() != plan.status {
        let mut updated = (*cj).clone();
        updated.status = Some(plan.status);
        cj_api
            .replace_status(&name, &PostParams::default(), &updated)
            .await?;
    }
    Ok(
        match plan.requeue_after.and_then(|d| Duration::try_from(d).ok()) {
            Some(after) => Action::requeue(after),
            None => Action::await_change(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_named_annotated_and_owned() {
        let cj: CronJob = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "tick", "namespace": "ns", "uid": "cj-1"},
            "spec": {
                "schedule": "* * * * *",
                "timeZone": "Europe/Berlin",
                "jobTemplate": {
                    "metadata": {"labels": {"app": "tick"}, "annotations": {"a": "b"}},
                    "spec": {"template": {"spec": {"containers": [], "restartPolicy": "Never"}}},
                },
            },
        }))
        .unwrap();
        let at: Timestamp = "2024-03-01T10:05:00Z".parse().unwrap();
        let job = job_for(&cj, at).unwrap();
        assert_eq!(job.metadata.name.as_deref(), Some("tick-28488125"));
        let annotations = job.metadata.annotations.unwrap();
        assert_eq!(
            annotations.get(SCHEDULED_TIMESTAMP).map(String::as_str),
            Some("2024-03-01T11:05:00+01:00")
        );
        assert_eq!(annotations.get("a").map(String::as_str), Some("b"));
        assert_eq!(
            job.metadata.labels.unwrap().get("app").map(String::as_str),
            Some("tick")
        );
        let owner = &job.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("CronJob", "cj-1", Some(true), Some(true))
        );
        assert!(job.spec.is_some());
    }
}
