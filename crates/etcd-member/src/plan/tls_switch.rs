//! Switching a running plaintext cluster to TLS (`spec.tls` set on a cluster that has members)
//! without losing quorum or a write. Pure.
//!
//! etcd cannot serve `http://` and `https://` on one port, and a member's peers reach it at the
//! peer URL etcd's member list holds for it. So each member first listens on both, then its
//! peer URL moves (`MemberUpdate`), and only once every member's peer URL is `https://` do the
//! plaintext listeners go. Each round goes member by member, one at a time, followers first
//! and the leader last; a round starts once the previous one is through:
//!
//! ```text
//!   Plain     listens http://:2380                 peer URL http://…:2380
//!     │ 1. roll (quorum-gated), every member
//!   Dual      listens http://:2380 + https://:2382 peer URL http://…:2380
//!     │ 2. MemberUpdate (quorum-gated), once every member is Ready on the dual listeners
//!   Switched  listens http://:2380 + https://:2382 peer URL https://…:2382
//!     │ healthy: next member          unhealthy past `revert_after`: MemberUpdate back (Dual)
//!     │ 3. roll (quorum-gated), once every member is Switched
//!   Https     listens https://:2382                peer URL https://…:2382
//! ```
//!
//! Round 1 is whole before any URL moves: etcd dials each peer at its URL (to receive from
//! it), so a member still on plain flags, without the CA and a peer certificate, could not
//! reach a peer whose URL became `https://`.
//!
//! The peer URL keeps port 2382 after the switch: moving it back to 2380 would need another
//! dual-listening roll and `MemberUpdate` per member, for no gain in safety.
//!
//! Clients: while a member listens on both peer sides it also serves clients on
//! `http://:2379` and `https://:2378`. The operator's own client moves to TLS once every member
//! serves it ([`operator_client_tls`]). Plaintext client serving stops only on the annotation
//! [`ANNOTATION_DROP_PLAINTEXT_CLIENTS`]: plaintext clients break at that point; then each member
//! is rolled to serve `https://` on 2379 *and* 2378 ([`Listen::HttpsWithSwitchPort`]). Keeping
//! 2378 means no client moves twice: a client that moved to `https://…:2378` during the switch
//! keeps working through the last roll (every member serves TLS on 2378 at every point of it,
//! where TLS on 2379 appears member by member) and after it. A cluster created with TLS never
//! listened on 2378 and never does.
//!
//! No stage is recorded anywhere: it is read from what each member Pod listens on (its flags)
//! and the peer URL etcd holds for it, so a crash at any point resumes at the right step. A
//! member without a Pod gets, when it is re-created, the listeners [`desired_listen`] gives.
//!
//! A member removed as dead mid-switch is replaced before the switch goes on (with one voter
//! fewer no roll would pass the quorum gate): the new member joins on `http://…:2380` while
//! some voter's URL is still `http://` (its Pod listens on both, and the switch moves its URL
//! like the others'), on `https://…:2382` once every voter's URL is there.

use std::time::Duration;

use super::{Disruption, QuorumChecked, quorum_gate};

pub use crate::naming::{SWITCH_CLIENT_TLS_PORT, SWITCH_PEER_TLS_PORT};
/// Annotation on the EtcdCluster (value `"true"`): stop serving plaintext clients once the
/// switch to TLS has given every member an `https://` client listener.
pub const ANNOTATION_DROP_PLAINTEXT_CLIENTS: &str = "etcd.operator.rs/drop-plaintext-clients";
/// Annotation on a member Pod (value `"true"`): its peer URL was moved back to `http://`.
pub const ANNOTATION_TLS_SWITCH_REVERTED: &str = "etcd.operator.rs/tls-switch-reverted";
/// How long a member whose peer URL was just moved to `https://` may stay unhealthy before the
/// URL is moved back. Well under the planner's replacement deadline (5 minutes), so a member
/// whose TLS does not work is reverted, never replaced.
pub const REVERT_AFTER: Duration = Duration::from_secs(60);

/// What a member serves on one side (peer or client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Listen {
    /// `http://` only (on 2380 / 2379).
    Http,
    /// `http://` on 2380 / 2379 and `https://` on [`SWITCH_PEER_TLS_PORT`] /
    /// [`SWITCH_CLIENT_TLS_PORT`].
    Dual,
    /// `https://` only: peers on the port of the member's peer URL, clients on 2379.
    Https,
    /// Client side only: `https://` only, on 2379 and on [`SWITCH_CLIENT_TLS_PORT`]. The client
    /// side of a cluster switched from plaintext once plaintext clients are dropped, so that
    /// the clients that moved to `https://…:2378` during the switch never have to move again.
    HttpsWithSwitchPort,
}

impl Listen {
    /// It serves `http://` (plaintext clients or peers).
    pub fn serves_plain(self) -> bool {
        matches!(self, Listen::Http | Listen::Dual)
    }

    /// On the client side: it serves `https://` on [`SWITCH_CLIENT_TLS_PORT`] (2378).
    pub fn serves_switch_client_port(self) -> bool {
        matches!(self, Listen::Dual | Listen::HttpsWithSwitchPort)
    }
}

/// The listeners of a member Pod, both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listeners {
    /// Peer side.
    pub peer: Listen,
    /// Client side.
    pub client: Listen,
}

/// One voter, as far as the switch goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchMember {
    /// Member name.
    pub name: String,
    /// etcd member ID.
    pub id: u64,
    /// The peer URL etcd's member list holds for it is `https://`.
    pub peer_url_tls: bool,
    /// Its advertised client URL is `http://` (or it advertises none yet).
    pub client_url_plain: bool,
    /// One of its advertised client URLs is `https://…:2378` ([`SWITCH_CLIENT_TLS_PORT`]): it
    /// served TLS clients there when it last started, i.e. the cluster was switched from
    /// plaintext. What keeps 2378 while the member has no Pod (a one-member cluster mid-roll).
    pub client_url_on_switch_port: bool,
    /// It answers its status request.
    pub healthy: bool,
    /// It is the raft leader.
    pub leader: bool,
    /// Since when it does not answer (zero when it does).
    pub unhealthy_for: Duration,
    /// Its Pod; `None` when it has none.
    pub pod: Option<SwitchPod>,
}

/// A member Pod, as far as the switch goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchPod {
    /// What it listens on (read from its etcd flags).
    pub listen: Listeners,
    /// The kubelet reports it Ready.
    pub ready: bool,
    /// Its deletion was requested.
    pub terminating: bool,
    /// Its peer URL was moved back to `http://` after it did not come up on TLS (annotation
    /// [`ANNOTATION_TLS_SWITCH_REVERTED`], written before the `MemberUpdate` back): the switch
    /// stops at this member until its Pod is re-created (delete it to try again).
    pub reverted: bool,
}

/// What the spec asks and what the user allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchWanted {
    /// `spec.tls.peer` is set.
    pub peer_tls: bool,
    /// `spec.tls.client` is set.
    pub client_tls: bool,
    /// [`ANNOTATION_DROP_PLAINTEXT_CLIENTS`] is `"true"`.
    pub drop_plaintext_clients: bool,
}

/// The one next step of a switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchStep {
    /// Delete the member's Pod so that it comes back with `to` ([`desired_listen`] gives the
    /// same for its next Pod). The member is down meanwhile: quorum-gated.
    Roll {
        /// Member name.
        member: String,
        /// What its Pod listens on now.
        from: Listeners,
        /// What its next Pod listens on.
        to: Listeners,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// `MemberUpdate` the member's peer URL: to `https://…:2382` (`to_tls`), or back to
    /// `http://…:2380` when it did not come up healthy on TLS within [`REVERT_AFTER`] (first
    /// marking its Pod [`ANNOTATION_TLS_SWITCH_REVERTED`], so that it is not moved forward
    /// again). Its peers
    /// reconnect to the new URL, so it is out of the quorum until they do: quorum-gated.
    UpdatePeerUrl {
        /// Member name.
        member: String,
        /// etcd member ID.
        id: u64,
        /// `https://` (forward) or `http://` (revert).
        to_tls: bool,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// Nothing safe now (a member down, not Ready, a Pod being deleted); observe again.
    Wait(SwitchWait),
}

/// Why the switch waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchWait {
    /// This member has no Pod, or its Pod is being deleted: it comes back first.
    PodMissing(String),
    /// This member's Pod is not Ready yet (just rolled): the next step waits, so never two
    /// members are down at once.
    PodNotReady(String),
    /// This member's peer URL just moved to `https://` and it does not answer yet (within
    /// [`REVERT_AFTER`]).
    SettlingOnTls(String),
    /// This member does not answer; the switch does not disrupt another meanwhile.
    MemberUnhealthy(String),
    /// This member's peer URL was moved back to `http://` (it did not come up on TLS within
    /// [`REVERT_AFTER`]): fix its certificates, then delete its Pod to try again.
    Reverted(String),
    /// The quorum gate refused.
    WouldLoseQuorum {
        /// Member the step concerns.
        member: String,
        /// Voters that answer.
        healthy: usize,
        /// Voters.
        voters: usize,
    },
}

/// What a member Pod listens on, read from its etcd flags (`--listen-peer-urls`,
/// `--listen-client-urls`); `None` when a flag is missing or names neither scheme. A client
/// side that serves `https://` alone, on 2378 among others, is [`Listen::HttpsWithSwitchPort`].
pub fn listeners_of_args(args: &[String]) -> Option<Listeners> {
    let urls = |flag: &str| -> Option<Vec<(String, Option<u16>)>> {
        let value = args.iter().find_map(|a| a.strip_prefix(flag))?;
        Some(
            value
                .split(',')
                .filter_map(|url| {
                    let (scheme, rest) = url.split_once("://")?;
                    let port = rest.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
                    Some((scheme.to_owned(), port))
                })
                .collect(),
        )
    };
    let side = |urls: &[(String, Option<u16>)]| {
        let http = urls.iter().any(|(scheme, _)| scheme == "http");
        let https = urls.iter().any(|(scheme, _)| scheme == "https");
        match (http, https) {
            (true, true) => Some(Listen::Dual),
            (true, false) => Some(Listen::Http),
            (false, true) => Some(Listen::Https),
            (false, false) => None,
        }
    };
    let client_urls = urls("--listen-client-urls=")?;
    let client = match side(&client_urls)? {
        Listen::Https
            if client_urls
                .iter()
                .any(|(_, port)| *port == Some(SWITCH_CLIENT_TLS_PORT)) =>
        {
            Listen::HttpsWithSwitchPort
        }
        other => other,
    };
    Some(Listeners {
        peer: side(&urls("--listen-peer-urls=")?)?,
        client,
    })
}

/// A member keeps an `http://` peer listener until every member's peer URL is `https://`: a
/// revert must still find it there, and plaintext peers may still dial it.
fn desired_peer(wanted: &SwitchWanted, members: &[SwitchMember]) -> Listen {
    if !wanted.peer_tls {
        Listen::Http
    } else if members.iter().all(|m| m.peer_url_tls) {
        Listen::Https
    } else {
        Listen::Dual
    }
}

/// Plaintext clients are still being served: some member Pod (not being deleted) listens on
/// `http://` for clients, or some member advertises an `http://` client URL (a member whose Pod
/// is gone is judged by what it advertised).
pub fn plaintext_clients_served(members: &[SwitchMember]) -> bool {
    members.iter().any(|m| match m.pod {
        Some(pod) if !pod.terminating => pod.listen.client.serves_plain(),
        _ => m.client_url_plain,
    })
}

/// The cluster was switched from plaintext, as far as its clients go: some member serves, or
/// (its Pod gone or going) last advertised, `https://` on 2378. A cluster created with TLS
/// never did; a switched one always has such a member, since members roll one at a time and
/// each comes back with 2378 while another has it.
pub fn clients_switched_from_plaintext(members: &[SwitchMember]) -> bool {
    members.iter().any(|m| {
        m.client_url_on_switch_port
            || m.pod
                .is_some_and(|pod| pod.listen.client.serves_switch_client_port())
    })
}

fn desired_client(wanted: &SwitchWanted, members: &[SwitchMember]) -> Listen {
    if !wanted.client_tls {
        Listen::Http
    } else if wanted.drop_plaintext_clients || !plaintext_clients_served(members) {
        if clients_switched_from_plaintext(members) {
            Listen::HttpsWithSwitchPort
        } else {
            Listen::Https
        }
    } else {
        Listen::Dual
    }
}

/// What every member Pod built now listens on: the same for all members, derived from the
/// member list and the Pods alone (so a member re-created mid-switch gets the listeners of
/// its stage). A cluster created with TLS gets `Https` on both sides at once; a plaintext one,
/// `Http`.
pub fn desired_listen(wanted: &SwitchWanted, members: &[SwitchMember]) -> Listeners {
    Listeners {
        peer: desired_peer(wanted, members),
        client: desired_client(wanted, members),
    }
}

/// The operator's own client may speak TLS: client TLS is wanted and every member Pod serves
/// `https://` clients (on 2378 while dual, on 2379 after). Before that it keeps plaintext.
pub fn operator_client_tls(wanted: &SwitchWanted, members: &[SwitchMember]) -> bool {
    wanted.client_tls
        && members.iter().all(|m| {
            m.pod
                .is_some_and(|pod| !pod.terminating && pod.listen.client != Listen::Http)
        })
}

/// Members through the current round of the switch and members in all, for the status
/// (`None`: no switch runs). Through: its Pod listens as [`desired_listen`] says now and its
/// peer URL is `https://` when peer TLS is wanted. The first round (dual listeners, URL moved)
/// counts up to all members, then the second (plaintext listeners dropped) again from zero.
pub fn progress(wanted: &SwitchWanted, members: &[SwitchMember]) -> Option<(usize, usize)> {
    let listen = desired_listen(wanted, members);
    let done = |m: &SwitchMember| {
        (!wanted.peer_tls || m.peer_url_tls) && m.pod.is_some_and(|pod| pod.listen == listen)
    };
    let all_done = members.iter().all(done);
    (!all_done).then(|| (members.iter().filter(|m| done(m)).count(), members.len()))
}

/// The next step of a switch to TLS (or `None`: nothing to switch, or every member is
/// switched). `members` are the voters; the caller has checked that there is no learner.
///
/// Order: first a member whose peer URL moved to `https://` but that does not answer is waited
/// for, then reverted after [`REVERT_AFTER`]; then, followers first and the leader last, the
/// first member whose Pod does not listen as it should is rolled, or whose Pod listens on both
/// but whose peer URL is still `http://` gets its URL moved. Each step needs every member's Pod
/// present and Ready and every member answering, so at most one member is ever down.
pub fn next_switch_step(
    wanted: &SwitchWanted,
    members: &[SwitchMember],
    revert_after: Duration,
) -> Option<SwitchStep> {
    let listen = desired_listen(wanted, members);
    let url_pending = |m: &SwitchMember| wanted.peer_tls && !m.peer_url_tls;
    // A member without a Pod (or whose Pod is going) is no reason to switch by itself: its
    // next Pod is built with `listen`. It only holds the switch back (below).
    let needs_work =
        |m: &SwitchMember| url_pending(m) || m.pod.is_some_and(|pod| pod.listen != listen);
    if !members.iter().any(needs_work) {
        return None;
    }
    let voters = members.len();
    let healthy = members.iter().filter(|m| m.healthy).count();
    let gate = |member: &SwitchMember| {
        quorum_gate(Disruption::TakeDownHealthyVoter, healthy, voters).map_err(|short| {
            SwitchStep::Wait(SwitchWait::WouldLoseQuorum {
                member: member.name.clone(),
                healthy: short.healthy,
                voters: short.voters,
            })
        })
    };

    // A member on its new https:// peer URL that does not answer: it is the one in flight.
    // Reverting takes nothing further down (it is down already): the quorum that commits the
    // MemberUpdate is all it needs.
    if let Some(unsettled) = members.iter().find(|m| {
        wanted.peer_tls
            && m.peer_url_tls
            && !m.healthy
            && m.pod.is_some_and(|pod| pod.listen.peer == Listen::Dual)
    }) {
        if unsettled.unhealthy_for < revert_after {
            return Some(SwitchStep::Wait(SwitchWait::SettlingOnTls(
                unsettled.name.clone(),
            )));
        }
        return Some(
            match quorum_gate(Disruption::RemoveUnhealthyOrLearner, healthy, voters) {
                Ok(quorum) => SwitchStep::UpdatePeerUrl {
                    member: unsettled.name.clone(),
                    id: unsettled.id,
                    to_tls: false,
                    quorum,
                },
                Err(short) => SwitchStep::Wait(SwitchWait::WouldLoseQuorum {
                    member: unsettled.name.clone(),
                    healthy: short.healthy,
                    voters: short.voters,
                }),
            },
        );
    }

    // Every member present, Ready and answering before anything is disrupted.
    for member in members {
        match member.pod {
            None => {
                return Some(SwitchStep::Wait(SwitchWait::PodMissing(
                    member.name.clone(),
                )));
            }
            Some(pod) if pod.terminating => {
                return Some(SwitchStep::Wait(SwitchWait::PodMissing(
                    member.name.clone(),
                )));
            }
            Some(pod) if !pod.ready => {
                return Some(SwitchStep::Wait(SwitchWait::PodNotReady(
                    member.name.clone(),
                )));
            }
            Some(_) if !member.healthy => {
                return Some(SwitchStep::Wait(SwitchWait::MemberUnhealthy(
                    member.name.clone(),
                )));
            }
            Some(_) => {}
        }
    }

    let mut order: Vec<&SwitchMember> = members.iter().collect();
    order.sort_by(|a, b| (a.leader, &a.name).cmp(&(b.leader, &b.name)));
    // Every member listens as this stage asks before any peer URL moves: a member still on
    // plain flags has no CA to verify, and no certificate to present to, a peer it must dial at
    // an https:// URL (etcd dials each peer's URL to receive from it).
    let roll = order.iter().find_map(|m| {
        let pod = m.pod.filter(|pod| pod.listen != listen)?;
        Some((*m, pod))
    });
    let step = if let Some((next, pod)) = roll {
        match gate(next) {
            Ok(quorum) => SwitchStep::Roll {
                member: next.name.clone(),
                from: pod.listen,
                to: listen,
                quorum,
            },
            Err(wait) => wait,
        }
    } else {
        let next = order.into_iter().find(|m| url_pending(m))?;
        if next.pod.is_some_and(|pod| pod.reverted) {
            SwitchStep::Wait(SwitchWait::Reverted(next.name.clone()))
        } else {
            match gate(next) {
                Ok(quorum) => SwitchStep::UpdatePeerUrl {
                    member: next.name.clone(),
                    id: next.id,
                    to_tls: true,
                    quorum,
                },
                Err(wait) => wait,
            }
        }
    };
    Some(step)
}

#[cfg(test)]
#[path = "tls_switch_tests.rs"]
mod tests;
