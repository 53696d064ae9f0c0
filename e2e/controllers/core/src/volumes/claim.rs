//! What the PersistentVolume controller does next for one PersistentVolumeClaim, decided from
//! the claim, the StorageClasses, the volume it names (if any) and the pods that mount it
//! (kube-controller-manager's persistentvolume and pvcprotection controllers, for the one
//! dynamic provisioner localkube has).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, Pod, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::pods;

/// The provisioner name of localkube's host-directory volumes (StorageClass `standard`).
pub const PROVISIONER: &str = "localkube.io/host-path";
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const ANN_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

#[derive(Debug, PartialEq)]
pub enum ClaimAction {
    Nothing,
    /// The claim is being deleted and no running pod mounts it: drop `pvc-protection`.
    RemoveProtection,
    /// No class named: take the default one (retroactive default StorageClass assignment).
    SetDefaultClass(String),
    /// Warning event `ProvisioningFailed`, the claim stays Pending.
    ClassMissing {
        message: String,
    },
    /// Normal event `WaitForFirstConsumer`: the class binds only once a pod is scheduled.
    WaitForConsumer,
    /// Make a directory and a PersistentVolume for the claim, then bind both.
    Provision {
        class: String,
        /// The node of the first scheduled consumer (WaitForFirstConsumer classes).
        selected_node: Option<String>,
    },
    /// The volume `pvc-<uid>` already claims this PVC: finish the claim's side of the binding.
    CompleteBinding {
        volume: String,
    },
    /// The claim is bound to a volume that no longer exists: phase `Lost`, Warning `ClaimLost`.
    Lost,
}

/// The volume name the provisioner gives a claim: `pvc-<claim uid>`.
pub fn volume_name(pvc: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", pvc.metadata.uid.as_deref().unwrap_or(""))
}

fn has_finalizer(meta: &ObjectMeta, f: &str) -> bool {
    meta.finalizers.iter().flatten().any(|x| x == f)
}

/// Pods that mount the claim and have not terminated (they keep it from being deleted).
pub fn users<'a>(pvc: &PersistentVolumeClaim, pods: &'a [Pod]) -> Vec<&'a Pod> {
    let name = pvc.metadata.name.as_deref().unwrap_or("");
    pods.iter()
        .filter(|p| p.metadata.namespace == pvc.metadata.namespace)
        .filter(|p| pods::claim_names(p).any(|c| c == name))
        .filter(|p| !pods::is_terminal(p))
        .collect()
}

/// The default StorageClass: annotated `is-default-class: "true"`; the newest if several
/// (as the DefaultStorageClass admission plugin picks).
pub fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_DEFAULT_CLASS))
                .is_some_and(|v| v == "true")
        })
        .max_by(|a, b| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
        })
}

fn is_fully_bound(pvc: &PersistentVolumeClaim, volume: &str) -> bool {
    let ann = pvc.metadata.annotations.as_ref();
    pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(volume)
        && ann.and_then(|a| a.get(ANN_BIND_COMPLETED)).is_some()
        && pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
        && pvc
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .is_some()
}

pub fn decide(
    pvc: &PersistentVolumeClaim,
    classes: &[StorageClass],
    volume: Option<&PersistentVolume>,
    pods: &[Pod],
) -> ClaimAction {
    if pvc.metadata.deletion_timestamp.is_some() {
        return if has_finalizer(&pvc.metadata, PVC_PROTECTION) && users(pvc, pods).is_empty() {
            ClaimAction::RemoveProtection
        } else {
            ClaimAction::Nothing
        };
    }
    let spec = pvc.spec.clone().unwrap_or_default();
    let claims_us = |pv: &PersistentVolume| {
        let r = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        r.and_then(|r| r.uid.as_deref()) == pvc.metadata.uid.as_deref()
    };
    if let Some(pv) = volume.filter(|pv| claims_us(pv)) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        return if is_fully_bound(pvc, &name) {
            ClaimAction::Nothing
        } else {
            ClaimAction::CompleteBinding { volume: name }
        };
    }
    if spec.volume_name.as_deref().is_some_and(|v| !v.is_empty()) {
        // Bound (or pre-bound) to a volume that is not there.
        let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        return if bound {
            ClaimAction::Lost
        } else {
            ClaimAction::Nothing
        };
    }
    let class_name = match spec.storage_class_name.as_deref() {
        None => {
            return match default_class(classes).and_then(|c| c.metadata.name.clone()) {
                Some(name) => ClaimAction::SetDefaultClass(name),
                None => ClaimAction::Nothing,
            };
        }
        // "" asks for a class-less, pre-provisioned volume: not ours to make.
        Some("") => return ClaimAction::Nothing,
        Some(name) => name,
    };
    let Some(class) = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(class_name))
    else {
        return ClaimAction::ClassMissing {
            message: format!("storageclass.storage.k8s.io \"{class_name}\" not found"),
        };
    };
    if class.provisioner != PROVISIONER {
        return ClaimAction::Nothing;
    }
    let mut selected_node = None;
    if class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
        selected_node = users(pvc, pods).iter().find_map(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
        });
        if selected_node.is_none() {
            return ClaimAction::WaitForConsumer;
        }
    }
    ClaimAction::Provision {
        class: class_name.to_string(),
        selected_node,
    }
}

/// The PersistentVolume provisioned for a claim: a host directory `<volumes_dir>/pvc-<uid>`
/// on `node`, the claim's requested size and access modes, pre-bound to the claim (`claimRef`
/// with uid and resourceVersion), the class's reclaim policy (default Delete).
pub fn provisioned_volume(
    pvc: &PersistentVolumeClaim,
    class: &StorageClass,
    volumes_dir: &Path,
    node: &str,
) -> PersistentVolume {
    let name = volume_name(pvc);
    let spec = pvc.spec.clone().unwrap_or_default();
    let request = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .cloned()
        .unwrap_or_else(|| Quantity("0".into()));
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            annotations: Some(BTreeMap::from([(
                ANN_PROVISIONED_BY.to_string(),
                class.provisioner.clone(),
            )])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), request)])),
            access_modes: spec.access_modes.clone(),
            host_path: Some(HostPathVolumeSource {
                path: volumes_dir.join(&name).to_string_lossy().into_owned(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: pvc.metadata.namespace.clone(),
                name: pvc.metadata.name.clone(),
                uid: pvc.metadata.uid.clone(),
                resource_version: pvc.metadata.resource_version.clone(),
                ..Default::default()
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            mount_options: class.mount_options.clone(),
            volume_mode: Some(spec.volume_mode.unwrap_or_else(|| "Filesystem".into())),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "kubernetes.io/hostname".into(),
                            operator: "In".into(),
                            values: Some(vec![node.to_string()]),
                        }]),
                        ..Default::default()
                    }],
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::fixtures::pod;
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource,
        PodSpec, Volume, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn class(name: &str, mode: &str, default: bool, provisioner: &str) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: default
                    .then(|| BTreeMap::from([(ANN_DEFAULT_CLASS.to_string(), "true".to_string())])),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            volume_binding_mode: Some(mode.into()),
            ..Default::default()
        }
    }

    fn claim(class: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: class.map(str::to_string),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity("1Gi".into()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn consumer(node: Option<&str>, phase: &str) -> Pod {
        let mut p = pod("user", &[], None, false);
        p.spec = Some(PodSpec {
            node_name: node.map(str::to_string),
            volumes: Some(vec![Volume {
                name: "v".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: "data".into(),
                    read_only: None,
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        if let Some(s) = p.status.as_mut() {
            s.phase = Some(phase.into());
        }
        p
    }

    fn deleting(mut c: PersistentVolumeClaim) -> PersistentVolumeClaim {
        c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        c.metadata.finalizers = Some(vec![PVC_PROTECTION.into()]);
        c
    }

    fn bound(mut c: PersistentVolumeClaim, complete: bool) -> PersistentVolumeClaim {
        if let Some(s) = c.spec.as_mut() {
            s.volume_name = Some("pvc-u1".into());
        }
        if complete {
            c.metadata.annotations = Some(BTreeMap::from([(
                ANN_BIND_COMPLETED.to_string(),
                "yes".to_string(),
            )]));
            c.status = Some(PersistentVolumeClaimStatus {
                phase: Some("Bound".into()),
                capacity: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity("1Gi".into()),
                )])),
                ..Default::default()
            });
        }
        c
    }

    #[test]
    fn decisions() {
        let std_class = class("standard", "Immediate", true, PROVISIONER);
        let wffc = class("local", "WaitForFirstConsumer", false, PROVISIONER);
        let external = class("ebs", "Immediate", false, "ebs.csi.aws.com");
        let classes = vec![std_class.clone(), wffc.clone(), external.clone()];
        let pv = provisioned_volume(&claim(Some("standard")), &std_class, Path::new("/v"), "n");
        let provision = |class: &str, node: Option<&str>| ClaimAction::Provision {
            class: class.into(),
            selected_node: node.map(str::to_string),
        };
        type Case<'a> = (
            &'a str,
            PersistentVolumeClaim,
            Vec<StorageClass>,
            Option<&'a PersistentVolume>,
            Vec<Pod>,
            ClaimAction,
        );
        let cases: Vec<Case> = vec![
            (
                "no class takes the default",
                claim(None),
                classes.clone(),
                None,
                vec![],
                ClaimAction::SetDefaultClass("standard".into()),
            ),
            (
                "no class and no default waits",
                claim(None),
                vec![wffc.clone()],
                None,
                vec![],
                ClaimAction::Nothing,
            ),
            (
                "empty class is static binding",
                claim(Some("")),
                classes.clone(),
                None,
                vec![],
                ClaimAction::Nothing,
            ),
            (
                "missing class",
                claim(Some("x")),
                classes.clone(),
                None,
                vec![],
                ClaimAction::ClassMissing {
                    message: "storageclass.storage.k8s.io \"x\" not found".into(),
                },
            ),
            (
                "immediate provisions",
                claim(Some("standard")),
                classes.clone(),
                None,
                vec![],
                provision("standard", None),
            ),
            (
                "external provisioner is left alone",
                claim(Some("ebs")),
                classes.clone(),
                None,
                vec![],
                ClaimAction::Nothing,
            ),
            (
                "wffc without consumer waits",
                claim(Some("local")),
                classes.clone(),
                None,
                vec![],
                ClaimAction::WaitForConsumer,
            ),
            (
                "wffc with unscheduled consumer waits",
                claim(Some("local")),
                classes.clone(),
                None,
                vec![consumer(None, "Pending")],
                ClaimAction::WaitForConsumer,
            ),
            (
                "wffc with scheduled consumer provisions",
                claim(Some("local")),
                classes.clone(),
                None,
                vec![consumer(Some("localkube"), "Pending")],
                provision("local", Some("localkube")),
            ),
            (
                "provisioned volume: finish the claim side",
                claim(Some("standard")),
                classes.clone(),
                Some(&pv),
                vec![],
                ClaimAction::CompleteBinding {
                    volume: "pvc-u1".into(),
                },
            ),
            (
                "fully bound",
                bound(claim(Some("standard")), true),
                classes.clone(),
                Some(&pv),
                vec![],
                ClaimAction::Nothing,
            ),
            (
                "bound volume vanished",
                bound(claim(Some("standard")), true),
                classes.clone(),
                None,
                vec![],
                ClaimAction::Lost,
            ),
            (
                "deleting, unused",
                deleting(claim(Some("standard"))),
                classes.clone(),
                None,
                vec![],
                ClaimAction::RemoveProtection,
            ),
            (
                "deleting, in use",
                deleting(claim(Some("standard"))),
                classes.clone(),
                None,
                vec![consumer(Some("localkube"), "Running")],
                ClaimAction::Nothing,
            ),
            (
                "deleting, user finished",
                deleting(claim(Some("standard"))),
                classes.clone(),
                None,
                vec![consumer(Some("localkube"), "Succeeded")],
                ClaimAction::RemoveProtection,
            ),
        ];
        for (what, pvc, classes, volume, pods, want) in cases {
            assert_eq!(decide(&pvc, &classes, volume, &pods), want, "{what}");
        }
    }

    #[test]
    fn the_provisioned_volume() {
        let mut c = class("standard", "Immediate", true, PROVISIONER);
        c.reclaim_policy = Some("Retain".into());
        let pv = provisioned_volume(
            &claim(Some("standard")),
            &c,
            Path::new("/var/lk/volumes"),
            "localkube",
        );
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u1"));
        let spec = pv.spec.unwrap_or_default();
        assert_eq!(
            spec.host_path.map(|h| h.path),
            Some("/var/lk/volumes/pvc-u1".to_string())
        );
        assert_eq!(
            spec.capacity.and_then(|c| c.get("storage").cloned()),
            Some(Quantity("1Gi".into()))
        );
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Retain")
        );
        assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
        let r = spec.claim_ref.unwrap_or_default();
        assert_eq!(
            (
                r.name.as_deref(),
                r.namespace.as_deref(),
                r.uid.as_deref(),
                r.resource_version.as_deref()
            ),
            (Some("data"), Some("ns"), Some("u1"), Some("7"))
        );
        c.reclaim_policy = None;
        let pv = provisioned_volume(&claim(Some("standard")), &c, Path::new("/v"), "n");
        assert_eq!(
            pv.spec
                .and_then(|s| s.persistent_volume_reclaim_policy)
                .as_deref(),
            Some("Delete")
        );
    }
}
