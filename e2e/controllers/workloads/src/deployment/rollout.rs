//! Rollout arithmetic of the Deployment controller (`deployment/util`, `rolling.go`,
//! `recreate.go`, `sync.go`), over plain numbers so each step is table-tested.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::intstr::scaled_value;

/// What a rollout step needs to know about one ReplicaSet.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RsState {
    pub name: String,
    pub created: Option<Timestamp>,
    /// `spec.replicas`
    pub replicas: i32,
    /// `status.availableReplicas`
    pub available: i32,
}

impl RsState {
    pub(crate) fn of(rs: &ReplicaSet) -> RsState {
        RsState {
            name: rs.metadata.name.clone().unwrap_or_default(),
            created: rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            replicas: spec_replicas(rs),
            available: rs
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0),
        }
    }
}

pub(crate) fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

pub(crate) fn desired_replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub(crate) fn is_recreate(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("Recreate")
}

/// `maxSurge` and `maxUnavailable` resolved against the desired replicas
/// (`ResolveFenceposts`): surge rounds up, unavailable down, and if both come out 0,
/// unavailable becomes 1. Missing values take the API defaults (25% each). Recreate has none.
pub(crate) fn fenceposts(d: &Deployment) -> Result<(i32, i32), String> {
    if is_recreate(d) {
        return Ok((0, 0));
    }
    let desired = desired_replicas(d);
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let default = IntOrString::String("25%".into());
    let surge_value = rolling
        .and_then(|r| r.max_surge.as_ref())
        .unwrap_or(&default);
    let unavailable_value = rolling
        .and_then(|r| r.max_unavailable.as_ref())
        .unwrap_or(&default);
    let surge = scaled_value(surge_value, desired, true)?;
    let mut unavailable = scaled_value(unavailable_value, desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// `deploymentutil.MaxUnavailable`: never more than the desired replicas; 0 when none are
/// desired or the strategy is Recreate.
pub(crate) fn max_unavailable(d: &Deployment, unavailable: i32) -> i32 {
    let desired = desired_replicas(d);
    if is_recreate(d) || desired == 0 {
        0
    } else {
        unavailable.min(desired)
    }
}

/// The size the new ReplicaSet may grow to now (`NewRSNewReplicas`, RollingUpdate): up to
/// `desired + maxSurge` pods counted by `spec.replicas` over all ReplicaSets.
pub(crate) fn new_rs_replicas(desired: i32, max_surge: i32, new: i32, all_total: i32) -> i32 {
    let max_total = desired + max_surge;
    if all_total >= max_total {
        return new;
    }
    let scale_up = (max_total - all_total).min(desired - new);
    new + scale_up
}

/// One rolling-update step (`rolloutRolling`): scale the new ReplicaSet up within maxSurge; if
/// it did not change, scale old ReplicaSets down within maxUnavailable, unhealthy replicas
/// first, oldest ReplicaSets first. Returns the `(name, new size)` changes; `old` is in any
/// order.
pub(crate) fn rolling_step(
    desired: i32,
    max_surge: i32,
    max_unavailable: i32,
    new: &RsState,
    old: &[RsState],
) -> Vec<(String, i32)> {
    let all_total = new.replicas + old.iter().map(|r| r.replicas).sum::<i32>();

    // reconcileNewReplicaSet
    if new.replicas > desired {
        return vec![(new.name.clone(), desired)];
    }
    if new.replicas < desired {
        let target = new_rs_replicas(desired, max_surge, new.replicas, all_total);
        if target != new.replicas {
            return vec![(new.name.clone(), target)];
        }
    }

    // reconcileOldReplicaSets
    let mut old: Vec<RsState> = old.to_vec();
    old.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name)));
    let old_total: i32 = old.iter().map(|r| r.replicas).sum();
    if old_total == 0 {
        return Vec::new();
    }
    let min_available = desired - max_unavailable;
    let new_unavailable = new.replicas - new.available;
    let max_scaled_down = all_total - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut changes: Vec<(String, i32)> = Vec::new();

    // cleanupUnhealthyReplicas
    let mut cleaned = 0;
    for rs in old.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        if rs.replicas == 0 || rs.replicas == rs.available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(rs.replicas - rs.available);
        rs.replicas -= down;
        cleaned += down;
        changes.push((rs.name.clone(), rs.replicas));
    }

    // scaleDownOldReplicaSetsForRollingUpdate
    let available_total = new.available + old.iter().map(|r| r.available).sum::<i32>();
    if available_total > min_available {
        let to_scale_down = available_total - min_available;
        let mut scaled = 0;
        for rs in old.iter_mut() {
            if scaled >= to_scale_down {
                break;
            }
            if rs.replicas == 0 {
                continue;
            }
            let down = rs.replicas.min(to_scale_down - scaled);
            rs.replicas -= down;
            scaled += down;
            changes.retain(|(name, _)| name != &rs.name);
            changes.push((rs.name.clone(), rs.replicas));
        }
    }
    changes
}

/// The old ReplicaSets `revisionHistoryLimit` lets go (`cleanupDeployment`): beyond the limit,
/// lowest revision first, and only those fully scaled down and settled.
pub(crate) fn history_to_delete(old: &[ReplicaSet], limit: i32) -> Vec<String> {
    let mut alive: Vec<&ReplicaSet> = old
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let excess = i32::try_from(alive.len()).unwrap_or(i32::MAX) - limit.max(0);
    if excess <= 0 {
        return Vec::new();
    }
    alive.sort_by(|a, b| {
        revision(a).cmp(&revision(b)).then_with(|| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
        })
    });
    alive
        .into_iter()
        .take(usize::try_from(excess).unwrap_or(0))
        .filter(|rs| {
            let status = rs.status.clone().unwrap_or_default();
            status.replicas == 0
                && spec_replicas(rs) == 0
                && rs.metadata.generation.unwrap_or(0) <= status.observed_generation.unwrap_or(0)
        })
        .filter_map(|rs| rs.metadata.name.clone())
        .collect()
}

/// The `deployment.kubernetes.io/revision` of an object, 0 when absent or malformed.
pub(crate) fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(super::REVISION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::testing::ts;
    use k8s_openapi::api::apps::v1::{
        DeploymentSpec, DeploymentStrategy, ReplicaSetSpec, ReplicaSetStatus,
        RollingUpdateDeployment,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn deployment(
        replicas: i32,
        surge: Option<IntOrString>,
        unavailable: Option<IntOrString>,
    ) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: surge,
                        max_unavailable: unavailable,
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn fenceposts_round_and_never_both_zero() {
        let pct = |s: &str| Some(IntOrString::String(s.into()));
        let int = |n| Some(IntOrString::Int(n));
        let cases = [
            (deployment(10, None, None), (3, 2)),
            (deployment(3, None, None), (1, 0)),
            (deployment(1, pct("0%"), pct("10%")), (0, 1)),
            (deployment(4, int(0), int(0)), (0, 1)),
            (deployment(4, int(2), pct("50%")), (2, 2)),
        ];
        for (d, want) in cases {
            assert_eq!(fenceposts(&d), Ok(want));
        }
        let mut recreate = deployment(3, None, None);
        if let Some(s) = recreate.spec.as_mut() {
            s.strategy = Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            });
        }
        assert_eq!(fenceposts(&recreate), Ok((0, 0)));
        assert_eq!(max_unavailable(&recreate, 5), 0);
        assert_eq!(max_unavailable(&deployment(2, None, None), 5), 2);
        assert!(fenceposts(&deployment(3, pct("x"), None)).is_err());
    }

    fn rs(name: &str, created: i64, replicas: i32, available: i32) -> RsState {
        RsState {
            name: name.into(),
            created: Some(ts(created)),
            replicas,
            available,
        }
    }

    #[test]
    fn rolling_steps() {
        struct Case {
            what: &'static str,
            desired: i32,
            surge: i32,
            unavailable: i32,
            new: RsState,
            old: Vec<RsState>,
            want: Vec<(&'static str, i32)>,
        }
        let cases = vec![
            Case {
                what: "fresh deployment scales straight to desired",
                desired: 3,
                surge: 1,
                unavailable: 0,
                new: rs("new", 10, 0, 0),
                old: vec![],
                want: vec![("new", 3)],
            },
            Case {
                what: "surge 1: new grows by one while old is full",
                desired: 3,
                surge: 1,
                unavailable: 0,
                new: rs("new", 10, 0, 0),
                old: vec![rs("old", 0, 3, 3)],
                want: vec![("new", 1)],
            },
            Case {
                what: "new pod not available yet, unavailable 0: nothing to scale down",
                desired: 3,
                surge: 1,
                unavailable: 0,
                new: rs("new", 10, 1, 0),
                old: vec![rs("old", 0, 3, 3)],
                want: vec![],
            },
            Case {
                what: "new pod available: old scales down by one",
                desired: 3,
                surge: 1,
                unavailable: 0,
                new: rs("new", 10, 1, 1),
                old: vec![rs("old", 0, 3, 3)],
                want: vec![("old", 2)],
            },
            Case {
                what: "defaults for 4 (surge 1, unavailable 1): old scales down 1 at once",
                desired: 4,
                surge: 1,
                unavailable: 1,
                new: rs("new", 10, 1, 0),
                old: vec![rs("old", 0, 4, 4)],
                want: vec![("old", 3)],
            },
            Case {
                what: "unhealthy old replicas go first, oldest RS first",
                desired: 3,
                surge: 0,
                unavailable: 1,
                new: rs("new", 10, 0, 0),
                old: vec![rs("older", 5, 2, 2), rs("oldest", 0, 1, 0)],
                want: vec![("oldest", 0)],
            },
            Case {
                what: "new RS above desired (scale-down during rollout) shrinks first",
                desired: 2,
                surge: 1,
                unavailable: 0,
                new: rs("new", 10, 3, 3),
                old: vec![rs("old", 0, 1, 1)],
                want: vec![("new", 2)],
            },
            Case {
                what: "rollout done: old at 0, nothing to do",
                desired: 3,
                surge: 1,
                unavailable: 0,
                new: rs("new", 10, 3, 3),
                old: vec![rs("old", 0, 0, 0)],
                want: vec![],
            },
        ];
        for case in cases {
            let got = rolling_step(
                case.desired,
                case.surge,
                case.unavailable,
                &case.new,
                &case.old,
            );
            let want: Vec<(String, i32)> =
                case.want.iter().map(|(n, r)| (n.to_string(), *r)).collect();
            assert_eq!(got, want, "{}", case.what);
        }
    }

    #[test]
    fn rolling_update_converges_within_bounds() {
        // Simulate: pods become available at once after each step; check the invariants hold
        // at every step and the rollout ends with everything on the new RS.
        let (desired, surge, unavailable) = (5, 2, 1);
        let mut new = rs("new", 10, 0, 0);
        let mut old = vec![rs("old", 0, 5, 5)];
        for _ in 0..20 {
            let changes = rolling_step(desired, surge, unavailable, &new, &old);
            if changes.is_empty() {
                break;
            }
            for (name, size) in changes {
                if name == "new" {
                    new.replicas = size;
                } else if let Some(r) = old.iter_mut().find(|r| r.name == name) {
                    r.replicas = size;
                    r.available = r.available.min(size);
                }
            }
            let total = new.replicas + old.iter().map(|r| r.replicas).sum::<i32>();
            let available = new.available + old.iter().map(|r| r.available).sum::<i32>();
            assert!(total <= desired + surge, "surge exceeded: {total}");
            assert!(
                available >= desired - unavailable,
                "too few available: {available}"
            );
            new.available = new.replicas;
        }
        assert_eq!((new.replicas, old[0].replicas), (5, 0));
    }

    fn full_rs(name: &str, revision: &str, spec: i32, status: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(
                    [(super::super::REVISION.to_string(), revision.to_string())].into(),
                ),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(spec),
                ..Default::default()
            }),
            status: Some(ReplicaSetStatus {
                replicas: status,
                observed_generation: Some(1),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn history_cleanup_removes_lowest_revisions_that_are_scaled_down() {
        let old = vec![
            full_rs("r3", "3", 0, 0),
            full_rs("r1", "1", 0, 0),
            full_rs("r2", "2", 0, 1), // still has a pod: kept even though beyond the limit
            full_rs("r4", "4", 0, 0),
        ];
        assert_eq!(history_to_delete(&old, 1), vec!["r1", "r3"]);
        assert_eq!(history_to_delete(&old, 4), Vec::<String>::new());
        assert_eq!(history_to_delete(&old, 0), vec!["r1", "r3", "r4"]);
    }
}
