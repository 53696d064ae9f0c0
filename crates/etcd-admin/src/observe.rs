//! Observing a cluster: every member's own status, and a member list that is known to come from
//! a member in quorum. Does I/O (etcd gRPC); the choice of whom to ask and the assembly of the
//! answers are pure functions, unit-tested below.
//!
//! Why the member list needs care: etcd serves `MemberList` from the answering member's local
//! view (etcd 3.4 and 3.5 before 3.5.13 have no linearizable MemberList, and etcd-client 0.21
//! always sends `linearizable: false`), so a member cut off from the quorum can return a stale
//! list. A member is trusted only after a linearizable read succeeded on it: that read needs the
//! leader to confirm its leadership with a quorum and waits until the member has applied
//! everything committed before it, so the list it serves right after is at least that fresh.
//! Both requests go to one connection to one endpoint, and both answers must carry the same
//! member ID (a DNS name could move to another Pod in between).
//!
//! Timing: every endpoint is asked concurrently and every step is bounded by `timeout`; the
//! quorum check of all candidates runs concurrently too. One observation takes at most about
//! twice `timeout`, whatever is unreachable.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tokio::task::JoinSet;

use crate::error::{AdminError, Subject};
use crate::pool::ClientPool;
use crate::tls::ClientTls;
use crate::types::{ClusterView, MemberInfo, MemberStatus};

/// The key read to confirm quorum. It does not need to exist: the read's linearizability is the
/// point, not its value.
const QUORUM_CHECK_KEY: &str = "etcd-admin/quorum-check";

/// Observes the cluster through `endpoints` (client URLs, one per member we know; DNS names or
/// IPs), each step bounded by `timeout`. Never fails: what could not be had is `None` or `Err`
/// in the [`ClusterView`].
///
/// Without quorum (e.g. 2 of 3 members dead), `membership` is `None`; a surviving member still
/// answers Status (etcd serves it locally), with `leader_id` 0 and `etcdserver: no leader` in
/// its `errors` once its election timeout (1 s by default) passed, so it is not healthy; the
/// dead members are `Err`.
pub async fn observe(endpoints: &[String], timeout: Duration) -> ClusterView {
    observe_tls(endpoints, timeout, None).await
}

/// [`observe`] of `https://` endpoints with `tls`.
pub async fn observe_tls(
    endpoints: &[String],
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> ClusterView {
    observe_detailed(endpoints, timeout, tls, None).await.0
}

/// How long an observation waits for the Status of a member that may still be starting (see
/// [`observe_pooled`]'s `starting`). A started etcd answers Status in milliseconds; one that
/// is still starting (a learner receiving the leader's snapshot, a seed opening its restored
/// database) accepts the connection but serves nothing until it is ready, so its request runs
/// into the full timeout (5 s by default): `make bench` (restore) showed every learner's
/// catching-up pass blocked 5 s on it while the learner turned ready meanwhile. At 1 s, the
/// passes of a restore round still spent 11-15 s of 19-23 s waiting here (`etcd=1002` ms per
/// pass while a learner caught up, after its promotion and during the hold), each delaying the
/// promotion, the next member add or the next Pod by up to a second. A quarter second is still
/// far above a started member's answer (2-5 ms here, a few round trips with a new TLS
/// connection), and a member that answers later is not lost: its answer is recorded and it
/// gets the full timeout from the next observation on.
pub const STARTING_MEMBER_WAIT: Duration = Duration::from_millis(250);

/// [`observe_tls`] through the clients `pool` keeps for `scope` (one per endpoint, reused
/// between observations; see [`ClientPool`]). The pool keeps, of `scope`'s clients, only those
/// for `endpoints` and this `tls`.
///
/// The endpoints in `starting` (members that never answered since their Pod started; the
/// caller decides, and names a known voter only while nothing acts on the answers or when its
/// Pod is gone) are waited
/// for at most [`STARTING_MEMBER_WAIT`] (or `timeout` if shorter); one that has not answered by
/// then is `Err` in the view, while its request goes on in the background up to `timeout` and,
/// if answered, is recorded in the pool ([`ClientPool::answered_at`]): a member that answers at
/// all, however slowly, is no longer starting on the next observation and gets the full
/// `timeout` from then on.
pub async fn observe_pooled(
    pool: &ClientPool,
    scope: &str,
    endpoints: &[String],
    starting: &[String],
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> ClusterView {
    pool.retain(scope, endpoints, timeout, tls);
    let pooled = Pooled {
        pool: pool.clone(),
        scope: scope.to_owned(),
        starting: starting.to_vec(),
    };
    observe_detailed(endpoints, timeout, tls, Some(&pooled))
        .await
        .0
}

/// Where an observation's connections come from when they are kept between observations.
#[derive(Clone)]
pub(crate) struct Pooled {
    pool: ClientPool,
    scope: String,
    /// Endpoints waited for at most [`STARTING_MEMBER_WAIT`].
    starting: Vec<String>,
}

/// One member's Status, through `endpoint` only, bounded by `timeout`.
pub async fn member_status(endpoint: &str, timeout: Duration) -> Result<MemberStatus, AdminError> {
    member_status_tls(endpoint, timeout, None).await
}

/// [`member_status`] of an `https://` endpoint with `tls`.
pub async fn member_status_tls(
    endpoint: &str,
    timeout: Duration,
    tls: Option<&ClientTls>,
) -> Result<MemberStatus, AdminError> {
    let op = format!("status of {endpoint}");
    let mut client = connect(endpoint, timeout, false, tls).await?;
    bounded(&op, timeout, status(&mut client, endpoint, timeout)).await
}

/// One endpoint's Status, or why it gave none.
type Answer = Result<MemberStatus, String>;

/// Every endpoint's [`Answer`] (in `endpoints` order) and, for those that answered, the
/// connection it answered on (by index).
pub(crate) type Answers = (Vec<(String, Answer)>, BTreeMap<usize, Client>);

/// [`observe`], and when `membership` is `None`, why (each endpoint's answer).
pub(crate) async fn observe_detailed(
    endpoints: &[String],
    timeout: Duration,
    tls: Option<&ClientTls>,
    pooled: Option<&Pooled>,
) -> (ClusterView, Option<String>) {
    let (answers, clients) = statuses(endpoints, timeout, tls, pooled).await;
    // The member list from the first candidate that confirms quorum.
    let candidates = quorum_candidates(&answers);
    let mut checks = JoinSet::new();
    for index in &candidates {
        let (Some(client), Some((endpoint, Ok(s)))) = (clients.get(index), answers.get(*index))
        else {
            continue;
        };
        let (mut client, endpoint, id) = (client.clone(), endpoint.clone(), s.id);
        let pooled = pooled.cloned();
        checks.spawn(async move {
            let op = format!("confirmed member list from {endpoint}");
            let asked = tokio::time::Instant::now();
            let list = bounded(
                &op,
                timeout,
                confirmed_list(&mut client, &endpoint, id, timeout),
            )
            .await;
            tracing::debug!(
                %endpoint,
                ms = asked.elapsed().as_secs_f64() * 1000.0,
                confirmed = list.is_ok(),
                "member list done"
            );
            if list.is_err()
                && let Some(p) = &pooled
            {
                p.pool.forget_endpoint(&p.scope, &endpoint);
            }
            (endpoint, list)
        });
    }
    let mut membership = None;
    let mut refusals = Vec::new();
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            joined = checks.join_next() => match joined {
                Some(Ok((_, Ok(list)))) => {
                    membership = Some(list);
                    break;
                }
                Some(Ok((endpoint, Err(e)))) => refusals.push(format!("{endpoint}: {e}")),
                Some(Err(_)) => {}
                None => break,
            },
            () = &mut deadline => {
                refusals.push(format!("no quorum confirmed within {timeout:?}"));
                break;
            }
        }
    }
    // Dropping the JoinSet aborts the checks still running.
    drop(checks);

    let why = membership
        .is_none()
        .then(|| no_quorum_detail(&answers, &candidates, &refusals));
    (assemble(answers, membership), why)
}

/// Every endpoint's Status, asked concurrently, keeping each connection that answered. With
/// `pooled`, the connections come from (and stay in) the pool; one that fails is dropped from it;
/// an answer is recorded in it, and its `starting` endpoints are waited for at most
/// [`STARTING_MEMBER_WAIT`] (their requests left running, see [`observe_pooled`]).
pub(crate) async fn statuses(
    endpoints: &[String],
    timeout: Duration,
    tls: Option<&ClientTls>,
    pooled: Option<&Pooled>,
) -> Answers {
    let started = tokio::time::Instant::now();
    let starting_wait = STARTING_MEMBER_WAIT.min(timeout);
    let starting: Vec<bool> = endpoints
        .iter()
        .map(|e| pooled.is_some_and(|p| p.starting.contains(e)))
        .collect();
    let mut answers: Vec<(String, Answer)> = endpoints
        .iter()
        .map(|e| (e.clone(), Err("status request did not complete".to_owned())))
        .collect();
    let mut pending: BTreeSet<usize> = BTreeSet::new();
    let mut asked = JoinSet::new();
    for (index, endpoint) in endpoints.iter().enumerate() {
        let is_starting = starting.get(index) == Some(&true);
        // A starting member is asked by one request at a time: while an earlier observation's
        // request still waits for it (and will record its answer), this one neither asks again
        // nor waits. Each pass of a restore round otherwise waited the brief wait again on the
        // same silent member (a learner catching up, a voter that lost etcd's publish race),
        // before every member add, Pod and promotion.
        let asking = match pooled {
            Some(p) if is_starting => match p.pool.start_asking(&p.scope, endpoint) {
                Some(guard) => Some(guard),
                None => {
                    if let Some(slot) = answers.get_mut(index) {
                        slot.1 = Err("no answer yet (a starting member: the status request \
                                      of an earlier observation still waits for it)"
                            .to_owned());
                    }
                    continue;
                }
            },
            _ => None,
        };
        pending.insert(index);
        let endpoint = endpoint.clone();
        let tls = tls.cloned();
        let pooled = pooled.cloned();
        asked.spawn(async move {
            let op = format!("status of {endpoint}");
            let answer = bounded(&op, timeout, async {
                let mut client = match &pooled {
                    Some(p) => {
                        p.pool
                            .client(&p.scope, &endpoint, timeout, tls.as_ref())
                            .await?
                    }
                    None => connect(&endpoint, timeout, false, tls.as_ref()).await?,
                };
                let s = status(&mut client, &endpoint, timeout).await?;
                Ok((client, s))
            })
            .await;
            if let Some(p) = &pooled {
                match &answer {
                    Ok(_) => p.pool.record_answer(&p.scope, &endpoint),
                    Err(_) => p.pool.forget_endpoint(&p.scope, &endpoint),
                }
            }
            drop(asking);
            (index, answer)
        });
    }
    let mut clients: BTreeMap<usize, Client> = BTreeMap::new();
    while !pending.is_empty() {
        // Once only starting members are left, wait for them until `starting_wait`.
        let only_starting = pending.iter().all(|i| starting.get(*i) == Some(&true));
        let joined = if only_starting {
            match tokio::time::timeout_at(started + starting_wait, asked.join_next()).await {
                Ok(joined) => joined,
                Err(_) => {
                    // Their requests go on (bounded by `timeout`) and record an answer.
                    asked.detach_all();
                    for index in &pending {
                        if let Some(slot) = answers.get_mut(*index) {
                            slot.1 = Err(format!(
                                "no answer within {starting_wait:?} (a starting member: \
                                 still asked in the background)"
                            ));
                        }
                    }
                    break;
                }
            }
        } else {
            asked.join_next().await
        };
        let Some(joined) = joined else {
            break;
        };
        // A task cannot panic short of a bug in etcd-client; its endpoint keeps the Err above.
        let Ok((index, answer)) = joined else {
            continue;
        };
        pending.remove(&index);
        tracing::debug!(
            endpoint = endpoints.get(index).map_or("", String::as_str),
            ms = started.elapsed().as_secs_f64() * 1000.0,
            starting = starting.get(index) == Some(&true),
            answered = answer.is_ok(),
            "status request done"
        );
        if let Some(slot) = answers.get_mut(index) {
            slot.1 = match answer {
                Ok((client, s)) => {
                    clients.insert(index, client);
                    Ok(s)
                }
                Err(e) => Err(e.to_string()),
            };
        }
    }
    (answers, clients)
}

/// Which answers may be asked for the member list, best first: voters that answered and know a
/// leader, the leader itself first (it confirms quorum without a round trip to another member),
/// one per member ID (a member can be reachable through two URLs). Indexes into `answers`.
pub(crate) fn quorum_candidates(answers: &[(String, Answer)]) -> Vec<usize> {
    let mut ok: Vec<(usize, &MemberStatus)> = answers
        .iter()
        .enumerate()
        .filter_map(|(i, (_, a))| a.as_ref().ok().map(|s| (i, s)))
        // A learner refuses linearizable reads ("rpc not supported for learner").
        .filter(|(_, s)| !s.learner && s.leader_id != 0)
        .collect();
    ok.sort_by_key(|(i, s)| (!s.is_leader(), *i));
    let mut seen = BTreeSet::new();
    ok.into_iter()
        .filter(|(_, s)| seen.insert(s.id))
        .map(|(i, _)| i)
        .collect()
}

/// Keys the answers by member ID: an answer by the ID it reported; a failure by the ID of the
/// member whose client URL the endpoint is, if `membership` lists one (and that member did not
/// answer through another URL), else under `unreached` by endpoint.
fn assemble(
    answers: Vec<(String, Answer)>,
    membership: Option<(u64, Vec<MemberInfo>)>,
) -> ClusterView {
    let mut statuses: BTreeMap<u64, Result<MemberStatus, String>> = BTreeMap::new();
    let mut failed = Vec::new();
    for (endpoint, answer) in answers {
        match answer {
            Ok(s) => {
                statuses.insert(s.id, Ok(s));
            }
            Err(e) => failed.push((endpoint, e)),
        }
    }
    let mut unreached = BTreeMap::new();
    for (endpoint, error) in failed {
        let owner = membership
            .as_ref()
            .and_then(|(_, members)| members.iter().find(|m| m.client_urls.contains(&endpoint)));
        match owner {
            Some(m) => {
                statuses
                    .entry(m.id)
                    .or_insert_with(|| Err(format!("{endpoint}: {error}")));
            }
            None => {
                unreached.insert(endpoint, error);
            }
        }
    }
    ClusterView {
        membership,
        statuses,
        unreached,
    }
}

/// Why no membership: the endpoints' answers when no candidate existed, else the refusals.
pub(crate) fn no_quorum_detail(
    answers: &[(String, Answer)],
    candidates: &[usize],
    refusals: &[String],
) -> String {
    if answers.is_empty() {
        return "no endpoint given".into();
    }
    if candidates.is_empty() {
        let each: Vec<String> = answers
            .iter()
            .map(|(endpoint, a)| match a {
                Ok(s) if s.learner => format!("{endpoint}: a learner"),
                Ok(_) => format!("{endpoint}: knows no leader"),
                Err(e) => format!("{endpoint}: {e}"),
            })
            .collect();
        return each.join("; ");
    }
    refusals.join("; ")
}

/// A client for `endpoint` alone, with `timeout` on connecting and on every request. With
/// `require_leader`, a member that knows no leader refuses at once ("no leader") instead of
/// waiting for one. etcd-client connects lazily, so this only fails on a malformed URL; an
/// unreachable endpoint fails (bounded by `timeout`) on the first request.
pub(crate) async fn connect(
    endpoint: &str,
    timeout: Duration,
    require_leader: bool,
    tls: Option<&ClientTls>,
) -> Result<Client, AdminError> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_timeout(timeout)
        .with_require_leader(require_leader);
    if let Some(tls) = tls {
        options = options.with_tls(tls.options());
    }
    let op = format!("connect to {endpoint}");
    bounded(&op, timeout, async {
        Client::connect([endpoint], Some(options))
            .await
            .map_err(|e| match e {
                etcd_client::Error::InvalidUri(_) | etcd_client::Error::InvalidArgs(_) => {
                    AdminError::InvalidEndpoint {
                        endpoints: endpoint.to_owned(),
                        message: e.to_string(),
                    }
                }
                e => AdminError::from_etcd(op.clone(), Subject::None, timeout, e),
            })
    })
    .await
}

/// Runs `step` with `timeout` as a hard bound: a request can wait in the client's load balancer
/// for a connection that never comes (no endpoint ready), outside the per-request timeout.
pub(crate) async fn bounded<T>(
    op: &str,
    timeout: Duration,
    step: impl Future<Output = Result<T, AdminError>>,
) -> Result<T, AdminError> {
    tokio::time::timeout(timeout, step)
        .await
        .unwrap_or_else(|_| Err(AdminError::elapsed(op.to_owned(), timeout)))
}

async fn status(
    client: &mut Client,
    endpoint: &str,
    timeout: Duration,
) -> Result<MemberStatus, AdminError> {
    let op = format!("status of {endpoint}");
    let r = client
        .status()
        .await
        .map_err(|e| AdminError::from_etcd(op.clone(), Subject::None, timeout, e))?;
    let header = r.header().ok_or_else(|| AdminError::Incomplete {
        op,
        detail: "status without a response header".into(),
    })?;
    Ok(MemberStatus {
        endpoint: endpoint.to_owned(),
        id: header.member_id(),
        cluster_id: header.cluster_id(),
        version: r.version().to_owned(),
        leader_id: r.leader(),
        revision: header.revision(),
        raft_index: r.raft_index(),
        raft_applied_index: r.raft_applied_index(),
        raft_term: r.raft_term(),
        learner: r.is_learner(),
        db_size: r.db_size(),
        db_size_in_use: r.raft_used_db_size(),
        db_size_quota: r.db_size_quota(),
        errors: r.errors().to_vec(),
    })
}

/// A linearizable read, then the member list, both from member `id` through `client`.
async fn confirmed_list(
    client: &mut Client,
    endpoint: &str,
    id: u64,
    timeout: Duration,
) -> Result<(u64, Vec<MemberInfo>), AdminError> {
    let op = format!("linearizable read on {endpoint}");
    let read = client
        .get(QUORUM_CHECK_KEY, None)
        .await
        .map_err(|e| AdminError::from_etcd(op.clone(), Subject::None, timeout, e))?;
    let read_by = read.header().map(|h| h.member_id());
    let op = format!("member list from {endpoint}");
    let list = client
        .member_list()
        .await
        .map_err(|e| AdminError::from_etcd(op.clone(), Subject::None, timeout, e))?;
    let header = list.header().ok_or_else(|| AdminError::Incomplete {
        op: op.clone(),
        detail: "member list without a response header".into(),
    })?;
    if read_by != Some(id) || header.member_id() != id {
        return Err(AdminError::Incomplete {
            op,
            detail: format!(
                "answers came from different members: status {id:x}, read {:x}, list {:x}",
                read_by.unwrap_or_default(),
                header.member_id()
            ),
        });
    }
    let members = list.members().iter().map(MemberInfo::from).collect();
    Ok((header.cluster_id(), members))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(id: u64, leader_id: u64, learner: bool) -> Answer {
        Ok(MemberStatus {
            endpoint: format!("http://m{id}:2379"),
            id,
            cluster_id: 99,
            leader_id,
            learner,
            ..MemberStatus::default()
        })
    }

    fn answers(list: Vec<Result<MemberStatus, String>>) -> Vec<(String, Answer)> {
        list.into_iter()
            .enumerate()
            .map(|(i, a)| (format!("http://e{i}:2379"), a))
            .collect()
    }

    fn member(id: u64, client_url: Option<&str>) -> MemberInfo {
        MemberInfo {
            id,
            name: client_url.map(|_| format!("m{id}")).unwrap_or_default(),
            peer_urls: vec![format!("http://m{id}:2380")],
            client_urls: client_url.into_iter().map(str::to_owned).collect(),
            learner: false,
        }
    }

    #[test]
    fn candidates_are_voters_that_know_a_leader_leader_first_one_per_member() {
        let cases: Vec<(Vec<Answer>, Vec<usize>)> = vec![
            // The leader (3) first, then the others in endpoint order.
            (
                vec![ok(1, 3, false), ok(2, 3, false), ok(3, 3, false)],
                vec![2, 0, 1],
            ),
            // Unreachable, leaderless and learners are no candidates.
            (
                vec![
                    Err("refused".into()),
                    ok(2, 0, false),
                    ok(3, 1, true),
                    ok(4, 1, false),
                ],
                vec![3],
            ),
            // The same member through two URLs counts once.
            (
                vec![ok(1, 2, false), ok(1, 2, false), ok(2, 2, false)],
                vec![2, 0],
            ),
            (vec![Err("refused".into()), ok(2, 0, false)], vec![]),
            (vec![], vec![]),
        ];
        for (list, want) in cases {
            let a = answers(list);
            assert_eq!(quorum_candidates(&a), want, "{a:?}");
        }
    }

    type Membership = Option<(u64, Vec<MemberInfo>)>;

    /// Answers of a listed member (m1, also failing through an alias URL), a listed member that
    /// failed (m2), an unlisted endpoint that failed (stray); the membership also lists m3, not
    /// started (no client URL).
    fn mixed_answers() -> (Vec<(String, Answer)>, Membership) {
        let a = vec![
            ("http://m1:2379".to_owned(), ok(1, 1, false)),
            ("http://m2:2379".to_owned(), Err("refused".to_owned())),
            ("http://stray:2379".to_owned(), Err("dns error".to_owned())),
            // m1 again through another URL that fails: its Ok answer stands.
            ("http://m1-alias:2379".to_owned(), Err("timeout".to_owned())),
        ];
        let mut m1 = member(1, Some("http://m1:2379"));
        m1.client_urls.push("http://m1-alias:2379".into());
        let membership = Some((
            99,
            vec![m1, member(2, Some("http://m2:2379")), member(3, None)],
        ));
        (a, membership)
    }

    #[test]
    fn failures_are_keyed_by_the_member_whose_client_url_failed() {
        let (a, membership) = mixed_answers();
        let view = assemble(a.clone(), membership.clone());
        assert_eq!(view.membership, membership);
        assert!(matches!(view.statuses.get(&1), Some(Ok(s)) if s.leader_id == 1));
        assert_eq!(
            view.statuses.get(&2),
            Some(&Err("http://m2:2379: refused".to_owned()))
        );
        // Member 3 has not started (no client URL): not asked, no entry.
        assert_eq!(view.statuses.get(&3), None);
        assert_eq!(
            view.unreached,
            BTreeMap::from([("http://stray:2379".to_owned(), "dns error".to_owned())])
        );

        // Without membership, every failure stays under its endpoint.
        let view = assemble(a, None);
        assert_eq!(view.statuses.len(), 1);
        assert_eq!(view.unreached.len(), 3);
    }

    /// Issue 24: the member watch is given the endpoints a pass found silent. A member the
    /// membership lists by its client URL (a learner that published itself, a voter that lost
    /// etcd's publish race) has its failure under its ID, not under `unreached`: counting only
    /// `unreached` left every such wait unwatched in the restore bench, each promotion found
    /// by the next half-second look.
    #[test]
    fn unanswered_counts_a_listed_members_failure_too() {
        let (a, membership) = mixed_answers();
        let asked: Vec<String> = a.iter().map(|(e, _)| e.clone()).collect();
        let view = assemble(a.clone(), membership);
        assert_eq!(
            view.unanswered(&asked),
            vec!["http://m2:2379".to_owned(), "http://stray:2379".to_owned()]
        );
        // Only endpoints asked are named.
        assert_eq!(
            view.unanswered(&["http://m2:2379".to_owned()]),
            vec!["http://m2:2379".to_owned()]
        );
        let view = assemble(a, None);
        assert_eq!(view.unanswered(&asked).len(), 3);
    }

    #[test]
    fn no_quorum_detail_names_each_endpoint() {
        let a = answers(vec![Err("refused".into()), ok(2, 0, false), ok(3, 1, true)]);
        assert_eq!(
            no_quorum_detail(&a, &[], &[]),
            "http://e0:2379: refused; http://e1:2379: knows no leader; http://e2:2379: a learner"
        );
        let refusals = vec!["http://e1:2379: no answer".to_owned()];
        assert_eq!(
            no_quorum_detail(&a, &[1], &refusals),
            "http://e1:2379: no answer"
        );
        assert_eq!(no_quorum_detail(&[], &[], &[]), "no endpoint given");
    }
}
