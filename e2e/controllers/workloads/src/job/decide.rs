//! What one Job sync does, as a pure function of the Job, its pods and the time
//! (`job_controller.go` `syncJob`, `manageJob`, `trackJobStatusAndRemoveFinalizers`,
//! `enactJobFinished`; NonIndexed completion mode).
//!
//! Pods carry the `batch.kubernetes.io/job-tracking` finalizer until they are counted. Counting
//! goes in three steps, one per sync, so a crash never counts a pod twice or loses one: a
//! finished pod's uid is first recorded in `status.uncountedTerminatedPods`, then its finalizer
//! is removed, then the uid moves into `succeeded`/`failed`.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pods;

pub(crate) const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// First delay before replacing a failed pod; doubles per failure since the last success.
const BACKOFF_BASE: SignedDuration = SignedDuration::from_secs(10);
/// The longest such delay (the documented six minutes).
const BACKOFF_MAX: SignedDuration = SignedDuration::from_secs(360);

/// What one sync does. Exactly one kind of step happens per sync; see the module docs.
#[derive(Debug, PartialEq)]
pub(crate) enum Plan {
    /// Record finished pods as uncounted (a status write) before touching them.
    RecordUncounted(JobStatus),
    /// Remove the tracking finalizer from these pods (recorded as uncounted already).
    RemoveFinalizers(Vec<String>),
    /// Count, decide conditions and pods.
    Sync(Box<SyncPlan>),
}

#[derive(Debug, Default, PartialEq)]
pub(crate) struct SyncPlan {
    pub create: usize,
    pub delete: Vec<String>,
    pub status: JobStatus,
    /// Events to publish: (warning?, reason, note).
    pub events: Vec<(bool, &'static str, String)>,
    pub requeue_after: Option<SignedDuration>,
    /// The job finished longer than `ttlSecondsAfterFinished` ago: delete it.
    pub expired: bool,
}

fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TRACKING_FINALIZER))
}

/// A pod the Job counts as finished: a terminal phase, or deleted before it succeeded.
fn finished(pod: &Pod) -> bool {
    pods::is_terminal(pod) || pod.metadata.deletion_timestamp.is_some()
}

fn counts_as_success(pod: &Pod) -> bool {
    pods::phase(pod) == "Succeeded"
}

pub(crate) fn condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// The finished condition (`Complete` or `Failed`) if the job has one.
pub(crate) fn finished_condition(status: &JobStatus) -> Option<&JobCondition> {
    condition(status, "Complete").or_else(|| condition(status, "Failed"))
}

fn new_condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// How long to wait before creating pods after failures (`backoffRecord.getRemainingTime`):
/// 10 s doubled for every failure since the last success, from the last failure, capped.
pub(crate) fn backoff_remaining(pods: &[&Pod], now: Timestamp) -> Option<SignedDuration> {
    let last_success = pods
        .iter()
        .filter(|p| counts_as_success(p))
        .filter_map(|p| pods::finished_at(p))
        .max();
    let failures: Vec<Timestamp> = pods
        .iter()
        .filter(|p| pods::phase(p) == "Failed")
        .filter_map(|p| pods::finished_at(p))
        .filter(|t| last_success.is_none_or(|s| *t > s))
        .collect();
    let last_failure = failures.iter().max()?;
    let exponent = u32::try_from(failures.len().saturating_sub(1))
        .unwrap_or(u32::MAX)
        .min(16);
    let delay = BACKOFF_BASE
        .checked_mul(1 << exponent)
        .unwrap_or(BACKOFF_MAX)
        .min(BACKOFF_MAX);
    let remaining = (*last_failure + delay).duration_since(now);
    (remaining > SignedDuration::ZERO).then_some(remaining)
}

/// Plan one sync of `job`, given the pods it controls.
pub(crate) fn plan(job: &Job, pods: &[Pod], now: Timestamp) -> Plan {
    let old = job.status.clone().unwrap_or_default();
    let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
    let recorded = |uid: &str| {
        uncounted.succeeded.iter().flatten().any(|u| u == uid)
            || uncounted.failed.iter().flatten().any(|u| u == uid)
    };

    // Step 1: finished pods still holding the finalizer are recorded as uncounted.
    let mut to_record = uncounted.clone();
    let mut newly = false;
    for pod in pods.iter().filter(|p| has_finalizer(p) && finished(p)) {
        let Some(uid) = pod.metadata.uid.clone() else {
            continue;
        };
        if recorded(&uid) {
            continue;
        }
        newly = true;
        let list = if counts_as_success(pod) {
            &mut to_record.succeeded
        } else {
            &mut to_record.failed
        };
        list.get_or_insert_with(Vec::new).push(uid);
    }
    if newly {
        let mut status = old;
        status.uncounted_terminated_pods = Some(to_record);
        return Plan::RecordUncounted(status);
    }

    // Step 2: release what is recorded.
    let release: Vec<String> = pods
        .iter()
        .filter(|p| has_finalizer(p) && p.metadata.uid.as_deref().is_some_and(recorded))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    if !release.is_empty() {
        return Plan::RemoveFinalizers(release);
    }

    Plan::Sync(Box::new(sync(job, pods, now, old, uncounted)))
}

fn sync(
    job: &Job,
    pods: &[Pod],
    now: Timestamp,
    old: JobStatus,
    uncounted: UncountedTerminatedPods,
) -> SyncPlan {
    let mut plan = SyncPlan::default();
    let spec = job.spec.clone().unwrap_or_default();
    let succeeded =
        old.succeeded.unwrap_or(0) + count(uncounted.succeeded.unwrap_or_default().len());
    let failed = old.failed.unwrap_or(0) + count(uncounted.failed.unwrap_or_default().len());
    let active: Vec<&Pod> = pods.iter().filter(|p| pods::is_active(p)).collect();
    let terminating = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some() && !pods::is_terminal(p))
        .count();
    let start_time = old.start_time.clone().unwrap_or(Time(now));
    let mut status = JobStatus {
        active: None,
        ready: Some(count(active.iter().filter(|p| pods::is_ready(p)).count())),
        succeeded: nonzero(succeeded),
        failed: nonzero(failed),
        terminating: Some(count(terminating)),
        start_time: Some(start_time.clone()),
        completion_time: old.completion_time.clone(),
        conditions: old.conditions.clone(),
        uncounted_terminated_pods: Some(UncountedTerminatedPods::default()),
        completed_indexes: None,
        failed_indexes: None,
    };

    if let Some(done) = finished_condition(&old) {
        // Finished: nothing runs any more; expire under ttlSecondsAfterFinished.
        plan.delete = active
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        status.active = None;
        if let (Some(ttl), Some(at)) = (
            spec.ttl_seconds_after_finished,
            done.last_transition_time.as_ref(),
        ) {
            let expires = at.0 + SignedDuration::from_secs(i64::from(ttl));
            if expires <= now {
                plan.expired = true;
            } else {
                plan.requeue_after = Some(expires.duration_since(now));
            }
        }
        plan.status = status;
        return plan;
    }

    // The interim condition: detected now or in an earlier sync.
    let interim = condition(&old, "FailureTarget")
        .or_else(|| condition(&old, "SuccessCriteriaMet"))
        .cloned();
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let on_failure = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        == Some("OnFailure");
    let restarts: i32 = active.iter().map(|p| pods::restart_count(p)).sum();
    let past_backoff_on_failure = on_failure
        && if backoff_limit == 0 {
            restarts > 0
        } else {
            restarts >= backoff_limit
        };
    let deadline = spec
        .active_deadline_seconds
        .map(|s| start_time.0 + SignedDuration::from_secs(s));

    let mut interim = interim.or_else(|| {
        if failed > backoff_limit || past_backoff_on_failure {
            Some(new_condition(
                "FailureTarget",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            ))
        } else if deadline.is_some_and(|d| d <= now) {
            Some(new_condition(
                "FailureTarget",
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
                now,
            ))
        } else {
            None
        }
    });

    let mut active_after = active.len();
    if interim.is_none() {
        // manageJob: how many should run.
        let parallelism = usize::try_from(spec.parallelism.unwrap_or(1).max(0)).unwrap_or(0);
        let want = match spec.completions {
            None if succeeded > 0 => active.len(),
            None => parallelism,
            Some(c) => usize::try_from((c - succeeded).max(0))
                .unwrap_or(0)
                .min(parallelism),
        };
        if active.len() > want {
            let mut ranked = active.clone();
            ranked.sort_by(|a, b| pods::scale_down_order(a, b));
            plan.delete = ranked[..active.len() - want]
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            active_after = want;
        } else if active.len() < want {
            match backoff_remaining(&pods.iter().collect::<Vec<_>>(), now) {
                Some(wait) => plan.requeue_after = Some(wait),
                None => {
                    plan.create = want - active.len();
                    active_after = want;
                }
            }
        }
        let complete = match spec.completions {
            None => succeeded > 0 && active_after == 0,
            Some(c) => succeeded >= c && active_after == 0,
        };
        if complete {
            interim = Some(new_condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                now,
            ));
        }
    } else {
        // Finishing: stop everything still running.
        plan.delete = active
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        active_after = 0;
    }

    if let Some(interim) = interim {
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        if !conditions
            .iter()
            .any(|c| c.type_ == interim.type_ && c.status == "True")
        {
            conditions.push(interim.clone());
        }
        // The terminal condition waits for terminating pods (and what this sync deletes).
        if terminating == 0 && plan.delete.is_empty() {
            let success = interim.type_ == "SuccessCriteriaMet";
            let type_ = if success { "Complete" } else { "Failed" };
            let reason = interim.reason.clone().unwrap_or_default();
            let message = interim.message.clone().unwrap_or_default();
            conditions.push(new_condition(type_, &reason, &message, now));
            if success {
                status.completion_time = Some(Time(now));
                plan.events
                    .push((false, "Completed", "Job completed".into()));
            } else {
                let event_reason = if reason == "DeadlineExceeded" {
                    "DeadlineExceeded"
                } else {
                    "BackoffLimitExceeded"
                };
                plan.events.push((true, event_reason, message));
            }
        }
    } else if let Some(d) = deadline {
        let wait = d.duration_since(now);
        plan.requeue_after = Some(plan.requeue_after.map_or(wait, |r| r.min(wait)));
    }
    status.active = nonzero(count(active_after));
    plan.status = status;
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::testing::{pod, ts};
    use k8s_openapi::api::batch::v1::JobSpec;
    use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn job(completions: Option<i32>, parallelism: i32, backoff: i32) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("pi".into()),
                uid: Some("job-uid".into()),
                ..Default::default()
            },
            spec: Some(JobSpec {
                completions,
                parallelism: Some(parallelism),
                backoff_limit: Some(backoff),
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        restart_policy: Some("Never".into()),
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    fn tracked(name: &str, phase: &str, at: i64) -> Pod {
        let mut p = pod(name, phase, phase == "Running", at);
        p.metadata.finalizers = Some(vec![TRACKING_FINALIZER.into()]);
        p
    }

    fn counted(name: &str, phase: &str, at: i64) -> Pod {
        pod(name, phase, false, at)
    }

    fn sync_plan(plan: Plan) -> SyncPlan {
        match plan {
            Plan::Sync(s) => *s,
            other => panic!("expected a sync, got {other:?}"),
        }
    }

    fn types(s: &JobStatus) -> Vec<&str> {
        s.conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect()
    }

    #[test]
    fn counting_goes_through_uncounted_then_finalizer_removal() {
        let j = job(Some(2), 1, 6);
        let pods = vec![tracked("a", "Succeeded", 0), tracked("b", "Running", 1)];
        let Plan::RecordUncounted(status) = plan(&j, &pods, ts(10)) else {
            panic!()
        };
        let uncounted = status.uncounted_terminated_pods.clone().unwrap();
        assert_eq!(uncounted.succeeded, Some(vec!["uid-a".to_string()]));

        let mut j2 = j.clone();
        j2.status = Some(status);
        assert_eq!(
            plan(&j2, &pods, ts(11)),
            Plan::RemoveFinalizers(vec!["a".into()])
        );

        let released = vec![counted("a", "Succeeded", 0), tracked("b", "Running", 1)];
        let s = sync_plan(plan(&j2, &released, ts(12)));
        assert_eq!(s.status.succeeded, Some(1));
        assert_eq!(s.status.active, Some(1));
        assert_eq!(
            s.status.uncounted_terminated_pods,
            Some(UncountedTerminatedPods::default())
        );
        assert_eq!(s.create, 0, "one left to complete and it is running");
    }

    #[test]
    fn completions_and_parallelism() {
        struct Case {
            completions: Option<i32>,
            parallelism: i32,
            succeeded: i32,
            pods: Vec<Pod>,
            create: usize,
            delete: usize,
            done: bool,
        }
        let cases = vec![
            Case {
                completions: Some(3),
                parallelism: 2,
                succeeded: 0,
                pods: vec![],
                create: 2,
                delete: 0,
                done: false,
            },
            Case {
                completions: Some(3),
                parallelism: 2,
                succeeded: 2,
                pods: vec![],
                create: 1,
                delete: 0,
                done: false,
            },
            Case {
                completions: Some(3),
                parallelism: 2,
                succeeded: 2,
                pods: vec![tracked("x", "Running", 0), tracked("y", "Running", 1)],
                create: 0,
                delete: 1,
                done: false,
            },
            Case {
                completions: Some(2),
                parallelism: 1,
                succeeded: 2,
                pods: vec![],
                create: 0,
                delete: 0,
                done: true,
            },
            Case {
                completions: None,
                parallelism: 2,
                succeeded: 0,
                pods: vec![],
                create: 2,
                delete: 0,
                done: false,
            },
            Case {
                completions: None,
                parallelism: 2,
                succeeded: 1,
                pods: vec![tracked("x", "Running", 0)],
                create: 0,
                delete: 0,
                done: false,
            },
            Case {
                completions: None,
                parallelism: 2,
                succeeded: 1,
                pods: vec![],
                create: 0,
                delete: 0,
                done: true,
            },
        ];
        for (i, case) in cases.into_iter().enumerate() {
            let mut j = job(case.completions, case.parallelism, 6);
            j.status = Some(JobStatus {
                succeeded: nonzero(case.succeeded),
                ..Default::default()
            });
            let s = sync_plan(plan(&j, &case.pods, ts(5)));
            assert_eq!(
                (s.create, s.delete.len()),
                (case.create, case.delete),
                "case {i}"
            );
            let want: Vec<&str> = if case.done {
                vec!["SuccessCriteriaMet", "Complete"]
            } else {
                vec![]
            };
            assert_eq!(types(&s.status), want, "case {i}");
            if case.done {
                assert_eq!(s.status.completion_time, Some(Time(ts(5))), "case {i}");
                assert_eq!(
                    s.events,
                    vec![(false, "Completed", "Job completed".to_string())]
                );
                let c = condition(&s.status, "Complete").unwrap();
                assert_eq!(c.reason.as_deref(), Some("CompletionsReached"));
            }
        }
    }

    #[test]
    fn backoff_limit_fails_the_job_after_its_pods_stop() {
        let mut j = job(Some(1), 1, 1);
        j.status = Some(JobStatus {
            failed: Some(2),
            ..Default::default()
        });
        let running = vec![tracked("r", "Running", 0)];
        let s = sync_plan(plan(&j, &running, ts(100)));
        assert_eq!(types(&s.status), ["FailureTarget"]);
        assert_eq!(s.delete, ["r"]);
        assert!(s.events.is_empty());

        j.status = Some(s.status);
        let s = sync_plan(plan(&j, &[counted("r", "Failed", 0)], ts(101)));
        assert_eq!(types(&s.status), ["FailureTarget", "Failed"]);
        let failed = condition(&s.status, "Failed").unwrap();
        assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
        assert_eq!(
            failed.message.as_deref(),
            Some("Job has reached the specified backoff limit")
        );
        assert_eq!(s.status.completion_time, None);
        assert_eq!(
            s.events,
            vec![(
                true,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit".to_string()
            )]
        );
    }

    #[test]
    fn on_failure_restarts_count_against_the_limit() {
        let mut j = job(Some(1), 1, 2);
        if let Some(s) = j.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
            s.restart_policy = Some("OnFailure".into());
        }
        let mut p = tracked("r", "Running", 0);
        if let Some(status) = p.status.as_mut() {
            status.container_statuses = Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
                restart_count: 2,
                ..Default::default()
            }]);
        }
        let s = sync_plan(plan(&j, &[p], ts(10)));
        assert_eq!(
            condition(&s.status, "FailureTarget").and_then(|c| c.reason.as_deref()),
            Some("BackoffLimitExceeded")
        );
    }

    #[test]
    fn active_deadline() {
        let mut j = job(Some(1), 1, 6);
        if let Some(s) = j.spec.as_mut() {
            s.active_deadline_seconds = Some(30);
        }
        j.status = Some(JobStatus {
            start_time: Some(Time(ts(0))),
            ..Default::default()
        });
        let s = sync_plan(plan(&j, &[tracked("r", "Running", 0)], ts(10)));
        assert_eq!(s.requeue_after, Some(SignedDuration::from_secs(20)));
        assert!(types(&s.status).is_empty());
        let s = sync_plan(plan(&j, &[tracked("r", "Running", 0)], ts(30)));
        assert_eq!(
            condition(&s.status, "FailureTarget").and_then(|c| c.reason.as_deref()),
            Some("DeadlineExceeded")
        );
        assert_eq!(s.delete, ["r"]);
    }

    #[test]
    fn failed_pods_are_replaced_after_an_exponential_backoff() {
        let f = |name: &str, at: i64| counted(name, "Failed", at); // finished at `at + 5`
        let cases = [
            (vec![f("a", 0)], 10, Some(5)),
            (vec![f("a", 0)], 15, None),
            (vec![f("a", 0), f("b", 10)], 20, Some(15)),
            (
                vec![f("a", 0), f("b", 10), counted("s", "Succeeded", 20)],
                40,
                None,
            ),
        ];
        for (pods, now, want) in cases {
            let refs: Vec<&Pod> = pods.iter().collect();
            assert_eq!(
                backoff_remaining(&refs, ts(now)),
                want.map(SignedDuration::from_secs),
                "now={now}"
            );
        }
        let many: Vec<Pod> = (0..12).map(|i| f(&format!("p{i}"), i)).collect();
        let refs: Vec<&Pod> = many.iter().collect();
        assert_eq!(backoff_remaining(&refs, ts(16)), Some(BACKOFF_MAX));

        let mut j = job(Some(1), 1, 6);
        j.status = Some(JobStatus {
            failed: Some(1),
            ..Default::default()
        });
        let s = sync_plan(plan(&j, &[f("a", 0)], ts(10)));
        assert_eq!(
            (s.create, s.requeue_after),
            (0, Some(SignedDuration::from_secs(5)))
        );
        let s = sync_plan(plan(&j, &[f("a", 0)], ts(16)));
        assert_eq!(s.create, 1);
    }

    #[test]
    fn finished_job_expires_after_its_ttl() {
        let mut j = job(Some(1), 1, 6);
        if let Some(s) = j.spec.as_mut() {
            s.ttl_seconds_after_finished = Some(60);
        }
        j.status = Some(JobStatus {
            conditions: Some(vec![new_condition(
                "Complete",
                "CompletionsReached",
                "",
                ts(100),
            )]),
            ..Default::default()
        });
        let s = sync_plan(plan(&j, &[], ts(130)));
        assert_eq!(
            (s.expired, s.requeue_after),
            (false, Some(SignedDuration::from_secs(30)))
        );
        assert!(sync_plan(plan(&j, &[], ts(160))).expired);
    }
}
