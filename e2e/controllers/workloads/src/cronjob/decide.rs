//! What one CronJob sync does, as a pure function of the CronJob, its Jobs and the time
//! (`cronjob_controllerv2.go` `syncCronJob`, `cleanupFinishedJobs`; `utils.go`
//! `mostRecentScheduleTime`).

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::schedule::{Schedule, parse, time_zone};

/// Above this many missed start times, the controller warns (`TooManyMissedTimes`).
const MANY_MISSED: i64 = 100;
/// Wake a little after the activation, as upstream's `nextScheduleDelta`.
const NEXT_DELTA: SignedDuration = SignedDuration::from_millis(100);

#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    /// The status after reconciling the active list (creation adds to it later).
    pub status: CronJobStatus,
    /// Start a Job for this scheduled time.
    pub create: Option<Timestamp>,
    /// Jobs to delete (Replace, history limits): (name, uid).
    pub delete: Vec<(String, Option<String>)>,
    /// Events: (warning?, reason, note).
    pub events: Vec<(bool, &'static str, String)>,
    pub requeue_after: Option<SignedDuration>,
}

/// The Job's finished condition type (`Complete` or `Failed`), if it finished.
pub(crate) fn finished(job: &Job) -> Option<&str> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

/// `getJobName`: `<cronjob>-<scheduled time in Unix minutes>`.
pub(crate) fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// The scheduled time as RFC 3339 in the schedule's zone (`Z` for UTC, like Go).
pub(crate) fn scheduled_timestamp(scheduled: Timestamp, tz: &TimeZone) -> String {
    let zoned = scheduled.to_zoned(tz.clone());
    if zoned.offset().seconds() == 0 {
        zoned.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// The latest activation in `(earliest, now]` and how many there were, approximately for large
/// counts (`mostRecentScheduleTime`).
pub(crate) fn most_recent(
    schedule: &Schedule,
    tz: &TimeZone,
    earliest: Timestamp,
    now: Timestamp,
) -> (Option<Timestamp>, i64) {
    let Some(t1) = schedule.next_after(earliest, tz) else {
        return (None, 0);
    };
    if now < t1 {
        return (None, 0);
    }
    let Some(t2) = schedule.next_after(t1, tz) else {
        return (Some(t1), 1);
    };
    if now < t2 {
        return (Some(t1), 1);
    }
    let period = t2.duration_since(t1).as_secs().max(1);
    let missed = now.duration_since(t1).as_secs() / period + 1;
    let mut recent = Timestamp::from_second(t1.as_second() + (missed - 1) * period).unwrap_or(t1);
    // Irregular schedules: walk to the exact latest activation.
    if recent > now {
        recent = t1;
    }
    while let Some(t) = schedule.next_after(recent, tz).filter(|t| *t <= now) {
        recent = t;
    }
    (Some(recent), missed)
}

fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// `byJobStartTime`: started ones first, oldest first; then by name.
fn oldest_first(jobs: &mut [&Job]) {
    let start = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
    };
    jobs.sort_by(|a, b| match (start(a), start(b)) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        _ => a.metadata.name.cmp(&b.metadata.name),
    });
}

/// Plan one sync of `cj`, given the Jobs it controls.
pub(crate) fn plan(cj: &CronJob, jobs: &[Job], now: Timestamp) -> Plan {
    let mut plan = Plan {
        status: cj.status.clone().unwrap_or_default(),
        ..Plan::default()
    };
    let spec = cj.spec.clone().unwrap_or_default();
    let status = &mut plan.status;
    let mut active = status.active.take().unwrap_or_default();

    // The active list against the Jobs that exist.
    for job in jobs {
        let uid = job.metadata.uid.as_deref();
        let listed = active.iter().any(|r| r.uid.as_deref() == uid);
        let name = job.metadata.name.clone().unwrap_or_default();
        match (listed, finished(job)) {
            (false, None) => plan.events.push((
                true,
                "UnexpectedJob",
                format!("Saw a job that the controller did not create or forgot: {name}"),
            )),
            (true, Some(condition)) => {
                active.retain(|r| r.uid.as_deref() != uid);
                plan.events.push((
                    false,
                    "SawCompletedJob",
                    format!("Saw completed job: {name}, condition: {condition}"),
                ));
            }
            _ => {}
        }
        if let Some(done) = job.status.as_ref().and_then(|s| s.completion_time.as_ref())
            && finished(job) == Some("Complete")
            && status
                .last_successful_time
                .as_ref()
                .is_none_or(|t| t.0 < done.0)
        {
            status.last_successful_time = Some(done.clone());
        }
    }
    active.retain(|r| {
        let exists = jobs.iter().any(|j| j.metadata.uid == r.uid);
        if !exists {
            plan.events.push((
                false,
                "MissingJob",
                format!(
                    "Active job went missing: {}",
                    r.name.as_deref().unwrap_or("")
                ),
            ));
        }
        exists
    });

    // History limits over finished Jobs (`cleanupFinishedJobs`).
    for (kind, limit) in [
        ("Complete", spec.successful_jobs_history_limit),
        ("Failed", spec.failed_jobs_history_limit),
    ] {
        let Some(limit) = limit else { continue };
        let mut done: Vec<&Job> = jobs.iter().filter(|j| finished(j) == Some(kind)).collect();
        let excess = done
            .len()
            .saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
        oldest_first(&mut done);
        for job in done.into_iter().take(excess) {
            let name = job.metadata.name.clone().unwrap_or_default();
            plan.events
                .push((false, "SuccessfulDelete", format!("Deleted job {name}")));
            plan.delete.push((name, job.metadata.uid.clone()));
        }
    }
    status.active = Some(active);

    if cj.metadata.deletion_timestamp.is_some() {
        return plan;
    }
    let tz = match time_zone(spec.time_zone.as_deref()) {
        Ok(tz) => tz,
        Err(_) => {
            let zone = spec.time_zone.clone().unwrap_or_default();
            plan.events.push((
                true,
                "UnknownTimeZone",
                format!("invalid timeZone: {zone:?}: unknown time zone {zone}"),
            ));
            return plan;
        }
    };
    if spec.suspend == Some(true) {
        return plan;
    }
    let schedule = match parse(&spec.schedule) {
        Ok(s) => s,
        Err(err) => {
            plan.events.push((
                true,
                "UnparseableSchedule",
                format!("unparseable schedule: {:?} : {err}", spec.schedule),
            ));
            return plan;
        }
    };
    plan.requeue_after = schedule
        .next_after(now, &tz)
        .map(|t| t.duration_since(now) + NEXT_DELTA);

    let created = cj
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(now);
    let mut earliest = plan
        .status
        .last_schedule_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(created);
    if let Some(deadline) = spec.starting_deadline_seconds {
        earliest = earliest.max(now - SignedDuration::from_secs(deadline));
    }
    let (scheduled, missed) = most_recent(&schedule, &tz, earliest, now);
    if missed > MANY_MISSED {
        plan.events.push((true, "TooManyMissedTimes", format!("too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew")));
    }
    // A time older than startingDeadlineSeconds is never found: `earliest` starts there.
    let Some(scheduled) = scheduled else {
        return plan;
    };
    let name = job_name(cj.metadata.name.as_deref().unwrap_or(""), scheduled);
    let active = plan.status.active.clone().unwrap_or_default();
    if active
        .iter()
        .any(|r| r.name.as_deref() == Some(name.as_str()))
        || plan
            .status
            .last_schedule_time
            .as_ref()
            .is_some_and(|t| t.0 == scheduled)
    {
        return plan;
    }
    match spec.concurrency_policy.as_deref() {
        Some("Forbid") if !active.is_empty() => {
            plan.events.push((false, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid".into()));
            return plan;
        }
        Some("Replace") => {
            for r in &active {
                let job_name = r.name.clone().unwrap_or_default();
                plan.events
                    .push((false, "SuccessfulDelete", format!("Deleted job {job_name}")));
                plan.delete.push((job_name, r.uid.clone()));
            }
            plan.status.active = Some(Vec::new());
        }
        _ => {}
    }
    plan.create = Some(scheduled);
    plan
}

/// Record a Job this sync created (or found already created) for `scheduled`.
pub(crate) fn record_created(status: &mut CronJobStatus, job: &Job, scheduled: Timestamp) {
    let active = status.active.get_or_insert_with(Vec::new);
    if finished(job).is_none() && !active.iter().any(|r| r.uid == job.metadata.uid) {
        active.push(reference(job));
    }
    status.last_schedule_time = Some(Time(scheduled));
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{CronJobSpec, JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn utc(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cronjob(schedule: &str, created: &str) -> CronJob {
        CronJob {
            metadata: ObjectMeta {
                name: Some("tick".into()),
                namespace: Some("ns".into()),
                uid: Some("cj-uid".into()),
                creation_timestamp: Some(Time(utc(created))),
                ..Default::default()
            },
            spec: Some(CronJobSpec {
                schedule: schedule.into(),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn job(name: &str, finished_as: Option<&str>, started: &str) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: None,
            status: Some(JobStatus {
                start_time: Some(Time(utc(started))),
                completion_time: (finished_as == Some("Complete"))
                    .then(|| Time(utc(started) + SignedDuration::from_secs(30))),
                conditions: finished_as.map(|t| {
                    vec![JobCondition {
                        type_: t.into(),
                        status: "True".into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn names_and_timestamps() {
        let t = utc("2024-03-01T10:05:00Z");
        assert_eq!(job_name("tick", t), format!("tick-{}", 1_709_287_500 / 60));
        assert_eq!(
            scheduled_timestamp(t, &TimeZone::UTC),
            "2024-03-01T10:05:00Z"
        );
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        assert_eq!(scheduled_timestamp(t, &berlin), "2024-03-01T11:05:00+01:00");
    }

    #[test]
    fn most_recent_and_missed_counts() {
        let every_minute = parse("* * * * *").unwrap();
        let cases = [
            ("2024-03-01T10:00:00Z", "2024-03-01T10:00:59Z", None, 0),
            (
                "2024-03-01T10:00:00Z",
                "2024-03-01T10:01:00Z",
                Some("2024-03-01T10:01:00Z"),
                1,
            ),
            (
                "2024-03-01T10:00:00Z",
                "2024-03-01T10:05:30Z",
                Some("2024-03-01T10:05:00Z"),
                5,
            ),
            (
                "2024-03-01T10:00:00Z",
                "2024-03-01T12:00:30Z",
                Some("2024-03-01T12:00:00Z"),
                120,
            ),
        ];
        for (earliest, now, want, missed) in cases {
            let got = most_recent(&every_minute, &TimeZone::UTC, utc(earliest), utc(now));
            assert_eq!(got, (want.map(utc), missed), "{earliest} {now}");
        }
        // Irregular: weekdays at 09:00, from Friday to Tuesday noon -> Tuesday 09:00.
        let weekdays = parse("0 9 * * 1-5").unwrap();
        let got = most_recent(
            &weekdays,
            &TimeZone::UTC,
            utc("2024-03-01T10:00:00Z"),
            utc("2024-03-05T12:00:00Z"),
        );
        assert_eq!(got.0, Some(utc("2024-03-05T09:00:00Z")));
    }

    #[test]
    fn schedules_the_most_recent_missed_time_only() {
        let cj = cronjob("* * * * *", "2024-03-01T10:00:00Z");
        let p = plan(&cj, &[], utc("2024-03-01T10:03:20Z"));
        assert_eq!(p.create, Some(utc("2024-03-01T10:03:00Z")));
        assert_eq!(p.requeue_after, Some(SignedDuration::from_millis(40_100)));
        let p = plan(&cj, &[], utc("2024-03-01T10:00:20Z"));
        assert_eq!(p.create, None);

        // Already done for that time.
        let mut done = cj.clone();
        done.status = Some(CronJobStatus {
            last_schedule_time: Some(Time(utc("2024-03-01T10:03:00Z"))),
            ..Default::default()
        });
        assert_eq!(plan(&done, &[], utc("2024-03-01T10:03:30Z")).create, None);

        // 200 missed: warn, still run the latest.
        let p = plan(&cj, &[], utc("2024-03-01T13:20:10Z"));
        assert_eq!(p.create, Some(utc("2024-03-01T13:20:00Z")));
        assert!(
            p.events.iter().any(|e| e.1 == "TooManyMissedTimes"
                && e.2.starts_with("too many missed start times: 200.")),
            "{:?}",
            p.events
        );
    }

    #[test]
    fn starting_deadline_suspend_and_concurrency() {
        let now = utc("2024-03-01T10:03:50Z");
        let mut cj = cronjob("* * * * *", "2024-03-01T10:00:00Z");
        if let Some(s) = cj.spec.as_mut() {
            s.starting_deadline_seconds = Some(30);
        }
        // 10:03 is 50 s late, beyond the 30 s deadline: skipped, silently, as upstream.
        let p = plan(&cj, &[], now);
        assert_eq!((p.create, p.events.len()), (None, 0));
        let p = plan(&cj, &[], utc("2024-03-01T10:03:25Z"));
        assert_eq!(p.create, Some(utc("2024-03-01T10:03:00Z")));

        let mut suspended = cronjob("* * * * *", "2024-03-01T10:00:00Z");
        if let Some(s) = suspended.spec.as_mut() {
            s.suspend = Some(true);
        }
        assert_eq!(plan(&suspended, &[], now).create, None);
        assert_eq!(plan(&suspended, &[], now).requeue_after, None);

        let running = job("tick-1", None, "2024-03-01T10:01:00Z");
        let mut with_active = cronjob("* * * * *", "2024-03-01T10:00:00Z");
        with_active.status = Some(CronJobStatus {
            active: Some(vec![reference(&running)]),
            last_schedule_time: Some(Time(utc("2024-03-01T10:01:00Z"))),
            ..Default::default()
        });
        let policy = |p: &str| {
            let mut cj = with_active.clone();
            if let Some(s) = cj.spec.as_mut() {
                s.concurrency_policy = Some(p.into());
            }
            plan(&cj, std::slice::from_ref(&running), now)
        };
        let allow = policy("Allow");
        assert_eq!(
            (allow.create, allow.delete.len()),
            (Some(utc("2024-03-01T10:03:00Z")), 0)
        );
        let forbid = policy("Forbid");
        assert_eq!(forbid.create, None);
        assert_eq!(
            forbid.events.iter().map(|e| e.1).collect::<Vec<_>>(),
            ["JobAlreadyActive"]
        );
        let replace = policy("Replace");
        assert_eq!(replace.create, Some(utc("2024-03-01T10:03:00Z")));
        assert_eq!(
            replace.delete,
            vec![("tick-1".to_string(), Some("uid-tick-1".to_string()))]
        );
        assert_eq!(replace.status.active, Some(vec![]));
    }

    #[test]
    fn active_list_and_history_limits() {
        let mut cj = cronjob("0 0 1 1 *", "2024-01-01T00:00:00Z");
        if let Some(s) = cj.spec.as_mut() {
            s.successful_jobs_history_limit = Some(2);
            s.failed_jobs_history_limit = Some(1);
        }
        let jobs = vec![
            job("ok-3", Some("Complete"), "2024-03-01T10:03:00Z"),
            job("ok-1", Some("Complete"), "2024-03-01T10:01:00Z"),
            job("ok-2", Some("Complete"), "2024-03-01T10:02:00Z"),
            job("bad-1", Some("Failed"), "2024-03-01T10:04:00Z"),
            job("bad-2", Some("Failed"), "2024-03-01T10:05:00Z"),
            job("running", None, "2024-03-01T10:06:00Z"),
        ];
        let gone = ObjectReference {
            name: Some("gone".into()),
            uid: Some("uid-gone".into()),
            ..Default::default()
        };
        cj.status = Some(CronJobStatus {
            active: Some(vec![reference(&jobs[0]), reference(&jobs[5]), gone]),
            ..Default::default()
        });
        let p = plan(&cj, &jobs, utc("2024-03-01T10:07:00Z"));
        let deleted: Vec<&str> = p.delete.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(deleted, ["ok-1", "bad-1"]);
        let active: Vec<_> = p
            .status
            .active
            .unwrap()
            .into_iter()
            .filter_map(|r| r.name)
            .collect();
        assert_eq!(active, ["running"]);
        assert_eq!(
            p.status.last_successful_time,
            Some(Time(utc("2024-03-01T10:03:30Z")))
        );
        let reasons: Vec<&str> = p.events.iter().map(|e| e.1).collect();
        assert!(
            reasons.contains(&"SawCompletedJob") && reasons.contains(&"MissingJob"),
            "{reasons:?}"
        );
        assert!(
            p.events
                .iter()
                .any(|e| e.2 == "Saw completed job: ok-3, condition: Complete")
        );
        assert!(!reasons.contains(&"UnexpectedJob"));
    }
}
