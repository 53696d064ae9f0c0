//! Mutating admission that kube-apiserver runs on create, for the plugins workloads rely on:
//! - `ServiceAccount`: a pod runs as a ServiceAccount that must exist, and gets the projected
//!   `kube-api-access-<suffix>` volume (token, `ca.crt`, namespace) at the path in-cluster clients
//!   read (`plugin/pkg/admission/serviceaccount/admission.go`).
//! - `StorageObjectInUseProtection`: PVCs and PVs get the protection finalizers that keep them
//!   while in use (the controllers remove them when that is safe).
//! - `DefaultStorageClass`: a PVC without a class gets the default one.

use serde_json::{Value, json};

use crate::api::Shared;
use crate::api::objects::{self, meta_mut, meta_str};
use crate::api::resources::ResourceType;
use crate::api::status::{ApiError, GroupResource};

pub const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
/// Projected token lifetime kube-apiserver asks for (an hour plus 7 s, `admission.go`).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

pub async fn admit_create(
    server: &Shared,
    rt: &ResourceType,
    obj: &mut Value,
) -> Result<(), ApiError> {
    if !rt.group.is_empty() {
        return Ok(());
    }
    match rt.kind.as_str() {
        "Pod" if server.service_account_admission => service_account(server, obj).await,
        "PersistentVolumeClaim" => {
            add_finalizer(obj, PVC_PROTECTION);
            default_storage_class(server, obj).await
        }
        "PersistentVolume" => {
            add_finalizer(obj, PV_PROTECTION);
            Ok(())
        }
        _ => Ok(()),
    }
}

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let mut finalizers = objects::finalizers(obj);
    if !finalizers.iter().any(|f| f == finalizer) {
        finalizers.push(finalizer.to_string());
        meta_mut(obj).insert("finalizers".into(), json!(finalizers));
    }
}

async fn service_account(server: &Shared, pod: &mut Value) -> Result<(), ApiError> {
    let ns = meta_str(pod, "namespace").unwrap_or("default").to_string();
    let pod_name = objects::name(pod).unwrap_or("").to_string();
    if !pod["spec"].is_object() {
        return Ok(());
    }
    let sa_name = pod["spec"]["serviceAccountName"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    pod["spec"]["serviceAccountName"] = json!(sa_name);
    let sa_key = format!("/registry/serviceaccounts/{ns}/{sa_name}");
    let sa = server
        .store
        .get(&sa_key)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| {
            ApiError::forbidden(
                &GroupResource::new("", "pods"),
                &pod_name,
                &format!(
                    "error looking up service account {ns}/{sa_name}: serviceaccount \"{sa_name}\" not found"
                ),
            )
        })?;
    let automount = pod["spec"]["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| sa.object["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if automount {
        inject_api_access_volume(pod);
    }
    Ok(())
}

/// Add the projected volume and mount it into every container that does not mount something
/// at the service-account path already.
fn inject_api_access_volume(pod: &mut Value) {
    let spec = &mut pod["spec"];
    let already = ["containers", "initContainers"].iter().any(|list| {
        spec[*list].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["volumeMounts"].as_array().is_some_and(|ms| {
                    ms.iter()
                        .any(|m| m["mountPath"].as_str() == Some(SERVICE_ACCOUNT_MOUNT))
                })
            })
        })
    });
    if already {
        return;
    }
    let volume_name = format!("kube-api-access-{}", objects::random_suffix());
    let volume = json!({
        "name": volume_name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                { "serviceAccountToken": { "expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token" } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                { "downwardAPI": { "items": [{ "path": "namespace", "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" } }] } },
            ],
        },
    });
    if !spec["volumes"].is_array() {
        spec["volumes"] = json!([]);
    }
    if let Some(vs) = spec["volumes"].as_array_mut() {
        vs.push(volume);
    }
    let mount =
        json!({ "name": volume_name, "readOnly": true, "mountPath": SERVICE_ACCOUNT_MOUNT });
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec[list].as_array_mut() {
            for c in containers {
                if !c["volumeMounts"].is_array() {
                    c["volumeMounts"] = json!([]);
                }
                if let Some(ms) = c["volumeMounts"].as_array_mut() {
                    ms.push(mount.clone());
                }
            }
        }
    }
}

async fn default_storage_class(server: &Shared, pvc: &mut Value) -> Result<(), ApiError> {
    if pvc["spec"].get("storageClassName").is_some() || !pvc["spec"].is_object() {
        return Ok(());
    }
    let classes = server
        .store
        .list("/registry/storageclasses/", None, 0, 0)
        .await
        .map_err(ApiError::internal)?;
    let default = classes.items.iter().find(|c| {
        c.object["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    });
    if let Some(name) = default.and_then(|c| objects::name(&c.object)) {
        pvc["spec"]["storageClassName"] = json!(name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_access_volume_is_mounted_in_every_container_once() {
        let mut pod = json!({"spec": {
            "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "initContainers": [{"name": "i"}],
        }});
        inject_api_access_volume(&mut pod);
        let volume = &pod["spec"]["volumes"][0];
        let name = volume["name"].as_str().unwrap();
        assert!(name.starts_with("kube-api-access-") && name.len() == 21);
        assert_eq!(
            volume["projected"]["sources"][0]["serviceAccountToken"]["path"],
            "token"
        );
        for (list, i) in [("containers", 0), ("containers", 1), ("initContainers", 0)] {
            let mounts = pod["spec"][list][i]["volumeMounts"].as_array().unwrap();
            assert_eq!(
                mounts
                    .iter()
                    .filter(|m| m["mountPath"] == SERVICE_ACCOUNT_MOUNT && m["name"] == name)
                    .count(),
                1
            );
        }
        let before = pod.clone();
        inject_api_access_volume(&mut pod);
        assert_eq!(
            pod, before,
            "a pod that mounts the path already is left alone"
        );
    }

    #[test]
    fn protection_finalizer_is_added_once() {
        let mut pvc = json!({"metadata": {"finalizers": ["x"]}});
        add_finalizer(&mut pvc, PVC_PROTECTION);
        add_finalizer(&mut pvc, PVC_PROTECTION);
        assert_eq!(
            pvc["metadata"]["finalizers"],
            json!(["x", "kubernetes.io/pvc-protection"])
        );
    }
}
