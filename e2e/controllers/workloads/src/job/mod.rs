//! The Job controller (`job-controller`): runs pods until `completions` succeed (NonIndexed
//! mode), replaces failed ones after an exponential backoff, enforces `backoffLimit` and
//! `activeDeadlineSeconds`, tracks pods with the `batch.kubernetes.io/job-tracking` finalizer,
//! and deletes finished Jobs after `ttlSecondsAfterFinished`.

mod decide;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};

use crate::error::Error;
use crate::runner::{Context, drive, object_reference};
use crate::{io, labels, pods};
use decide::{Plan, TRACKING_FINALIZER};

pub(crate) const CONTROLLER: &str = "job-controller";

/// Run the Job controller until dropped.
pub async fn run_jobs(client: Client) {
    let controller = Controller::new(Api::<Job>::all(client.clone()), watcher::Config::default())
        .owns(Api::<Pod>::all(client.clone()), watcher::Config::default());
    let ctx = Context::new(client, CONTROLLER, ());
    drive("job", controller, ctx, reconcile).await;
}

/// A pod for `job`: its template plus the labels every Job pod carries (the API server puts
/// them in the template too; they are ensured here for Jobs created before that defaulting)
/// and the tracking finalizer.
fn job_pod(job: &Job) -> Option<Pod> {
    let spec = job.spec.as_ref()?;
    let mut pod = pods::from_template(
        &spec.template,
        &job.name_any(),
        pods::new_controller_ref(job)?,
    );
    let uid = job.metadata.uid.clone()?;
    let labels = pod.metadata.labels.get_or_insert_with(Default::default);
    for key in ["batch.kubernetes.io/controller-uid", "controller-uid"] {
        labels.entry(key.into()).or_insert_with(|| uid.clone());
    }
    for key in ["batch.kubernetes.io/job-name", "job-name"] {
        labels.entry(key.into()).or_insert_with(|| job.name_any());
    }
    let finalizers = pod.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.into());
    }
    Some(pod)
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Context<()>>) -> Result<Action, Error> {
    let namespace = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let job_api: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let selector = job
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .filter(|s| !labels::is_empty(s))
        .ok_or_else(|| Error::invalid("Job", &name, "no selector"))?;
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let owned: Vec<Pod> = pod_api
        .list(&ListParams::default().labels(&labels::to_query(selector)))
        .await?
        .items
        .into_iter()
        .filter(|p| pods::controller_ref(&p.metadata).is_some_and(|r| r.uid == uid))
        .collect();
    let now = Timestamp::now();
    let reference = object_reference(job.as_ref());

    let sync = match decide::plan(&job, &owned, now) {
        Plan::RecordUncounted(status) => {
            let mut updated = (*job).clone();
            updated.status = Some(status);
            job_api
                .replace_status(&name, &PostParams::default(), &updated)
                .await?;
            return Ok(Action::await_change());
        }
        Plan::RemoveFinalizers(names) => {
            for pod in owned.iter().filter(|p| names.contains(&p.name_any())) {
                let finalizers: Vec<&String> = pod
                    .finalizers()
                    .iter()
                    .filter(|f| *f != TRACKING_FINALIZER)
                    .collect();
                let patch = serde_json::json!({"metadata": {
                    "finalizers": if finalizers.is_empty() { serde_json::Value::Null } else { serde_json::json!(finalizers) },
                    "resourceVersion": pod.metadata.resource_version,
                }});
                match pod_api
                    .patch(
                        &pod.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await
                {
                    Err(err) if crate::error::is_not_found(&err) => {}
                    other => {
                        other?;
                    }
                }
            }
            return Ok(Action::await_change());
        }
        Plan::Sync(sync) => sync,
    };

    if sync.create > 0 {
        let pod = job_pod(&job)
            .ok_or_else(|| Error::invalid("Job", &name, "no template, name or uid"))?;
        // A refusal is reported as an event; the next sync tries again.
        let _ = io::create_pods(&ctx, &pod_api, &pod, sync.create, &reference).await;
    }
    for victim in owned.iter().filter(|p| sync.delete.contains(&p.name_any())) {
        if io::delete(
            &pod_api,
            &victim.name_any(),
            victim.metadata.uid.as_deref(),
            None,
        )
        .await?
        {
            let note = format!("Deleted pod: {}", victim.name_any());
            ctx.event(
                &reference,
                EventType::Normal,
                "SuccessfulDelete",
                "Delete",
                note,
            )
            .await;
        }
    }
    if job.status.as_ref() != Some(&sync.status) {
        let mut updated = (*job).clone();
        updated.status = Some(sync.status.clone());
        job_api
            .replace_status(&name, &PostParams::default(), &updated)
            .await?;
    }
    for (warning, reason, note) in &sync.events {
        let type_ = if *warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.event(&reference, type_, reason, "Sync", note.clone())
            .await;
    }
    if sync.expired {
        // The TTL-after-finished controller deletes in the foreground, so the pods go first.
        io::delete(
            &job_api,
            &name,
            Some(&uid),
            Some(PropagationPolicy::Foreground),
        )
        .await?;
        return Ok(Action::await_change());
    }
    Ok(
        match sync.requeue_after.and_then(|d| Duration::try_from(d).ok()) {
            Some(after) => Action::requeue(after + Duration::from_millis(100)),
            None => Action::await_change(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_pods_carry_labels_finalizer_and_owner() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pi", "namespace": "ns", "uid": "u-1"},
            "spec": {"template": {"metadata": {"labels": {"app": "pi"}}, "spec": {"containers": []}}},
        }))
        .unwrap();
        let pod = job_pod(&job).unwrap();
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("pi-"));
        let labels = pod.metadata.labels.unwrap();
        for (k, v) in [
            ("app", "pi"),
            ("batch.kubernetes.io/controller-uid", "u-1"),
            ("controller-uid", "u-1"),
            ("batch.kubernetes.io/job-name", "pi"),
            ("job-name", "pi"),
        ] {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert_eq!(
            pod.metadata.finalizers,
            Some(vec![TRACKING_FINALIZER.to_string()])
        );
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Job", "u-1", Some(true))
        );
    }
}
