//! Volume growth: members' PVCs follow an increase of `spec.storage.size`.
//!
//! A shrink never reaches here: it is refused before any action (rule 1, `check_storage_change`),
//! as Kubernetes refuses to shrink a claim. A PVC grows only when its StorageClass says
//! `allowVolumeExpansion: true`; otherwise the planner waits with
//! [`WaitReason::VolumeExpansionNotAllowed`], naming the field, the class and the PVCs, and
//! nothing after it happens (the configuration roll would raise the backend quota derived from
//! the size beyond what the volume holds).
//!
//! Reached only with every member healthy, at the desired size and version (plan/mod.rs). The
//! patch of a request is not disruptive, so no quorum check: one PVC per pass, by name.

use etcd_api::validation::quantity_to_bytes;

use super::{Action, WaitReason};
use crate::state::{Member, Observed};

/// The next member PVC to grow, or the reason none can; `None` when every member PVC requests
/// at least `spec.storage.size`.
pub(super) fn next_growth(observed: &Observed, members: &[Member]) -> Option<Action> {
    let cluster = &observed.cluster;
    let size = &observed.spec.storage.size.0;
    let desired = quantity_to_bytes(size)?;
    let mut names: Vec<String> = members
        .iter()
        .filter_map(|m| m.member_name(cluster))
        .collect();
    names.sort();
    let smaller: Vec<(&String, &crate::state::PvcState)> = names
        .iter()
        .filter_map(|name| observed.pvcs.get_key_value(name))
        .filter(|(_, pvc)| {
            !pvc.terminating && !pvc.retained_by_restore && pvc.requested_bytes < Some(desired)
        })
        .collect();
    if let Some((name, pvc)) = smaller.iter().find(|(_, pvc)| pvc.class_allows_expansion) {
        return Some(Action::ExpandVolume {
            pvc: (*name).clone(),
            from: pvc
                .requested_bytes
                .map_or_else(|| "unset".to_owned(), bytes_text),
            to: size.clone(),
        });
    }
    let (_, first) = smaller.first()?;
    Some(Action::Wait(WaitReason::VolumeExpansionNotAllowed {
        pvcs: smaller.iter().map(|(name, _)| (*name).clone()).collect(),
        storage_class: first.storage_class.clone(),
        size: size.clone(),
    }))
}

/// Bytes as a quantity: in Gi or Mi when exact, else plain bytes.
fn bytes_text(bytes: u128) -> String {
    const MI: u128 = 1024 * 1024;
    const GI: u128 = 1024 * MI;
    if bytes.is_multiple_of(GI) {
        format!("{}Gi", bytes / GI)
    } else if bytes.is_multiple_of(MI) {
        format!("{}Mi", bytes / MI)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use crate::fixtures::*;
    use crate::plan::{Action, Policy, WaitReason, next_action};
    use crate::state::{Member, Observed};

    fn plan(observed: &Observed) -> Action {
        next_action(observed, &Policy::default())
    }

    fn settled() -> Observed {
        cluster(3, V35)
            .members(
                [0, 1, 2]
                    .iter()
                    .map(|&o| healthy(o, V35, o == 0))
                    .collect::<Vec<Member>>(),
            )
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2])
    }

    /// The user grows the volumes from 1Gi to 2Gi; `expandable`: the class allows it.
    fn grown(expandable: bool) -> Observed {
        let mut observed = settled();
        // The quota derived from the size changes too: pin it so only the volumes differ.
        observed.spec.storage.size = Quantity("2Gi".into());
        for pvc in observed.pvcs.values_mut() {
            pvc.class_allows_expansion = expandable;
        }
        observed.member_storage = Some(etcd_api::StorageSpec {
            size: Quantity("1Gi".into()),
            ..etcd_api::StorageSpec::default()
        });
        observed
    }

    fn expand(ordinal: u32) -> Action {
        Action::ExpandVolume {
            pvc: name(ordinal),
            from: "1Gi".into(),
            to: "2Gi".into(),
        }
    }

    #[test]
    fn a_larger_size_grows_each_pvc_one_per_pass_then_the_members_roll_onto_the_new_quota() {
        let mut observed = grown(true);
        for ordinal in [0, 1, 2] {
            assert_eq!(plan(&observed), expand(ordinal));
            observed
                .pvcs
                .get_mut(&name(ordinal))
                .unwrap()
                .requested_bytes = Some(2 << 30);
        }
        // Every volume asks for 2Gi: the roll applies the quota derived from it (one member
        // at a time, followers first, as any configuration change).
        assert!(
            matches!(plan(&observed), Action::RollMember { ref member, .. } if *member == name(1)),
            "{:?}",
            plan(&observed)
        );
    }

    #[test]
    fn a_class_without_expansion_is_reported_and_nothing_rolls() {
        let observed = grown(false);
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::VolumeExpansionNotAllowed {
                pvcs: vec![name(0), name(1), name(2)],
                storage_class: Some("standard".into()),
                size: "2Gi".into(),
            })
        );
    }

    #[test]
    fn a_shrink_is_refused_and_no_pvc_is_touched() {
        let mut observed = grown(true);
        observed.spec.storage.size = Quantity("512Mi".into());
        let Action::Refuse(errors) = plan(&observed) else {
            panic!("{:?}", plan(&observed))
        };
        assert_eq!(errors[0].field, "spec.storage.size");
    }

    #[test]
    fn growth_waits_for_an_unhealthy_member_and_a_paused_cluster() {
        let mut observed = grown(true);
        if let crate::state::Membership::Known(members) = &mut observed.membership {
            members[1] = unhealthy(1, 3);
        }
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::MemberUnhealthy { member: name(1) })
        );
        let mut observed = grown(true);
        observed.spec.paused = true;
        assert_eq!(plan(&observed), Action::Wait(WaitReason::Paused));
    }

    #[test]
    fn pvcs_of_non_members_and_retained_ones_are_not_grown() {
        let mut observed = grown(true);
        observed.pvcs.get_mut(&name(0)).unwrap().requested_bytes = Some(2 << 30);
        observed.pvcs.get_mut(&name(1)).unwrap().requested_bytes = Some(2 << 30);
        // Member 2's volume was kept aside by a restore: never written to again.
        observed.pvcs.get_mut(&name(2)).unwrap().retained_by_restore = true;
        // A volume of a removed member (reclaimPolicy Retain): not a member's, not grown.
        let mut old = observed.pvcs[&name(0)].clone();
        old.requested_bytes = Some(1 << 30);
        observed.pvcs.insert(name(7), old);
        let action = plan(&observed);
        assert!(
            !matches!(action, Action::ExpandVolume { .. } | Action::Wait(_)),
            "{action:?}"
        );
    }

    #[test]
    fn growth_never_takes_a_member_down() {
        // Growing is a patch of the claim: every member stays up and Ready throughout.
        let mut observed = grown(true);
        for _ in 0..3 {
            let Action::ExpandVolume { pvc, .. } = plan(&observed) else {
                panic!()
            };
            observed.pvcs.get_mut(&pvc).unwrap().requested_bytes = Some(2 << 30);
            assert!(observed.pods.values().all(|p| p.ready && !p.terminating));
        }
    }
}
