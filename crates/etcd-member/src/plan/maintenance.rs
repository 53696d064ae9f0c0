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
    use etcd_api::{DefragSpec, EtcdOptions, MaintenanceSpec};

    use crate::fixtures::*;
    use crate::plan::{Action, DefragReason, Policy, WaitReason, database_near_quota, next_action};
    use crate::state::{DbStats, Member, MemberAlarm, MemberHealth, Membership, Observed};

    const MIB: u64 = 1 << 20;

    fn plan(observed: &Observed) -> Action {
        next_action(observed, &Policy::default())
    }

    /// A settled cluster of three on 3.5, member `leader` leading, each database `db`.
    fn settled(leader: u32, db: DbStats) -> Observed {
        let members: Vec<Member> = [0, 1, 2]
            .iter()
            .map(|&o| Member {
                db: Some(db),
                ..healthy(o, V35, o == leader)
            })
            .collect();
        cluster(3, V35)
            .members(members)
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2])
    }

    fn members(observed: &mut Observed) -> &mut Vec<Member> {
        let Membership::Known(members) = &mut observed.membership else {
            unreachable!()
        };
        members
    }

    /// Full at a 100 MiB quota: the file is at the quota, `in_use` of it holds live data.
    fn full(in_use: u64) -> DbStats {
        DbStats {
            size: 100 * MIB,
            in_use,
            quota: 0,
            revision: 5000,
        }
    }

    fn no_space(leader: u32, db: DbStats, compact: bool) -> Observed {
        let mut observed = settled(leader, db);
        observed.spec.etcd_options = Some(EtcdOptions {
            quota_backend_bytes: Some(i64::try_from(100 * MIB).unwrap()),
            ..EtcdOptions::default()
        });
        // The fixture Pods were built before the option: the roll must not be what we see.
        let hash = Some(crate::build::config_hash(&observed.spec));
        for pod in observed.pods.values_mut() {
            pod.config_hash = hash.clone();
        }
        observed.spec.maintenance = Some(MaintenanceSpec {
            defrag: None,
            compact_on_no_space: compact,
        });
        // etcd lists every alarm on every member; the observer records who raised it.
        observed.alarms = vec![MemberAlarm {
            member: name(1),
            alarm: "NOSPACE".into(),
        }];
        observed
    }

    /// Plays a NOSPACE recovery as etcd would answer it: compaction frees history, each
    /// defragmentation shrinks that member's file to what is in use, the disarm clears the
    /// alarm. Checks the order and that no two members are ever busy at once.
    fn play(mut observed: Observed, live: u64) -> Vec<String> {
        let mut steps = vec![];
        for _ in 0..20 {
            let action = plan(&observed);
            match &action {
                Action::CompactKeyspace { revision } => {
                    steps.push("compact".to_owned());
                    observed.compacted_revision = Some(*revision);
                    // The history is free space now, but `dbSizeInUse` does not show it yet
                    // (measured): only the defragmentation tells.
                }
                Action::DefragmentMember {
                    member,
                    reason,
                    revision,
                    ..
                } => {
                    assert_eq!(*reason, DefragReason::NoSpace);
                    steps.push(format!("defrag {member}"));
                    observed.defragmented_at.insert(member.clone(), *revision);
                    let m = members(&mut observed)
                        .iter_mut()
                        .find(|m| &m.name == member)
                        .unwrap();
                    let db = m.db.as_mut().unwrap();
                    // The file keeps what is really in use (the in-use figure may have lagged).
                    db.size = db.in_use.min(live) + MIB / 4;
                    db.in_use = db.size;
                }
                Action::DisarmNoSpace { .. } => {
                    steps.push("disarm".to_owned());
                    observed.alarms.clear();
                }
                Action::Converged => break,
                other => {
                    steps.push(format!("{other:?}"));
                    break;
                }
            }
            // Each step is one call the executor finishes before the next observation: every
            // member answers again by then (none busy, none down).
            assert!(members(&mut observed).iter().all(Member::healthy));
        }
        steps
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
        let with_option = |db: DbStats| {
            let mut observed = settled(0, db);
            observed.spec.etcd_options = Some(EtcdOptions {
                quota_backend_bytes: Some(i64::try_from(100 * MIB).unwrap()),
                ..EtcdOptions::default()
            });
            observed
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
        assert!(database_near_quota(&no_space(0, db(MIB, 0), false)));
    }

    #[test]
    fn no_space_compacts_when_allowed_then_defragments_followers_first_then_disarms() {
        let observed = no_space(0, full(95 * MIB), true);
        assert_eq!(
            play(observed, 10 * MIB),
            vec![
                "compact",
                "defrag main-1",
                "defrag main-2",
                "defrag main-0",
                "disarm"
            ]
        );
    }

    #[test]
    fn without_compaction_the_free_space_is_defragmented_and_the_alarm_disarmed() {
        // Auto-compaction already freed 60 MiB of each file.
        let observed = no_space(2, full(40 * MIB), false);
        assert_eq!(
            play(observed, 40 * MIB),
            vec!["defrag main-0", "defrag main-1", "defrag main-2", "disarm"]
        );
    }

    #[test]
    fn nothing_to_free_waits_and_says_so_instead_of_disarming_into_the_next_alarm() {
        // Every byte is live: each member is defragmented once, then the operator waits.
        let observed = no_space(0, full(100 * MIB), false);
        let steps = play(observed, 100 * MIB);
        assert_eq!(
            &steps[..3],
            ["defrag main-1", "defrag main-2", "defrag main-0"]
        );
        assert!(steps[3].contains("NoSpaceCannotBeFreed"), "{steps:?}");
    }

    #[test]
    fn a_compaction_that_freed_nothing_is_not_repeated() {
        let mut observed = no_space(0, full(100 * MIB), true);
        observed.compacted_revision = Some(5000);
        for ordinal in [0, 1, 2] {
            observed.defragmented_at.insert(name(ordinal), 5000);
        }
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::NoSpaceCannotBeFreed {
                largest_db: 100 * MIB,
                quota: 100 * MIB
            })
        );
    }

    #[test]
    fn no_space_waits_for_an_unhealthy_member() {
        let mut observed = no_space(0, full(40 * MIB), false);
        members(&mut observed)[2].health = MemberHealth::Unhealthy {
            unhealthy_for: std::time::Duration::from_secs(3),
        };
        members(&mut observed)[2].db = None;
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::MemberUnhealthy { member: name(2) })
        );
    }

    /// The decision of issue 25's note: a two-voter cluster under NOSPACE defragments its
    /// members one at a time although, while one is busy, the other alone is no quorum, so
    /// linearizable reads pause for the seconds it takes. Writes already fail under NOSPACE;
    /// refusing instead (the gate a scheduled defragmentation uses) would keep the cluster in
    /// NOSPACE for good, refusing every write, since no other step clears it. A pause of reads
    /// is the lesser outage. A scheduled (threshold) defragmentation of the same cluster
    /// waits instead (`defragmentation_never_takes_a_second_member_away`).
    #[test]
    fn two_voters_under_no_space_defragment_pausing_reads_rather_than_staying_full() {
        let members2: Vec<Member> = [0, 1]
            .iter()
            .map(|&o| Member {
                db: Some(full(40 * MIB)),
                ..healthy(o, V35, o == 0)
            })
            .collect();
        let mut observed = no_space(0, full(40 * MIB), false);
        let spec = observed.spec.clone();
        let alarms = observed.alarms.clone();
        observed = cluster(2, V35)
            .members(members2)
            .pods(&[0, 1])
            .ready(&[0, 1])
            .pvcs(&[0, 1]);
        observed.spec = etcd_api::EtcdClusterSpec { size: 2, ..spec };
        let hash = Some(crate::build::config_hash(&observed.spec));
        for pod in observed.pods.values_mut() {
            pod.config_hash = hash.clone();
        }
        observed.alarms = alarms;
        assert_eq!(
            play(observed, 40 * MIB),
            vec!["defrag main-1", "defrag main-0", "disarm"]
        );
    }

    fn fragmented(leader: u32) -> Observed {
        let mut observed = settled(
            leader,
            DbStats {
                size: 400 * MIB,
                in_use: 100 * MIB,
                quota: 0,
                revision: 9,
            },
        );
        observed.spec.maintenance = Some(MaintenanceSpec {
            defrag: Some(DefragSpec::default()),
            compact_on_no_space: false,
        });
        observed
    }

    #[test]
    fn defragmentation_past_the_threshold_goes_followers_first_and_the_leader_last() {
        let mut observed = fragmented(1);
        let mut order = vec![];
        while let Action::DefragmentMember { member, reason, .. } = plan(&observed) {
            assert_eq!(reason, DefragReason::Fragmented);
            order.push(member.clone());
            let m = members(&mut observed)
                .iter_mut()
                .find(|m| m.name == member)
                .unwrap();
            m.db.as_mut().unwrap().size = 101 * MIB;
            assert!(order.len() <= 3);
        }
        assert_eq!(order, vec![name(0), name(2), name(1)]);
        assert_eq!(plan(&observed), Action::Converged);
    }

    #[test]
    fn below_the_threshold_or_unset_nothing_is_defragmented() {
        let mut observed = fragmented(0);
        observed.spec.maintenance = None;
        assert_eq!(plan(&observed), Action::Converged);
        let mut observed = fragmented(0);
        // 75% free, but the threshold asks for 80%.
        observed.spec.maintenance = Some(MaintenanceSpec {
            defrag: Some(DefragSpec {
                threshold_percent: 80,
                ..DefragSpec::default()
            }),
            compact_on_no_space: false,
        });
        assert_eq!(plan(&observed), Action::Converged);
        // A small database is not worth the pause, whatever its share of free space.
        let mut observed = fragmented(0);
        for m in members(&mut observed) {
            m.db = Some(DbStats {
                size: 40 * MIB,
                in_use: MIB,
                quota: 0,
                revision: 9,
            });
        }
        assert_eq!(plan(&observed), Action::Converged);
    }

    /// `schedule`: the threshold check runs only in the schedule's windows; a NOSPACE alarm is
    /// cleared outside them too.
    #[test]
    fn scheduled_defragmentation_waits_for_its_window() {
        // 2026-11-26 00:00 UTC; windows nightly from 02:00 for 90 minutes.
        const MIDNIGHT: i64 = 1_795_651_200;
        let at = |seconds: i64| {
            let mut observed = fragmented(0);
            if let Some(defrag) = observed
                .spec
                .maintenance
                .as_mut()
                .and_then(|m| m.defrag.as_mut())
            {
                defrag.schedule = Some("0 2 * * *".into());
                defrag.window_minutes = 90;
            }
            observed.wall_clock = Some(seconds);
            observed
        };
        let defragments = |observed: &Observed| {
            matches!(
                plan(observed),
                Action::DefragmentMember {
                    reason: DefragReason::Fragmented,
                    ..
                }
            )
        };
        let hour = 3600;
        assert!(!defragments(&at(MIDNIGHT + hour)), "before the window");
        assert!(defragments(&at(MIDNIGHT + 2 * hour)), "at its start");
        assert!(defragments(&at(MIDNIGHT + 3 * hour + 29 * 60)), "in it");
        assert!(!defragments(&at(MIDNIGHT + 3 * hour + 30 * 60)), "after it");
        // An unknown time opens no window.
        let mut unknown = at(MIDNIGHT + 2 * hour);
        unknown.wall_clock = None;
        assert!(!defragments(&unknown));
        // NOSPACE does not wait for a window.
        let mut full_now = no_space(0, full(40 * MIB), false);
        full_now.spec.maintenance = Some(MaintenanceSpec {
            defrag: Some(DefragSpec {
                schedule: Some("0 2 * * *".into()),
                ..DefragSpec::default()
            }),
            compact_on_no_space: false,
        });
        full_now.wall_clock = Some(MIDNIGHT + hour);
        assert!(matches!(
            plan(&full_now),
            Action::DefragmentMember {
                reason: DefragReason::NoSpace,
                ..
            }
        ));
    }

    #[test]
    fn defragmentation_never_takes_a_second_member_away() {
        // Two voters: the one defragmenting would leave the other without quorum.
        let members2: Vec<Member> = [0, 1]
            .iter()
            .map(|&o| Member {
                db: fragmented(0).membership_db(),
                ..healthy(o, V35, o == 0)
            })
            .collect();
        let mut observed = cluster(2, V35)
            .members(members2)
            .pods(&[0, 1])
            .ready(&[0, 1])
            .pvcs(&[0, 1]);
        observed.spec.maintenance = fragmented(0).spec.maintenance;
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::WouldLoseQuorum {
                member: name(1),
                healthy: 2,
                voters: 2
            })
        );
        // A member that does not answer (busy, or down): nothing else is defragmented.
        let mut observed = fragmented(0);
        members(&mut observed)[1].health = MemberHealth::Unhealthy {
            unhealthy_for: std::time::Duration::from_secs(1),
        };
        assert!(!matches!(plan(&observed), Action::DefragmentMember { .. }));
    }

    /// Member Pods built with the serving readiness gate, open.
    fn gated(mut observed: Observed) -> Observed {
        for pod in observed.pods.values_mut() {
            pod.serving_gate = Some(true);
        }
        observed
    }

    #[test]
    fn a_gated_member_is_drained_for_its_defragmentation_an_older_pod_is_not() {
        let observed = gated(fragmented(1));
        assert!(matches!(
            plan(&observed),
            Action::DefragmentMember { ref member, drain: true, .. } if *member == name(0)
        ));
        // Pods built before the gate: defragmented in the Service, as before.
        assert!(matches!(
            plan(&fragmented(1)),
            Action::DefragmentMember { drain: false, .. }
        ));
        // Under NOSPACE too.
        let full_now = gated(no_space(0, full(40 * MIB), false));
        assert!(matches!(
            plan(&full_now),
            Action::DefragmentMember {
                reason: DefragReason::NoSpace,
                drain: true,
                ..
            }
        ));
    }

    /// "Never two members down": the kubelet reports another member's Pod not Ready (its probe
    /// lags, or it fails while etcd answers the operator): draining one more would leave two
    /// out of the client Service. Scheduled and NOSPACE defragmentation both wait.
    #[test]
    fn no_member_is_drained_while_another_pod_is_not_ready() {
        for mut observed in [
            gated(fragmented(1)),
            gated(no_space(0, full(40 * MIB), false)),
        ] {
            observed.pods.get_mut(&name(2)).unwrap().ready = false;
            assert_eq!(
                plan(&observed),
                Action::Wait(WaitReason::PodNotReady { member: name(2) })
            );
        }
    }

    /// A new Pod's gate is opened (its condition is not set yet), and a gate left closed by a
    /// defragmentation that never reopened it (the operator crashed in between, or the write
    /// failed) is opened before anything else: before the defragmentation is planned again,
    /// and even while a member is unhealthy.
    #[test]
    fn a_closed_serving_gate_is_opened_first_so_a_crash_mid_defragmentation_converges() {
        let mut observed = gated(fragmented(1));
        let Action::DefragmentMember { member, drain, .. } = plan(&observed) else {
            panic!("{:?}", plan(&observed));
        };
        assert!(drain);
        // The executor closed the gate (the Pod went unready), then the process stopped.
        let pod = observed.pods.get_mut(&member).unwrap();
        pod.serving_gate = Some(false);
        pod.ready = false;
        members(&mut observed)[2].health = MemberHealth::Unhealthy {
            unhealthy_for: std::time::Duration::from_secs(1),
        };
        assert_eq!(
            plan(&observed),
            Action::OpenServingGate {
                member: member.clone()
            }
        );
        // Opened (and Ready again once the kubelet sees it): the defragmentation resumes
        // once every member answers, with one member out of the Service at a time.
        let pod = observed.pods.get_mut(&member).unwrap();
        pod.serving_gate = Some(true);
        pod.ready = true;
        members(&mut observed)[2].health = healthy(2, V35, false).health;
        assert!(matches!(
            plan(&observed),
            Action::DefragmentMember { member: ref again, drain: true, .. } if *again == member
        ));
        // A terminating Pod is left alone; a Pod without the gate has nothing to open.
        let mut observed = gated(fragmented(1));
        observed.pods.get_mut(&name(0)).unwrap().serving_gate = Some(false);
        observed.pods.get_mut(&name(0)).unwrap().terminating = true;
        assert!(!matches!(plan(&observed), Action::OpenServingGate { .. }));
    }

    /// A new member's Pod (built with the gate, its condition unset) is opened by the pass
    /// after its creation, also while the cluster has no member list yet (the seed).
    #[test]
    fn a_new_pods_gate_is_opened_even_before_the_member_answers() {
        let mut observed = cluster(3, V35);
        observed.pods.insert(
            name(0),
            crate::state::PodState {
                terminating: false,
                ready: false,
                config_hash: None,
                tls_hash: None,
                snapshot_before_upgrade: false,
                v2_snapshot_saved: false,
                listen: None,
                tls_switch_reverted: false,
                serving_gate: Some(false),
            },
        );
        assert_eq!(plan(&observed), Action::OpenServingGate { member: name(0) });
        observed.pods.get_mut(&name(0)).unwrap().serving_gate = Some(true);
        assert_eq!(plan(&observed), Action::Wait(WaitReason::SeedStarting));
    }

    /// A scheduled defragmentation of three gated members, played as the executor runs it
    /// (close, defragment, open): each member is drained once, and at no step are two
    /// members' Pods out of the client Service.
    #[test]
    fn defragmentation_drains_one_member_at_a_time() {
        let mut observed = gated(fragmented(1));
        let mut drained = vec![];
        for _ in 0..10 {
            let unready = observed.pods.values().filter(|p| !p.ready).count();
            assert!(unready <= 1, "two members out of the Service");
            match plan(&observed) {
                Action::DefragmentMember {
                    member,
                    drain: true,
                    ..
                } => {
                    drained.push(member.clone());
                    let m = members(&mut observed)
                        .iter_mut()
                        .find(|m| m.name == member)
                        .unwrap();
                    m.db.as_mut().unwrap().size = 101 * MIB;
                }
                Action::Converged => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(drained, vec![name(0), name(2), name(1)]);
    }

    trait Db {
        fn membership_db(&self) -> Option<DbStats>;
    }

    impl Db for Observed {
        fn membership_db(&self) -> Option<DbStats> {
            let Membership::Known(members) = &self.membership else {
                return None;
            };
            members[0].db
        }
    }
}
