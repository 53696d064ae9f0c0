//! Volumes on the node: a directory per volume under the pod's directory (emptyDir, and the
//! files of secret / configMap / downwardAPI / projected volumes), or the PersistentVolume's
//! directory for a claim. The containers get them as bind mounts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount, Volume,
};
use kube::api::PostParams;
use kube::{Api, Client};
use localkube_podspec::volumes::{VolumeKind, volume_kind};

/// Why a pod's volumes are not ready yet: the kubelet's `FailedMount` event, retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountError(pub String);

/// Prepare every volume of `pod`; returns volume name → host directory.
pub async fn prepare(
    client: &Client,
    pod: &Pod,
    pod_dir: &Path,
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
    for volume in &volumes {
        let dir = pod_dir.join("volumes").join(&volume.name);
        let source = match volume_kind(volume) {
            VolumeKind::EmptyDir { .. } => {
                create_dir(&dir)?;
                dir
            }
            VolumeKind::Pvc { claim_name, .. } => {
                claim_dir(client, &ns, &volume.name, &claim_name).await?
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
        out.insert(volume.name.clone(), source);
    }
    Ok(out)
}

fn create_dir(dir: &Path) -> Result<(), MountError> {
    std::fs::create_dir_all(dir).map_err(|e| MountError(format!("creating {}: {e}", dir.display())))
}

/// The directory of the PersistentVolume bound to the claim (the provisioner's hostPath).
async fn claim_dir(
    client: &Client,
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
    create_dir(Path::new(&path))?;
    Ok(PathBuf::from(path))
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
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(expiration),
            ..Default::default()
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
    use std::os::unix::fs::PermissionsExt;
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
