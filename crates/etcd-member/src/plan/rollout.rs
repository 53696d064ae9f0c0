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
    //! The single decisions are scenarios in `testdata/rollout.txt`; this plays a whole roll.

    use crate::fixtures::*;
    use crate::plan::{Action, Policy, WaitReason, next_action};
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

    fn current_hash(observed: &Observed) -> Option<String> {
        Some(crate::build::config_hash(&observed.spec))
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
                            raft_caught_up: false,
                            etcd_started_at: None,
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
