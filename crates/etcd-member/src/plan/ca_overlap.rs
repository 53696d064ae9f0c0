//! The CA overlap the operator builds itself for peer certificates it does not issue (a Secret
//! you provide, or cert-manager's). Pure.
//!
//! Why it is needed. etcd reads its trusted CA file only when it starts, but re-reads its own
//! certificate and key on every TLS handshake (etcd-facts.md), and a real kubelet refreshes a
//! Secret volume in a running Pod within about a minute. So when a member mounts its source
//! Secret directly and that Secret moves to a new CA in one step (cert-manager renewing from an
//! issuer whose CA was replaced writes the new certificate and `ca.crt` = the new CA alone; a
//! Secret you provide updated the same way), the running member starts presenting a
//! certificate its running peers do not trust, without any restart: refusing the roll
//! (`operators/cluster/src/trust.rs`) cannot prevent that, only a layer between the source and
//! the member can.
//!
//! The layer: each member mounts a copy of its peer certificate that the operator owns (the
//! "mounted copy": `tls.crt` and `tls.key` of its source, `ca.crt` a trust bundle), and this
//! planner decides what each copy holds, from three observations per member, each reduced to CA
//! fingerprints: the source Secret as it is now, the copy as it is now, and what the running
//! Pod was started on (its `etcd.operator.rs/peer-trust` record). There is no phase to store:
//! the copies and the records are the state, so a crash anywhere resumes from them.
//!
//! ```text
//!   presented = the CAs of the certificates in the copies and in the running Pods' records
//!               (with a real kubelet a Pod presents either)
//!   bundle    = presented ∪ the CAs of every source's ca.crt           (every copy's ca.crt)
//!   a copy takes its source's certificate only once every OTHER running Pod trusts the
//!   source's CA (its record lists it); until then it keeps the one it has.
//! ```
//!
//! A CA change (O to N) then walks, with the ordinary one-at-a-time, quorum-gated rolls of
//! members whose mounted Secrets changed (`rollout.rs`) between the steps:
//!
//! ```text
//!   source: cert N, ca.crt N       copies: cert O, ca.crt O+N   roll every member  (Trusting)
//!   every running Pod trusts N     copies: cert N, ca.crt O+N   roll every member  (Presenting)
//!   every Pod started on cert N    copies: cert N, ca.crt N     roll every member  (Dropping)
//! ```
//!
//! cert-manager renews the members' Certificates one at a time: the overlap lasts until the
//! last source moved to N (O stays trusted while any copy or Pod presents it). A renewal by the
//! same CA is taken at once (one roll, as before). A CA is dropped only when no copy holds a
//! certificate of it, no running Pod was started on one, and no source's `ca.crt` lists it; a
//! Pod with no record (built before records existed) or a member whose source is not usable
//! right now holds every drop back. A member without a copy (a new member, or one being
//! replaced) gets one only with a certificate every running Pod trusts: it waits while the
//! others roll onto the bundle.
//!
//! Wiring (the cluster operator): the copies are `<member>-peer-mounted`
//! (`etcd_api::tls::mounted_peer_secret_name`), owned by the EtcdCluster, mounted by
//! `build::member_tls_volumes` for a peer side that is not operator-managed. Each pass's TLS
//! writes (`operators/cluster/src/tls/writes.rs`) read the copies of every known member (Pod,
//! PVC or etcd entry), call [`plan`] through `operators/cluster/src/overlap.rs` and write the
//! copies with the other Secrets (create/replace, the `cluster.secret_create` and
//! `cluster.secret_replace` failpoints). A member's Pod waits for its copy. A Pod built before
//! copies existed mounts its source directly and reads by its record (what it trusts is what
//! it started on; what it presents, that or its source's certificate, is in every bundle, which
//! holds every source's CA); its certificate hash marks the copy, so it is rolled onto its copy
//! once. `trust::peer_trust_refusals` judges the copies, which this planner keeps passing.
//!
//! A member added (or replaced) while the running members do not trust its source's CA yet
//! waits for its copy until they rolled onto the bundle. Whether the planner rolls them while
//! that member has no Pod is the quorum gate's call, so such an addition may wait until the
//! change is otherwise complete: a liveness limit, not a safety one (nothing starts on a
//! certificate its peers do not trust).
//!
//! What stays outside: the client port. Its certificates are verified by clients the operator
//! does not know (its own, through the operators' client Secret, are checked in
//! `operators/cluster/src/trust.rs`), so it cannot gate on them.

use std::collections::BTreeSet;

/// A certificate Secret as far as trust goes: the fingerprint of the CA that signed its
/// certificate, and those of the CAs of its `ca.crt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertTrust {
    /// The CA that signed `tls.crt`.
    pub issuer: String,
    /// Every CA of `ca.crt`.
    pub trusts: BTreeSet<String>,
}

/// A Secret's certificate and trust: [`CertTrust`] and an identity of the certificate itself
/// (a digest of `tls.crt` and `tls.key`), to tell a renewal from the same certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Identity of the certificate and key.
    pub cert: String,
    /// Its CA and the CAs trusted next to it.
    pub trust: CertTrust,
}

/// A running member Pod (not being deleted), as far as trust goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Running {
    /// It records what it was started on.
    Recorded(CertTrust),
    /// It records nothing (built before records existed): it may present and trust anything.
    Unrecorded,
}

/// One member's peer certificates, as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberPeer {
    /// The member's name.
    pub member: String,
    /// Its source Secret as it is now; `None` while it is pending (cert-manager has not filled
    /// it) or unusable (refused elsewhere).
    pub source: Option<Held>,
    /// Its mounted copy as it is now; `None` when it does not exist yet.
    pub mounted: Option<Held>,
    /// Its Pod, when one runs.
    pub running: Option<Running>,
}

/// What a copy's certificate becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertChoice {
    /// The certificate the copy holds.
    Keep,
    /// The source's certificate (and key).
    FromSource,
}

/// One copy to create or replace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountWrite {
    /// Whose copy.
    pub member: String,
    /// Its certificate.
    pub cert: CertChoice,
    /// Its `ca.crt`: these CAs (fingerprints; every one is in a source's or a copy's `ca.crt`).
    pub trusts: BTreeSet<String>,
}

/// Where the overlap stands, for status and events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverlapPhase {
    /// Every copy holds its source's certificate and trusts what is presented: nothing beyond
    /// an ordinary renewal.
    Stable,
    /// Certificates of these CAs wait until every running member trusts them.
    Trusting(BTreeSet<String>),
    /// Every running member trusts the new CAs; copies take their certificates.
    Presenting,
    /// These CAs are no longer presented; copies stop trusting them.
    Dropping(BTreeSet<String>),
}

/// A member whose copy keeps an older certificate (or, without a copy, waits for one) because
/// running members do not trust its source's CA yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldBack {
    /// The member.
    pub member: String,
    /// The CA of its source's certificate.
    pub ca: String,
    /// The running members that do not trust it yet.
    pub untrusting: Vec<String>,
}

/// The outcome of [`plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlapPlan {
    /// The copies to create or replace (those that differ), by member order.
    pub writes: Vec<MountWrite>,
    /// Members held back.
    pub held_back: Vec<HeldBack>,
    /// Where the overlap stands.
    pub phase: OverlapPhase,
}

/// What each member's copy should hold now (module doc). Pure and stateless: the copies and the
/// Pods' records are the state.
pub fn plan(members: &[MemberPeer]) -> OverlapPlan {
    let records: Vec<(&str, Option<&CertTrust>)> = members
        .iter()
        .filter_map(|m| {
            m.running.as_ref().map(|r| match r {
                Running::Recorded(trust) => (m.member.as_str(), Some(trust)),
                Running::Unrecorded => (m.member.as_str(), None),
            })
        })
        .collect();
    // Nothing is dropped while something could present a CA we do not see: a Pod without a
    // record, or a member whose source is not usable now (its next certificate is unknown).
    let blind = records.iter().any(|(_, r)| r.is_none())
        || members
            .iter()
            .any(|m| m.source.is_none() && (m.mounted.is_some() || m.running.is_some()));
    let mut bundle: BTreeSet<String> = BTreeSet::new();
    for m in members {
        if let Some(held) = &m.mounted {
            bundle.insert(held.trust.issuer.clone());
            if blind {
                bundle.extend(held.trust.trusts.iter().cloned());
            }
        }
        if let Some(source) = &m.source {
            bundle.extend(source.trust.trusts.iter().cloned());
            // A source's ca.crt signs its certificate (checked before it is usable); its CA
            // is trusted in any case.
            bundle.insert(source.trust.issuer.clone());
        }
    }
    for (_, record) in &records {
        if let Some(record) = record {
            bundle.insert(record.issuer.clone());
            if blind {
                bundle.extend(record.trusts.iter().cloned());
            }
        }
    }

    let mut writes = Vec::new();
    let mut held_back = Vec::new();
    for m in members {
        let Some(source) = &m.source else {
            // Nothing to take: the copy (if any) only follows the bundle.
            if let Some(held) = &m.mounted
                && held.trust.trusts != bundle
            {
                writes.push(MountWrite {
                    member: m.member.clone(),
                    cert: CertChoice::Keep,
                    trusts: bundle.clone(),
                });
            }
            continue;
        };
        let current = m.mounted.as_ref().is_some_and(|h| h.cert == source.cert);
        let untrusting: Vec<String> = records
            .iter()
            .filter(|(other, _)| *other != m.member)
            .filter(|(_, record)| !record.is_some_and(|r| r.trusts.contains(&source.trust.issuer)))
            .map(|(other, _)| (*other).to_owned())
            .collect();
        let cert = if current {
            CertChoice::Keep
        } else if untrusting.is_empty() {
            CertChoice::FromSource
        } else {
            held_back.push(HeldBack {
                member: m.member.clone(),
                ca: source.trust.issuer.clone(),
                untrusting,
            });
            CertChoice::Keep
        };
        match (&m.mounted, &cert) {
            // No copy and nothing trusted to put in it: it waits.
            (None, CertChoice::Keep) => {}
            (Some(held), CertChoice::Keep) if held.trust.trusts == bundle => {}
            _ => writes.push(MountWrite {
                member: m.member.clone(),
                cert,
                trusts: bundle.clone(),
            }),
        }
    }

    // Copies that only change their trust bundle first: a copy taking a certificate of a new
    // CA is written after every other copy trusts it (a crash in between resumes here).
    writes.sort_by_key(|w| w.cert == CertChoice::FromSource);
    let presented: BTreeSet<&String> = members
        .iter()
        .filter_map(|m| m.mounted.as_ref().map(|h| &h.trust.issuer))
        .chain(records.iter().filter_map(|(_, r)| r.map(|r| &r.issuer)))
        .collect();
    let sourced: BTreeSet<&String> = members
        .iter()
        .filter_map(|m| m.source.as_ref().map(|s| &s.trust.issuer))
        .collect();
    let dropped: BTreeSet<String> = members
        .iter()
        .filter_map(|m| m.mounted.as_ref())
        .flat_map(|h| h.trust.trusts.iter())
        .filter(|ca| !bundle.contains(*ca))
        .cloned()
        .collect();
    let phase = if !held_back.is_empty() {
        OverlapPhase::Trusting(held_back.iter().map(|h| h.ca.clone()).collect())
    } else if presented.len() > 1 || presented.iter().any(|ca| !sourced.contains(ca)) {
        OverlapPhase::Presenting
    } else if !dropped.is_empty() {
        OverlapPhase::Dropping(dropped)
    } else {
        OverlapPhase::Stable
    };
    OverlapPlan {
        writes,
        held_back,
        phase,
    }
}

#[cfg(test)]
mod tests;
