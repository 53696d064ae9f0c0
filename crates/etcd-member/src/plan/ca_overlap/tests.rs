//! The overlap planner, decision by decision and then played whole: a model of the members
//! (sources, copies, Pods) where a running member presents the certificate of its copy as soon
//! as it changes (a real kubelet refreshes the volume and etcd re-reads its certificate per
//! handshake) but trusts only what it was started on, rolled one at a time between passes,
//! with the writes of a pass made one by one (a crash may stop a pass after any of them).

use std::collections::{BTreeMap, BTreeSet};

use super::*;

fn cas(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|ca| (*ca).to_owned()).collect()
}

fn trust(issuer: &str, trusts: &[&str]) -> CertTrust {
    CertTrust {
        issuer: issuer.to_owned(),
        trusts: cas(trusts),
    }
}

/// Certificate `cert` of CA `issuer`, with `trusts` in `ca.crt`.
fn held(cert: &str, issuer: &str, trusts: &[&str]) -> Held {
    Held {
        cert: cert.to_owned(),
        trust: trust(issuer, trusts),
    }
}

fn member(
    name: &str,
    source: Option<Held>,
    mounted: Option<Held>,
    running: Option<Running>,
) -> MemberPeer {
    MemberPeer {
        member: name.to_owned(),
        source,
        mounted,
        running,
    }
}

fn recorded(issuer: &str, trusts: &[&str]) -> Option<Running> {
    Some(Running::Recorded(trust(issuer, trusts)))
}

/// `n` members `m0`, `m1`, … settled on CA "O": source and copy hold an O certificate
/// trusting only O, and each Pod was started on it.
fn settled_on_o(n: usize) -> Vec<MemberPeer> {
    (0..n)
        .map(|i| {
            member(
                &format!("m{i}"),
                Some(held(&format!("o{i}"), "O", &["O"])),
                Some(held(&format!("o{i}"), "O", &["O"])),
                recorded("O", &["O"]),
            )
        })
        .collect()
}

#[test]
fn a_settled_cluster_plans_nothing() {
    let members = settled_on_o(3);
    let planned = plan(&members);
    assert_eq!(planned.writes, []);
    assert_eq!(planned.held_back, []);
    assert_eq!(planned.phase, OverlapPhase::Stable);
}

#[test]
fn a_renewal_by_the_same_ca_is_taken_at_once() {
    let members = [
        member(
            "m0",
            Some(held("o0-renewed", "O", &["O"])),
            Some(held("o0", "O", &["O"])),
            recorded("O", &["O"]),
        ),
        member(
            "m1",
            Some(held("o1", "O", &["O"])),
            Some(held("o1", "O", &["O"])),
            recorded("O", &["O"]),
        ),
    ];
    let planned = plan(&members);
    assert_eq!(
        planned.writes,
        [MountWrite {
            member: "m0".into(),
            cert: CertChoice::FromSource,
            trusts: cas(&["O"]),
        }]
    );
    assert_eq!(planned.phase, OverlapPhase::Stable);
}

/// A Secret you provide moved to CA N in one step (certificate and ca.crt): every copy keeps
/// its certificate of O and trusts both; the new certificate waits for every peer to trust N.
#[test]
fn a_ca_change_in_one_step_is_trusted_first() {
    let members: Vec<MemberPeer> = (0..3)
        .map(|i| {
            member(
                &format!("m{i}"),
                Some(held("n", "N", &["N"])),
                Some(held("o", "O", &["O"])),
                recorded("O", &["O"]),
            )
        })
        .collect();
    let planned = plan(&members);
    let expected: Vec<MountWrite> = (0..3)
        .map(|i| MountWrite {
            member: format!("m{i}"),
            cert: CertChoice::Keep,
            trusts: cas(&["N", "O"]),
        })
        .collect();
    assert_eq!(planned.writes, expected);
    assert_eq!(planned.phase, OverlapPhase::Trusting(cas(&["N"])));
    assert_eq!(
        planned.held_back[1],
        HeldBack {
            member: "m1".into(),
            ca: "N".into(),
            untrusting: vec!["m0".into(), "m2".into()],
        }
    );
}

/// Once every other running member was started trusting N, the copies take the certificates
/// of N (still trusting O: the Pods present O until they roll).
#[test]
fn certificates_of_the_new_ca_are_taken_once_every_peer_trusts_it() {
    let members = [
        member(
            "m0",
            Some(held("n0", "N", &["N"])),
            Some(held("o0", "O", &["N", "O"])),
            recorded("O", &["N", "O"]),
        ),
        member(
            "m1",
            Some(held("n1", "N", &["N"])),
            Some(held("o1", "O", &["N", "O"])),
            // Still on its way: its own trust does not matter for its own certificate.
            recorded("O", &["O"]),
        ),
    ];
    let planned = plan(&members);
    assert_eq!(
        planned.writes,
        [MountWrite {
            member: "m1".into(),
            cert: CertChoice::FromSource,
            trusts: cas(&["N", "O"]),
        }]
    );
    assert_eq!(planned.held_back.len(), 1, "{planned:?}");
    assert_eq!(planned.held_back[0].member, "m0");
}

#[test]
fn the_old_ca_is_dropped_once_nothing_presents_it() {
    let on_n = |i: usize, record: &[&str]| {
        member(
            &format!("m{i}"),
            Some(held(&format!("n{i}"), "N", &["N"])),
            Some(held(&format!("n{i}"), "N", &["N", "O"])),
            recorded("N", record),
        )
    };
    // m1's Pod still runs on its certificate of O: O stays.
    let mut members = vec![on_n(0, &["N", "O"]), on_n(1, &["N", "O"])];
    members[1].running = recorded("O", &["N", "O"]);
    let planned = plan(&members);
    assert_eq!(planned.writes, []);
    assert_eq!(planned.phase, OverlapPhase::Presenting);
    // Every Pod started on N.
    let members = vec![on_n(0, &["N", "O"]), on_n(1, &["N", "O"])];
    let planned = plan(&members);
    assert_eq!(planned.writes.len(), 2);
    assert!(
        planned
            .writes
            .iter()
            .all(|w| w.cert == CertChoice::Keep && w.trusts == cas(&["N"]))
    );
    assert_eq!(planned.phase, OverlapPhase::Dropping(cas(&["O"])));
}

#[test]
fn nothing_is_dropped_or_taken_blind() {
    // A Pod without a record may trust anything: no certificate of a new CA for the others
    // (its own is verified by m1, which trusts N), and no drop.
    let members = [
        member(
            "m0",
            Some(held("n0", "N", &["N"])),
            Some(held("o0", "O", &["N", "O"])),
            Some(Running::Unrecorded),
        ),
        member(
            "m1",
            Some(held("n1", "N", &["N"])),
            Some(held("o1", "O", &["N", "O"])),
            recorded("O", &["N", "O"]),
        ),
    ];
    let planned = plan(&members);
    assert_eq!(
        planned.writes,
        [MountWrite {
            member: "m0".into(),
            cert: CertChoice::FromSource,
            trusts: cas(&["N", "O"]),
        }]
    );
    assert_eq!(planned.held_back.len(), 1, "{planned:?}");
    assert_eq!(planned.held_back[0].member, "m1");
    assert_eq!(planned.held_back[0].untrusting, ["m0"]);
    // A source not usable now (cert-manager re-issuing): its copy keeps what it trusts.
    let members = [
        member(
            "m0",
            None,
            Some(held("o0", "O", &["N", "O"])),
            recorded("O", &["N", "O"]),
        ),
        member(
            "m1",
            Some(held("n1", "N", &["N"])),
            Some(held("n1", "N", &["N", "O"])),
            recorded("N", &["N", "O"]),
        ),
    ];
    let planned = plan(&members);
    assert_eq!(planned.writes, []);
    assert_eq!(planned.phase, OverlapPhase::Presenting);
}

#[test]
fn a_new_member_waits_for_a_certificate_its_peers_trust() {
    let mut members = settled_on_o(2);
    members.push(member("m2", Some(held("n2", "N", &["N"])), None, None));
    let planned = plan(&members);
    // No copy for m2 (its Pod cannot start); the others trust N first.
    assert!(
        planned.writes.iter().all(|w| w.member != "m2"),
        "{planned:?}"
    );
    assert_eq!(planned.writes.len(), 2);
    assert_eq!(planned.held_back[0].member, "m2");
    // A new member whose certificate they trust gets its copy at once.
    members[2].source = Some(held("o2", "O", &["O"]));
    let planned = plan(&members);
    assert_eq!(
        planned.writes,
        [MountWrite {
            member: "m2".into(),
            cert: CertChoice::FromSource,
            trusts: cas(&["O"]),
        }]
    );
}

/// The model: sources as the user or cert-manager left them, copies as the planner's writes
/// left them, Pods as started.
#[derive(Clone, Debug, Default)]
struct Model {
    sources: BTreeMap<String, Held>,
    copies: BTreeMap<String, Held>,
    /// What each running Pod was started on.
    pods: BTreeMap<String, CertTrust>,
    /// Restarts per member (a Pod created counts).
    rolls: BTreeMap<String, usize>,
}

impl Model {
    fn new(size: usize) -> Model {
        let mut model = Model::default();
        for i in 0..size {
            let name = format!("m{i}");
            let cert = held(&format!("o{i}"), "O", &["O"]);
            model.pods.insert(name.clone(), cert.trust.clone());
            model.sources.insert(name.clone(), cert.clone());
            model.copies.insert(name, cert);
        }
        model
    }

    fn observed(&self) -> Vec<MemberPeer> {
        self.sources
            .keys()
            .chain(self.pods.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|name| MemberPeer {
                member: name.clone(),
                source: self.sources.get(name).cloned(),
                mounted: self.copies.get(name).cloned(),
                running: self.pods.get(name).cloned().map(Running::Recorded),
            })
            .collect()
    }

    /// What a running member may present: what it was started on, or its copy's certificate
    /// once the kubelet refreshed the volume.
    fn may_present(&self, name: &str) -> BTreeSet<&String> {
        let mut presented: BTreeSet<&String> =
            self.pods.get(name).map(|p| &p.issuer).into_iter().collect();
        presented.extend(self.copies.get(name).map(|c| &c.trust.issuer));
        presented
    }

    /// No running member may present a certificate another running member does not trust.
    fn assert_connected(&self, when: &str) {
        for a in self.pods.keys() {
            for (b, trusted) in &self.pods {
                if a == b {
                    continue;
                }
                for ca in self.may_present(a) {
                    assert!(
                        trusted.trusts.contains(ca),
                        "{when}: {a} may present a certificate of {ca} that {b} does not trust: \
                         {self:#?}"
                    );
                }
            }
        }
    }

    /// One pass's writes, made one by one (`budget` of them at most: a crash after that).
    fn write(&mut self, budget: usize) -> usize {
        let planned = plan(&self.observed());
        let mut made = 0;
        for write in planned.writes.into_iter().take(budget) {
            let cert = match write.cert {
                CertChoice::Keep => self.copies[&write.member].clone(),
                CertChoice::FromSource => self.sources[&write.member].clone(),
            };
            let copy = Held {
                cert: cert.cert,
                trust: CertTrust {
                    issuer: cert.trust.issuer,
                    trusts: write.trusts,
                },
            };
            self.copies.insert(write.member.clone(), copy);
            made += 1;
            self.assert_connected(&format!("after writing {}'s copy", write.member));
        }
        made
    }

    /// Restarts (or starts) the first member whose Pod does not run on its copy as it is, if
    /// the guard of operators/cluster/src/trust.rs lets it: its certificate trusted by every
    /// running peer, and its ca.crt trusting what each of them may present. Returns it.
    fn roll_one(&mut self) -> Option<String> {
        let name = self
            .copies
            .iter()
            .find(|(name, copy)| self.pods.get(*name) != Some(&copy.trust))
            .map(|(name, _)| name.clone())?;
        let copy = self.copies[&name].clone();
        for (other, theirs) in self.pods.iter().filter(|(o, _)| **o != name) {
            assert!(
                theirs.trusts.contains(&copy.trust.issuer),
                "{name} would be refused: {other} does not trust {}: {self:#?}",
                copy.trust.issuer
            );
            for ca in self.may_present(other) {
                assert!(
                    copy.trust.trusts.contains(ca),
                    "{name} would be refused: it would not trust {other}'s {ca}: {self:#?}"
                );
            }
        }
        self.pods.insert(name.clone(), copy.trust);
        *self.rolls.entry(name.clone()).or_default() += 1;
        self.assert_connected(&format!("after rolling {name}"));
        Some(name)
    }

    /// Passes (each making at most `budget` writes) and rolls, alternating, until neither has
    /// anything left.
    fn settle(&mut self, budget: usize) {
        for _ in 0..200 {
            let made = self.write(budget);
            let rolled = self.roll_one();
            if made == 0 && rolled.is_none() {
                return;
            }
        }
        panic!("did not settle: {self:#?}");
    }

    fn assert_all_on(&self, ca: &str) {
        for (name, copy) in &self.copies {
            assert_eq!(copy.trust, trust(ca, &[ca]), "{name}'s copy: {self:#?}");
            assert_eq!(
                self.pods.get(name),
                Some(&copy.trust),
                "{name}'s Pod: {self:#?}"
            );
        }
        assert_eq!(plan(&self.observed()).phase, OverlapPhase::Stable);
    }
}

/// A Secret you provide, moved to CA N in one step, whatever a crash interrupts: at most three
/// rolls of each member (trust both, present N, trust N alone; the last member to trust both
/// may take its certificate of N in the same write, its own trust not mattering to what it
/// presents) and never two running members that could not verify each other.
#[test]
fn a_shared_secret_moved_to_a_new_ca_in_one_step_completes_connected() {
    for budget in [1, 2, usize::MAX] {
        let mut model = Model::new(3);
        for source in model.sources.values_mut() {
            *source = held("n", "N", &["N"]);
        }
        model.settle(budget);
        model.assert_all_on("N");
        assert!(
            model.rolls.values().all(|r| (2..=3).contains(r)),
            "budget {budget}: {:?}",
            model.rolls
        );
    }
}

/// cert-manager renews the members' Certificates from the replaced issuer one at a time, with
/// rolls in between: the overlap lasts until the last one, then O is dropped.
#[test]
fn cert_manager_renewals_from_a_new_ca_one_by_one_complete_connected() {
    let mut model = Model::new(3);
    model.sources.insert("m1".into(), held("n1", "N", &["N"]));
    model.settle(usize::MAX);
    // m1 presents N, the others O; everyone trusts both.
    assert_eq!(model.copies["m1"].trust, trust("N", &["N", "O"]));
    assert_eq!(model.copies["m0"].trust, trust("O", &["N", "O"]));
    assert_eq!(plan(&model.observed()).phase, OverlapPhase::Presenting);
    // A member replaced meanwhile gets a certificate of N and trusts both.
    model.pods.remove("m2");
    model.copies.remove("m2");
    model.sources.insert("m2".into(), held("n2", "N", &["N"]));
    model.settle(1);
    assert_eq!(model.pods["m2"], trust("N", &["N", "O"]));
    model.sources.insert("m0".into(), held("n0", "N", &["N"]));
    model.settle(1);
    model.assert_all_on("N");
}

/// A new member whose certificate (of N) the running members do not trust waits for its copy
/// until they rolled onto the bundle; it then starts and the cluster settles on N.
#[test]
fn a_member_added_during_a_ca_change_starts_once_trusted() {
    let mut model = Model::new(2);
    model.sources.insert("m2".into(), held("n2", "N", &["N"]));
    let first = plan(&model.observed());
    assert!(first.writes.iter().all(|w| w.member != "m2"));
    model.settle(usize::MAX);
    assert_eq!(
        model.rolls["m2"], 1,
        "m2 started once, on N: {:?}",
        model.rolls
    );
    // m0 and m1 stay on O (their sources are) and everyone trusts both.
    assert_eq!(model.pods["m0"], trust("O", &["N", "O"]));
    for name in ["m0", "m1"] {
        model
            .sources
            .insert(name.into(), held(&format!("n-{name}"), "N", &["N"]));
    }
    model.settle(usize::MAX);
    model.assert_all_on("N");
}
