//! What the PersistentVolume controller does next for one PersistentVolume: keep its phase, reclaim
//! it when its claim is gone, and lift `pv-protection` once a deleted volume is no longer bound
//! (persistentvolume and pvprotection controllers).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::PersistentVolume;

use super::claim::ANN_PROVISIONED_BY;

pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// What a live read of the volume's `claimRef` found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClaimState {
    /// No `claimRef`.
    Unclaimed,
    /// The claim exists with the referenced uid.
    Present,
    /// The claim is gone (404), or a new claim of the same name has another uid.
    Gone,
}

#[derive(Debug, PartialEq)]
pub enum VolumeAction {
    Nothing,
    SetPhase(&'static str),
    /// Released with reclaim policy Delete and made by us: delete the directory, then the volume.
    Reclaim {
        directory: Option<PathBuf>,
    },
    /// The volume is being deleted and is not Bound: drop `pv-protection`.
    RemoveProtection,
}

fn phase(pv: &PersistentVolume) -> Option<&str> {
    pv.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// The directory behind a volume this provisioner made, only if it is exactly
/// `<volumes_dir>/<volume name>`: nothing else is ever removed from the host.
fn own_directory(pv: &PersistentVolume, volumes_dir: &Path, provisioner: &str) -> Option<PathBuf> {
    let ours = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_PROVISIONED_BY))
        .is_some_and(|p| p == provisioner);
    let name = pv
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty() && !n.contains('/'))?;
    let expected = volumes_dir.join(name);
    let path = pv.spec.as_ref()?.host_path.as_ref()?.path.as_str();
    (ours && Path::new(path) == expected).then_some(expected)
}

pub fn decide(
    pv: &PersistentVolume,
    claim: ClaimState,
    volumes_dir: &Path,
    provisioner: &str,
) -> VolumeAction {
    if pv.metadata.deletion_timestamp.is_some() {
        let protected = pv
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == PV_PROTECTION);
        return if protected && phase(pv) != Some("Bound") {
            VolumeAction::RemoveProtection
        } else {
            VolumeAction::Nothing
        };
    }
    let policy = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain");
    match claim {
        ClaimState::Unclaimed if phase(pv) != Some("Available") => {
            VolumeAction::SetPhase("Available")
        }
        ClaimState::Unclaimed => VolumeAction::Nothing,
        ClaimState::Present if phase(pv) != Some("Bound") => VolumeAction::SetPhase("Bound"),
        ClaimState::Present => VolumeAction::Nothing,
        ClaimState::Gone if policy == "Delete" => match own_directory(pv, volumes_dir, provisioner)
        {
            Some(dir) => VolumeAction::Reclaim {
                directory: Some(dir),
            },
            // Not a directory of ours: the volume object goes, the storage is someone else's.
            None if pv
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_PROVISIONED_BY))
                .is_some_and(|p| p == provisioner) =>
            {
                VolumeAction::Reclaim { directory: None }
            }
            None if phase(pv) != Some("Failed") => VolumeAction::SetPhase("Failed"),
            None => VolumeAction::Nothing,
        },
        ClaimState::Gone if phase(pv) != Some("Released") => VolumeAction::SetPhase("Released"),
        ClaimState::Gone => VolumeAction::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volumes::claim::PROVISIONER;
    use k8s_openapi::api::core::v1::{
        HostPathVolumeSource, PersistentVolumeSpec, PersistentVolumeStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::BTreeMap;

    fn pv(policy: &str, phase: &str, path: &str, ours: bool) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pvc-u1".into()),
                annotations: ours.then(|| {
                    BTreeMap::from([(ANN_PROVISIONED_BY.to_string(), PROVISIONER.to_string())])
                }),
                finalizers: Some(vec![PV_PROTECTION.into()]),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some(policy.into()),
                host_path: Some(HostPathVolumeSource {
                    path: path.into(),
                    type_: None,
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    fn deleting(mut pv: PersistentVolume) -> PersistentVolume {
        pv.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        pv
    }

    #[test]
    fn decisions() {
        let dir = Path::new("/v");
        let cases = vec![
            (
                "new bound volume",
                pv("Delete", "Pending", "/v/pvc-u1", true),
                ClaimState::Present,
                VolumeAction::SetPhase("Bound"),
            ),
            (
                "bound",
                pv("Delete", "Bound", "/v/pvc-u1", true),
                ClaimState::Present,
                VolumeAction::Nothing,
            ),
            (
                "unclaimed",
                pv("Retain", "Pending", "/v/pvc-u1", true),
                ClaimState::Unclaimed,
                VolumeAction::SetPhase("Available"),
            ),
            (
                "released, Delete",
                pv("Delete", "Bound", "/v/pvc-u1", true),
                ClaimState::Gone,
                VolumeAction::Reclaim {
                    directory: Some(PathBuf::from("/v/pvc-u1")),
                },
            ),
            (
                "released, Delete, foreign path: no directory removed",
                pv("Delete", "Bound", "/etc", true),
                ClaimState::Gone,
                VolumeAction::Reclaim { directory: None },
            ),
            (
                "released, Delete, not provisioned by us",
                pv("Delete", "Bound", "/v/pvc-u1", false),
                ClaimState::Gone,
                VolumeAction::SetPhase("Failed"),
            ),
            (
                "released, Retain",
                pv("Retain", "Bound", "/v/pvc-u1", true),
                ClaimState::Gone,
                VolumeAction::SetPhase("Released"),
            ),
            (
                "released, Retain, done",
                pv("Retain", "Released", "/v/pvc-u1", true),
                ClaimState::Gone,
                VolumeAction::Nothing,
            ),
            (
                "deleting while bound stays",
                deleting(pv("Retain", "Bound", "/v/pvc-u1", true)),
                ClaimState::Present,
                VolumeAction::Nothing,
            ),
            (
                "deleting released",
                deleting(pv("Retain", "Released", "/v/pvc-u1", true)),
                ClaimState::Gone,
                VolumeAction::RemoveProtection,
            ),
        ];
        for (what, v, claim, want) in cases {
            assert_eq!(decide(&v, claim, dir, PROVISIONER), want, "{what}");
        }
    }
}
