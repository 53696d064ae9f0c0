//! The quorum gate: the one check every action that takes a voter away (for good or for a
//! while) passes, and the proof of it that such an action carries. Pure.
//!
//! [`QuorumChecked`] has a private field: outside this module it can only be had from
//! [`quorum_gate`], and the destructive variants of [`super::Action`] (remove a member, upgrade,
//! roll, snapshot before an upgrade, defragment) cannot be built without one. So the executor
//! never performs a destructive step the gate did not pass.

use super::quorum;

/// What an action does to the voters, for [`quorum_gate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disruption {
    /// Remove a member that is not a healthy voter: a learner (no vote) or a dead voter (not
    /// among the healthy). The healthy voters are unchanged; etcd commits the removal only with
    /// a quorum of the current voters, and the healthy ones then hold a quorum of one fewer too.
    RemoveUnhealthyOrLearner,
    /// Remove a healthy voter for good (scale down): one voter and one healthy voter fewer.
    RemoveHealthyVoter,
    /// Take a healthy voter down for a while (upgrade, configuration roll, v2 snapshot before
    /// an upgrade, scheduled defragmentation): the voters stay, one healthy voter is missing
    /// meanwhile. A one-member cluster has no redundancy to keep: its short outage is what the
    /// user chose with size 1.
    TakeDownHealthyVoter,
    /// Defragment a member under a NOSPACE alarm: the cluster takes no writes until the alarm
    /// is cleared, and defragmenting every member is the way back. A quorum of healthy voters
    /// is all it needs (the planner checks it before any NOSPACE step). Decided (issue 25's
    /// note): with two voters, the busy one leaves the other without a quorum, so linearizable
    /// reads pause for the seconds the defragmentation takes; that pause is accepted, because
    /// writes already fail and refusing would keep the cluster in NOSPACE for good.
    DefragmentUnderNoSpace,
}

/// Proof that an action passed [`quorum_gate`]; required by every destructive action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuorumChecked(());

/// Why [`quorum_gate`] refused: the healthy voters and the voters it judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuorumShort {
    /// Voters that answer.
    pub healthy: usize,
    /// Voters in the member list.
    pub voters: usize,
}

/// Whether `disruption` keeps quorum with `healthy` of `voters` voters answering now.
pub fn quorum_gate(
    disruption: Disruption,
    healthy: usize,
    voters: usize,
) -> Result<QuorumChecked, QuorumShort> {
    let safe = match disruption {
        Disruption::RemoveUnhealthyOrLearner | Disruption::DefragmentUnderNoSpace => {
            healthy >= quorum(voters)
        }
        // One fewer healthy voter must still be a majority of the voters left.
        Disruption::RemoveHealthyVoter => voters > 1 && healthy > quorum(voters - 1),
        // One fewer healthy voter must still be a majority of the same voters.
        Disruption::TakeDownHealthyVoter => voters == 1 || healthy > quorum(voters),
    };
    if safe {
        Ok(QuorumChecked(()))
    } else {
        Err(QuorumShort { healthy, voters })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape up to seven voters: the gate never lets the healthy voters left drop below
    /// a majority of the voters left, but for the one-member outage and the NOSPACE pause.
    #[test]
    fn the_gate_keeps_a_majority_of_healthy_voters() {
        for voters in 1..=7 {
            for healthy in 0..=voters {
                let pass = |d| quorum_gate(d, healthy, voters).is_ok();
                assert_eq!(
                    pass(Disruption::RemoveUnhealthyOrLearner),
                    healthy >= quorum(voters)
                );
                if pass(Disruption::RemoveHealthyVoter) {
                    assert!(
                        healthy.saturating_sub(1) >= quorum(voters - 1),
                        "{healthy}/{voters}"
                    );
                }
                if pass(Disruption::TakeDownHealthyVoter) && voters > 1 {
                    assert!(
                        healthy.saturating_sub(1) >= quorum(voters),
                        "{healthy}/{voters}"
                    );
                }
                assert_eq!(
                    pass(Disruption::DefragmentUnderNoSpace),
                    pass(Disruption::RemoveUnhealthyOrLearner)
                );
            }
        }
        // Two voters, both answering: a scheduled defragmentation waits, a NOSPACE one goes
        // (reads pause meanwhile; see DefragmentUnderNoSpace).
        assert!(quorum_gate(Disruption::TakeDownHealthyVoter, 2, 2).is_err());
        assert!(quorum_gate(Disruption::DefragmentUnderNoSpace, 2, 2).is_ok());
        assert!(quorum_gate(Disruption::DefragmentUnderNoSpace, 1, 2).is_err());
        assert!(quorum_gate(Disruption::TakeDownHealthyVoter, 1, 1).is_ok());
        assert!(quorum_gate(Disruption::RemoveHealthyVoter, 1, 1).is_err());
        assert_eq!(
            quorum_gate(Disruption::TakeDownHealthyVoter, 2, 3),
            Err(QuorumShort {
                healthy: 2,
                voters: 3
            })
        );
    }
}
