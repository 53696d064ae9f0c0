//! The Deployment status after a sync (`calculateStatus`, `syncRolloutStatus`, `progress.go`):
//! counts summed over the ReplicaSets, and the `Available` and `Progressing` conditions with
//! upstream's reasons and messages.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::rollout::{desired_replicas, spec_replicas};

/// How the new ReplicaSet was obtained in this sync, for the first `Progressing` condition.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NewRs {
    Created(String),
    Found(String),
}

fn sum(rss: &[&ReplicaSet], f: impl Fn(&ReplicaSet) -> i32) -> i32 {
    rss.iter().map(|rs| f(rs)).sum()
}

fn status_of(rs: &ReplicaSet) -> k8s_openapi::api::apps::v1::ReplicaSetStatus {
    rs.status.clone().unwrap_or_default()
}

fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

pub(crate) fn condition<'a>(
    status: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

pub(crate) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// `SetDeploymentCondition`: no change when status and reason are the same; the transition
/// time survives when only the reason changes; the condition moves to the end.
pub(crate) fn set_condition(status: &mut DeploymentStatus, mut cond: DeploymentCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(current) = conditions.iter().find(|c| c.type_ == cond.type_) {
        if current.status == cond.status && current.reason == cond.reason {
            return;
        }
        if current.status == cond.status {
            cond.last_transition_time = current.last_transition_time.clone();
        }
    }
    conditions.retain(|c| c.type_ != cond.type_);
    conditions.push(cond);
}

fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

/// `spec.progressDeadlineSeconds`, unless unset or "infinite" (MaxInt32).
pub(crate) fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|s| *s != i32::MAX)
}

/// `DeploymentComplete`: every desired replica is updated and available, and nothing else runs.
pub(crate) fn is_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let desired = desired_replicas(d);
    status.updated_replicas.unwrap_or(0) == desired
        && status.replicas.unwrap_or(0) == desired
        && status.available_replicas.unwrap_or(0) == desired
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// The counts and the `Available` condition (`calculateStatus`).
pub(crate) fn calculate(
    d: &Deployment,
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    max_unavailable: i32,
    now: Timestamp,
) -> DeploymentStatus {
    let old = d.status.clone().unwrap_or_default();
    let available = sum(all, |rs| status_of(rs).available_replicas.unwrap_or(0));
    let total = sum(all, spec_replicas);
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(sum(all, |rs| status_of(rs).replicas)),
        updated_replicas: nonzero(new_rs.map(|rs| status_of(rs).replicas).unwrap_or(0)),
        ready_replicas: nonzero(sum(all, |rs| status_of(rs).ready_replicas.unwrap_or(0))),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    let cond = if available >= desired_replicas(d) - max_unavailable {
        new_condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            now,
        )
    } else {
        new_condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            now,
        )
    };
    set_condition(&mut status, cond);
    status
}

/// The full status of a rollout step (`syncRolloutStatus`), starting from `d.status` (with the
/// condition for how the new ReplicaSet was obtained applied, as `getNewReplicaSet` does).
pub(crate) fn rollout_status(
    d: &Deployment,
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    how: Option<&NewRs>,
    max_unavailable: i32,
    now: Timestamp,
) -> DeploymentStatus {
    let mut d = d.clone();
    let deadline = progress_deadline(&d);
    if let (Some(how), Some(_)) = (how, deadline) {
        let status = d.status.get_or_insert_with(Default::default);
        match how {
            NewRs::Created(name) => set_condition(
                status,
                new_condition(
                    "Progressing",
                    "True",
                    "NewReplicaSetCreated",
                    format!("Created new replica set {name:?}"),
                    now,
                ),
            ),
            NewRs::Found(name) if condition(status, "Progressing").is_none() => set_condition(
                status,
                new_condition(
                    "Progressing",
                    "True",
                    "FoundNewReplicaSet",
                    format!("Found new replica set {name:?}"),
                    now,
                ),
            ),
            NewRs::Found(_) => {}
        }
    }
    let old = d.status.clone().unwrap_or_default();
    let mut status = calculate(&d, all, new_rs, max_unavailable, now);
    let Some(deadline) = deadline else {
        remove_condition(&mut status, "Progressing");
        return status;
    };
    let current = condition(&old, "Progressing").cloned();
    let already_complete = status.replicas == status.updated_replicas
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some("NewReplicaSetAvailable");
    if already_complete {
        return status;
    }
    let subject = match new_rs.and_then(|rs| rs.metadata.name.as_deref()) {
        Some(rs) => format!("ReplicaSet {rs:?}"),
        None => format!("Deployment {:?}", d.metadata.name.as_deref().unwrap_or("")),
    };
    if is_complete(&d, &status) {
        set_condition(
            &mut status,
            new_condition(
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                format!("{subject} has successfully progressed."),
                now,
            ),
        );
    } else if made_progress(&old, &status) {
        let mut cond = new_condition(
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            format!("{subject} is progressing."),
            now,
        );
        if let Some(current) = current.as_ref().filter(|c| c.status == "True") {
            cond.last_transition_time = current.last_transition_time.clone();
        }
        remove_condition(&mut status, "Progressing");
        set_condition(&mut status, cond);
    } else if timed_out(&status, deadline, now) {
        set_condition(
            &mut status,
            new_condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                format!("{subject} has timed out progressing."),
                now,
            ),
        );
    }
    status
}

/// `DeploymentProgressing`: more updated, fewer old, more ready or more available replicas.
fn made_progress(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// `DeploymentTimedOut`: the last progress is older than the deadline.
fn timed_out(status: &DeploymentStatus, deadline: i32, now: Timestamp) -> bool {
    let Some(cond) = condition(status, "Progressing") else {
        return false;
    };
    match cond.reason.as_deref() {
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        _ => cond
            .last_update_time
            .as_ref()
            .is_some_and(|t| t.0 + SignedDuration::from_secs(i64::from(deadline)) < now),
    }
}

/// When to look again for a timeout of a rollout that is not progressing
/// (`requeueStuckDeployment`).
pub(crate) fn recheck_after(
    d: &Deployment,
    status: &DeploymentStatus,
    now: Timestamp,
) -> Option<SignedDuration> {
    let deadline = progress_deadline(d)?;
    let cond = condition(status, "Progressing")?;
    if is_complete(d, status) || cond.reason.as_deref() == Some("ProgressDeadlineExceeded") {
        return None;
    }
    let at = cond.last_update_time.as_ref()?.0 + SignedDuration::from_secs(i64::from(deadline));
    let after = at.duration_since(now);
    Some(if after < SignedDuration::from_secs(1) {
        SignedDuration::from_secs(1)
    } else {
        after + SignedDuration::from_secs(1)
    })
}

/// The `Progressing` condition of a paused (or just resumed) Deployment (`checkPausedConditions`).
pub(crate) fn paused_condition(d: &Deployment, now: Timestamp) -> Option<DeploymentCondition> {
    progress_deadline(d)?;
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let status = d.status.clone().unwrap_or_default();
    let reason = condition(&status, "Progressing").and_then(|c| c.reason.clone());
    let paused_reason = reason.as_deref() == Some("DeploymentPaused");
    if paused && !paused_reason {
        Some(new_condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
            now,
        ))
    } else if !paused && paused_reason {
        Some(new_condition(
            "Progressing",
            "Unknown",
            "DeploymentResumed",
            "Deployment is resumed".into(),
            now,
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::testing::ts;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn deployment(replicas: i32, generation: i64) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                generation: Some(generation),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                progress_deadline_seconds: Some(600),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn rs(name: &str, spec: i32, replicas: i32, ready: i32, available: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(spec),
                ..Default::default()
            }),
            status: Some(ReplicaSetStatus {
                replicas,
                ready_replicas: Some(ready),
                available_replicas: Some(available),
                ..Default::default()
            }),
        }
    }

    fn reason<'a>(s: &'a DeploymentStatus, t: &str) -> (&'a str, &'a str) {
        let c = condition(s, t).unwrap();
        (c.status.as_str(), c.reason.as_deref().unwrap())
    }

    #[test]
    fn fresh_rollout_then_available_then_complete() {
        let d = deployment(3, 2);
        let new = rs("web-abc", 3, 0, 0, 0);
        let created = NewRs::Created("web-abc".into());
        let s = rollout_status(&d, &[&new], Some(&new), Some(&created), 0, ts(0));
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(
            reason(&s, "Available"),
            ("False", "MinimumReplicasUnavailable")
        );
        assert_eq!(reason(&s, "Progressing"), ("True", "NewReplicaSetCreated"));
        assert_eq!(
            condition(&s, "Progressing").unwrap().message.as_deref(),
            Some("Created new replica set \"web-abc\"")
        );
        assert_eq!(s.unavailable_replicas, Some(3));

        let mut d = d;
        d.status = Some(s);
        let half = rs("web-abc", 3, 3, 2, 2);
        let s = rollout_status(
            &d,
            &[&half],
            Some(&half),
            Some(&NewRs::Found("web-abc".into())),
            0,
            ts(10),
        );
        assert_eq!(reason(&s, "Progressing"), ("True", "ReplicaSetUpdated"));
        let progressing = condition(&s, "Progressing").unwrap();
        assert_eq!(
            progressing.last_transition_time,
            Some(Time(ts(0))),
            "still True: transition kept"
        );
        assert_eq!(progressing.last_update_time, Some(Time(ts(10))));
        assert_eq!(
            progressing.message.as_deref(),
            Some("ReplicaSet \"web-abc\" is progressing.")
        );

        d.status = Some(s);
        let done = rs("web-abc", 3, 3, 3, 3);
        let s = rollout_status(&d, &[&done], Some(&done), None, 0, ts(20));
        assert_eq!(
            reason(&s, "Available"),
            ("True", "MinimumReplicasAvailable")
        );
        assert_eq!(
            reason(&s, "Progressing"),
            ("True", "NewReplicaSetAvailable")
        );
        assert_eq!(
            condition(&s, "Progressing").unwrap().message.as_deref(),
            Some("ReplicaSet \"web-abc\" has successfully progressed.")
        );
        assert_eq!(
            (
                s.replicas,
                s.updated_replicas,
                s.ready_replicas,
                s.available_replicas,
                s.unavailable_replicas
            ),
            (Some(3), Some(3), Some(3), Some(3), None)
        );
        let types: Vec<_> = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["Available", "Progressing"]);
    }

    #[test]
    fn stuck_rollout_times_out_after_the_deadline() {
        let mut d = deployment(2, 1);
        let stuck = rs("web-new", 2, 2, 0, 0);
        let mut status = rollout_status(
            &d,
            &[&stuck],
            Some(&stuck),
            Some(&NewRs::Created("web-new".into())),
            0,
            ts(0),
        );
        d.status = Some(status.clone());
        assert_eq!(
            recheck_after(&d, &status, ts(100)),
            Some(SignedDuration::from_secs(501))
        );
        // The first sync saw pods appear (progress); nothing changes after that.
        assert_eq!(
            reason(&status, "Progressing"),
            ("True", "ReplicaSetUpdated")
        );
        status = rollout_status(&d, &[&stuck], Some(&stuck), None, 0, ts(599));
        assert_eq!(
            reason(&status, "Progressing"),
            ("True", "ReplicaSetUpdated")
        );
        status = rollout_status(&d, &[&stuck], Some(&stuck), None, 0, ts(601));
        assert_eq!(
            reason(&status, "Progressing"),
            ("False", "ProgressDeadlineExceeded")
        );
        assert_eq!(recheck_after(&d, &status, ts(601)), None);
    }

    #[test]
    fn available_tolerates_max_unavailable() {
        let d = deployment(4, 1);
        let rs = rs("web-a", 4, 4, 3, 3);
        assert_eq!(
            reason(&calculate(&d, &[&rs], Some(&rs), 1, ts(0)), "Available"),
            ("True", "MinimumReplicasAvailable")
        );
        assert_eq!(
            reason(&calculate(&d, &[&rs], Some(&rs), 0, ts(0)), "Available"),
            ("False", "MinimumReplicasUnavailable")
        );
    }

    #[test]
    fn no_deadline_means_no_progressing_condition() {
        let mut d = deployment(1, 1);
        if let Some(s) = d.spec.as_mut() {
            s.progress_deadline_seconds = Some(i32::MAX);
        }
        let r = rs("web-a", 1, 1, 1, 1);
        let s = rollout_status(
            &d,
            &[&r],
            Some(&r),
            Some(&NewRs::Created("web-a".into())),
            0,
            ts(0),
        );
        assert!(condition(&s, "Progressing").is_none());
        assert!(paused_condition(&d, ts(0)).is_none());
    }

    #[test]
    fn pause_and_resume_conditions() {
        let mut d = deployment(1, 1);
        if let Some(s) = d.spec.as_mut() {
            s.paused = Some(true);
        }
        let paused = paused_condition(&d, ts(0)).unwrap();
        assert_eq!(
            (paused.status.as_str(), paused.reason.as_deref()),
            ("Unknown", Some("DeploymentPaused"))
        );
        d.status = Some(DeploymentStatus {
            conditions: Some(vec![paused]),
            ..Default::default()
        });
        assert!(paused_condition(&d, ts(1)).is_none());
        if let Some(s) = d.spec.as_mut() {
            s.paused = Some(false);
        }
        assert_eq!(
            paused_condition(&d, ts(2)).unwrap().reason.as_deref(),
            Some("DeploymentResumed")
        );
    }
}
