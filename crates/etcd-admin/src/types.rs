//! What etcd says about its members, as plain data, and the pure decisions over it (leader,
//! health, `--initial-cluster` for a joining member). No I/O.

use std::collections::BTreeMap;

/// One entry of etcd's member list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberInfo {
    /// etcd member ID.
    pub id: u64,
    /// The name the member gave itself; empty until it has started once.
    pub name: String,
    /// Its peer URLs (ours have exactly one).
    pub peer_urls: Vec<String>,
    /// Its advertised client URLs; empty until it has started once.
    pub client_urls: Vec<String>,
    /// A non-voting learner.
    pub learner: bool,
}

impl From<&etcd_client::Member> for MemberInfo {
    fn from(m: &etcd_client::Member) -> Self {
        MemberInfo {
            id: m.id(),
            name: m.name().to_owned(),
            peer_urls: m.peer_urls().to_vec(),
            client_urls: m.client_urls().to_vec(),
            learner: m.is_learner(),
        }
    }
}

/// One member's own answer to `Maintenance.Status`. It is the member's local view: it says
/// nothing about quorum by itself (see [`crate::observe`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberStatus {
    /// The client URL that answered.
    pub endpoint: String,
    /// Its member ID.
    pub id: u64,
    /// The cluster ID it belongs to.
    pub cluster_id: u64,
    /// Its server version, e.g. `3.5.1`.
    pub version: String,
    /// The member ID of the leader it knows; 0 if none (election, or no quorum).
    pub leader_id: u64,
    /// The revision of its key space.
    pub revision: i64,
    /// Its raft committed index.
    pub raft_index: u64,
    /// Its raft applied index (0 from etcd 3.4, which does not report it).
    pub raft_applied_index: u64,
    /// Its raft term.
    pub raft_term: u64,
    /// It is a non-voting learner.
    pub learner: bool,
    /// Size of its backend database file in bytes.
    pub db_size: i64,
    /// Bytes of the database file in use; the rest is free space a defragmentation gives back.
    pub db_size_in_use: i64,
    /// Its backend quota in bytes (reported from etcd 3.6; 0 before).
    pub db_size_quota: i64,
    /// Errors it reports: `etcdserver: no leader` (etcd adds it itself when it knows no
    /// leader), alarms such as `NOSPACE` or `CORRUPT`.
    pub errors: Vec<String>,
}

impl MemberStatus {
    /// It is the raft leader.
    pub fn is_leader(&self) -> bool {
        self.leader_id != 0 && self.leader_id == self.id
    }

    /// It knows a leader and reports no error but alarms. A member that lost quorum reports
    /// leader 0 and `etcdserver: no leader` once its election timeout passed, so it is not
    /// healthy; right after losing quorum it can still name the old leader for about a second.
    ///
    /// Alarms do not count: etcd lists every alarm of the cluster in every member's Status, and
    /// a member under NOSPACE (or next to a CORRUPT one) still votes and serves reads. Counting
    /// them made one alarm look like the loss of every member (issue 17); see [`Self::alarms`].
    pub fn healthy(&self) -> bool {
        self.leader_id != 0 && self.errors.iter().all(|e| Alarm::parse(e).is_some())
    }
}

/// An alarm etcd reports in a Status answer (`memberID:<decimal id> alarm:<NAME>`). Alarms are
/// cluster-wide: every member lists every member's alarms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alarm {
    /// The member that raised it.
    pub member_id: u64,
    /// `NOSPACE`, `CORRUPT`.
    pub kind: String,
}

impl Alarm {
    /// Parses one error of a Status answer; `None` when it is not an alarm.
    pub fn parse(error: &str) -> Option<Alarm> {
        let (member, kind) = error.trim().split_once(' ')?;
        let member_id = member.strip_prefix("memberID:")?.parse().ok()?;
        let kind = kind.trim().strip_prefix("alarm:")?;
        (!kind.is_empty()).then(|| Alarm {
            member_id,
            kind: kind.to_owned(),
        })
    }
}

impl MemberStatus {
    /// The alarms among its errors (every alarm of the cluster, whichever member raised it).
    pub fn alarms(&self) -> Vec<Alarm> {
        self.errors.iter().filter_map(|e| Alarm::parse(e)).collect()
    }
}

/// One observation of a cluster, made through a set of client URLs (one per member we know).
/// Made by [`crate::observe`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// The cluster ID and member list, only from a member that confirmed it is part of a quorum
    /// (a linearizable read succeeded on it just before it listed the members). `None` when no
    /// member could: quorum lost, all unreachable, or only learners answered.
    pub membership: Option<(u64, Vec<MemberInfo>)>,
    /// Each member's own Status answer, by member ID. A member that did not answer is `Err`
    /// (with why) when its ID is known: its endpoint is one of its client URLs in `membership`.
    /// A member of `membership` without an entry was not asked (no endpoint given for it, or
    /// not started yet so it has no client URL).
    pub statuses: BTreeMap<u64, Result<MemberStatus, String>>,
    /// Endpoints that did not answer and whose member is not known (no membership, or the URL
    /// is no member's client URL), with why.
    pub unreached: BTreeMap<String, String>,
}

impl ClusterView {
    /// Of the endpoints `asked`, those that gave no status answer: wherever [`crate::observe`]
    /// put the failure, under [`Self::unreached`] or, for a member the membership lists by that
    /// client URL, as its `Err` in [`Self::statuses`] (a learner that published itself, a voter
    /// that lost etcd's publish race). A member that answered through another URL answered.
    pub fn unanswered(&self, asked: &[String]) -> Vec<String> {
        let members = self.membership.as_ref().map(|(_, m)| m.as_slice());
        asked
            .iter()
            .filter(|endpoint| {
                self.unreached.contains_key(*endpoint)
                    || members.unwrap_or_default().iter().any(|m| {
                        m.client_urls.contains(endpoint)
                            && matches!(self.statuses.get(&m.id), Some(Err(_)))
                    })
            })
            .cloned()
            .collect()
    }
}

/// The `--initial-cluster` value for the member `new_id` that was just added and will start as
/// `new_name` with `--initial-cluster-state=existing`: `name=peerURL` for every member of
/// `members` (the list after the add), as `etcdctl member add` prints it. etcd checks that it
/// names exactly the cluster's peer URLs.
pub fn initial_cluster(members: &[MemberInfo], new_id: u64, new_name: &str) -> String {
    members
        .iter()
        .flat_map(|m| {
            let name = if m.id == new_id {
                new_name
            } else {
                m.name.as_str()
            };
            m.peer_urls.iter().map(move |u| format!("{name}={u}"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(id: u64, leader_id: u64, revision: i64) -> MemberStatus {
        MemberStatus {
            endpoint: format!("http://m{id}:2379"),
            id,
            cluster_id: 99,
            version: "3.5.1".into(),
            leader_id,
            revision,
            ..MemberStatus::default()
        }
    }

    fn member(id: u64, learner: bool) -> MemberInfo {
        MemberInfo {
            id,
            name: format!("m{id}"),
            peer_urls: vec![format!("http://m{id}:2380")],
            client_urls: vec![format!("http://m{id}:2379")],
            learner,
        }
    }

    #[test]
    fn leader_and_health() {
        let cases = [
            // (id, leader_id, errors, is_leader, healthy)
            (1, 1, vec![], true, true),
            (2, 1, vec![], false, true),
            (0, 0, vec![], false, false),
            (
                2,
                0,
                vec!["etcdserver: no leader".to_string()],
                false,
                false,
            ),
            // An alarm is not ill health (issue 17): etcd lists every alarm of the cluster in
            // every member's Status, and a member with NOSPACE still serves reads and votes.
            (
                1,
                1,
                vec!["memberID:1 alarm:NOSPACE".to_string()],
                true,
                true,
            ),
            (
                2,
                1,
                vec!["memberID:1 alarm:CORRUPT".to_string()],
                false,
                true,
            ),
            // An error that is not an alarm still is.
            (
                2,
                1,
                vec!["etcdserver: some other error".to_string()],
                false,
                false,
            ),
        ];
        for (id, leader, errors, is_leader, healthy) in cases {
            let s = MemberStatus {
                errors: errors.clone(),
                ..status(id, leader, 1)
            };
            assert_eq!(s.is_leader(), is_leader, "{s:?}");
            assert_eq!(s.healthy(), healthy, "{s:?}");
        }
    }

    #[test]
    fn alarms_are_parsed_with_the_member_they_name() {
        let s = MemberStatus {
            errors: vec![
                "memberID:13668033151171901709 alarm:NOSPACE ".to_string(),
                "memberID:2 alarm:CORRUPT".to_string(),
                "etcdserver: no leader".to_string(),
            ],
            ..status(1, 1, 1)
        };
        assert_eq!(
            s.alarms(),
            vec![
                Alarm {
                    member_id: 13_668_033_151_171_901_709,
                    kind: "NOSPACE".into()
                },
                Alarm {
                    member_id: 2,
                    kind: "CORRUPT".into()
                },
            ]
        );
    }

    #[test]
    fn initial_cluster_names_the_new_member_and_keeps_the_others() {
        let mut new = member(3, true);
        new.name.clear();
        new.client_urls.clear();
        let members = vec![member(1, false), member(2, false), new];
        assert_eq!(
            initial_cluster(&members, 3, "m3"),
            "m1=http://m1:2380,m2=http://m2:2380,m3=http://m3:2380"
        );
    }
}
