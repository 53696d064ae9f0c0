//! Pod predicates shared by the controllers, with kube-controller-manager's meanings
//! (`k8s.io/kubernetes/pkg/api/v1/pod`).

use k8s_openapi::api::core::v1::Pod;

/// The pod's `Ready` condition is `True` (`podutil.IsPodReady`).
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Phase `Succeeded` or `Failed`: its containers will not run again.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

pub fn is_deleting(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The pod's primary IP (`status.podIP`, else the first of `status.podIPs`).
pub fn ip(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?;
    status
        .pod_ip
        .as_deref()
        .filter(|ip| !ip.is_empty())
        .or_else(|| {
            status
                .pod_ips
                .as_ref()?
                .first()
                .map(|p| p.ip.as_str())
                .filter(|ip| !ip.is_empty())
        })
}

/// The names of the PersistentVolumeClaims the pod mounts.
pub fn claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Pods built from a few facts, for the table-driven tests of the controllers.
    use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    pub fn pod(name: &str, labels: &[(&str, &str)], ip: Option<&str>, ready: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("localkube".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: ip.map(str::to_string),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    pub fn deleting(mut pod: Pod) -> Pod {
        pod.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        pod
    }
}
