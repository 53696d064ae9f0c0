use super::*;

const BOTH: SwitchWanted = SwitchWanted {
    peer_tls: true,
    client_tls: true,
    drop_plaintext_clients: false,
};

fn listen(peer: Listen, client: Listen) -> Listeners {
    Listeners { peer, client }
}

const PLAIN: Listeners = Listeners {
    peer: Listen::Http,
    client: Listen::Http,
};
const DUAL: Listeners = Listeners {
    peer: Listen::Dual,
    client: Listen::Dual,
};

/// Member `i` of three (member 2 leads), healthy, Ready, on `listen` with an `http://` or
/// `https://` peer URL.
fn member(i: u64, listen: Listeners, url_tls: bool) -> SwitchMember {
    SwitchMember {
        name: format!("main-{i}"),
        id: 100 + i,
        peer_url_tls: url_tls,
        client_url_plain: listen.client.serves_plain(),
        client_url_on_switch_port: listen.client.serves_switch_client_port(),
        healthy: true,
        leader: i == 2,
        unhealthy_for: Duration::ZERO,
        pod: Some(SwitchPod {
            listen,
            ready: true,
            terminating: false,
            reverted: false,
        }),
    }
}

fn cluster(states: [(Listeners, bool); 3]) -> Vec<SwitchMember> {
    states
        .into_iter()
        .zip(0..)
        .map(|((listen, url), i)| member(i, listen, url))
        .collect()
}

/// The step as a short string, for tables.
fn show(step: Option<SwitchStep>) -> String {
    match step {
        None => "none".to_owned(),
        Some(SwitchStep::Roll { member, to, .. }) => {
            format!("roll {member} to {:?}/{:?}", to.peer, to.client)
        }
        Some(SwitchStep::UpdatePeerUrl { member, to_tls, .. }) => {
            format!("url {member} {}", if to_tls { "https" } else { "http" })
        }
        Some(SwitchStep::Wait(wait)) => format!("wait {wait:?}"),
    }
}

#[test]
fn each_stage_has_one_next_step_round_by_round_followers_first_leader_last() {
    let https = listen(Listen::Https, Listen::Dual);
    // (members: (listeners, peer URL https) for main-0, main-1, main-2 (the leader), step)
    let cases: Vec<([(Listeners, bool); 3], &str)> = vec![
        // Round 1: every member listens on both, followers first.
        (
            [(PLAIN, false), (PLAIN, false), (PLAIN, false)],
            "roll main-0 to Dual/Dual",
        ),
        (
            [(DUAL, false), (PLAIN, false), (PLAIN, false)],
            "roll main-1 to Dual/Dual",
        ),
        (
            [(DUAL, false), (DUAL, false), (PLAIN, false)],
            "roll main-2 to Dual/Dual",
        ),
        // Round 2: peer URLs move, the leader's last.
        (
            [(DUAL, false), (DUAL, false), (DUAL, false)],
            "url main-0 https",
        ),
        (
            [(DUAL, true), (DUAL, false), (DUAL, false)],
            "url main-1 https",
        ),
        (
            [(DUAL, true), (DUAL, true), (DUAL, false)],
            "url main-2 https",
        ),
        // Round 3: every peer URL is https: the plaintext peer listeners go, followers first.
        // Clients keep plaintext (no annotation).
        (
            [(DUAL, true), (DUAL, true), (DUAL, true)],
            "roll main-0 to Https/Dual",
        ),
        (
            [(https, true), (DUAL, true), (DUAL, true)],
            "roll main-1 to Https/Dual",
        ),
        (
            [(https, true), (https, true), (DUAL, true)],
            "roll main-2 to Https/Dual",
        ),
        ([(https, true), (https, true), (https, true)], "none"),
    ];
    for (states, want) in cases {
        assert_eq!(
            show(next_switch_step(&BOTH, &cluster(states), REVERT_AFTER)),
            want,
            "{states:?}"
        );
    }
}

#[test]
fn plaintext_clients_are_dropped_only_on_the_annotation() {
    let switched = listen(Listen::Https, Listen::Dual);
    let done = cluster([(switched, true), (switched, true), (switched, true)]);
    assert_eq!(show(next_switch_step(&BOTH, &done, REVERT_AFTER)), "none");
    assert_eq!(progress(&BOTH, &done), None);
    let drop = SwitchWanted {
        drop_plaintext_clients: true,
        ..BOTH
    };
    // https:// alone from then on, on 2379 and still on 2378: a client that moved to 2378
    // during the switch never moves again.
    assert_eq!(
        show(next_switch_step(&drop, &done, REVERT_AFTER)),
        "roll main-0 to Https/HttpsWithSwitchPort"
    );
    assert_eq!(progress(&drop, &done), Some((0, 3)));
    let tls = listen(Listen::Https, Listen::HttpsWithSwitchPort);
    let last = cluster([(tls, true), (tls, true), (switched, true)]);
    assert_eq!(
        show(next_switch_step(&drop, &last, REVERT_AFTER)),
        "roll main-2 to Https/HttpsWithSwitchPort"
    );
    // Every member serves TLS on 2378 at every point of that roll.
    assert!(last.iter().all(|m| {
        m.pod
            .is_some_and(|p| p.listen.client.serves_switch_client_port())
    }));
    // Once no member serves plaintext clients, removing the annotation brings nothing back.
    let all = cluster([(tls, true), (tls, true), (tls, true)]);
    assert_eq!(show(next_switch_step(&BOTH, &all, REVERT_AFTER)), "none");
    assert_eq!(show(next_switch_step(&drop, &all, REVERT_AFTER)), "none");
    assert_eq!(desired_listen(&BOTH, &all), tls);
    assert!(!plaintext_clients_served(&all));
}

#[test]
fn clusters_switched_before_2378_was_kept_are_not_rolled_again() {
    // Members an earlier operator moved to https:// on 2379 alone: nothing of 2378 is left to
    // keep, so nothing rolls.
    let tls = listen(Listen::Https, Listen::Https);
    let done = cluster([(tls, true), (tls, true), (tls, true)]);
    let drop = SwitchWanted {
        drop_plaintext_clients: true,
        ..BOTH
    };
    assert_eq!(show(next_switch_step(&drop, &done, REVERT_AFTER)), "none");
}

#[test]
fn a_one_member_cluster_keeps_2378_while_its_only_pod_is_rolled() {
    let drop = SwitchWanted {
        drop_plaintext_clients: true,
        ..BOTH
    };
    let mut alone = vec![member(0, listen(Listen::Https, Listen::Dual), true)];
    // Its Pod is deleted for the last roll: what it advertised still says it served 2378.
    alone[0].pod = None;
    assert_eq!(
        desired_listen(&drop, &alone),
        listen(Listen::Https, Listen::HttpsWithSwitchPort)
    );
    // A member of a cluster created with TLS never advertised 2378.
    let mut born = vec![member(0, listen(Listen::Https, Listen::Https), true)];
    born[0].pod = None;
    assert_eq!(
        desired_listen(&drop, &born),
        listen(Listen::Https, Listen::Https)
    );
}

#[test]
fn a_cluster_created_with_or_without_tls_has_nothing_to_switch() {
    let tls = listen(Listen::Https, Listen::Https);
    let fresh = cluster([(tls, true), (tls, true), (tls, true)]);
    assert_eq!(desired_listen(&BOTH, &fresh), tls);
    assert_eq!(next_switch_step(&BOTH, &fresh, REVERT_AFTER), None);
    // The annotation means nothing to it: no 2378, no roll.
    let drop = SwitchWanted {
        drop_plaintext_clients: true,
        ..BOTH
    };
    assert_eq!(desired_listen(&drop, &fresh), tls);
    assert_eq!(next_switch_step(&drop, &fresh, REVERT_AFTER), None);
    let plain = cluster([(PLAIN, false), (PLAIN, false), (PLAIN, false)]);
    let none = SwitchWanted {
        peer_tls: false,
        client_tls: false,
        drop_plaintext_clients: false,
    };
    assert_eq!(desired_listen(&none, &plain), PLAIN);
    assert_eq!(next_switch_step(&none, &plain, REVERT_AFTER), None);
    assert_eq!(progress(&none, &plain), None);
}

#[test]
fn only_client_tls_rolls_the_client_side_and_never_moves_a_peer_url() {
    let client_only = SwitchWanted {
        peer_tls: false,
        ..BOTH
    };
    let plain = cluster([(PLAIN, false), (PLAIN, false), (PLAIN, false)]);
    assert_eq!(
        show(next_switch_step(&client_only, &plain, REVERT_AFTER)),
        "roll main-0 to Http/Dual"
    );
    let dual_client = listen(Listen::Http, Listen::Dual);
    let done = cluster([
        (dual_client, false),
        (dual_client, false),
        (dual_client, false),
    ]);
    assert_eq!(next_switch_step(&client_only, &done, REVERT_AFTER), None);
}

#[test]
fn nothing_is_disrupted_while_a_member_is_down_not_ready_or_gone() {
    let base = || cluster([(DUAL, true), (DUAL, false), (DUAL, false)]);
    let mut gone = base();
    gone[0].pod = None;
    gone[0].healthy = false;
    let mut terminating = base();
    if let Some(pod) = terminating[2].pod.as_mut() {
        pod.terminating = true;
    }
    let mut not_ready = base();
    if let Some(pod) = not_ready[0].pod.as_mut() {
        pod.ready = false;
    }
    // Answers the operator, Ready, but etcd says it is unhealthy (a plaintext member).
    let mut unhealthy = base();
    unhealthy[1].healthy = false;
    unhealthy[1].unhealthy_for = Duration::from_secs(600);
    let cases = [
        (gone, "wait PodMissing(\"main-0\")"),
        (terminating, "wait PodMissing(\"main-2\")"),
        (not_ready, "wait PodNotReady(\"main-0\")"),
        (unhealthy, "wait MemberUnhealthy(\"main-1\")"),
    ];
    for (members, want) in cases {
        assert_eq!(show(next_switch_step(&BOTH, &members, REVERT_AFTER)), want);
    }
}

#[test]
fn a_member_that_does_not_come_up_on_tls_is_waited_for_then_reverted_and_left_alone() {
    let mut members = cluster([(DUAL, true), (DUAL, false), (DUAL, false)]);
    members[0].healthy = false;
    members[0].unhealthy_for = Duration::from_secs(20);
    assert_eq!(
        show(next_switch_step(&BOTH, &members, REVERT_AFTER)),
        "wait SettlingOnTls(\"main-0\")"
    );
    members[0].unhealthy_for = REVERT_AFTER;
    assert_eq!(
        show(next_switch_step(&BOTH, &members, REVERT_AFTER)),
        "url main-0 http"
    );
    // Reverted (its Pod marked first), healthy again on http://: the switch stops there and
    // nothing else is rolled, until its Pod is re-created.
    members[0].healthy = true;
    members[0].unhealthy_for = Duration::ZERO;
    members[0].peer_url_tls = false;
    if let Some(pod) = members[0].pod.as_mut() {
        pod.reverted = true;
    }
    assert_eq!(
        show(next_switch_step(&BOTH, &members, REVERT_AFTER)),
        "wait Reverted(\"main-0\")"
    );
    // Crash after the mark, before the MemberUpdate back: the revert is done again.
    members[0].healthy = false;
    members[0].unhealthy_for = REVERT_AFTER;
    members[0].peer_url_tls = true;
    assert_eq!(
        show(next_switch_step(&BOTH, &members, REVERT_AFTER)),
        "url main-0 http"
    );
}

#[test]
fn the_revert_needs_the_quorum_that_commits_it() {
    let mut members = cluster([(DUAL, true), (DUAL, false), (DUAL, false)]);
    members[0].healthy = false;
    members[0].unhealthy_for = REVERT_AFTER;
    members[1].healthy = false;
    assert_eq!(
        show(next_switch_step(&BOTH, &members, REVERT_AFTER)),
        "wait WouldLoseQuorum { member: \"main-0\", healthy: 1, voters: 3 }"
    );
}

#[test]
fn the_operator_client_moves_to_tls_once_every_member_serves_it() {
    let https = listen(Listen::Https, Listen::Dual);
    let cases = [
        ([(PLAIN, false), (PLAIN, false), (PLAIN, false)], false),
        ([(DUAL, true), (DUAL, true), (PLAIN, false)], false),
        ([(DUAL, true), (DUAL, true), (DUAL, true)], true),
        ([(https, true), (https, true), (DUAL, true)], true),
    ];
    for (states, tls) in cases {
        assert_eq!(
            operator_client_tls(&BOTH, &cluster(states)),
            tls,
            "{states:?}"
        );
    }
    let mut gone = cluster([(DUAL, true), (DUAL, true), (DUAL, true)]);
    gone[1].pod = None;
    assert!(!operator_client_tls(&BOTH, &gone));
}

/// The world's answer to a step, one event per planner pass: a deleted Pod comes back with the
/// listeners [`desired_listen`] gives (not Ready, not answering), then becomes Ready; a peer URL
/// moved to https:// is reached at once unless the member's TLS is broken.
struct World {
    members: Vec<SwitchMember>,
    broken_tls: Option<usize>,
}

impl World {
    fn settle(&mut self, wanted: &SwitchWanted) {
        let listen = desired_listen(wanted, &self.members);
        for (i, m) in self.members.iter_mut().enumerate() {
            match m.pod {
                None => {
                    m.pod = Some(SwitchPod {
                        listen,
                        ready: false,
                        terminating: false,
                        reverted: false,
                    });
                    return;
                }
                Some(ref mut pod) if !pod.ready => {
                    pod.ready = true;
                    // It advertises the client URLs it listens on.
                    let client = pod.listen.client;
                    m.client_url_plain = client.serves_plain();
                    m.client_url_on_switch_port = client.serves_switch_client_port();
                    m.healthy = !(self.broken_tls == Some(i) && m.peer_url_tls);
                    return;
                }
                _ => {}
            }
        }
    }

    fn apply(&mut self, step: &SwitchStep) {
        match step {
            SwitchStep::Roll { member, .. } => {
                let m = self.find(member);
                m.pod = None;
                m.healthy = false;
            }
            SwitchStep::UpdatePeerUrl { member, to_tls, .. } => {
                let broken = self.broken_tls;
                let i = self.members.iter().position(|m| &m.name == member);
                let m = self.find(member);
                m.peer_url_tls = *to_tls;
                if !to_tls && let Some(pod) = m.pod.as_mut() {
                    pod.reverted = true;
                }
                m.healthy = !(*to_tls && broken.is_some() && broken == i);
            }
            SwitchStep::Wait(_) => {}
        }
    }

    fn find(&mut self, name: &str) -> &mut SwitchMember {
        self.members
            .iter_mut()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no member {name}"))
    }

    fn down(&self) -> usize {
        self.members
            .iter()
            .filter(|m| !m.healthy || m.pod.is_none_or(|p| !p.ready))
            .count()
    }
}

/// Walks a whole switch, with the planner called between every event, and checks that never
/// two members are down and that it ends with every member on TLS.
#[test]
fn a_whole_switch_never_takes_two_members_down_and_ends_on_tls() {
    let drop = SwitchWanted {
        drop_plaintext_clients: true,
        ..BOTH
    };
    let dual = listen(Listen::Https, Listen::Dual);
    let kept = listen(Listen::Https, Listen::HttpsWithSwitchPort);
    // The annotation never set; set once the switch is through (the way the README asks: 2378
    // is kept); set before the switch starts (no member ever serves 2378: none is kept).
    let https = listen(Listen::Https, Listen::Https);
    let walks: [(u64, &[SwitchWanted], Listeners); 6] = [
        (1, &[BOTH], dual),
        (1, &[BOTH, drop], kept),
        (3, &[BOTH], dual),
        (3, &[BOTH, drop], kept),
        (5, &[BOTH, drop], kept),
        (3, &[drop], https),
    ];
    for (size, phases, end) in walks {
        let mut world = World {
            members: (0..size).map(|i| member(i, PLAIN, false)).collect(),
            broken_tls: None,
        };
        for m in &mut world.members {
            m.leader = m.name == "main-0";
        }
        let mut steps = vec![];
        for wanted in phases {
            for _ in 0..200 {
                let Some(step) = next_switch_step(wanted, &world.members, REVERT_AFTER) else {
                    // Nothing left to switch; the last Pod may still be coming up.
                    if world.down() == 0 {
                        break;
                    }
                    world.settle(wanted);
                    continue;
                };
                if size > 1 {
                    assert!(world.down() <= 1, "two members down before {step:?}");
                }
                world.apply(&step);
                if size > 1 {
                    assert!(world.down() <= 1, "two members down after {step:?}");
                }
                steps.push(show(Some(step)));
                world.settle(wanted);
            }
        }
        for m in &world.members {
            assert!(m.peer_url_tls && m.healthy, "{m:?} after {steps:#?}");
            assert_eq!(m.pod.map(|p| p.listen), Some(end), "{m:?} after {steps:#?}");
        }
        let last = phases.last().copied().unwrap_or(BOTH);
        assert!(operator_client_tls(&last, &world.members));
        // The leader (main-0 here) is the last of each round.
        let rounds: Vec<&String> = steps.iter().filter(|s| s.starts_with("roll")).collect();
        let per_round = usize::try_from(size).unwrap_or(0);
        for round in rounds.chunks(per_round) {
            assert!(
                round.last().is_some_and(|s| s.contains("main-0 ")),
                "{round:?}"
            );
        }
    }
}

/// The planner keeps no memory: a crash at any step is a pass that starts over from the same
/// observation. Calling it twice on every state of a walk gives the same step twice.
#[test]
fn every_stage_is_read_from_what_is_observed() {
    let mut world = World {
        members: (0..3).map(|i| member(i, PLAIN, false)).collect(),
        broken_tls: None,
    };
    for _ in 0..100 {
        let first = next_switch_step(&BOTH, &world.members, REVERT_AFTER);
        assert_eq!(first, next_switch_step(&BOTH, &world.members, REVERT_AFTER));
        let Some(step) = first else {
            world.settle(&BOTH);
            continue;
        };
        world.apply(&step);
        world.settle(&BOTH);
    }
    assert_eq!(next_switch_step(&BOTH, &world.members, REVERT_AFTER), None);
}

#[test]
fn a_broken_member_is_reverted_and_the_switch_stops_there_with_quorum_kept() {
    let mut world = World {
        members: (0..3).map(|i| member(i, PLAIN, false)).collect(),
        broken_tls: Some(1),
    };
    let mut last = None;
    for _ in 0..60 {
        let step = next_switch_step(&BOTH, &world.members, REVERT_AFTER);
        assert!(world.down() <= 1);
        let Some(step) = step else { break };
        if matches!(step, SwitchStep::Wait(SwitchWait::SettlingOnTls(_))) {
            world.members[1].unhealthy_for += Duration::from_secs(15);
        }
        world.apply(&step);
        world.settle(&BOTH);
        last = Some(show(Some(step)));
    }
    assert_eq!(last.as_deref(), Some("wait Reverted(\"main-1\")"));
    let m = &world.members[1];
    assert!(!m.peer_url_tls && m.healthy);
    // main-2 (the leader) never had its peer URL moved.
    assert!(!world.members[2].peer_url_tls);
}
