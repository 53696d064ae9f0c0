//! Rotation of the operator-managed CA, with an overlap period. Pure.
//!
//! etcd reads its trusted CA file only when it starts (measured on 3.5 and 3.6), so a new CA
//! reaches the members through rolls, and no step may leave two members unable to verify each
//! other. Three phases, each recorded in the CA Secret itself (one write per step, so a crash at
//! any point resumes from what the Secret says):
//!
//! ```text
//!   Stable (issue A, trust A)
//!     │ rotation wanted (annotation etcd.operator.rs/rotate-ca changed, or A near expiry)
//!     ▼
//!   Trusting (issue A, trust A+B)  every member Secret gets ca.crt A+B; members roll
//!     │ every member settled
//!     ▼
//!   Issuing (issue B, trust A+B)   member and client certificates re-issued by B; members roll
//!     │ every member settled
//!     ▼
//!   Stable (issue B, trust B)      ca.crt B everywhere; members roll
//! ```
//!
//! "Settled": every member Pod (not being deleted) is Ready and was built from the certificate
//! Secrets as they are now (its `etcd.operator.rs/tls-hash` matches): the previous step's roll
//! is complete. A member without a Pod holds nothing stale: its next Pod mounts the Secrets as
//! they are. The rolls themselves are the planner's ordinary quorum-gated, one-at-a-time rolls
//! (`rollout.rs`).

/// Where a rotation of the operator-managed CA stands (read from the CA Secret).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaPhase {
    /// One CA issues and is trusted.
    Stable,
    /// A new CA is trusted next to the one that still issues.
    Trusting,
    /// The new CA issues; the previous one is still trusted.
    Issuing,
}

/// The next write to the CA Secret, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaStep {
    /// Nothing to do now (no rotation wanted, or the members are still rolling).
    Keep,
    /// Create the next CA and trust it next to the current one.
    StartRotation,
    /// Issue from the next CA, still trusting the previous one.
    SwitchIssuer,
    /// Trust only the CA that issues.
    DropPrevious,
}

/// A member's Pod, as far as its certificates go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberCerts {
    /// Its Pod is Ready.
    pub ready: bool,
    /// The certificate hash its Pod records (`None`: none recorded).
    pub pod_hash: Option<String>,
    /// The hash of its certificate Secrets as they are now (`None`: unknown).
    pub current_hash: Option<String>,
}

/// Every member Pod runs on its certificate Secrets as they are now, Ready.
pub fn members_settled(members: &[MemberCerts]) -> bool {
    members
        .iter()
        .all(|m| m.ready && m.pod_hash.is_some() && m.pod_hash == m.current_hash)
}

/// The next step of a rotation: `wanted` is a rotation request not yet served (or the CA near
/// expiry); `settled` is [`members_settled`]. A rotation starts only on a settled cluster (no
/// roll in flight), and each phase ends only once the members rolled onto it.
pub fn next_ca_step(phase: CaPhase, wanted: bool, settled: bool) -> CaStep {
    match (phase, settled) {
        (_, false) => CaStep::Keep,
        (CaPhase::Stable, true) if wanted => CaStep::StartRotation,
        (CaPhase::Stable, true) => CaStep::Keep,
        (CaPhase::Trusting, true) => CaStep::SwitchIssuer,
        (CaPhase::Issuing, true) => CaStep::DropPrevious,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(ready: bool, pod: Option<&str>, now: Option<&str>) -> MemberCerts {
        MemberCerts {
            ready,
            pod_hash: pod.map(str::to_owned),
            current_hash: now.map(str::to_owned),
        }
    }

    #[test]
    fn settled_means_every_pod_ready_on_its_secrets_as_they_are() {
        let cases: [(&[MemberCerts], bool); 7] = [
            (&[], true),
            (&[member(true, Some("a"), Some("a"))], true),
            (
                &[
                    member(true, Some("a"), Some("a")),
                    member(true, Some("b"), Some("b")),
                ],
                true,
            ),
            // A member still to roll onto changed Secrets.
            (
                &[
                    member(true, Some("a"), Some("a")),
                    member(true, Some("b"), Some("c")),
                ],
                false,
            ),
            // Rolled but not Ready yet.
            (&[member(false, Some("a"), Some("a"))], false),
            // A Pod without a hash (not adopted yet), Ready or not.
            (&[member(false, None, Some("a"))], false),
            (&[member(true, None, None)], false),
        ];
        for (members, settled) in cases {
            assert_eq!(members_settled(members), settled, "{members:?}");
        }
    }

    #[test]
    fn each_phase_advances_only_once_the_members_rolled_onto_it() {
        use CaPhase::*;
        use CaStep::*;
        // (phase, wanted, settled, step)
        let cases = [
            (Stable, false, true, Keep),
            (Stable, true, true, StartRotation),
            (Stable, true, false, Keep),
            (Trusting, false, false, Keep),
            (Trusting, false, true, SwitchIssuer),
            (Trusting, true, true, SwitchIssuer),
            (Issuing, true, false, Keep),
            (Issuing, false, true, DropPrevious),
        ];
        for (phase, wanted, settled, step) in cases {
            assert_eq!(
                next_ca_step(phase, wanted, settled),
                step,
                "{phase:?} wanted {wanted} settled {settled}"
            );
        }
    }

    /// A whole rotation, with the members rolling between the steps: each step waits for the
    /// roll the previous one caused, and the request is served once.
    #[test]
    fn a_rotation_walks_the_three_phases_once() {
        let mut phase = CaPhase::Stable;
        let mut served = false;
        let mut steps = vec![];
        for settled in [false, true, false, true, false, true, true, true] {
            let step = next_ca_step(phase, !served, settled);
            phase = match step {
                CaStep::Keep => phase,
                CaStep::StartRotation => {
                    served = true;
                    CaPhase::Trusting
                }
                CaStep::SwitchIssuer => CaPhase::Issuing,
                CaStep::DropPrevious => CaPhase::Stable,
            };
            steps.push(step);
        }
        use CaStep::*;
        assert_eq!(
            steps,
            [
                Keep,
                StartRotation,
                Keep,
                SwitchIssuer,
                Keep,
                DropPrevious,
                Keep,
                Keep
            ]
        );
    }
}
