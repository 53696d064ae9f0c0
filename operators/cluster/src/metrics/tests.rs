use etcd_admin::{ClusterView, MemberStatus};
use operator_runtime::metrics::{new_registry, render};

use super::*;
use crate::fixtures::{
    Build, V34, V35, cluster, healthy, learner, main, quorum_checked, unhealthy,
};

fn view_with_errors(errors: &[(u64, &str)]) -> ClusterView {
    let mut view = ClusterView::default();
    for (id, error) in errors {
        let status = view.statuses.entry(*id).or_insert_with(|| {
            Ok(MemberStatus {
                id: *id,
                ..MemberStatus::default()
            })
        });
        status.as_mut().unwrap().errors.push((*error).to_owned());
    }
    view
}

#[test]
fn a_sample_counts_voters_learners_quorum_leader_alarms_and_version() {
    let observed = cluster(3, V35).members(vec![
        healthy(0, V35, true),
        unhealthy(1, 30),
        healthy(2, V34, false),
        learner(3, true),
    ]);
    let view = view_with_errors(&[
        (0xa0, "memberID:160 alarm:NOSPACE"),
        (0xa2, "alarm:NOSPACE"),
        (0xa2, "etcdserver: no leader"),
    ]);
    let s = sample(&observed, &view);
    assert_eq!(s.desired_voters, 3);
    assert_eq!(s.voters, 3);
    assert_eq!(s.healthy_voters, 2);
    assert_eq!(s.learners, 1);
    assert!(s.quorum);
    assert_eq!(s.leader, Some(0xa0));
    assert_eq!(s.alarms.get("NOSPACE"), Some(&2));
    assert_eq!(s.alarms.get("CORRUPT"), Some(&0));
    assert_eq!(s.alarms.len(), 2, "no label from a non-alarm error");
    // During a roll the cluster runs its lowest version.
    assert_eq!(s.version.as_deref(), Some(V34));
}

#[test]
fn quorum_is_what_etcd_confirmed_a_known_membership() {
    // A member list comes only from a member whose linearizable read succeeded: etcd confirmed
    // quorum, however few voters answer the operator.
    let reached_one = cluster(3, V35).members(vec![
        healthy(0, V35, false),
        unhealthy(1, 30),
        unhealthy(2, 30),
    ]);
    let s = sample(&reached_one, &ClusterView::default());
    assert!(s.quorum, "{s:?}");
    assert_eq!(s.healthy_voters, 1);
    let two_of_three = cluster(3, V35).members(vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        unhealthy(2, 30),
    ]);
    assert!(sample(&two_of_three, &ClusterView::default()).quorum);
    // Learners hold no vote: one voter and two answering learners still is a quorum of one.
    let learners = cluster(3, V35).members(vec![
        healthy(0, V35, true),
        learner(1, true),
        learner(2, true),
    ]);
    let s = sample(&learners, &ClusterView::default());
    assert!(s.quorum);
    assert_eq!((s.voters, s.learners), (1, 2));
    // Nobody in quorum answered: no quorum, the last version recorded in the status.
    let silent = cluster(3, V35).existed(&[0, 1, 2], V34);
    let s = sample(&silent, &ClusterView::default());
    assert!(!s.quorum);
    assert_eq!((s.voters, s.healthy_voters), (0, 0));
    assert_eq!(s.version.as_deref(), Some(V34));
}

#[test]
fn a_cluster_whose_first_member_has_not_answered_is_bootstrapping_not_quorum_lost() {
    let mut registry = new_registry();
    let metrics = ClusterMetrics::register(&mut registry);
    let id = "namespace=\"db\",name=\"main\"";
    let series = |text: &str, family: &str| line(text, &format!("{family}{{{id}}}"));

    // Just applied, seed Pod starting: no quorum yet, and bootstrapping says why.
    let new = cluster(3, V35).pods(&[0]);
    let s = sample(&new, &ClusterView::default());
    assert!(!s.quorum && s.bootstrapping, "{s:?}");
    metrics.record(&main(), &s);
    let text = render(&registry);
    assert_eq!(
        series(&text, "etcd_operator_cluster_quorum").as_deref(),
        Some("0")
    );
    assert_eq!(
        series(&text, "etcd_operator_cluster_bootstrapping").as_deref(),
        Some("1"),
        "{text}"
    );

    // The seed answered: quorum, no longer bootstrapping.
    let seeded = cluster(3, V35).members(vec![healthy(0, V35, true)]);
    let s = sample(&seeded, &ClusterView::default());
    assert!(s.quorum && !s.bootstrapping, "{s:?}");
    metrics.record(&main(), &s);
    let text = render(&registry);
    assert_eq!(
        series(&text, "etcd_operator_cluster_quorum").as_deref(),
        Some("1")
    );
    assert_eq!(
        series(&text, "etcd_operator_cluster_bootstrapping").as_deref(),
        Some("0")
    );

    // Later nobody answers: the status recorded the cluster, so this is quorum loss, never
    // bootstrapping again (whatever is left of the members).
    let silent = cluster(3, V35).existed(&[0, 1, 2], V35);
    let s = sample(&silent, &ClusterView::default());
    assert!(!s.quorum && !s.bootstrapping, "{s:?}");
    metrics.record(&main(), &s);
    let text = render(&registry);
    assert_eq!(
        series(&text, "etcd_operator_cluster_quorum").as_deref(),
        Some("0")
    );
    assert_eq!(
        series(&text, "etcd_operator_cluster_bootstrapping").as_deref(),
        Some("0")
    );

    // A member list with a minority answering is not quorum loss: the list is known only after
    // a linearizable read succeeded, so etcd confirmed quorum; the operator reaches too few
    // (cut off, or voters not serving clients yet). The status says MembersUnreachable, not
    // QuorumLost, and the gauge agrees with it.
    let minority = cluster(3, V35).members(vec![
        healthy(0, V35, false),
        unhealthy(1, 30),
        unhealthy(2, 30),
    ]);
    let s = sample(&minority, &ClusterView::default());
    assert!(s.quorum && !s.bootstrapping, "{s:?}");
    assert_eq!((s.voters, s.healthy_voters), (3, 1));

    metrics.forget(&ClusterLabels::from(&main()));
    assert!(
        !render(&registry).contains("bootstrapping{"),
        "gone with the cluster"
    );
}

#[test]
fn alarm_names_are_parsed_and_bounded() {
    assert_eq!(
        alarm_of("memberID:1 alarm:NOSPACE").as_deref(),
        Some("NOSPACE")
    );
    assert_eq!(alarm_of("alarm:CORRUPT").as_deref(), Some("CORRUPT"));
    assert_eq!(alarm_of("etcdserver: no leader"), None);
    assert_eq!(alarm_of("alarm:"), None);
    assert_eq!(alarm_of("alarm:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), None);
}

fn line(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .map(|l| l[series.len() + 1..].to_owned())
}

#[test]
fn recorded_series_render_per_cluster_and_go_with_the_cluster() {
    let mut registry = new_registry();
    let metrics = ClusterMetrics::register(&mut registry);
    let observed = cluster(3, V35).members(vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        unhealthy(2, 30),
    ]);
    let view = view_with_errors(&[(0xa0, "memberID:160 alarm:NOSPACE")]);
    metrics.record(&main(), &sample(&observed, &view));

    let text = render(&registry);
    let id = "namespace=\"db\",name=\"main\"";
    for (series, value) in [
        (format!("etcd_operator_cluster_desired_voters{{{id}}}"), "3"),
        (format!("etcd_operator_cluster_voters{{{id}}}"), "3"),
        (format!("etcd_operator_cluster_healthy_voters{{{id}}}"), "2"),
        (format!("etcd_operator_cluster_learners{{{id}}}"), "0"),
        (format!("etcd_operator_cluster_quorum{{{id}}}"), "1"),
        (
            format!("etcd_operator_cluster_leader_changes_total{{{id}}}"),
            "0",
        ),
        (
            format!("etcd_operator_cluster_alarms{{{id},alarm=\"NOSPACE\"}}"),
            "1",
        ),
        (
            format!("etcd_operator_cluster_alarms{{{id},alarm=\"CORRUPT\"}}"),
            "0",
        ),
        (
            format!("etcd_operator_cluster_version_info{{{id},version=\"3.5.35\"}}"),
            "1",
        ),
    ] {
        assert_eq!(
            line(&text, &series).as_deref(),
            Some(value),
            "{series} in\n{text}"
        );
    }
    // No member names or IDs in any label.
    assert!(!text.contains("main-0") && !text.contains("160"), "{text}");

    // The leader moves to member 1, the only one the operator reaches (etcd still confirms
    // quorum through it), the version changes: one change counted, the old version series gone.
    let moved = cluster(3, V35).members(vec![
        unhealthy(0, 10),
        healthy(1, V34, true),
        unhealthy(2, 40),
    ]);
    metrics.record(&main(), &sample(&moved, &ClusterView::default()));
    // An observation without a leader (nobody in quorum answers) is not a change either way.
    let leaderless = cluster(3, V35).existed(&[0, 1, 2], V35);
    metrics.record(&main(), &sample(&leaderless, &ClusterView::default()));
    let quorum_series = format!("etcd_operator_cluster_quorum{{{id}}}");
    assert_eq!(
        line(&render(&registry), &quorum_series).as_deref(),
        Some("0")
    );
    metrics.record(&main(), &sample(&moved, &ClusterView::default()));
    let text = render(&registry);
    assert_eq!(
        line(
            &text,
            &format!("etcd_operator_cluster_leader_changes_total{{{id}}}")
        )
        .as_deref(),
        Some("1"),
        "{text}"
    );
    assert_eq!(line(&text, &quorum_series).as_deref(), Some("1"));
    assert_eq!(
        line(
            &text,
            &format!("etcd_operator_cluster_alarms{{{id},alarm=\"NOSPACE\"}}")
        )
        .as_deref(),
        Some("0")
    );
    assert!(!text.contains("version=\"3.5.35\""), "{text}");
    assert!(text.contains("version=\"3.4.23\""), "{text}");

    // Another cluster stays when this one is deleted.
    let other = ClusterName::new("db", "other");
    metrics.record(&other, &sample(&cluster(1, V35), &ClusterView::default()));
    metrics.retain(|c| c.name == "other");
    let text = render(&registry);
    assert!(!text.contains("name=\"main\""), "{text}");
    assert_eq!(
        line(
            &text,
            "etcd_operator_cluster_desired_voters{namespace=\"db\",name=\"other\"}"
        )
        .as_deref(),
        Some("1"),
        "{text}"
    );
}

#[test]
fn every_change_is_an_action_kind_and_waiting_is_none() {
    use crate::plan::{Action, PodReason, RemovalReason, WaitReason};
    let v = crate::fixtures::v(V35);
    let cases = [
        (
            Action::BootstrapSeed {
                member: "m".into(),
                version: v,
            },
            Some("SeedBootstrapped"),
        ),
        (
            Action::CreateMemberPod {
                member: "m".into(),
                initial_cluster: vec![],
                version: v,
                reason: PodReason::Restart,
            },
            Some("PodRestarted"),
        ),
        (
            Action::AddLearner {
                member: "m".into(),
                peer_url: "u".into(),
            },
            Some("MemberAdded"),
        ),
        (
            Action::PromoteLearner {
                member: "m".into(),
                id: 1,
            },
            Some("MemberPromoted"),
        ),
        (
            Action::RemoveMember {
                member: "m".into(),
                id: 1,
                reason: RemovalReason::Dead,
                quorum: quorum_checked(),
            },
            Some("DeadMemberRemoved"),
        ),
        (
            Action::UpgradeMember {
                member: "m".into(),
                from: v,
                to: v,
                quorum: quorum_checked(),
            },
            Some("MemberUpgraded"),
        ),
        (Action::Wait(WaitReason::Paused), None),
        (Action::Converged, None),
    ];
    for (action, kind) in cases {
        assert_eq!(action_kind(&action), kind, "{action:?}");
    }
}

#[test]
fn the_chart_lists_every_series_this_operator_exposes() {
    let mut registry = new_registry();
    let metrics = Metrics::register(&mut registry);
    // A series in every family (the exposition leaves empty families out).
    metrics
        .reconciles
        .reconciled(std::time::Duration::from_millis(1), Some("Failed"));
    metrics.reconciles.action("MemberAdded");
    let mut clock = PassClock::start();
    clock.lap(PassStep::Etcd);
    metrics.record_pass(&clock);
    let observed = cluster(1, V35).members(vec![healthy(0, V35, true)]);
    metrics
        .clusters
        .record(&main(), &sample(&observed, &ClusterView::default()));
    metrics
        .clusters
        .record_certificates(&main(), &[("peer-tls".to_owned(), 1_900_000_000, false)]);
    let list = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../charts/etcd-operator/files/series/cluster-operator.txt");
    if let Err(stale) = operator_runtime::metrics::check_series_list(&registry, &list) {
        panic!("{stale}");
    }
}

#[test]
fn certificates_not_renewed_by_the_operator_are_exported_by_secret_and_dropped_when_unused() {
    let mut registry = new_registry();
    let metrics = ClusterMetrics::register(&mut registry);
    let id = |secret: &str| format!("namespace=\"db\",name=\"main\",secret=\"{secret}\"");
    let expiry = "etcd_operator_cluster_certificate_expiry_timestamp_seconds";
    let near = "etcd_operator_cluster_certificate_near_expiry";
    metrics.record_certificates(
        &main(),
        &[
            ("peer-tls".to_owned(), 1_900_000_000, false),
            ("main-0-client-tls".to_owned(), 1_800_000_000, true),
        ],
    );
    let text = render(&registry);
    assert_eq!(
        line(&text, &format!("{expiry}{{{}}}", id("peer-tls"))).as_deref(),
        Some("1900000000")
    );
    assert_eq!(
        line(&text, &format!("{near}{{{}}}", id("main-0-client-tls"))).as_deref(),
        Some("1")
    );
    assert_eq!(
        line(&text, &format!("{near}{{{}}}", id("peer-tls"))).as_deref(),
        Some("0")
    );
    // The member's Secret is no longer used (it was replaced): its series go.
    metrics.record_certificates(&main(), &[("peer-tls".to_owned(), 1_900_000_000, false)]);
    let text = render(&registry);
    assert_eq!(
        line(&text, &format!("{near}{{{}}}", id("main-0-client-tls"))),
        None
    );
    assert!(line(&text, &format!("{near}{{{}}}", id("peer-tls"))).is_some());
    // The cluster is gone: all of them go.
    metrics.forget(&ClusterLabels::from(&main()));
    let text = render(&registry);
    assert_eq!(
        line(&text, &format!("{expiry}{{{}}}", id("peer-tls"))),
        None
    );
}

/// A pass's clock charges each step the time since the previous lap, adds up a step run twice,
/// keeps the order steps first ran in, and shows milliseconds as the pass's log line does.
#[test]
fn a_pass_clock_charges_each_step_its_own_time() {
    let mut clock = PassClock::start();
    clock.charge(
        PassStep::PodsListed,
        std::time::Duration::from_micros(1_500),
    );
    clock.charge(PassStep::Etcd, std::time::Duration::from_millis(40));
    clock.charge(PassStep::Tls, std::time::Duration::from_millis(2));
    clock.charge(PassStep::Etcd, std::time::Duration::from_millis(2));
    assert_eq!(clock.to_string(), "pods_listed=1.5 etcd=42.0 tls=2.0");
    let before = clock.steps().len();
    std::thread::sleep(std::time::Duration::from_millis(5));
    clock.lap(PassStep::Action);
    let (step, took) = clock.steps()[before];
    assert_eq!(step, PassStep::Action);
    assert!(took >= std::time::Duration::from_millis(5), "{took:?}");
    assert!(clock.total() >= took);
    // Every step has its own label.
    let mut names: Vec<&str> = PassStep::ALL.iter().map(|s| s.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), PassStep::ALL.len());
}
