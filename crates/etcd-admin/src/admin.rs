//! Membership changes: add (as learner or voter), promote, remove, and the confirmed member
//! list. Does I/O (etcd gRPC), every call bounded by the client's timeout.
//!
//! Each call is one etcd request: the caller (the cluster operator's executor) decides one step,
//! performs it and re-observes. How to read the outcomes:
//! - [`AdminError::RetryLater`]: etcd applied nothing ("unhealthy cluster" for ~5 s after any
//!   membership change or start, learner not in sync yet, one learner already, no leader).
//! - [`AdminError::Timeout`] / [`AdminError::Unreachable`] on a change: the outcome is unknown
//!   (a proposal can still be applied); re-observe before deciding again.
//! - [`AdminError::PeerUrlExists`] on an add, [`AdminError::NotFound`] on a remove,
//!   [`AdminError::AlreadyPromoted`] on a promote: the change is already in place, which is how
//!   a retried step after a crash looks.

use std::time::Duration;

use etcd_client::{Client, MemberAddOptions};

use crate::error::{AdminError, Subject};
use crate::observe::{
    bounded, connect, no_quorum_detail, observe_detailed, quorum_candidates, statuses,
};
use crate::tls::ClientTls;
use crate::types::MemberInfo;

/// A client for membership changes, talking to one member chosen at connect time (see
/// [`EtcdAdmin::connect`]); the confirmed member list asks all endpoints.
#[derive(Clone)]
pub struct EtcdAdmin {
    endpoints: Vec<String>,
    /// The endpoint of the member the calls go to.
    member: String,
    timeout: Duration,
    client: Client,
    /// TLS of `https://` endpoints (the confirmed member list connects again).
    tls: Option<ClientTls>,
}

impl std::fmt::Debug for EtcdAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdAdmin")
            .field("endpoints", &self.endpoints)
            .field("member", &self.member)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl EtcdAdmin {
    /// A client for the cluster behind `endpoints`, with `timeout` on every call. It asks every
    /// endpoint's Status (concurrently) and talks to one member from then on: the leader if it
    /// answered, else a voter that knows a leader. One member, not a balanced set, because a
    /// balanced client sends some calls to dead endpoints (say, the member being removed) and
    /// fails them as unreachable. Calls need that member to still know a leader, else they fail
    /// at once with [`AdminError::RetryLater`] ("no leader").
    ///
    /// Fails with [`AdminError::InvalidEndpoint`] for no endpoint, [`AdminError::NoQuorum`] when
    /// no voter that knows a leader answered (with each endpoint's answer).
    pub async fn connect(endpoints: &[String], timeout: Duration) -> Result<Self, AdminError> {
        Self::connect_tls(endpoints, timeout, None).await
    }

    /// [`EtcdAdmin::connect`] to `https://` endpoints with `tls`.
    pub async fn connect_tls(
        endpoints: &[String],
        timeout: Duration,
        tls: Option<&ClientTls>,
    ) -> Result<Self, AdminError> {
        if endpoints.is_empty() {
            return Err(AdminError::InvalidEndpoint {
                endpoints: String::new(),
                message: "no endpoint given".into(),
            });
        }
        let (answers, _) = statuses(endpoints, timeout, tls, None).await;
        let candidates = quorum_candidates(&answers);
        let Some((endpoint, _)) = candidates.first().and_then(|i| answers.get(*i)) else {
            return Err(AdminError::NoQuorum {
                op: format!("connect to {}", endpoints.join(",")),
                detail: no_quorum_detail(&answers, &candidates, &[]),
            });
        };
        let client = connect(endpoint, timeout, true, tls).await?;
        Ok(EtcdAdmin {
            tls: tls.cloned(),
            endpoints: endpoints.to_vec(),
            member: endpoint.clone(),
            timeout,
            client,
        })
    }

    /// The endpoint of the member the membership changes go to.
    pub fn member_endpoint(&self) -> &str {
        &self.member
    }

    /// Adds a learner with `peer_url` (a non-voting member: it does not count for quorum until
    /// promoted, so starting it can never cost the cluster its quorum). Returns the new member
    /// (no name, no client URLs until it starts). Start it with
    /// `--initial-cluster-state=existing` and the [`crate::initial_cluster`] of the list after the
    /// add, then [`EtcdAdmin::promote`] it once it caught up.
    pub async fn add_learner(&mut self, peer_url: &str) -> Result<MemberInfo, AdminError> {
        self.add(peer_url, true).await
    }

    /// Adds a voting member with `peer_url`. Prefer [`EtcdAdmin::add_learner`]: a new voter
    /// raises the quorum size before it runs (growing 1→2 leaves the cluster without quorum
    /// until the new member is up).
    pub async fn add_voter(&mut self, peer_url: &str) -> Result<MemberInfo, AdminError> {
        self.add(peer_url, false).await
    }

    async fn add(&mut self, peer_url: &str, learner: bool) -> Result<MemberInfo, AdminError> {
        let kind = if learner { "learner" } else { "voter" };
        let op = format!("member add {kind} {peer_url} via {}", self.via());
        let options = if learner {
            MemberAddOptions::new().with_is_learner()
        } else {
            MemberAddOptions::new()
        };
        let subject = Subject::PeerUrl(peer_url);
        let timeout = self.timeout;
        let client = &mut self.client;
        let response = bounded(&op, timeout, async {
            failpoint::around(
                "cluster.member_add",
                client.member_add([peer_url], Some(options)),
            )
            .await
            .map_err(|e| AdminError::from_etcd(op.clone(), subject, timeout, e))
        })
        .await?;
        response
            .member()
            .map(MemberInfo::from)
            .ok_or_else(|| AdminError::Incomplete {
                op,
                detail: "member add answered without the new member".into(),
            })
    }

    /// Promotes learner `id` to a voter. etcd refuses ([`AdminError::RetryLater`]) until the
    /// learner has started and caught up with the leader's log (90% of the leader's index).
    /// etcd checks that before whether `id` is a learner at all, so a promote repeated right
    /// after a success can be refused the same way before it says [`AdminError::AlreadyPromoted`].
    pub async fn promote(&mut self, id: u64) -> Result<(), AdminError> {
        let op = format!("member promote {id:x} via {}", self.via());
        let timeout = self.timeout;
        let client = &mut self.client;
        bounded(&op, timeout, async {
            failpoint::around("cluster.member_promote", client.member_promote(id))
                .await
                .map(drop)
                .map_err(|e| AdminError::from_etcd(op.clone(), Subject::Member(id), timeout, e))
        })
        .await
    }

    /// Sets member `id`'s peer URLs to `peer_url` alone (`MemberUpdate`): its peers dial it
    /// there from then on. Used by the switch of a running cluster from plaintext to TLS, once
    /// the member listens on the new URL (and to move it back). Repeating it is harmless.
    pub async fn update_peer_url(&mut self, id: u64, peer_url: &str) -> Result<(), AdminError> {
        let op = format!("member update {id:x} {peer_url} via {}", self.via());
        let timeout = self.timeout;
        let client = &mut self.client;
        bounded(&op, timeout, async {
            failpoint::around(
                "cluster.member_update",
                client.member_update(id, [peer_url.to_owned()]),
            )
            .await
            .map(drop)
            .map_err(|e| AdminError::from_etcd(op.clone(), Subject::Member(id), timeout, e))
        })
        .await
    }

    /// Removes member `id` (voter or learner). A removed etcd 3.5 member stops by itself within
    /// ~2 s; 3.4 may keep running. [`AdminError::NotFound`] means it is already gone.
    ///
    /// etcd checks a removal against the peer connections of the member that handles the
    /// request (`mayRemoveMember`: each voter connected for the last 5 s). That record can be
    /// stale on one member: a message to a restarted peer that failed after the peer's streams
    /// came back marks the peer inactive, and nothing marks it active again until a stream
    /// reconnects, so that member refuses ("unhealthy cluster") for minutes while every member
    /// is healthy (seen on the leader after the 3.5 → 3.6 roll, issue 16). When the member the
    /// calls go to refuses, each other voting member, not the one being removed, is asked once:
    /// it judges from its own connections, so etcd's quorum check still decides.
    pub async fn remove(&mut self, id: u64) -> Result<(), AdminError> {
        let refused = match self.remove_via_member(id).await {
            Err(refused @ AdminError::RetryLater { .. }) => refused,
            done => return done,
        };
        let (answers, mut clients) =
            statuses(&self.endpoints, self.timeout, self.tls.as_ref(), None).await;
        for index in quorum_candidates(&answers) {
            let Some((endpoint, Ok(status))) = answers.get(index) else {
                continue;
            };
            if *endpoint == self.member || status.id == id {
                continue;
            }
            let client = match clients.remove(&index) {
                Some(client) => client,
                None => match connect(endpoint, self.timeout, true, self.tls.as_ref()).await {
                    Ok(client) => client,
                    Err(_) => continue,
                },
            };
            self.client = client;
            self.member = endpoint.clone();
            match self.remove_via_member(id).await {
                Err(AdminError::RetryLater { .. }) => continue,
                done => return done,
            }
        }
        Err(refused)
    }

    /// One `MemberRemove` through the member the calls go to.
    async fn remove_via_member(&mut self, id: u64) -> Result<(), AdminError> {
        let op = format!("member remove {id:x} via {}", self.via());
        let timeout = self.timeout;
        let client = &mut self.client;
        bounded(&op, timeout, async {
            failpoint::around("cluster.member_remove", client.member_remove(id))
                .await
                .map(drop)
                .map_err(|e| AdminError::from_etcd(op.clone(), Subject::Member(id), timeout, e))
        })
        .await
    }

    /// The cluster ID and member list from a member that confirmed it is part of a quorum (see
    /// [`crate::observe`]); [`AdminError::NoQuorum`] if none could. Takes up to about twice the
    /// timeout.
    pub async fn member_list(&mut self) -> Result<(u64, Vec<MemberInfo>), AdminError> {
        let (view, why) =
            observe_detailed(&self.endpoints, self.timeout, self.tls.as_ref(), None).await;
        view.membership.ok_or_else(|| AdminError::NoQuorum {
            op: format!("member list via {}", self.endpoints.join(",")),
            detail: why.unwrap_or_default(),
        })
    }

    fn via(&self) -> &str {
        &self.member
    }
}
