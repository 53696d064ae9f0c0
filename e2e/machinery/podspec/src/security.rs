//! A container's security context as the runtime applies it: the process's user, group and
//! supplementary groups, `no_new_privs`, a read-only root file system, and the pod's `fsGroup`
//! for its volumes. Container fields override the pod's (`runAsUser`, `runAsGroup`,
//! `runAsNonRoot`); `supplementalGroups` and `fsGroup` exist only at pod level.
//!
//! kubelet's `verifyRunAsNonRoot` refuses to create a container that would run as root under
//! `runAsNonRoot: true`; the refusals below keep its messages.
//!
//! Not applied here (written down in e2e/README.md): capabilities beyond what a non-root uid
//! loses by itself, `privileged`, seccomp, SELinux/AppArmor, `procMount`, sysctls.

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext};
use thiserror::Error;

use crate::image_map::ImageEntry;

/// What the container's process runs as, and under which restrictions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSecurity {
    pub uid: u32,
    pub gid: u32,
    /// `supplementalGroups`, then `fsGroup` (kubelet adds it so the process can use its volumes).
    pub supplementary_groups: Vec<u32>,
    /// `allowPrivilegeEscalation: false` sets the kernel's `no_new_privs` (setuid binaries and
    /// file capabilities then grant nothing).
    pub no_new_privileges: bool,
    /// Everything but the container's volumes, /dev and /proc is read-only for the process.
    pub read_only_root_filesystem: bool,
}

/// The pod's `fsGroup`: its writable volumes belong to this group (kubelet's
/// `SetVolumeOwnership`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsGroup {
    pub gid: u32,
    /// `fsGroupChangePolicy: OnRootMismatch`: skip the walk when the volume's root already has
    /// the group and the setgid bit.
    pub only_on_root_mismatch: bool,
}

/// Why the container is not created (waiting reason `CreateContainerConfigError`).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SecurityError {
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RunAsUserBreaksNonRoot { pod: String, container: String },
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    ImageRunsAsRoot { pod: String, container: String },
    #[error("container {container}: {field} {value} is not a valid Linux id")]
    InvalidId {
        container: String,
        field: &'static str,
        value: i64,
    },
}

impl SecurityError {
    /// The waiting reason kubelet shows for a container it refuses to create.
    pub fn reason(&self) -> &'static str {
        "CreateContainerConfigError"
    }
}

/// The effective security of container `c` of `pod`, run from `image`.
pub fn container_security(
    pod: &Pod,
    c: &Container,
    image: &ImageEntry,
) -> Result<ProcessSecurity, SecurityError> {
    let pod_sc = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let sc = c.security_context.clone().unwrap_or_default();
    let id = |field: &'static str, value: i64| {
        u32::try_from(value).map_err(|_| SecurityError::InvalidId {
            container: c.name.clone(),
            field,
            value,
        })
    };
    let run_as_user = sc.run_as_user.or(pod_sc.run_as_user);
    let run_as_group = sc.run_as_group.or(pod_sc.run_as_group);
    let run_as_non_root = sc.run_as_non_root.or(pod_sc.run_as_non_root) == Some(true);
    let image_user = image.image_user();
    if run_as_non_root {
        let refusal = match run_as_user {
            Some(0) => Some(SecurityError::RunAsUserBreaksNonRoot {
                pod: pod_identity(pod),
                container: c.name.clone(),
            }),
            None if image_user.uid == 0 => Some(SecurityError::ImageRunsAsRoot {
                pod: pod_identity(pod),
                container: c.name.clone(),
            }),
            _ => None,
        };
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
    }
    let uid = match run_as_user {
        Some(u) => id("runAsUser", u)?,
        None => image_user.uid,
    };
    // A runAsUser without runAsGroup takes that user's group from the image's /etc/passwd,
    // which localkube's images do not have: 0, as for a uid the file does not list.
    let gid = match (run_as_group, run_as_user) {
        (Some(g), _) => id("runAsGroup", g)?,
        (None, Some(_)) => 0,
        (None, None) => image_user.gid.unwrap_or(0),
    };
    let mut supplementary_groups = Vec::new();
    for g in pod_sc.supplemental_groups.iter().flatten() {
        supplementary_groups.push(id("supplementalGroups", *g)?);
    }
    if let Some(fs) = pod_sc.fs_group {
        supplementary_groups.push(id("fsGroup", fs)?);
    }
    supplementary_groups.dedup();
    Ok(ProcessSecurity {
        uid,
        gid,
        supplementary_groups,
        no_new_privileges: sc.allow_privilege_escalation == Some(false),
        read_only_root_filesystem: sc.read_only_root_filesystem == Some(true),
    })
}

/// The pod's `fsGroup`, if it sets one (a negative one is left to API validation: ignored).
pub fn fs_group(pod: &Pod) -> Option<FsGroup> {
    let sc: PodSecurityContext = pod.spec.as_ref()?.security_context.clone()?;
    Some(FsGroup {
        gid: u32::try_from(sc.fs_group?).ok()?,
        only_on_root_mismatch: sc.fs_group_change_policy.as_deref() == Some("OnRootMismatch"),
    })
}

/// kubelet's `format.Pod`: `name_namespace(uid)`.
fn pod_identity(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{}_{}({})",
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, SecurityContext};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(sc: Option<PodSecurityContext>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("op-1".into()),
                namespace: Some("ops".into()),
                uid: Some("u-1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                security_context: sc,
                ..Default::default()
            }),
            status: None,
        }
    }

    fn container(sc: Option<SecurityContext>) -> Container {
        Container {
            name: "main".into(),
            security_context: sc,
            ..Default::default()
        }
    }

    fn image(user: Option<&str>) -> ImageEntry {
        ImageEntry {
            user: user.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn without_a_security_context_the_image_user_runs_unrestricted() {
        let got = container_security(&pod(None), &container(None), &image(None)).unwrap();
        assert_eq!(
            got,
            ProcessSecurity {
                uid: 0,
                gid: 0,
                supplementary_groups: vec![],
                no_new_privileges: false,
                read_only_root_filesystem: false,
            }
        );
        let got =
            container_security(&pod(None), &container(None), &image(Some("65532:65532"))).unwrap();
        assert_eq!((got.uid, got.gid), (65532, 65532));
    }

    #[test]
    fn container_fields_override_the_pods_and_groups_come_from_the_pod() {
        let pod_sc = PodSecurityContext {
            run_as_user: Some(1000),
            run_as_group: Some(1000),
            run_as_non_root: Some(true),
            supplemental_groups: Some(vec![5, 6]),
            fs_group: Some(2000),
            ..Default::default()
        };
        let sc = SecurityContext {
            run_as_user: Some(65532),
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            ..Default::default()
        };
        let got =
            container_security(&pod(Some(pod_sc)), &container(Some(sc)), &image(None)).unwrap();
        assert_eq!(
            got,
            ProcessSecurity {
                uid: 65532,
                gid: 1000,
                supplementary_groups: vec![5, 6, 2000],
                no_new_privileges: true,
                read_only_root_filesystem: true,
            }
        );
    }

    #[test]
    fn run_as_user_without_a_group_gets_group_0_not_the_images() {
        let sc = SecurityContext {
            run_as_user: Some(7),
            ..Default::default()
        };
        let got =
            container_security(&pod(None), &container(Some(sc)), &image(Some("9:9"))).unwrap();
        assert_eq!((got.uid, got.gid), (7, 0));
    }

    #[test]
    fn run_as_non_root_refuses_root_with_kubelets_messages() {
        let non_root = |user: Option<i64>| PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: user,
            ..Default::default()
        };
        let err = container_security(
            &pod(Some(non_root(Some(0)))),
            &container(None),
            &image(None),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "container's runAsUser breaks non-root policy (pod: \"op-1_ops(u-1)\", container: main)"
        );
        assert_eq!(err.reason(), "CreateContainerConfigError");
        let err = container_security(&pod(Some(non_root(None))), &container(None), &image(None))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "container has runAsNonRoot and image will run as root (pod: \"op-1_ops(u-1)\", container: main)"
        );
        // A non-root image user, or a container that overrides the policy, is fine.
        assert!(
            container_security(
                &pod(Some(non_root(None))),
                &container(None),
                &image(Some("65532"))
            )
            .is_ok()
        );
        let opt_out = SecurityContext {
            run_as_non_root: Some(false),
            ..Default::default()
        };
        assert!(
            container_security(
                &pod(Some(non_root(Some(0)))),
                &container(Some(opt_out)),
                &image(None)
            )
            .is_ok()
        );
    }

    #[test]
    fn an_id_outside_linux_range_is_refused_naming_the_field() {
        let sc = SecurityContext {
            run_as_group: Some(-1),
            ..Default::default()
        };
        let err = container_security(&pod(None), &container(Some(sc)), &image(None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "container main: runAsGroup -1 is not a valid Linux id"
        );
    }

    #[test]
    fn fs_group_and_its_change_policy() {
        assert_eq!(fs_group(&pod(None)), None);
        let sc = |policy: Option<&str>| PodSecurityContext {
            fs_group: Some(2000),
            fs_group_change_policy: policy.map(str::to_owned),
            ..Default::default()
        };
        assert_eq!(
            fs_group(&pod(Some(sc(None)))),
            Some(FsGroup {
                gid: 2000,
                only_on_root_mismatch: false
            })
        );
        assert_eq!(
            fs_group(&pod(Some(sc(Some("OnRootMismatch"))))).map(|f| f.only_on_root_mismatch),
            Some(true)
        );
    }
}
