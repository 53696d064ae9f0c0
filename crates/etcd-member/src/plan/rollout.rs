//! Configuration drift: members whose Pod was built from another `spec.pod` / `spec.etcdOptions`,
//! or (TLS clusters) from other certificate Secrets than they hold now (a renewal, a CA
//! rotation step, a Secret you provide updated: `Observed::tls_hashes`), are rolled, one at a
//! time, exactly as an upgrade rolls them.
//!
//! Reached only after every earlier rule passed (plan/mod.rs): the spec is valid, the cluster
//! is not paused or being restored, every member has its Pod, every voter answers, there is no
//! learner and no Pod terminating, the size matches, and no member is behind on the version.
//! So the member rolled before this one is back and healthy before the next goes (and here,
//! also Ready per the kubelet): at most one member is ever down for a roll.
//!
//! A Pod without the hash annotation (built by an operator release that did not record one) is
//! adopted as it is: upgrading the operator never restarts an etcd member by itself (`helm
//! upgrade` keeps every member running, which the chart scenario checks). [`next_adoption`]
//! records the current hash on it (an annotation patch, no restart): from then on it is judged
//! like any other Pod, and a later change of the spec rolls it. What it cannot know is what
//! such a Pod was really built from: a spec change made between the operator upgrade and the
//! adoption (which comes once the cluster is healthy, at full size and version) is taken as
//! already applied to it.

use super::{Action, Disruption, WaitReason, ordinal_key, quorum_gate};

/// Record the current hash on the first member Pod (by name) that has none and is not being
/// deleted; `None` when every member Pod has one. Reached only with every member healthy and
/// its Pod present (plan/mod.rs), after upgrades: a Pod an upgrade re-creates gets the hash
/// from the builder. Learners count too: their Pod is a member Pod like any other.
pub(super) fn next_adoption(observed: &Observed, members: &[Member]) -> Option<Action> {
    let cluster = &observed.cluster;
    let mut names: Vec<String> = members
        .iter()
        .filter_map(|m| m.member_name(cluster))
        .collect();
    names.sort();
    names.into_iter().find_map(|member| {
        let pod = observed.pods.get(&member).filter(|pod| !pod.terminating)?;
        let hash = pod
            .config_hash
            .is_none()
            .then(|| build::config_hash(&observed.spec));
        let tls_hash = observed
            .tls_hashes
            .get(&member)
            .filter(|_| pod.tls_hash.is_none())
            .cloned();
        (hash.is_some() || tls_hash.is_some()).then_some(Action::AdoptPod {
            member,
            hash,
            tls_hash,
        })
    })
}
use crate::build;
use crate::state::{Member, Observed};

/// Roll the next drifted voter, followers first and the leader last; `None` when every voter's
/// Pod runs the current configuration.
pub(super) fn next_roll(
    observed: &Observed,
    voters: &[&Member],
    healthy_voters: usize,
) -> Option<Action> {
    let cluster = &observed.cluster;
    let desired = build::config_hash(&observed.spec);
    let up_to_date = |m: &Member| {
        let Some(name) = m.member_name(cluster) else {
            return true;
        };
        let desired_tls = observed.tls_hashes.get(&name);
        observed
            .pods
            .get(&name)
            // Members that are not ours have no Pod of ours to roll; a Pod without a hash is
            // adopted (module doc). A TLS hash is compared only when the Secrets are known.
            .is_none_or(|pod| {
                pod.config_hash
                    .as_deref()
                    .is_none_or(|hash| hash == desired.as_str())
                    && pod
                        .tls_hash
                        .as_ref()
                        .zip(desired_tls)
                        .is_none_or(|(have, want)| have == want)
            })
    };
    let current = voters.iter().filter(|m| up_to_date(m)).count();
    let next = voters
        .iter()
        .filter(|m| !up_to_date(m))
        .min_by_key(|m| (m.leader(), ordinal_key(cluster, m)))?;
    // Each member healthy before the next: etcd answers (rule 5 already waited for that) and
    // the kubelet reports its Pod Ready, i.e. it is back in the client Service.
    let not_ready = voters.iter().find_map(|m| {
        let name = m.member_name(cluster)?;
        let pod = observed.pods.get(&name)?;
        (!pod.ready).then_some(name)
    });
    if let Some(member) = not_ready {
        return Some(Action::Wait(WaitReason::PodNotReady { member }));
    }
    let member = next.display_name(cluster);
    // The same gate as an upgrade: a one-member cluster has no redundancy to keep (a short
    // outage the user chose with size 1); otherwise the others must keep quorum without it.
    Some(
        match quorum_gate(
            Disruption::TakeDownHealthyVoter,
            healthy_voters,
            voters.len(),
        ) {
            Ok(quorum) => Action::RollMember {
                member,
                up_to_date: current,
                voters: voters.len(),
                quorum,
            },
            Err(short) => Action::Wait(WaitReason::WouldLoseQuorum {
                member,
                healthy: short.healthy,
                voters: short.voters,
            }),
        },
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use etcd_api::{EtcdOptions, PodPolicy};
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use crate::fixtures::*;
    use crate::plan::{Action, PodReason, Policy, WaitReason, next_action};
    use crate::state::{Member, MemberHealth, Observed};

    fn plan(observed: &Observed) -> Action {
        next_action(observed, &Policy::default())
    }

    fn on(version: &str, ordinals: &[u32], leader: u32) -> Vec<Member> {
        ordinals
            .iter()
            .map(|&o| healthy(o, version, o == leader))
            .collect()
    }

    /// The user asks for more CPU: every Pod built before now drifts.
    fn change_resources(mut observed: Observed) -> Observed {
        observed.spec.pod = Some(PodPolicy {
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "cpu".to_owned(),
                    Quantity("250m".into()),
                )])),
                ..ResourceRequirements::default()
            }),
            ..PodPolicy::default()
        });
        observed
    }

    /// A settled 3-member cluster on 3.5 (leader `leader`) whose spec.pod just changed.
    fn drifted(leader: u32) -> Observed {
        change_resources(
            cluster(3, V35)
                .members(on(V35, &[0, 1, 2], leader))
                .pods(&[0, 1, 2])
                .ready(&[0, 1, 2])
                .pvcs(&[0, 1, 2]),
        )
    }

    fn roll(ordinal: u32, up_to_date: usize) -> Action {
        Action::RollMember {
            member: name(ordinal),
            up_to_date,
            voters: 3,
            quorum: quorum_checked(),
        }
    }

    fn current_hash(observed: &Observed) -> Option<String> {
        Some(crate::build::config_hash(&observed.spec))
    }

    #[test]
    fn drift_rolls_followers_first_by_ordinal_and_the_leader_last() {
        let mut observed = drifted(0);
        assert_eq!(plan(&observed), roll(1, 0));
        let hash = current_hash(&observed);
        for (ordinal, next) in [(1, roll(2, 1)), (2, roll(0, 2)), (0, Action::Converged)] {
            // The rolled member is back, built from the current spec, and answers.
            observed.pods.get_mut(&name(ordinal)).unwrap().config_hash = hash.clone();
            assert_eq!(plan(&observed), next, "after rolling {}", name(ordinal));
        }
    }

    /// A settled 3-member TLS cluster (leader `leader`) whose Pods carry the certificate hash
    /// of the Secrets they mount now.
    fn tls_settled(leader: u32) -> Observed {
        let mut observed = cluster(3, V35)
            .members(on(V35, &[0, 1, 2], leader))
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2]);
        for ordinal in [0, 1, 2] {
            let hash = format!("certs-{ordinal}-a");
            observed.tls_hashes.insert(name(ordinal), hash.clone());
            observed.pods.get_mut(&name(ordinal)).unwrap().tls_hash = Some(hash);
        }
        observed
    }

    /// Certificate Secrets changed (a renewal, a CA rotation step): every member whose Secrets
    /// differ from what its Pod mounted is rolled, followers first, the leader last, one at a
    /// time; members whose Secrets did not change are not.
    #[test]
    fn changed_certificate_secrets_roll_their_members_one_at_a_time() {
        // (leader, members whose Secrets changed, the rolls expected in order)
        let cases: [(u32, &[u32], &[u32]); 5] = [
            (0, &[0, 1, 2], &[1, 2, 0]),
            (1, &[0, 1, 2], &[0, 2, 1]),
            (2, &[2], &[2]),
            (0, &[1], &[1]),
            (0, &[], &[]),
        ];
        for (leader, changed, expected) in cases {
            let mut observed = tls_settled(leader);
            for &ordinal in changed {
                observed
                    .tls_hashes
                    .insert(name(ordinal), format!("certs-{ordinal}-b"));
            }
            let mut rolled = vec![];
            loop {
                match plan(&observed) {
                    Action::RollMember { member, .. } => {
                        // The member comes back mounting the Secrets as they are now.
                        let now = observed.tls_hashes[&member].clone();
                        observed.pods.get_mut(&member).unwrap().tls_hash = Some(now);
                        rolled.push(member);
                    }
                    Action::Converged => break,
                    other => panic!("leader {leader}, changed {changed:?}: {other:?}"),
                }
            }
            let expected: Vec<String> = expected.iter().map(|&o| name(o)).collect();
            assert_eq!(rolled, expected, "leader {leader}, changed {changed:?}");
        }
    }

    /// A roll for new certificates is quorum-gated like any other: not while another member
    /// is down, not while a Pod is not Ready.
    #[test]
    fn a_certificate_roll_waits_for_quorum_and_readiness() {
        let mut observed = tls_settled(0);
        observed.tls_hashes.insert(name(1), "certs-1-b".into());
        if let crate::state::Membership::Known(members) = &mut observed.membership {
            members[2] = unhealthy(2, 3);
        }
        assert!(
            !matches!(plan(&observed), Action::RollMember { .. }),
            "{:?}",
            plan(&observed)
        );
        let mut observed = tls_settled(0);
        observed.tls_hashes.insert(name(1), "certs-1-b".into());
        observed.pods.get_mut(&name(2)).unwrap().ready = false;
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::PodNotReady { member: name(2) })
        );
    }

    /// Secrets not read (a member's Secret unknown this pass) never roll anyone; a Pod an
    /// older operator built (no certificate hash) is adopted with the hash there is, without a
    /// restart, and only the missing annotation is written.
    #[test]
    fn unknown_certificate_hashes_do_not_roll_and_pods_without_one_are_adopted() {
        let mut observed = tls_settled(0);
        observed.tls_hashes.clear();
        assert_eq!(plan(&observed), Action::Converged);

        let mut observed = tls_settled(0);
        observed.pods.get_mut(&name(1)).unwrap().tls_hash = None;
        assert_eq!(
            plan(&observed),
            Action::AdoptPod {
                member: name(1),
                hash: None,
                tls_hash: Some("certs-1-a".into()),
            }
        );
        // Both missing: both recorded in one patch.
        observed.pods.get_mut(&name(1)).unwrap().config_hash = None;
        assert_eq!(
            plan(&observed),
            Action::AdoptPod {
                member: name(1),
                hash: current_hash(&observed),
                tls_hash: Some("certs-1-a".into()),
            }
        );
        // A config drift is not hidden by adopting the certificate hash.
        let mut observed = change_resources(tls_settled(0));
        observed.pods.get_mut(&name(1)).unwrap().tls_hash = None;
        assert!(matches!(
            plan(&observed),
            Action::AdoptPod { hash: None, .. }
        ));
    }

    #[test]
    fn an_etcd_option_change_drifts_too() {
        let mut observed = cluster(3, V35)
            .members(on(V35, &[0, 1, 2], 2))
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2]);
        assert_eq!(plan(&observed), Action::Converged);
        observed.spec.etcd_options = Some(EtcdOptions {
            snapshot_count: Some(5000),
            ..EtcdOptions::default()
        });
        assert_eq!(plan(&observed), roll(0, 0));
    }

    #[test]
    fn scaling_does_not_roll_anyone() {
        let mut observed = cluster(3, V35)
            .members(on(V35, &[0, 1, 2], 0))
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2]);
        observed.spec.size = 5;
        assert!(matches!(plan(&observed), Action::AddLearner { .. }));
        observed.spec.size = 3;
        assert_eq!(plan(&observed), Action::Converged);
    }

    #[test]
    fn the_rolled_members_pod_comes_back_on_its_data() {
        let mut observed = drifted(0);
        observed.pods.remove(&name(1));
        assert!(matches!(
            plan(&observed),
            Action::CreateMemberPod { member, reason: PodReason::Restart, .. } if member == name(1)
        ));
    }

    #[test]
    fn no_roll_while_a_member_is_unhealthy() {
        // Member 1 was just rolled: it runs the current configuration but does not answer yet.
        let mut observed = drifted(0);
        let hash = current_hash(&observed);
        observed.pods.get_mut(&name(1)).unwrap().config_hash = hash;
        if let crate::state::Membership::Known(members) = &mut observed.membership {
            members[1] = unhealthy(1, 3);
        }
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::MemberUnhealthy { member: name(1) })
        );
    }

    #[test]
    fn the_next_waits_until_the_rolled_members_pod_is_ready() {
        // Member 1 answers etcd again, but the kubelet's probe has not passed yet.
        let mut observed = drifted(0);
        let hash = current_hash(&observed);
        let pod = observed.pods.get_mut(&name(1)).unwrap();
        pod.config_hash = hash;
        pod.ready = false;
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::PodNotReady { member: name(1) })
        );
        observed.pods.get_mut(&name(1)).unwrap().ready = true;
        assert_eq!(plan(&observed), roll(2, 1));
    }

    #[test]
    fn no_roll_while_a_pod_terminates() {
        let observed = change_resources(
            cluster(3, V35)
                .members(on(V35, &[0, 1, 2], 0))
                .pods(&[0, 1, 2])
                .terminating(1)
                .pvcs(&[0, 1, 2]),
        );
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::PodTerminating { member: name(1) })
        );
    }

    #[test]
    fn paused_clusters_do_not_roll() {
        let mut observed = drifted(0);
        observed.spec.paused = true;
        assert_eq!(plan(&observed), Action::Wait(WaitReason::Paused));
    }

    #[test]
    fn upgrades_go_before_a_roll() {
        let observed = change_resources(
            cluster(3, V35)
                .members(on(V34, &[0, 1, 2], 0))
                .pods(&[0, 1, 2])
                .ready(&[0, 1, 2])
                .pvcs(&[0, 1, 2]),
        );
        assert!(
            matches!(plan(&observed), Action::UpgradeMember { member, .. } if member == name(1))
        );
    }

    #[test]
    fn two_voters_cannot_lose_one_so_they_wait() {
        let observed = change_resources(
            cluster(2, V35)
                .members(on(V35, &[0, 1], 0))
                .pods(&[0, 1])
                .ready(&[0, 1])
                .pvcs(&[0, 1]),
        );
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::WouldLoseQuorum {
                member: name(1),
                healthy: 2,
                voters: 2
            })
        );
    }

    #[test]
    fn a_single_member_rolls_as_it_upgrades() {
        let observed = change_resources(
            cluster(1, V35)
                .members(on(V35, &[0], 0))
                .pods(&[0])
                .ready(&[0])
                .pvcs(&[0]),
        );
        assert_eq!(
            plan(&observed),
            Action::RollMember {
                member: name(0),
                up_to_date: 0,
                voters: 1,
                quorum: quorum_checked(),
            }
        );
    }

    /// Upgrading the operator restarts no member: Pods an older release built (no hash) are
    /// adopted as they are, the current hash recorded on them.
    #[test]
    fn pods_without_a_hash_are_adopted_not_rolled() {
        let mut observed = cluster(3, V35)
            .members(on(V35, &[0, 1, 2], 2))
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2]);
        for pod in observed.pods.values_mut() {
            pod.config_hash = None;
        }
        let hash = current_hash(&observed).unwrap();
        // One Pod at a time, by name, none restarted; then nothing is left to do.
        for ordinal in [0, 1, 2] {
            assert_eq!(
                plan(&observed),
                Action::AdoptPod {
                    member: name(ordinal),
                    hash: Some(hash.clone()),
                    tls_hash: None,
                }
            );
            observed.pods.get_mut(&name(ordinal)).unwrap().config_hash = Some(hash.clone());
        }
        assert_eq!(plan(&observed), Action::Converged);
    }

    /// The gap adoption closes: a spec change after the adoption rolls the adopted Pods.
    #[test]
    fn adopted_pods_roll_on_a_later_change() {
        let mut observed = cluster(3, V35)
            .members(on(V35, &[0, 1, 2], 0))
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2]);
        let adopted = current_hash(&observed);
        for pod in observed.pods.values_mut() {
            pod.config_hash = adopted.clone(); // what AdoptPod recorded
        }
        assert_eq!(plan(&observed), Action::Converged);
        let observed = change_resources(observed);
        assert_eq!(plan(&observed), roll(1, 0));
    }

    #[test]
    fn a_pod_being_deleted_is_not_adopted_and_repairs_come_first() {
        // Member 1's Pod (no hash) is stopping: it comes back from the builder, with the hash.
        let mut observed = cluster(3, V35)
            .members(on(V35, &[0, 1, 2], 0))
            .pods(&[0, 1, 2])
            .terminating(1)
            .pvcs(&[0, 1, 2]);
        observed.pods.get_mut(&name(1)).unwrap().config_hash = None;
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::PodTerminating { member: name(1) })
        );
        // An unhealthy member is waited for before any adoption.
        let mut observed = drifted(0);
        for pod in observed.pods.values_mut() {
            pod.config_hash = None;
        }
        if let crate::state::Membership::Known(members) = &mut observed.membership {
            members[2] = unhealthy(2, 3);
        }
        assert_eq!(
            plan(&observed),
            Action::Wait(WaitReason::MemberUnhealthy { member: name(2) })
        );
    }

    /// Plays the whole roll as Kubernetes and etcd would answer it, one observation per step,
    /// for Pods built from an older spec: never two members down at once, followers first, the
    /// leader last, and once every Pod carries the hash nothing more is rolled.
    #[test]
    fn a_whole_roll_never_takes_two_members_down_and_ends() {
        let mut observed = cluster(3, V35)
            .members(on(V35, &[0, 1, 2], 2))
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2]);
        for pod in observed.pods.values_mut() {
            pod.config_hash = Some("0000000000000000".into()); // built from an older spec
        }
        let hash = current_hash(&observed);
        let mut rolled = vec![];
        for _ in 0..40 {
            let action = plan(&observed);
            let crate::state::Membership::Known(members) = &mut observed.membership else {
                unreachable!()
            };
            match &action {
                Action::Converged => break,
                Action::RollMember { member, .. } => {
                    rolled.push(member.clone());
                    observed.pods.get_mut(member).unwrap().terminating = true;
                }
                Action::Wait(WaitReason::PodTerminating { member }) => {
                    observed.pods.remove(member);
                    let m = members.iter_mut().find(|m| &m.name == member).unwrap();
                    m.health = MemberHealth::Unhealthy {
                        unhealthy_for: std::time::Duration::from_secs(1),
                    };
                }
                Action::CreateMemberPod { member, .. } => {
                    observed.pods.insert(
                        member.clone(),
                        crate::state::PodState {
                            terminating: false,
                            ready: false,
                            config_hash: hash.clone(),
                            tls_hash: None,
                            snapshot_before_upgrade: false,
                            v2_snapshot_saved: false,
                            listen: None,
                            tls_switch_reverted: false,
                            serving_gate: None,
                        },
                    );
                }
                Action::Wait(WaitReason::MemberUnhealthy { member }) => {
                    // It answers again; the leader hands over leadership when it goes down,
                    // but that is etcd's business: the planner looks at the reported leader.
                    let m = members.iter_mut().find(|m| &m.name == member).unwrap();
                    m.health = MemberHealth::Healthy {
                        version: v(V35),
                        leader: m.id == 0xa2,
                    };
                }
                Action::Wait(WaitReason::PodNotReady { member }) => {
                    observed.pods.get_mut(member).unwrap().ready = true;
                }
                other => panic!("unexpected step {other:?}"),
            }
            // Down: not answering, or out of the client Service (no Pod, stopping, not Ready).
            let down = members
                .iter()
                .filter(|m| {
                    !m.healthy()
                        || observed
                            .pods
                            .get(&m.name)
                            .is_none_or(|p| p.terminating || !p.ready)
                })
                .count();
            assert!(down <= 1, "two members down after {action:?}");
        }
        assert_eq!(rolled, vec![name(0), name(1), name(2)]);
        assert_eq!(plan(&observed), Action::Converged);
        assert!(observed.pods.values().all(|p| p.config_hash == hash));
    }
}
