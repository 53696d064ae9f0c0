//! Volumes on the node: a directory per volume under the pod's directory (emptyDir, and the
//! files of secret / configMap / downwardAPI / projected volumes), or the PersistentVolume's
//! directory for a claim. The containers get them as bind mounts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount, Volume,
};
use kube::api::PostParams;
use kube::{Api, Client};
use std::os::unix::fs::PermissionsExt;

use localkube_podspec::security::FsGroup;
use localkube_podspec::volumes::{VolumeKind, volume_kind};

/// Why a pod's volumes are not ready yet: the kubelet's `FailedMount` event, retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountError(pub String);

/// Where a pod's volumes go on the host.
#[derive(Clone, Copy)]
pub struct Dirs<'a> {
    /// The pod's own directory (emptyDir and file volumes).
    pub pod: &'a Path,
    /// Where PersistentVolumes' directories are.
    pub volumes: &'a crate::VolumeDirs,
}

/// Prepare every volume of `pod`; returns volume name → host directory.
pub async fn prepare(
    client: &Client,
    pod: &Pod,
    dirs: Dirs<'_>,
    lookups: &crate::lookups::Snapshot,
    ctx: &localkube_podspec::PodContext,
) -> Result<BTreeMap<String, PathBuf>, MountError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let mut out = BTreeMap::new();
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    let fs_group = localkube_podspec::security::fs_group(pod);
    for volume in &volumes {
        let dir = dirs.pod.join("volumes").join(&volume.name);
        let kind = volume_kind(volume);
        let source = match &kind {
            VolumeKind::EmptyDir { .. } => {
                create_dir(&dir)?;
                // kubelet makes an emptyDir world-writable, so any container user can use it.
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
                    .map_err(|e| MountError(format!("chmod {}: {e}", dir.display())))?;
                dir
            }
            VolumeKind::Pvc { claim_name, .. } => {
                claim_dir(client, dirs.volumes, &ns, &volume.name, claim_name).await?
            }
            VolumeKind::Files => {
                let token = match needs_token(volume) {
                    Some(expiration) => Some(request_token(client, pod, expiration).await?),
                    None => None,
                };
                let files = localkube_podspec::volumes::volume_files(
                    pod,
                    volume,
                    lookups,
                    ctx,
                    token.as_deref(),
                )
                .map_err(|e| MountError(e.to_string()))?;
                write_files(&dir, &files)?;
                dir
            }
            // hostPath needs nothing prepared: the node is the host.
            VolumeKind::Unsupported(_) if volume.host_path.is_some() => PathBuf::from(
                volume
                    .host_path
                    .as_ref()
                    .map(|h| h.path.as_str())
                    .unwrap_or("/"),
            ),
            VolumeKind::Unsupported(field) => {
                return Err(MountError(format!(
                    "MountVolume.SetUp failed for volume \"{}\" : the localkube node agent does not support {field} volumes",
                    volume.name
                )));
            }
        };
        // The claim stands for a block volume (what a cluster's default StorageClass gives), so
        // fsGroup applies to it as to the pod's own volumes; hostPath never gets it.
        let owned = match kind {
            VolumeKind::EmptyDir { .. } | VolumeKind::Pvc { .. } => Some(false),
            VolumeKind::Files => Some(true),
            VolumeKind::Unsupported(_) => None,
        };
        if let (Some(fs_group), Some(read_only)) = (fs_group, owned) {
            set_volume_ownership(&source, fs_group, read_only)?;
        }
        out.insert(volume.name.clone(), source);
    }
    Ok(out)
}

/// kubelet's `SetVolumeOwnership`: every file and directory of the volume gets the fsGroup as
/// its group, group read (and write unless the volume is read-only, as secrets are), and
/// directories get group search and the setgid bit, so new files inherit the group.
/// `OnRootMismatch` skips the walk when the root already looks done.
pub fn set_volume_ownership(
    root: &Path,
    fs_group: FsGroup,
    read_only: bool,
) -> Result<(), MountError> {
    use std::os::unix::fs::MetadataExt;
    const SETGID: u32 = 0o2000;
    let mask = if read_only { 0o440 } else { 0o660 };
    let dir_mask = mask | 0o110 | SETGID;
    let io = |what: &str, path: &Path, e: std::io::Error| {
        MountError(format!(
            "applying fsGroup {} to {}: {what}: {e}",
            fs_group.gid,
            path.display()
        ))
    };
    if fs_group.only_on_root_mismatch {
        let meta = std::fs::metadata(root).map_err(|e| io("stat", root, e))?;
        if meta.gid() == fs_group.gid && meta.mode() & dir_mask == dir_mask {
            return Ok(());
        }
    }
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).map_err(|e| io("stat", &path, e))?;
        std::os::unix::fs::lchown(&path, None, Some(fs_group.gid))
            .map_err(|e| io("chown", &path, e))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let wanted = if meta.is_dir() { dir_mask } else { mask };
        std::fs::set_permissions(
            &path,
            std::fs::Permissions::from_mode((meta.mode() & 0o7777) | wanted),
        )
        .map_err(|e| io("chmod", &path, e))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).map_err(|e| io("read", &path, e))? {
                pending.push(entry.map_err(|e| io("read", &path, e))?.path());
            }
        }
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), MountError> {
    std::fs::create_dir_all(dir).map_err(|e| MountError(format!("creating {}: {e}", dir.display())))
}

/// The directory of the PersistentVolume bound to the claim (the provisioner's hostPath).
async fn claim_dir(
    client: &Client,
    volume_dirs: &crate::VolumeDirs,
    ns: &str,
    volume: &str,
    claim: &str,
) -> Result<PathBuf, MountError> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pvc = pvcs
        .get_opt(claim)
        .await
        .map_err(|e| MountError(e.to_string()))?
        .ok_or_else(|| MountError(format!("persistentvolumeclaim \"{claim}\" not found")))?;
    let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let pv_name = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
    let (true, Some(pv_name)) = (bound, pv_name) else {
        return Err(MountError(format!(
            "Unable to attach or mount volumes: unmounted volumes=[{volume}]: persistentvolumeclaim \"{claim}\" is not bound"
        )));
    };
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv = pvs
        .get(&pv_name)
        .await
        .map_err(|e| MountError(format!("persistentvolume \"{pv_name}\": {e}")))?;
    let spec = pv.spec.unwrap_or_default();
    let path = spec
        .host_path
        .map(|h| h.path)
        .or(spec.local.map(|l| l.path))
        .ok_or_else(|| {
            MountError(format!(
                "persistentvolume \"{pv_name}\" has no hostPath or local path the node can mount"
            ))
        })?;
    let dir = volume_dirs.host_path(Path::new(&path));
    create_dir(&dir)?;
    Ok(dir)
}

/// The expiration of a projected ServiceAccount token source, if the volume has one.
fn needs_token(volume: &Volume) -> Option<i64> {
    volume
        .projected
        .as_ref()?
        .sources
        .as_ref()?
        .iter()
        .find_map(|s| {
            s.service_account_token
                .as_ref()
                .map(|t| t.expiration_seconds.unwrap_or(3600))
        })
}

/// A bound token for the pod's ServiceAccount (TokenRequest, as the kubelet asks for it).
async fn request_token(client: &Client, pod: &Pod, expiration: i64) -> Result<String, MountError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    // Bound to the pod, as the kubelet asks: the token dies with the pod, and NodeRestriction
    // lets a node request only tokens bound to pods it runs.
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(expiration),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let response = api
        .create_token_request(&sa, &PostParams::default(), &request)
        .await
        .map_err(|e| MountError(format!("failed to fetch token: {e}")))?;
    response
        .status
        .map(|s| s.token)
        .ok_or_else(|| MountError("failed to fetch token: empty TokenRequest status".into()))
}

/// Write the volume's files, replacing the previous content (a file that left the volume goes).
fn write_files(
    dir: &Path,
    files: &[localkube_podspec::volumes::VolumeFile],
) -> Result<(), MountError> {
    let io = |what: &str, path: &Path, e: std::io::Error| {
        MountError(format!("{what} {}: {e}", path.display()))
    };
    let staging = dir.with_extension("new");
    let _ = std::fs::remove_dir_all(&staging);
    create_dir(&staging)?;
    for file in files {
        let path = staging.join(&file.path);
        if let Some(parent) = path.parent() {
            create_dir(parent)?;
        }
        std::fs::write(&path, &file.data).map_err(|e| io("writing", &path, e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))
            .map_err(|e| io("chmod", &path, e))?;
    }
    // Containers bind-mount `dir` itself, so refresh its content in place.
    create_dir(dir)?;
    for entry in std::fs::read_dir(dir)
        .map_err(|e| io("reading", dir, e))?
        .flatten()
    {
        let p = entry.path();
        let _ = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
    }
    for entry in std::fs::read_dir(&staging)
        .map_err(|e| io("reading", &staging, e))?
        .flatten()
    {
        let to = dir.join(entry.file_name());
        std::fs::rename(entry.path(), &to).map_err(|e| io("moving", &to, e))?;
    }
    let _ = std::fs::remove_dir_all(&staging);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode_and_gid(path: &Path) -> (u32, u32) {
        let meta = std::fs::symlink_metadata(path).unwrap();
        (meta.mode() & 0o7777, meta.gid())
    }

    #[test]
    fn fs_group_owns_the_volume_like_kubelet() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("vol");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/file"), "x").unwrap();
        std::fs::set_permissions(
            root.join("sub/file"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        std::os::unix::fs::symlink("sub/file", root.join("link")).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let fs_group = FsGroup {
            gid: 2000,
            only_on_root_mismatch: false,
        };
        set_volume_ownership(&root, fs_group, false).unwrap();
        assert_eq!(mode_and_gid(&root), (0o2775, 2000));
        assert_eq!(mode_and_gid(&root.join("sub")), (0o2775, 2000));
        assert_eq!(mode_and_gid(&root.join("sub/file")), (0o660, 2000));
        assert_eq!(
            std::fs::symlink_metadata(root.join("link")).unwrap().gid(),
            2000
        );

        // Read-only volumes (secrets) get group read only.
        std::fs::set_permissions(
            root.join("sub/file"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        set_volume_ownership(
            &root,
            FsGroup {
                gid: 3000,
                ..fs_group
            },
            true,
        )
        .unwrap();
        assert_eq!(mode_and_gid(&root.join("sub/file")), (0o640, 3000));

        // OnRootMismatch: a root that already has the group and mode is not walked.
        std::fs::set_permissions(
            root.join("sub/file"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let lazy = FsGroup {
            gid: 3000,
            only_on_root_mismatch: true,
        };
        set_volume_ownership(&root, lazy, true).unwrap();
        assert_eq!(mode_and_gid(&root.join("sub/file")), (0o600, 3000));
        set_volume_ownership(&root, FsGroup { gid: 4000, ..lazy }, true).unwrap();
        assert_eq!(mode_and_gid(&root.join("sub/file")), (0o640, 4000));
    }
}
