//! Database maintenance: clearing a NOSPACE alarm, and defragmentation past a threshold.
//!
//! Both run only with every voter answering, no learner and no Pod stopping (plan/mod.rs
//! rules 1-6 passed). A defragmenting member serves nothing for the duration (seconds per GiB),
//! so one member at a time, followers first and the leader last (defragmenting the leader
//! stalls every write; last, it stalls them once). The executor's call returns when the
//! member is done, and the next pass observes it again: never two members busy at once.
//!
//! Clients are drained from the member for the duration: its Pod's readiness gate
//! ([`crate::build::SERVING_CONDITION`]) is closed before the defragmentation and opened after
//! it, so the Pod is not Ready and the client Service stops routing to it instead of stalling
//! its clients. Only while every other member Pod is Ready (never two out of the Service at
//! once); a gate found closed by a later pass (a crash in between) is opened first
//! ([`reopen_serving_gate`]).
//!
//! NOSPACE: etcd refuses writes until the alarm is disarmed, and disarming before the database
//! file is back under the quota only lets the next write raise it again. So:
//! 1. `compactOnNoSpace`: compact the key space to the current revision, once per revision
//!    (a compaction that freed nothing is not repeated: the revision does not move while
//!    writes are refused);
//! 2. defragment, once per revision (writes are refused, the revision does not move), each
//!    member whose file is near the quota or has free space worth it, followers first, the
//!    leader last. Near the quota counts whatever `dbSizeInUse` says: after a compaction it
//!    shows the freed pages only once the member's backend commits again, which refused writes
//!    do not cause (measured on 3.6: two members of three still showed them in use 20 s on);
//! 3. then: disarm if every database file is under the quota, else wait and say what would
//!    help ([`WaitReason::NoSpaceCannotBeFreed`]).

use super::{Action, DefragReason, Disruption, WaitReason, ordinal_key, quorum_gate};
use crate::state::{DbStats, Member, Observed};

/// Under NOSPACE, free space worth a defragmentation: at least 1 MiB and a tenth of the file
/// (a freshly defragmented file keeps a few free pages; they are not worth another pass).
const NO_SPACE_WORTH_BYTES: u64 = 1 << 20;

/// The next NOSPACE step, `None` when no NOSPACE alarm is raised.
pub(super) fn no_space_recovery(observed: &Observed, voters: &[&Member]) -> Option<Action> {
    if !observed.alarms.iter().any(|a| a.alarm == "NOSPACE") {
        return None;
    }
    // Every voter answered (rule 5), so each has its database figures.
    let stats: Vec<(&Member, DbStats)> = voters.iter().filter_map(|m| Some((*m, m.db?))).collect();
    if stats.len() < voters.len() {
        return None;
    }
    let maintenance = observed.spec.maintenance.clone().unwrap_or_default();
    let revision = stats.iter().map(|(_, db)| db.revision).max().unwrap_or(0);
    if maintenance.compact_on_no_space
        && revision > 0
        && observed
            .compacted_revision
            .is_none_or(|done| done < revision)
    {
        return Some(Action::CompactKeyspace { revision });
    }
    let quota = quota_bytes(observed, &stats);
    let worth = |db: &DbStats| {
        let free = db.free() >= NO_SPACE_WORTH_BYTES && db.free() * 10 >= db.size;
        let near_quota = u128::from(db.size) * 10 >= u128::from(quota) * 9;
        free || near_quota
    };
    let cluster = &observed.cluster;
    if let Some((member, db)) = stats
        .iter()
        .filter(|(m, db)| {
            worth(db)
                && observed.defragmented_at.get(&m.display_name(cluster)) != Some(&db.revision)
        })
        .min_by_key(|(m, _)| (m.leader(), ordinal_key(cluster, m)))
        && let Some(client_url) = member.client_url.clone()
        && let Ok(quorum) = quorum_gate(
            Disruption::DefragmentUnderNoSpace,
            voters.iter().filter(|m| m.healthy()).count(),
            voters.len(),
        )
    {
        let name = member.display_name(cluster);
        return Some(match drain(observed, &name) {
            Ok(drain) => Action::DefragmentMember {
                member: name,
                client_url,
                free_bytes: db.free(),
                revision: db.revision,
                reason: DefragReason::NoSpace,
                drain,
                quorum,
            },
            Err(wait) => wait,
        });
    }
    let largest_db = stats.iter().map(|(_, db)| db.size).max().unwrap_or(0);
    Some(if largest_db < quota {
        Action::DisarmNoSpace { largest_db, quota }
    } else {
        Action::Wait(WaitReason::NoSpaceCannotBeFreed { largest_db, quota })
    })
}

/// A database file at least this share of the backend quota (percent) is near it: etcd raises
/// NOSPACE when a write would take the file past the quota, and nothing in the Kubernetes API
/// changes when it does, so the operator looks at such a cluster more often (the controller's
/// resync) to find the alarm seconds after it is raised instead of up to a resync period later.
pub const NEAR_QUOTA_PERCENT: u64 = 75;

/// Whether any member's database file (as its last Status reported it) is at least
/// [`NEAR_QUOTA_PERCENT`] of the backend quota, or an alarm is raised. The quota is what etcd
/// reports (3.6 and later), else what the operator gives the Pods.
pub fn database_near_quota(observed: &Observed) -> bool {
    if !observed.alarms.is_empty() {
        return true;
    }
    let crate::state::Membership::Known(members) = &observed.membership else {
        return false;
    };
    let stats: Vec<(&Member, DbStats)> = members.iter().filter_map(|m| Some((m, m.db?))).collect();
    let quota = quota_bytes(observed, &stats);
    stats.iter().any(|(_, db)| {
        u128::from(db.size) * 100 >= u128::from(quota) * u128::from(NEAR_QUOTA_PERCENT)
    })
}

/// Whether `member`'s client traffic can be drained for its defragmentation (its Pod has the
/// readiness gate [`crate::build::SERVING_CONDITION`]; a Pod built before it has none and is
/// defragmented in the Service, as before), or the wait when another member's Pod is not Ready:
/// draining this one too would leave two members out of the client Service at once.
fn drain(observed: &Observed, member: &str) -> Result<bool, Action> {
    if let Some((other, _)) = observed
        .pods
        .iter()
        .find(|(name, pod)| name.as_str() != member && (!pod.ready || pod.terminating))
    {
        return Err(Action::Wait(WaitReason::PodNotReady {
            member: other.clone(),
        }));
    }
    Ok(observed
        .pods
        .get(member)
        .is_some_and(|pod| pod.serving_gate.is_some()))
}

/// A member Pod whose serving gate is closed while no defragmentation runs: open it. The
/// executor closes the gate, defragments and opens it again within one reconcile, and a
/// cluster's reconciles never overlap, so a closed gate seen here is either a new Pod (its
/// condition not yet set) or a defragmentation interrupted by a crash or a failed write: in
/// both cases the member should serve. Safe whatever the member's state: the Pod is Ready only
/// once its readiness probe (a leader, a read served) passes too.
pub(super) fn reopen_serving_gate(observed: &Observed) -> Option<Action> {
    observed
        .pods
        .iter()
        .find(|(_, pod)| pod.serving_gate == Some(false) && !pod.terminating)
        .map(|(name, _)| Action::OpenServingGate {
            member: name.clone(),
        })
}

/// The members' backend quota: what etcd reports (3.6 and later), else what the operator gives
/// the Pods (`etcdOptions.quotaBackendBytes`, or the quota derived from the volume).
fn quota_bytes(observed: &Observed, stats: &[(&Member, DbStats)]) -> u64 {
    let reported = stats
        .iter()
        .map(|(_, db)| db.quota)
        .filter(|q| *q > 0)
        .min();
    if let Some(quota) = reported {
        return quota;
    }
    let explicit = observed
        .spec
        .etcd_options
        .as_ref()
        .and_then(|o| o.quota_backend_bytes)
        .and_then(|q| u64::try_from(q).ok());
    let largest = stats.iter().map(|(_, db)| db.size).max().unwrap_or(0);
    explicit
        .or_else(|| {
            crate::build::default_quota_for(&observed.spec.storage.size.0, largest)
                .and_then(|q| u64::try_from(q).ok())
        })
        .unwrap_or(u64::MAX)
}

/// Whether a window of `schedule` (each `window_minutes` long) is open at `now` (Unix
/// seconds). An unknown time or a schedule that does not parse (refused by validation before
/// planning) opens none.
fn window_open(schedule: &str, window_minutes: i32, now: Option<i64>) -> bool {
    let (Some(now), Ok(schedule)) = (now, etcd_api::cron::Schedule::parse(schedule)) else {
        return false;
    };
    schedule
        .open_window(now, i64::from(window_minutes.max(1)) * 60)
        .is_some()
}

/// The next member to defragment under `spec.maintenance.defrag`, `None` when it is unset or
/// no member's free space passes its threshold.
pub(super) fn next_defrag(
    observed: &Observed,
    voters: &[&Member],
    healthy_voters: usize,
) -> Option<Action> {
    let defrag = observed.spec.maintenance.as_ref()?.defrag.clone()?;
    if let Some(schedule) = &defrag.schedule
        && !window_open(schedule, defrag.window_minutes, observed.wall_clock)
    {
        return None;
    }
    let percent = u64::try_from(defrag.threshold_percent.clamp(1, 100)).unwrap_or(50);
    let min_bytes = u64::try_from(defrag.min_fragmented_bytes).unwrap_or(0);
    let due = |db: &DbStats| db.free() >= min_bytes && db.free() * 100 >= db.size * percent;
    let cluster = &observed.cluster;
    let (member, db) = voters
        .iter()
        .filter_map(|m| Some((*m, m.db?)))
        .filter(|(_, db)| due(db))
        .min_by_key(|(m, _)| (m.leader(), ordinal_key(cluster, m)))?;
    let client_url = member.client_url.clone()?;
    let name = member.display_name(cluster);
    // A busy member is a member down for quorum's sake: the others must keep it. A
    // one-member cluster pauses for the duration, as the user chose with size 1.
    Some(
        match quorum_gate(
            Disruption::TakeDownHealthyVoter,
            healthy_voters,
            voters.len(),
        ) {
            Ok(quorum) => match drain(observed, &name) {
                Ok(drain) => Action::DefragmentMember {
                    member: name,
                    client_url,
                    free_bytes: db.free(),
                    revision: db.revision,
                    reason: DefragReason::Fragmented,
                    drain,
                    quorum,
                },
                Err(wait) => wait,
            },
            Err(short) => Action::Wait(WaitReason::WouldLoseQuorum {
                member: name,
                healthy: short.healthy,
                voters: short.voters,
            }),
        },
    )
}

#[cfg(test)]
mod tests {
    //! The planner's decisions are scenarios in `testdata/maintenance.txt`; this checks when a
    //! cluster counts as near its quota (the controller's resync).

    use etcd_api::EtcdOptions;

    use crate::fixtures::*;
    use crate::plan::database_near_quota;
    use crate::state::{DbStats, Member, MemberAlarm, Membership, Observed};

    const MIB: u64 = 1 << 20;

    /// A settled cluster of three on 3.5, each database `db`, with a 100 MiB quota option.
    fn with_option(db: DbStats) -> Observed {
        let members: Vec<Member> = [0, 1, 2]
            .iter()
            .map(|&o| Member {
                db: Some(db),
                ..healthy(o, V35, o == 0)
            })
            .collect();
        let mut observed = cluster(3, V35)
            .members(members)
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2]);
        observed.spec.etcd_options = Some(EtcdOptions {
            quota_backend_bytes: Some(i64::try_from(100 * MIB).unwrap()),
            ..EtcdOptions::default()
        });
        observed
    }

    fn members(observed: &mut Observed) -> &mut Vec<Member> {
        let Membership::Known(members) = &mut observed.membership else {
            unreachable!()
        };
        members
    }

    /// A cluster whose largest database file reached 3/4 of the quota (etcd's reported quota
    /// first, else the operator's) is near it; one far from it is not, nor one whose members'
    /// figures are unknown; a raised alarm is.
    #[test]
    fn a_database_at_three_quarters_of_its_quota_is_near_it() {
        let db = |size: u64, quota: u64| DbStats {
            size,
            in_use: size,
            quota,
            revision: 10,
        };
        // etcd 3.5 reports no quota: the operator's 100 MiB counts.
        assert!(!database_near_quota(&with_option(db(74 * MIB, 0))));
        assert!(database_near_quota(&with_option(db(75 * MIB, 0))));
        // etcd 3.6 reports its own quota, which wins.
        assert!(!database_near_quota(&with_option(db(75 * MIB, 200 * MIB))));
        assert!(database_near_quota(&with_option(db(16 * MIB, 16 * MIB))));
        // One member near it is enough.
        let mut observed = with_option(db(10 * MIB, 0));
        members(&mut observed)[2].db = Some(db(90 * MIB, 0));
        assert!(database_near_quota(&observed));
        // No figures (no member answered): not near.
        let mut observed = with_option(db(90 * MIB, 0));
        for member in members(&mut observed) {
            member.db = None;
        }
        assert!(!database_near_quota(&observed));
        // A raised alarm (NOSPACE on 3.4/3.5 whatever the figures say).
        let mut observed = with_option(db(MIB, 0));
        observed.alarms = vec![MemberAlarm {
            member: name(1),
            alarm: "NOSPACE".into(),
        }];
        assert!(database_near_quota(&observed));
    }
}
