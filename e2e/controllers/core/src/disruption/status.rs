//! The status of a PodDisruptionBudget (kube-controller-manager `disruption` controller) as a
//! pure function of the budget, its pods and, for percentages and maxUnavailable, the scale of
//! the pods' controllers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::core::{Selector, SelectorExt};

use crate::pods;

/// How long an eviction's `disruptedPods` entry is honoured before the pod must be gone
/// (upstream `DeletionTimeout`).
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);
pub const CONDITION: &str = "DisruptionAllowed";

/// The pods of the budget's namespace its selector matches. A budget without a selector matches
/// nothing; an empty selector matches every pod (policy/v1).
pub fn selected<'a>(pdb: &PodDisruptionBudget, pods: &'a [Pod]) -> Result<Vec<&'a Pod>, String> {
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.clone()) else {
        return Ok(Vec::new());
    };
    let sel = Selector::try_from(sel).map_err(|e| e.to_string())?;
    let empty = BTreeMap::new();
    Ok(pods
        .iter()
        .filter(|p| p.metadata.namespace == pdb.metadata.namespace)
        .filter(|p| sel.matches(p.metadata.labels.as_ref().unwrap_or(&empty)))
        .collect())
}

/// Whether the budget needs its pods' controllers' scale: maxUnavailable, or a percentage
/// minAvailable.
pub fn needs_scale(pdb: &PodDisruptionBudget) -> bool {
    let spec = pdb.spec.as_ref();
    spec.and_then(|s| s.max_unavailable.as_ref()).is_some()
        || matches!(
            spec.and_then(|s| s.min_available.as_ref()),
            Some(IntOrString::String(_))
        )
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
pub fn scaled(v: &IntOrString, total: i32) -> Result<i32, String> {
    match v {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let pct = s
                .strip_suffix('%')
                .ok_or_else(|| {
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_string()
                })?
                .parse::<i64>()
                .map_err(|e| format!("invalid value for IntOrString: invalid value {s:?}: {e}"))?;
            let total = i64::from(total);
            let up = (pct * total + 99).div_euclid(100);
            i32::try_from(up).map_err(|e| e.to_string())
        }
    }
}

/// (expectedPods, desiredHealthy). `scale` is the summed scale of the pods' controllers, given
/// when [`needs_scale`].
pub fn expected_and_desired(
    pdb: &PodDisruptionBudget,
    pod_count: usize,
    scale: Option<i32>,
) -> Result<(i32, i32), String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let pods = i32::try_from(pod_count).map_err(|e| e.to_string())?;
    if let Some(max) = &spec.max_unavailable {
        let expected = scale.ok_or("no scale for maxUnavailable")?;
        let unavailable = scaled(max, expected)?;
        return Ok((expected, (expected - unavailable).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((pods, *n)),
        Some(min @ IntOrString::String(_)) => {
            let expected = scale.ok_or("no scale for a percentage minAvailable")?;
            Ok((expected, scaled(min, expected)?))
        }
        None => Ok((0, 0)),
    }
}

/// Set the DisruptionAllowed condition; its lastTransitionTime moves only when its status does.
fn set_condition(
    conditions: &mut Vec<Condition>,
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) {
    let new = Condition {
        type_: CONDITION.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: now.clone(),
    };
    match conditions.iter_mut().find(|c| c.type_ == CONDITION) {
        Some(c) => {
            let time = if c.status == new.status {
                c.last_transition_time.clone()
            } else {
                now.clone()
            };
            *c = Condition {
                last_transition_time: time,
                ..new
            };
        }
        None => conditions.push(new),
    }
}

/// The new status, and when to look again (the earliest `disruptedPods` entry expiry).
pub fn compute(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    scale: Option<i32>,
    now: Timestamp,
) -> Result<(PodDisruptionBudgetStatus, Option<Timestamp>), String> {
    let (expected, desired) = expected_and_desired(pdb, pods.len(), scale)?;
    let old = pdb.status.clone().unwrap_or_default();
    let old_disrupted = old.disrupted_pods.clone().unwrap_or_default();
    // buildDisruptedPodMap: keep entries of live, not-yet-deleted pods until they expire.
    let mut disrupted = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    for pod in pods {
        if pods::is_deleting(pod) {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = old_disrupted.get(&name) else {
            continue;
        };
        let expires = at.0 + DELETION_TIMEOUT;
        if expires < now {
            continue;
        }
        recheck = Some(recheck.map_or(expires, |r: Timestamp| r.min(expires)));
        disrupted.insert(name, at.clone());
    }
    let healthy = pods
        .iter()
        .filter(|p| !pods::is_deleting(p))
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or("")))
        .filter(|p| pods::is_ready(p))
        .count();
    let healthy = i32::try_from(healthy).map_err(|e| e.to_string())?;
    let allowed = if expected <= 0 {
        0
    } else {
        (healthy - desired).max(0)
    };
    let generation = pdb.metadata.generation;
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let (status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    set_condition(
        &mut conditions,
        status,
        reason,
        String::new(),
        generation,
        &Time(now),
    );
    Ok((
        PodDisruptionBudgetStatus {
            observed_generation: generation,
            disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
            current_healthy: healthy,
            desired_healthy: desired,
            expected_pods: expected,
            disruptions_allowed: allowed,
            conditions: Some(conditions),
        },
        recheck,
    ))
}

/// `failSafe`: when the status cannot be computed, no disruption is allowed and the condition
/// says why (reason SyncFailed); the rest of the status stays as it was.
pub fn fail_safe(
    pdb: &PodDisruptionBudget,
    error: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let generation = status.observed_generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(
        conditions,
        "False",
        "SyncFailed",
        error.to_string(),
        generation,
        &Time(now),
    );
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::fixtures::{deleting, pod};
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("b".into()),
                namespace: Some("ns".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                min_available: min,
                max_unavailable: max,
                selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_string(), "etcd".to_string())])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn percentages_round_up() {
        let cases = [
            (IntOrString::Int(2), 5, Ok(2)),
            (s("50%"), 3, Ok(2)),
            (s("50%"), 4, Ok(2)),
            (s("34%"), 3, Ok(2)),
            (s("33%"), 3, Ok(1)),
            (s("100%"), 3, Ok(3)),
            (s("0%"), 3, Ok(0)),
            (s("1%"), 1, Ok(1)),
        ];
        for (v, total, want) in cases {
            assert_eq!(scaled(&v, total), want, "{v:?} of {total}");
        }
        assert!(scaled(&s("50"), 3).is_err());
    }

    #[test]
    fn expected_and_desired_healthy() {
        let cases = [
            // (minAvailable, maxUnavailable, pods, scale) -> (expected, desired)
            (Some(IntOrString::Int(2)), None, 3, None, (3, 2)),
            (Some(s("50%")), None, 3, Some(3), (3, 2)),
            (None, Some(IntOrString::Int(1)), 2, Some(3), (3, 2)),
            (None, Some(s("34%")), 3, Some(3), (3, 1)),
            (None, Some(IntOrString::Int(5)), 3, Some(3), (3, 0)),
            (None, None, 3, None, (0, 0)),
        ];
        for (min, max, n, scale, want) in cases {
            let b = pdb(min.clone(), max.clone());
            assert_eq!(needs_scale(&b), scale.is_some(), "{min:?} {max:?}");
            assert_eq!(
                expected_and_desired(&b, n, scale),
                Ok(want),
                "{min:?} {max:?}"
            );
        }
    }

    #[test]
    fn status_at_quorum() {
        let now = Timestamp::from_second(1_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let app = [("app", "etcd")];
        let all = vec![
            pod("etcd-0", &app, Some("10.0.0.1"), true),
            pod("etcd-1", &app, Some("10.0.0.2"), true),
            pod("etcd-2", &app, Some("10.0.0.3"), true),
            pod("other", &[("app", "x")], Some("10.0.0.4"), true),
        ];
        let b = pdb(Some(IntOrString::Int(2)), None);
        let chosen = selected(&b, &all).unwrap_or_default();
        assert_eq!(chosen.len(), 3);
        let (st, recheck) = compute(&b, &chosen, None, now).unwrap_or_default();
        assert_eq!(
            (
                st.expected_pods,
                st.current_healthy,
                st.desired_healthy,
                st.disruptions_allowed,
                st.observed_generation
            ),
            (3, 3, 2, 1, Some(3))
        );
        assert_eq!(recheck, None);
        let c = &st.conditions.clone().unwrap_or_default()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("DisruptionAllowed", "True", "SufficientPods")
        );

        // one pod evicted (recent disruptedPods entry) and one being deleted
        let mut b2 = b.clone();
        let recent = Time(now - SignedDuration::from_secs(10));
        let old = Time(now - SignedDuration::from_secs(300));
        b2.status = Some(PodDisruptionBudgetStatus {
            disrupted_pods: Some(BTreeMap::from([
                ("etcd-0".to_string(), recent.clone()),
                ("etcd-1".to_string(), old),
                ("gone".to_string(), recent.clone()),
            ])),
            ..st.clone()
        });
        let pods2 = [all[0].clone(), all[1].clone(), deleting(all[2].clone())];
        let chosen: Vec<&Pod> = pods2.iter().collect();
        let (st2, recheck) = compute(&b2, &chosen, None, now).unwrap_or_default();
        // etcd-0 disrupted (not healthy), etcd-1's entry expired (healthy), etcd-2 deleting
        assert_eq!(
            st2.disrupted_pods,
            Some(BTreeMap::from([("etcd-0".to_string(), recent.clone())]))
        );
        assert_eq!((st2.current_healthy, st2.disruptions_allowed), (1, 0));
        assert_eq!(recheck, Some(recent.0 + DELETION_TIMEOUT));
        let c2 = &st2.conditions.clone().unwrap_or_default()[0];
        assert_eq!(
            (c2.status.as_str(), c2.reason.as_str()),
            ("False", "InsufficientPods")
        );
        assert_eq!(c2.last_transition_time, Time(now));

        // a failure: nothing allowed, SyncFailed
        let failed = fail_safe(&b2, "found no controllers for pod \"etcd-0\"", now);
        assert_eq!(failed.disruptions_allowed, 0);
        let c3 = &failed.conditions.unwrap_or_default()[0];
        assert_eq!(
            (c3.reason.as_str(), c3.message.as_str()),
            ("SyncFailed", "found no controllers for pod \"etcd-0\"")
        );
    }

    #[test]
    fn selectors() {
        let app = [("app", "etcd")];
        let p = vec![pod("a", &app, None, true)];
        let mut none = pdb(None, None);
        if let Some(spec) = none.spec.as_mut() {
            spec.selector = None;
        }
        assert_eq!(selected(&none, &p).map(|v| v.len()), Ok(0));
        let mut empty = pdb(None, None);
        if let Some(spec) = empty.spec.as_mut() {
            spec.selector = Some(LabelSelector::default());
        }
        assert_eq!(selected(&empty, &p).map(|v| v.len()), Ok(1));
    }
}
