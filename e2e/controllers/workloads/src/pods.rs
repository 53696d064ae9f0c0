//! Facts about pods that several controllers share: activity, readiness and availability,
//! controller references, and the scale-down ranking of the ReplicaSet controller.

use std::cmp::Ordering;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

/// A pod that is neither finished nor being deleted (`controller.IsPodActive`).
pub(crate) fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Phase Succeeded or Failed.
pub(crate) fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

pub(crate) fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The pod's `Ready` condition is `True`.
pub(crate) fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// When the pod last became Ready, if it is Ready.
fn ready_since(pod: &Pod) -> Option<Timestamp> {
    condition(pod, "Ready")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// How long until a Ready pod counts as available under `min_ready_seconds`: `Some(0)` when it
/// already is, `None` when it is not Ready (`podutil.IsPodAvailable`). A Ready pod without a
/// transition time is available only when `min_ready_seconds` is 0.
pub(crate) fn available_in(
    pod: &Pod,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<SignedDuration> {
    if !is_ready(pod) {
        return None;
    }
    if min_ready_seconds <= 0 {
        return Some(SignedDuration::ZERO);
    }
    let since = ready_since(pod)?;
    let at = since + SignedDuration::from_secs(i64::from(min_ready_seconds));
    // Upstream requires `since + minReadySeconds < now`, strictly.
    if at < now {
        Some(SignedDuration::ZERO)
    } else {
        Some(at.duration_since(now) + SignedDuration::from_millis(1))
    }
}

pub(crate) fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    available_in(pod, min_ready_seconds, now).is_some_and(|d| d.is_zero())
}

/// The owner reference marked `controller: true`, if any.
pub(crate) fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The owner reference a controller puts on what it creates (`metav1.NewControllerRef`).
pub(crate) fn new_controller_ref<K: Resource<DynamicType = ()>>(
    owner: &K,
) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.meta().name.clone()?,
        uid: owner.meta().uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// Total container restarts (init and regular), as the Job controller counts OnFailure retries.
pub(crate) fn restart_count(pod: &Pod) -> i32 {
    let Some(status) = pod.status.as_ref() else {
        return 0;
    };
    status
        .init_container_statuses
        .iter()
        .chain(status.container_statuses.iter())
        .flatten()
        .map(|c| c.restart_count)
        .sum()
}

/// When a finished pod finished: the latest container `terminated.finishedAt`, else its Ready
/// condition's transition, else its creation (the Job controller's `getFinishedTime`).
pub(crate) fn finished_at(pod: &Pod) -> Option<Timestamp> {
    let containers = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let latest = containers
        .into_iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max();
    latest
        .or_else(|| {
            condition(pod, "Ready")
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0)
        })
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn phase_rank(pod: &Pod) -> u8 {
    match phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

fn deletion_cost(pod: &Pod) -> i64 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("controller.kubernetes.io/pod-deletion-cost"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The order in which a scale-down deletes pods, first to delete first (`ActivePodsWithRanks`
/// with a single node, so the "doubled up" rank is equal for all): unassigned before assigned;
/// Pending before Unknown before Running; not ready before ready; lower
/// `pod-deletion-cost` first; more recently ready first; more restarts first; newer first.
pub(crate) fn scale_down_order(a: &Pod, b: &Pod) -> Ordering {
    let assigned = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    assigned(a)
        .cmp(&assigned(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| match (ready_since(a), ready_since(b)) {
            (Some(x), Some(y)) => y.cmp(&x),
            _ => Ordering::Equal,
        })
        .then_with(|| restart_count(b).cmp(&restart_count(a)))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            match (created(a), created(b)) {
                (Some(x), Some(y)) => y.cmp(&x),
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        })
}

#[cfg(test)]
pub(crate) mod testing {
    //! Pod builders for the table-driven tests of every controller.
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    pub(crate) fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    pub(crate) fn pod(name: &str, phase: &str, ready: bool, created: i64) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time(ts(created))),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("localkube".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    last_transition_time: Some(Time(ts(created + 5))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn availability_honours_min_ready_seconds_strictly() {
        let p = pod("a", "Running", true, 0); // ready since ts(5)
        let cases = [
            (0, ts(5), Some(SignedDuration::ZERO)),
            (10, ts(15), Some(SignedDuration::from_millis(1))),
            (10, ts(16), Some(SignedDuration::ZERO)),
            (10, ts(10), Some(SignedDuration::from_millis(5001))),
        ];
        for (min_ready, now, want) in cases {
            assert_eq!(available_in(&p, min_ready, now), want, "{min_ready} {now}");
        }
        assert_eq!(available_in(&pod("b", "Running", false, 0), 0, ts(9)), None);
    }

    #[test]
    fn scale_down_prefers_unready_then_newest() {
        let mut unassigned = pod("unassigned", "Pending", false, 0);
        if let Some(spec) = unassigned.spec.as_mut() {
            spec.node_name = None;
        }
        let mut costly = pod("costly-new", "Running", true, 50);
        costly.metadata.annotations = Some(
            [(
                "controller.kubernetes.io/pod-deletion-cost".to_string(),
                "100".to_string(),
            )]
            .into(),
        );
        let mut pods = [
            pod("ready-old", "Running", true, 0),
            costly,
            pod("ready-new", "Running", true, 30),
            pod("pending", "Pending", false, 10),
            pod("running-unready", "Running", false, 20),
            unassigned,
        ];
        pods.sort_by(scale_down_order);
        let names: Vec<_> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(
            names,
            [
                "unassigned",
                "pending",
                "running-unready",
                "ready-new",
                "ready-old",
                "costly-new"
            ]
        );
    }

    #[test]
    fn finished_time_prefers_container_termination() {
        use k8s_openapi::api::core::v1::{
            ContainerState, ContainerStateTerminated, ContainerStatus,
        };
        let mut p = pod("a", "Failed", false, 0);
        assert_eq!(finished_at(&p), Some(ts(5)));
        if let Some(status) = p.status.as_mut() {
            status.container_statuses = Some(vec![ContainerStatus {
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        finished_at: Some(Time(ts(42))),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                restart_count: 3,
                ..Default::default()
            }]);
        }
        assert_eq!(finished_at(&p), Some(ts(42)));
        assert_eq!(restart_count(&p), 3);
    }
}

/// A pod built from a controller's template (`controller.GetPodFromTemplate`): the template's
/// labels, annotations, finalizers and spec, `generateName` `<owner>-` (the API server appends
/// five characters), and the controller reference.
pub(crate) fn from_template(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
    owner_name: &str,
    owner: OwnerReference,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{owner_name}-")),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// Slow-start batch sizes for creating `count` objects (`controller.slowStartBatch`): 1, 2, 4,
/// ... so a template the API server rejects fails once, not `count` times.
pub(crate) fn slow_start_batches(count: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let mut remaining = count;
    let mut size = 1usize;
    while remaining > 0 {
        let batch = size.min(remaining);
        batches.push(batch);
        remaining -= batch;
        size = size.saturating_mul(2);
    }
    batches
}

#[cfg(test)]
mod batch_tests {
    #[test]
    fn slow_start_doubles() {
        assert_eq!(super::slow_start_batches(0), Vec::<usize>::new());
        assert_eq!(super::slow_start_batches(1), vec![1]);
        assert_eq!(super::slow_start_batches(10), vec![1, 2, 4, 3]);
    }
}
