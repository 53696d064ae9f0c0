//! Pod volumes: which kind of directory the caller must prepare, the files of the volumes
//! kubelet writes itself (secret, configMap, downwardAPI, projected), and each container's
//! mounts. Errors carry kubelet's `FailedMount` wording.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, KeyToPath, Pod, Volume};
use thiserror::Error;

use crate::command::expand;
use crate::fieldref::{FieldRefError, metadata_field, resource_field};
use crate::{Lookups, PodContext};

/// What the caller must prepare for a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeKind {
    /// A per-pod directory; `medium: Memory` asks for a tmpfs.
    EmptyDir { memory: bool },
    /// The claim's persistent directory, which outlives the pod.
    Pvc { claim_name: String, read_only: bool },
    /// Files computed by [`volume_files`] (secret, configMap, downwardAPI, projected).
    Files,
    /// A volume source localkube does not implement, by its field name (`hostPath`, `nfs`...).
    Unsupported(String),
}

pub fn volume_kind(volume: &Volume) -> VolumeKind {
    if let Some(e) = &volume.empty_dir {
        return VolumeKind::EmptyDir {
            memory: e.medium.as_deref() == Some("Memory"),
        };
    }
    if let Some(p) = &volume.persistent_volume_claim {
        return VolumeKind::Pvc {
            claim_name: p.claim_name.clone(),
            read_only: p.read_only == Some(true),
        };
    }
    if volume.secret.is_some()
        || volume.config_map.is_some()
        || volume.downward_api.is_some()
        || volume.projected.is_some()
    {
        return VolumeKind::Files;
    }
    // the source's field name is what users recognise in their manifest
    VolumeKind::Unsupported(source_field_name(volume))
}

/// The one set field of a volume other than `name`, e.g. `hostPath`.
fn source_field_name(volume: &Volume) -> String {
    let sources: [(&str, bool); 11] = [
        ("hostPath", volume.host_path.is_some()),
        ("nfs", volume.nfs.is_some()),
        ("csi", volume.csi.is_some()),
        ("ephemeral", volume.ephemeral.is_some()),
        ("image", volume.image.is_some()),
        ("iscsi", volume.iscsi.is_some()),
        ("gitRepo", volume.git_repo.is_some()),
        (
            "awsElasticBlockStore",
            volume.aws_elastic_block_store.is_some(),
        ),
        ("gcePersistentDisk", volume.gce_persistent_disk.is_some()),
        ("azureDisk", volume.azure_disk.is_some()),
        ("fc", volume.fc.is_some()),
    ];
    sources
        .iter()
        .find(|(_, set)| *set)
        .map_or("unknown", |(name, _)| name)
        .to_owned()
}

/// One file of a volume, relative to the volume root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeFile {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

/// `MountVolume.SetUp failed for volume "x" : <cause>`, the message of kubelet's `FailedMount`
/// Warning event; the pod stays in `ContainerCreating` until it succeeds.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("MountVolume.SetUp failed for volume {} : {cause}", localkube_gofmt::quote(.volume))]
pub struct VolumeError {
    pub volume: String,
    pub cause: VolumeCause,
}

impl VolumeError {
    pub fn reason(&self) -> &'static str {
        "FailedMount"
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum VolumeCause {
    #[error("secret {} not found", localkube_gofmt::quote(.0))]
    SecretNotFound(String),
    #[error("configmap {} not found", localkube_gofmt::quote(.0))]
    ConfigMapNotFound(String),
    #[error("references non-existent secret key: {0}")]
    SecretKeyMissing(String),
    #[error("configmap references non-existent config key: {0}")]
    ConfigMapKeyMissing(String),
    #[error(transparent)]
    Field(#[from] FieldRefError),
    #[error("invalid mode {0}: must be a number between 0 and 0777 (octal), both inclusive")]
    InvalidMode(i64),
    #[error("invalid path: {0}")]
    InvalidPath(String),
    #[error("failed to fetch token: no service account token was issued for this pod")]
    NoToken,
    #[error("volume source {0} is not a file volume")]
    NotFiles(String),
    /// Several sources of a projected volume failed: Go's aggregate `[a, b]`.
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<VolumeCause>),
}

const DEFAULT_MODE: i32 = 0o644;

/// The files of a secret, configMap, downwardAPI or projected volume. `token` is the
/// ServiceAccount token for `serviceAccountToken` projections (the caller requests it with the
/// projection's audience and expiry); every such projection in the volume receives it.
pub fn volume_files(
    pod: &Pod,
    volume: &Volume,
    lookups: &dyn Lookups,
    ctx: &PodContext,
    token: Option<&str>,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let fail = |cause| VolumeError {
        volume: volume.name.clone(),
        cause,
    };
    let mut files = BTreeMap::new();
    if let Some(s) = &volume.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let mode = checked_mode(s.default_mode).map_err(fail)?;
        secret_files(
            &mut files,
            lookups,
            &name,
            s.items.as_deref(),
            mode,
            s.optional == Some(true),
        )
        .map_err(fail)?;
    } else if let Some(c) = &volume.config_map {
        let mode = checked_mode(c.default_mode).map_err(fail)?;
        config_map_files(
            &mut files,
            lookups,
            &c.name,
            c.items.as_deref(),
            mode,
            c.optional == Some(true),
        )
        .map_err(fail)?;
    } else if let Some(d) = &volume.downward_api {
        let mode = checked_mode(d.default_mode).map_err(fail)?;
        downward_files(
            &mut files,
            pod,
            d.items.as_deref().unwrap_or(&[]),
            mode,
            ctx,
        )
        .map_err(fail)?;
    } else if let Some(p) = &volume.projected {
        let mode = checked_mode(p.default_mode).map_err(fail)?;
        let mut errors = Vec::new();
        for source in p.sources.iter().flatten() {
            let result = if let Some(s) = &source.secret {
                secret_files(
                    &mut files,
                    lookups,
                    &s.name,
                    s.items.as_deref(),
                    mode,
                    s.optional == Some(true),
                )
            } else if let Some(c) = &source.config_map {
                config_map_files(
                    &mut files,
                    lookups,
                    &c.name,
                    c.items.as_deref(),
                    mode,
                    c.optional == Some(true),
                )
            } else if let Some(d) = &source.downward_api {
                downward_files(
                    &mut files,
                    pod,
                    d.items.as_deref().unwrap_or(&[]),
                    mode,
                    ctx,
                )
            } else if let Some(t) = &source.service_account_token {
                match token {
                    Some(token) => insert(&mut files, &t.path, token.as_bytes().to_vec(), mode),
                    None => Err(VolumeCause::NoToken),
                }
            } else {
                Ok(())
            };
            if let Err(e) = result
                && !errors.contains(&e)
            {
                errors.push(e);
            }
        }
        match errors.len() {
            0 => {}
            1 => return Err(fail(errors.remove(0))),
            _ => return Err(fail(VolumeCause::Aggregate(errors))),
        }
    } else {
        let kind = match volume_kind(volume) {
            VolumeKind::EmptyDir { .. } => "emptyDir".to_owned(),
            VolumeKind::Pvc { .. } => "persistentVolumeClaim".to_owned(),
            VolumeKind::Unsupported(kind) => kind,
            VolumeKind::Files => String::new(),
        };
        return Err(fail(VolumeCause::NotFiles(kind)));
    }
    Ok(files.into_values().collect())
}

type Files = BTreeMap<String, VolumeFile>;

fn secret_files(
    files: &mut Files,
    lookups: &dyn Lookups,
    name: &str,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: bool,
) -> Result<(), VolumeCause> {
    let data = match lookups.secret(name) {
        Some(d) => d,
        None if optional => BTreeMap::new(),
        None => return Err(VolumeCause::SecretNotFound(name.to_owned())),
    };
    project(
        files,
        &data,
        items,
        mode,
        optional,
        VolumeCause::SecretKeyMissing,
    )
}

fn config_map_files(
    files: &mut Files,
    lookups: &dyn Lookups,
    name: &str,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: bool,
) -> Result<(), VolumeCause> {
    let cm = match lookups.config_map(name) {
        Some(cm) => cm,
        None if optional => Default::default(),
        None => return Err(VolumeCause::ConfigMapNotFound(name.to_owned())),
    };
    let mut data: BTreeMap<String, Vec<u8>> = cm.binary_data;
    data.extend(cm.data.into_iter().map(|(k, v)| (k, v.into_bytes())));
    project(
        files,
        &data,
        items,
        mode,
        optional,
        VolumeCause::ConfigMapKeyMissing,
    )
}

/// `MakePayload`: every key as a file, or only the listed `items` (key → path, own mode).
fn project(
    files: &mut Files,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: bool,
    missing: fn(String) -> VolumeCause,
) -> Result<(), VolumeCause> {
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (key, value) in data {
                insert(files, key, value.clone(), mode)?;
            }
        }
        Some(items) => {
            for item in items {
                let Some(value) = data.get(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(missing(item.key.clone()));
                };
                let mode = match item.mode {
                    Some(m) => checked_mode(Some(m))?,
                    None => mode,
                };
                insert(files, &item.path, value.clone(), mode)?;
            }
        }
    }
    Ok(())
}

/// `downwardapi.CollectData`: each item's field or resource value; all failures are reported.
fn downward_files(
    files: &mut Files,
    pod: &Pod,
    items: &[k8s_openapi::api::core::v1::DownwardAPIVolumeFile],
    mode: u32,
    ctx: &PodContext,
) -> Result<(), VolumeCause> {
    let mut errors = Vec::new();
    for item in items {
        let item_mode = match item.mode {
            Some(m) => checked_mode(Some(m))?,
            None => mode,
        };
        let value = if let Some(f) = &item.field_ref {
            metadata_field(pod, &f.field_path)
        } else if let Some(r) = &item.resource_field_ref {
            resource_field(r, pod, None, ctx)
        } else {
            Ok(String::new())
        };
        match value {
            Ok(v) => insert(files, &item.path, v.into_bytes(), item_mode)?,
            Err(e) => errors.push(VolumeCause::Field(e)),
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(VolumeCause::Aggregate(errors)),
    }
}

fn insert(files: &mut Files, path: &str, data: Vec<u8>, mode: u32) -> Result<(), VolumeCause> {
    let path = clean_relative_path(path)?;
    files.insert(path.clone(), VolumeFile { path, data, mode });
    Ok(())
}

/// File modes are 0..=0777; the API rejects others, this refuses them rather than writing them.
fn checked_mode(mode: Option<i32>) -> Result<u32, VolumeCause> {
    let mode = mode.unwrap_or(DEFAULT_MODE);
    u32::try_from(mode)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or(VolumeCause::InvalidMode(i64::from(mode)))
}

/// `filepath.Clean` followed by the atomic writer's `validatePath`: relative, no `..`, Linux
/// length limits.
fn clean_relative_path(path: &str) -> Result<String, VolumeCause> {
    if path.is_empty() {
        return Err(VolumeCause::InvalidPath(
            "must not be empty: \"\"".to_owned(),
        ));
    }
    if path.starts_with('/') {
        return Err(VolumeCause::InvalidPath(format!(
            "must be relative path: {path}"
        )));
    }
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let cleaned = parts.join("/");
    if cleaned.is_empty() {
        return Err(VolumeCause::InvalidPath(format!(
            "must not be empty: {path:?}"
        )));
    }
    if cleaned.len() > 4096 {
        return Err(VolumeCause::InvalidPath(
            "must be less than or equal to 4096 characters".to_owned(),
        ));
    }
    for part in &parts {
        if *part == ".." {
            return Err(VolumeCause::InvalidPath(format!(
                "must not contain '..': {cleaned}"
            )));
        }
        if part.len() > 255 {
            return Err(VolumeCause::InvalidPath(
                "filenames must be less than or equal to 255 characters".to_owned(),
            ));
        }
    }
    if parts.first().is_some_and(|p| p.starts_with("..")) {
        return Err(VolumeCause::InvalidPath(format!(
            "must not start with '..': {cleaned}"
        )));
    }
    Ok(cleaned)
}

/// One bind mount of a volume into a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerMount {
    pub volume: String,
    /// Absolute path inside the container.
    pub mount_path: String,
    /// The mount's `readOnly`, or forced by the volume: secret, configMap, downwardAPI and
    /// projected volumes are always read-only, as is a PVC marked `readOnly`.
    pub read_only: bool,
    /// Relative path inside the volume (`subPath`, or `subPathExpr` expanded).
    pub sub_path: Option<String>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum MountError {
    #[error("cannot find volume {} to mount into container {}", localkube_gofmt::quote(.volume), localkube_gofmt::quote(.container))]
    VolumeMissing { volume: String, container: String },
    #[error("error SubPath `{0}` must not be an absolute path")]
    AbsoluteSubPath(String),
    #[error("unable to provision SubPath `{0}`: must not contain '..'")]
    SubPathBacksteps(String),
    #[error("missing value for {0}")]
    SubPathExprMissing(String),
}

impl MountError {
    /// kubelet fails container creation with these (`CreateContainerConfigError`).
    pub fn reason(&self) -> &'static str {
        "CreateContainerConfigError"
    }
}

/// The container's mounts in `volumeMounts` order. `env` is the container's generated env
/// ([`crate::env::ContainerEnv::vars`]), which `subPathExpr` refers to.
pub fn mounts_for(
    container: &Container,
    volumes: &[Volume],
    env: &[(String, String)],
) -> Result<Vec<ContainerMount>, MountError> {
    let env: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut out = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let volume =
            volumes
                .iter()
                .find(|v| v.name == m.name)
                .ok_or_else(|| MountError::VolumeMissing {
                    volume: m.name.clone(),
                    container: container.name.clone(),
                })?;
        let sub_path = match m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            Some(expr) => {
                let mut missing = std::collections::BTreeSet::new();
                let expanded = expand(expr, |name| {
                    let value = env.get(name).copied().unwrap_or("");
                    if value.is_empty() {
                        missing.insert(name.to_owned());
                    }
                    Some(value.to_owned())
                });
                if !missing.is_empty() {
                    return Err(MountError::SubPathExprMissing(
                        missing.into_iter().collect::<Vec<_>>().join(", "),
                    ));
                }
                expanded
            }
            None => m.sub_path.clone().unwrap_or_default(),
        };
        if sub_path.starts_with('/') {
            return Err(MountError::AbsoluteSubPath(sub_path));
        }
        if sub_path.split('/').any(|p| p == "..") {
            return Err(MountError::SubPathBacksteps(sub_path));
        }
        let forced_ro = match volume_kind(volume) {
            VolumeKind::Files => true,
            VolumeKind::Pvc { read_only, .. } => read_only,
            _ => false,
        };
        let mount_path = if m.mount_path.starts_with('/') {
            m.mount_path.clone()
        } else {
            format!("/{}", m.mount_path)
        };
        out.push(ContainerMount {
            volume: m.name.clone(),
            mount_path,
            read_only: m.read_only == Some(true) || forced_ro,
            sub_path: (!sub_path.is_empty()).then_some(sub_path),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConfigMapData;
    use serde_json::json;

    struct Objects;

    impl Lookups for Objects {
        fn secret(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
            (name == "tls").then(|| {
                [
                    ("tls.crt".to_owned(), b"CERT".to_vec()),
                    ("tls.key".to_owned(), b"KEY".to_vec()),
                ]
                .into_iter()
                .collect()
            })
        }
        fn config_map(&self, name: &str) -> Option<ConfigMapData> {
            (name == "kube-root-ca.crt" || name == "cfg").then(|| ConfigMapData {
                data: [("ca.crt".to_owned(), "CA".to_owned())]
                    .into_iter()
                    .collect(),
                binary_data: [("blob".to_owned(), vec![0, 159, 146, 150])]
                    .into_iter()
                    .collect(),
            })
        }
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "64Mi"}}}]}
        }))
        .unwrap()
    }

    fn volume(v: serde_json::Value) -> Volume {
        serde_json::from_value(v).unwrap()
    }

    fn files(
        v: serde_json::Value,
        token: Option<&str>,
    ) -> Result<Vec<(String, Vec<u8>, u32)>, String> {
        volume_files(&pod(), &volume(v), &Objects, &PodContext::default(), token)
            .map(|fs| fs.into_iter().map(|f| (f.path, f.data, f.mode)).collect())
            .map_err(|e| e.to_string())
    }

    fn f(path: &str, data: &[u8], mode: u32) -> (String, Vec<u8>, u32) {
        (path.to_owned(), data.to_vec(), mode)
    }

    #[test]
    fn secret_and_config_map_files() {
        assert_eq!(
            files(json!({"name": "v", "secret": {"secretName": "tls"}}), None).unwrap(),
            vec![f("tls.crt", b"CERT", 0o644), f("tls.key", b"KEY", 0o644)]
        );
        assert_eq!(
            files(json!({"name": "v", "secret": {"secretName": "tls", "defaultMode": 256,
                "items": [{"key": "tls.key", "path": "keys/./server.key", "mode": 384}, {"key": "tls.crt", "path": "crt"}]}}), None)
            .unwrap(),
            vec![f("crt", b"CERT", 0o400), f("keys/server.key", b"KEY", 0o600)]
        );
        assert_eq!(
            files(json!({"name": "v", "configMap": {"name": "cfg"}}), None).unwrap(),
            vec![
                f("blob", &[0, 159, 146, 150], 0o644),
                f("ca.crt", b"CA", 0o644)
            ]
        );
        // optional and missing: an empty volume
        assert_eq!(
            files(
                json!({"name": "v", "secret": {"secretName": "x", "optional": true}}),
                None
            )
            .unwrap(),
            vec![]
        );
        assert_eq!(
            files(json!({"name": "v", "configMap": {"name": "cfg", "optional": true, "items": [{"key": "nope", "path": "n"}]}}), None)
                .unwrap(),
            vec![]
        );
    }

    #[test]
    fn downward_api_files() {
        assert_eq!(
            files(json!({"name": "podinfo", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 256},
                {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}
            ]}}), None)
            .unwrap(),
            vec![f("labels", b"a=\"1\"\nb=\"2\"", 0o644), f("mem", b"64", 0o644), f("name", b"p", 0o400)]
        );
    }

    #[test]
    fn projected_service_account_volume() {
        let kube_api_access = json!({"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}});
        assert_eq!(
            files(kube_api_access.clone(), Some("eyJtoken")).unwrap(),
            vec![
                f("ca.crt", b"CA", 0o644),
                f("namespace", b"ns", 0o644),
                f("token", b"eyJtoken", 0o644)
            ]
        );
        assert_eq!(
            files(kube_api_access, None).unwrap_err(),
            "MountVolume.SetUp failed for volume \"kube-api-access-x\" : failed to fetch token: no service account token was issued for this pod"
        );
    }

    #[test]
    fn failures_are_failed_mount_messages() {
        let cases = [
            (
                json!({"name": "v", "secret": {"secretName": "s"}}),
                "MountVolume.SetUp failed for volume \"v\" : secret \"s\" not found",
            ),
            (
                json!({"name": "v", "configMap": {"name": "c"}}),
                "MountVolume.SetUp failed for volume \"v\" : configmap \"c\" not found",
            ),
            (
                json!({"name": "v", "secret": {"secretName": "tls", "items": [{"key": "ca", "path": "ca"}]}}),
                "MountVolume.SetUp failed for volume \"v\" : references non-existent secret key: ca",
            ),
            (
                json!({"name": "v", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "k"}]}}),
                "MountVolume.SetUp failed for volume \"v\" : configmap references non-existent config key: k",
            ),
            (
                json!({"name": "v", "secret": {"secretName": "tls", "defaultMode": 4096}}),
                "MountVolume.SetUp failed for volume \"v\" : invalid mode 4096: must be a number between 0 and 0777 (octal), both inclusive",
            ),
            (
                json!({"name": "v", "secret": {"secretName": "tls", "defaultMode": -1}}),
                "MountVolume.SetUp failed for volume \"v\" : invalid mode -1: must be a number between 0 and 0777 (octal), both inclusive",
            ),
            (
                json!({"name": "v", "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "../escape"}]}}),
                "MountVolume.SetUp failed for volume \"v\" : invalid path: must not contain '..': ../escape",
            ),
            (
                json!({"name": "v", "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "/abs"}]}}),
                "MountVolume.SetUp failed for volume \"v\" : invalid path: must be relative path: /abs",
            ),
            (
                json!({"name": "v", "downwardAPI": {"items": [{"path": "x", "fieldRef": {"fieldPath": "spec.nodeName"}}]}}),
                "MountVolume.SetUp failed for volume \"v\" : unsupported fieldPath: spec.nodeName",
            ),
            (
                json!({"name": "v", "projected": {"sources": [{"secret": {"name": "a"}}, {"configMap": {"name": "b"}}]}}),
                "MountVolume.SetUp failed for volume \"v\" : [secret \"a\" not found, configmap \"b\" not found]",
            ),
            (
                json!({"name": "v", "emptyDir": {}}),
                "MountVolume.SetUp failed for volume \"v\" : volume source emptyDir is not a file volume",
            ),
        ];
        for (v, message) in cases {
            let err = volume_files(&pod(), &volume(v), &Objects, &PodContext::default(), None)
                .unwrap_err();
            assert_eq!(err.to_string(), message);
            assert_eq!(err.reason(), "FailedMount");
        }
    }

    #[test]
    fn kinds() {
        let cases = [
            (
                json!({"name": "v", "emptyDir": {}}),
                VolumeKind::EmptyDir { memory: false },
            ),
            (
                json!({"name": "v", "emptyDir": {"medium": "Memory"}}),
                VolumeKind::EmptyDir { memory: true },
            ),
            (
                json!({"name": "v", "persistentVolumeClaim": {"claimName": "data"}}),
                VolumeKind::Pvc {
                    claim_name: "data".into(),
                    read_only: false,
                },
            ),
            (
                json!({"name": "v", "persistentVolumeClaim": {"claimName": "data", "readOnly": true}}),
                VolumeKind::Pvc {
                    claim_name: "data".into(),
                    read_only: true,
                },
            ),
            (
                json!({"name": "v", "secret": {"secretName": "s"}}),
                VolumeKind::Files,
            ),
            (
                json!({"name": "v", "projected": {"sources": []}}),
                VolumeKind::Files,
            ),
            (
                json!({"name": "v", "hostPath": {"path": "/x"}}),
                VolumeKind::Unsupported("hostPath".into()),
            ),
            (
                json!({"name": "v", "nfs": {"server": "s", "path": "/x"}}),
                VolumeKind::Unsupported("nfs".into()),
            ),
        ];
        for (v, kind) in cases {
            assert_eq!(volume_kind(&volume(v.clone())), kind, "{v}");
        }
    }

    #[test]
    fn container_mounts() {
        let volumes: Vec<Volume> = serde_json::from_value(json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
            {"name": "ro-data", "persistentVolumeClaim": {"claimName": "d", "readOnly": true}},
            {"name": "certs", "secret": {"secretName": "tls"}},
            {"name": "scratch", "emptyDir": {}}
        ]))
        .unwrap();
        let container: Container = serde_json::from_value(json!({"name": "c", "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/etcd", "subPathExpr": "$(POD_NAME)/member"},
            {"name": "ro-data", "mountPath": "/ro"},
            {"name": "certs", "mountPath": "/certs"},
            {"name": "scratch", "mountPath": "tmp", "subPath": "x", "readOnly": true}
        ]}))
        .unwrap();
        let env = vec![("POD_NAME".to_owned(), "etcd-0".to_owned())];
        let mounts = mounts_for(&container, &volumes, &env).unwrap();
        let got: Vec<(&str, &str, bool, Option<&str>)> = mounts
            .iter()
            .map(|m| {
                (
                    m.volume.as_str(),
                    m.mount_path.as_str(),
                    m.read_only,
                    m.sub_path.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("data", "/var/lib/etcd", false, Some("etcd-0/member")),
                ("ro-data", "/ro", true, None),
                ("certs", "/certs", true, None),
                ("scratch", "/tmp", true, Some("x")),
            ]
        );

        let bad = |mount: serde_json::Value| {
            let c: Container =
                serde_json::from_value(json!({"name": "c", "volumeMounts": [mount]})).unwrap();
            mounts_for(&c, &volumes, &env).unwrap_err().to_string()
        };
        assert_eq!(
            bad(json!({"name": "nope", "mountPath": "/x"})),
            "cannot find volume \"nope\" to mount into container \"c\""
        );
        assert_eq!(
            bad(json!({"name": "data", "mountPath": "/x", "subPath": "/etc"})),
            "error SubPath `/etc` must not be an absolute path"
        );
        assert_eq!(
            bad(json!({"name": "data", "mountPath": "/x", "subPath": "a/../../b"})),
            "unable to provision SubPath `a/../../b`: must not contain '..'"
        );
        assert_eq!(
            bad(json!({"name": "data", "mountPath": "/x", "subPathExpr": "$(B)/$(A)/$(POD_NAME)"})),
            "missing value for A, B"
        );
    }
}
