//! What one ReplicaSet sync does, as a pure function of the ReplicaSet, the pods of its
//! namespace and the time (`ReplicaSetController.syncReplicaSet`, `claimPods`, `manageReplicas`,
//! `calculateStatus`).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;

use crate::labels;
use crate::pods;

/// The actions of one sync, and the status that describes what it saw.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    /// Orphans matching the selector: take them (add our controller reference).
    pub adopt: Vec<String>,
    /// Pods we control that no longer match the selector: let them go.
    pub release: Vec<String>,
    /// How many pods to create from the template.
    pub create: usize,
    /// Pods to delete, first to go first.
    pub delete: Vec<String>,
    pub status: ReplicaSetStatus,
    /// Sync again after this long (a Ready pod becomes available under minReadySeconds).
    pub requeue_after: Option<SignedDuration>,
}

fn nonzero(n: usize) -> Option<i32> {
    i32::try_from(n).ok().filter(|n| *n != 0)
}

fn uid_of(pod: &Pod) -> Option<&str> {
    pod.metadata.uid.as_deref()
}

/// Plan one sync of `rs` given every pod of its namespace.
pub(crate) fn plan(rs: &ReplicaSet, pods: &[Pod], now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    let Some(spec) = rs.spec.as_ref() else {
        return plan;
    };
    let rs_uid = rs.metadata.uid.as_deref().unwrap_or("");
    let rs_deleting = rs.metadata.deletion_timestamp.is_some();
    let empty = BTreeMap::new();

    // claimPods: ours and matching stay; ours and not matching are released; matching orphans
    // are adopted unless either side is being deleted.
    let mut owned: Vec<&Pod> = Vec::new();
    for pod in pods {
        let pod_labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let selected = labels::matches(&spec.selector, pod_labels);
        let name = pod.metadata.name.clone().unwrap_or_default();
        match pods::controller_ref(&pod.metadata) {
            Some(owner) if owner.uid == rs_uid => {
                if selected {
                    owned.push(pod);
                } else if !rs_deleting {
                    plan.release.push(name);
                }
            }
            Some(_) => {}
            None => {
                if selected
                    && !rs_deleting
                    && pod.metadata.deletion_timestamp.is_none()
                    && uid_of(pod).is_some()
                {
                    plan.adopt.push(name);
                    owned.push(pod);
                }
            }
        }
    }

    let mut active: Vec<&Pod> = owned.into_iter().filter(|p| pods::is_active(p)).collect();
    let desired = usize::try_from(spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    if !rs_deleting {
        if active.len() < desired {
            plan.create = desired - active.len();
        } else if active.len() > desired {
            active.sort_by(|a, b| pods::scale_down_order(a, b));
            plan.delete = active[..active.len() - desired]
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
        }
    }

    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref())
        .unwrap_or(&empty);
    let fully_labeled = active
        .iter()
        .filter(|p| {
            let have = p.metadata.labels.as_ref().unwrap_or(&empty);
            template_labels.iter().all(|(k, v)| have.get(k) == Some(v))
        })
        .count();
    let ready = active.iter().filter(|p| pods::is_ready(p)).count();
    let available = active
        .iter()
        .filter(|p| pods::is_available(p, min_ready, now))
        .count();

    // Upstream requeues after minReadySeconds once every replica is ready but not all are
    // available yet; here, exactly when the first of them becomes available.
    if min_ready > 0 && ready == desired && available != desired {
        plan.requeue_after = active
            .iter()
            .filter_map(|p| pods::available_in(p, min_ready, now))
            .filter(|d| !d.is_zero())
            .min();
    }

    plan.status = ReplicaSetStatus {
        replicas: i32::try_from(active.len()).unwrap_or(i32::MAX),
        fully_labeled_replicas: nonzero(fully_labeled),
        ready_replicas: nonzero(ready),
        available_replicas: nonzero(available),
        observed_generation: rs.metadata.generation,
        // ReplicaFailure is decided by the I/O layer, which sees create/delete errors; keep
        // what is there until then.
        conditions: rs.status.as_ref().and_then(|s| s.conditions.clone()),
        terminating_replicas: None,
    };
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::testing::{pod, ts};
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector, ObjectMeta, OwnerReference, Time,
    };

    fn app_labels() -> BTreeMap<String, String> {
        [("app".to_string(), "web".to_string())].into()
    }

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("rs-uid".into()),
                generation: Some(4),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: Some(min_ready),
                selector: LabelSelector {
                    match_labels: Some(app_labels()),
                    ..Default::default()
                },
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(app_labels()),
                        ..Default::default()
                    }),
                    spec: None,
                }),
            }),
            status: None,
        }
    }

    fn owned(name: &str, phase: &str, ready: bool, created: i64, owner_uid: &str) -> Pod {
        let mut p = pod(name, phase, ready, created);
        p.metadata.labels = Some(app_labels());
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "x".into(),
            uid: owner_uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        p
    }

    #[test]
    fn claims_creates_and_deletes() {
        let mut orphan = pod("orphan", "Running", true, 1);
        orphan.metadata.labels = Some(app_labels());
        let mut mislabelled = owned("mislabelled", "Running", true, 1, "rs-uid");
        mislabelled.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
        let foreign = owned("foreign", "Running", true, 1, "other-uid");
        let failed = owned("failed", "Failed", false, 1, "rs-uid");
        let mut terminating = owned("terminating", "Running", true, 1, "rs-uid");
        terminating.metadata.deletion_timestamp = Some(Time(ts(50)));

        struct Case {
            replicas: i32,
            pods: Vec<Pod>,
            want_adopt: Vec<&'static str>,
            want_release: Vec<&'static str>,
            want_create: usize,
            want_delete: Vec<&'static str>,
            want_replicas: i32,
        }
        let cases = vec![
            Case {
                replicas: 3,
                pods: vec![],
                want_adopt: vec![],
                want_release: vec![],
                want_create: 3,
                want_delete: vec![],
                want_replicas: 0,
            },
            Case {
                // The failed and the terminating pod are replaced; the foreign one is ignored.
                replicas: 2,
                pods: vec![
                    failed.clone(),
                    terminating.clone(),
                    foreign.clone(),
                    owned("a", "Running", true, 1, "rs-uid"),
                ],
                want_adopt: vec![],
                want_release: vec![],
                want_create: 1,
                want_delete: vec![],
                want_replicas: 1,
            },
            Case {
                replicas: 2,
                pods: vec![
                    orphan.clone(),
                    mislabelled.clone(),
                    owned("a", "Running", true, 1, "rs-uid"),
                ],
                want_adopt: vec!["orphan"],
                want_release: vec!["mislabelled"],
                want_create: 0,
                want_delete: vec![],
                want_replicas: 2,
            },
            Case {
                // Scale down: not-ready first, then the newest ready.
                replicas: 1,
                pods: vec![
                    owned("old", "Running", true, 1, "rs-uid"),
                    owned("new", "Running", true, 9, "rs-uid"),
                    owned("unready", "Running", false, 0, "rs-uid"),
                ],
                want_adopt: vec![],
                want_release: vec![],
                want_create: 0,
                want_delete: vec!["unready", "new"],
                want_replicas: 3,
            },
        ];
        for (i, case) in cases.into_iter().enumerate() {
            let got = plan(&rs(case.replicas, 0), &case.pods, ts(100));
            assert_eq!(got.adopt, case.want_adopt, "case {i}");
            assert_eq!(got.release, case.want_release, "case {i}");
            assert_eq!(got.create, case.want_create, "case {i}");
            assert_eq!(got.delete, case.want_delete, "case {i}");
            assert_eq!(got.status.replicas, case.want_replicas, "case {i}");
            assert_eq!(got.status.observed_generation, Some(4), "case {i}");
        }
    }

    #[test]
    fn status_counts_ready_available_and_labels() {
        let mut extra = owned("extra-label", "Running", false, 0, "rs-uid");
        extra.metadata.labels = Some(app_labels());
        let pods = vec![
            owned("a", "Running", true, 0, "rs-uid"), // ready since ts(5)
            owned("b", "Running", true, 50, "rs-uid"), // ready since ts(55)
            extra,
        ];
        // minReadySeconds 30 at ts(60): a is available, b in 25 s.
        let got = plan(&rs(3, 30), &pods, ts(60));
        assert_eq!(got.status.replicas, 3);
        assert_eq!(got.status.fully_labeled_replicas, Some(3));
        assert_eq!(got.status.ready_replicas, Some(2));
        assert_eq!(got.status.available_replicas, Some(1));
        assert_eq!(got.requeue_after, None, "not every replica is ready");

        let ready_pods: Vec<Pod> = pods[..2].to_vec();
        let got = plan(&rs(2, 30), &ready_pods, ts(60));
        assert_eq!(got.requeue_after, Some(SignedDuration::from_millis(25_001)));
    }

    #[test]
    fn deleting_replicaset_neither_creates_nor_adopts() {
        let mut deleting = rs(3, 0);
        deleting.metadata.deletion_timestamp = Some(Time(ts(1)));
        let mut orphan = pod("orphan", "Running", true, 1);
        orphan.metadata.labels = Some(app_labels());
        let got = plan(&deleting, &[orphan], ts(2));
        assert_eq!((got.create, got.adopt.len()), (0, 0));
    }
}
