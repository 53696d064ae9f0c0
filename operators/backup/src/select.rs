//! Which etcd member to snapshot (pure, no I/O).
//!
//! The executor asks every candidate endpoint for its `Maintenance.Status` and hands the answers
//! here. A member qualifies when it answered, reports no errors but alarms, is not the member a
//! CORRUPT alarm names, knows a leader (a member without one may be partitioned and stale) and
//! is not a learner. A NOSPACE alarm does not stop a backup: a snapshot is a read, which etcd
//! serves under NOSPACE, and a backup is what a user wants before freeing space (issue 17;
//! etcd lists every alarm of the cluster in every member's Status). Among those,
//! the highest revision wins: the most recent data. On a tie a follower is preferred over the
//! leader (a snapshot costs the serving member CPU and disk reads; the leader is busiest), then
//! the earliest endpoint in the given order, so the choice is deterministic.

use std::fmt;

use etcd_api::EtcdClusterStatus;

/// Client URLs to probe for an EtcdCluster: its healthy voting members' client URLs, or when
/// it lists none, its client Service's URL (`clientEndpoint`). Empty when it has neither (not
/// bootstrapped yet, or its operator has not written status).
pub fn endpoints_of(status: &EtcdClusterStatus) -> Vec<String> {
    let members: Vec<String> = status
        .members
        .iter()
        .filter(|m| m.healthy && !m.learner)
        .filter_map(|m| m.client_url.clone())
        .collect();
    if !members.is_empty() {
        return members;
    }
    status.client_endpoint.iter().cloned().collect()
}

/// What one member said when asked for its status: etcd-admin's reading of
/// `Maintenance.Status`, the same type the cluster operator observes members with.
pub use etcd_admin::MemberStatus as MemberProbe;

/// One endpoint and what came back from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberAnswer {
    /// The client URL that was asked.
    pub endpoint: String,
    /// Its status, or why it could not be had (connection refused, timeout, ...).
    pub probe: Result<MemberProbe, String>,
}

/// The member chosen, with the endpoint to stream from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    /// The client URL to take the snapshot from.
    pub endpoint: String,
    /// What the member reported.
    pub probe: MemberProbe,
}

/// No member qualified. The message lists every endpoint and why it was passed over.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct NoReachableMember {
    /// (endpoint, why it was not chosen), in the order given.
    pub rejected: Vec<(String, String)>,
}

impl fmt::Display for NoReachableMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rejected.is_empty() {
            return write!(f, "no etcd endpoint to back up from");
        }
        write!(f, "no healthy etcd member among ")?;
        for (i, (endpoint, why)) in self.rejected.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{endpoint}: {why}")?;
        }
        Ok(())
    }
}

/// Why a member that answered is not eligible, if it is not.
fn ineligible(probe: &MemberProbe) -> Option<String> {
    let alarms = probe.alarms();
    if alarms.len() < probe.errors.len() {
        return Some(format!("reports errors: {}", probe.errors.join(", ")));
    }
    if alarms
        .iter()
        .any(|a| a.kind == "CORRUPT" && a.member_id == probe.id)
    {
        return Some("raised a CORRUPT alarm: its data differs from the others'".to_owned());
    }
    if probe.leader_id == 0 {
        return Some("has no leader".to_owned());
    }
    if probe.learner {
        return Some("is a learner".to_owned());
    }
    None
}

/// Picks the member to snapshot; see the module docs for the rule.
pub fn select_member(answers: &[MemberAnswer]) -> Result<Selected, NoReachableMember> {
    let mut best: Option<&MemberAnswer> = None;
    let mut best_probe: Option<&MemberProbe> = None;
    let mut rejected = Vec::new();
    for answer in answers {
        let probe = match &answer.probe {
            Ok(probe) => probe,
            Err(why) => {
                rejected.push((answer.endpoint.clone(), why.clone()));
                continue;
            }
        };
        if let Some(why) = ineligible(probe) {
            rejected.push((answer.endpoint.clone(), why));
            continue;
        }
        let better = match best_probe {
            None => true,
            Some(current) => {
                // Strictly better only: the earlier endpoint wins a full tie.
                (probe.revision, !probe.is_leader()) > (current.revision, !current.is_leader())
            }
        };
        if better {
            best = Some(answer);
            best_probe = Some(probe);
        }
    }
    match (best, best_probe) {
        (Some(answer), Some(probe)) => Ok(Selected {
            endpoint: answer.endpoint.clone(),
            probe: probe.clone(),
        }),
        _ => Err(NoReachableMember { rejected }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEADER: u64 = 1;

    fn member(id: u64, revision: i64) -> MemberProbe {
        MemberProbe {
            endpoint: format!("http://member-{id}:2379"),
            id,
            cluster_id: 0xc1,
            version: "3.5.1".into(),
            revision,
            leader_id: LEADER,
            ..Default::default()
        }
    }

    fn ok(endpoint: &str, probe: MemberProbe) -> MemberAnswer {
        MemberAnswer {
            endpoint: endpoint.into(),
            probe: Ok(probe),
        }
    }

    fn down(endpoint: &str) -> MemberAnswer {
        MemberAnswer {
            endpoint: endpoint.into(),
            probe: Err("connection refused".into()),
        }
    }

    #[test]
    fn table() {
        // What etcd really reports: every alarm of the cluster, in every member's Status.
        let alarmed = MemberProbe {
            errors: vec!["etcdserver: some error".into()],
            ..member(2, 900)
        };
        let leaderless = MemberProbe {
            leader_id: 0,
            ..member(3, 900)
        };
        let learner = MemberProbe {
            learner: true,
            ..member(4, 900)
        };
        let cases: Vec<(&str, Vec<MemberAnswer>, Option<&str>)> = vec![
            (
                "highest revision wins",
                vec![
                    ok("a", member(2, 10)),
                    ok("b", member(3, 12)),
                    ok("c", member(4, 11)),
                ],
                Some("b"),
            ),
            (
                "unreachable members are skipped",
                vec![down("a"), ok("b", member(2, 5)), down("c")],
                Some("b"),
            ),
            (
                "tie: a follower is preferred over the leader",
                vec![ok("a", member(LEADER, 7)), ok("b", member(2, 7))],
                Some("b"),
            ),
            (
                "tie between followers: the first endpoint",
                vec![
                    ok("a", member(LEADER, 7)),
                    ok("b", member(2, 7)),
                    ok("c", member(3, 7)),
                ],
                Some("b"),
            ),
            (
                "the leader wins when it is ahead",
                vec![ok("a", member(LEADER, 8)), ok("b", member(2, 7))],
                Some("a"),
            ),
            (
                "members with errors, without a leader or learners are not eligible",
                vec![
                    ok("a", alarmed.clone()),
                    ok("b", leaderless.clone()),
                    ok("c", learner.clone()),
                    ok("d", member(5, 3)),
                ],
                Some("d"),
            ),
            // Issue 17: a member with a NOSPACE alarm serves reads, and a snapshot is a read:
            // backups must run, the backup being what the user needs before fixing the quota.
            (
                "a NOSPACE alarm does not prevent a backup",
                vec![ok(
                    "a",
                    MemberProbe {
                        errors: vec!["memberID:2 alarm:NOSPACE".into()],
                        ..member(2, 900)
                    },
                )],
                Some("a"),
            ),
            // A member whose data etcd found corrupt is never snapshotted; the others are.
            (
                "the member a CORRUPT alarm names is not eligible",
                vec![
                    ok(
                        "a",
                        MemberProbe {
                            errors: vec!["memberID:2 alarm:CORRUPT".into()],
                            ..member(2, 900)
                        },
                    ),
                    ok(
                        "b",
                        MemberProbe {
                            errors: vec!["memberID:2 alarm:CORRUPT".into()],
                            ..member(3, 800)
                        },
                    ),
                ],
                Some("b"),
            ),
            ("all down", vec![down("a"), down("b")], None),
            (
                "all unhealthy",
                vec![ok("a", alarmed), ok("b", leaderless), ok("c", learner)],
                None,
            ),
            ("no endpoints", vec![], None),
        ];
        for (name, answers, want) in cases {
            let got = select_member(&answers);
            assert_eq!(
                got.as_ref().ok().map(|s| s.endpoint.as_str()),
                want,
                "{name}: {got:?}"
            );
        }
    }

    #[test]
    fn failure_names_every_endpoint_and_why() {
        let err = select_member(&[
            down("http://10.0.0.1:2379"),
            ok(
                "http://10.0.0.2:2379",
                MemberProbe {
                    leader_id: 0,
                    ..member(2, 1)
                },
            ),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no healthy etcd member among http://10.0.0.1:2379: connection refused; \
             http://10.0.0.2:2379: has no leader"
        );
        assert_eq!(
            select_member(&[]).unwrap_err().to_string(),
            "no etcd endpoint to back up from"
        );
    }

    #[test]
    fn endpoints_of_a_cluster() {
        use etcd_api::MemberStatus;
        let m = |name: &str, healthy: bool, learner: bool, url: Option<&str>| MemberStatus {
            name: name.into(),
            healthy,
            learner,
            client_url: url.map(str::to_owned),
            ..Default::default()
        };
        let mut status = EtcdClusterStatus {
            members: vec![
                m("a", true, false, Some("http://a:2379")),
                m("b", false, false, Some("http://b:2379")),
                m("c", true, true, Some("http://c:2379")),
                m("d", true, false, None),
                m("e", true, false, Some("http://e:2379")),
            ],
            client_endpoint: Some("http://svc:2379".into()),
            ..Default::default()
        };
        assert_eq!(endpoints_of(&status), ["http://a:2379", "http://e:2379"]);
        status.members.retain(|m| !m.healthy || m.learner);
        assert_eq!(endpoints_of(&status), ["http://svc:2379"]);
        status.client_endpoint = None;
        assert!(endpoints_of(&status).is_empty());
    }

    #[test]
    fn selected_carries_the_probe() {
        let s = select_member(&[ok("a", member(9, 42))]).unwrap();
        assert_eq!(s.probe, member(9, 42));
    }
}
