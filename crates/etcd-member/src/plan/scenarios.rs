//! Planner scenarios as data, raft-rs style: each case in `testdata/*.txt` is an observed state
//! written line by line, `----`, and the one action the planner must choose. Read the files for
//! the cases; this module only parses and runs them.
//!
//! ```text
//! # A case starts with comment lines saying what it shows.
//! cluster 3 3.5.35              spec.size and spec.version (required, first)
//! member 0 healthy 3.5.35 leader
//! member 1 unhealthy 600        seconds since it last answered
//! member 2 learner answers      or: learner silent [SECONDS], learner unstarted
//! pods 0 1 2                    member Pods; `ready 0 1` marks the kubelet's Ready,
//! pvcs 0 1 2                    `terminating 2` a Pod being deleted
//! existed 0 1 2 3.5.35          the last status listed these members at that version
//! paused                        spec.paused
//! restoring NAME                an EtcdRestore holds the cluster
//! cluster-version 3.5           etcd's cluster version (`none`: no member reports one;
//!                               without: the lowest minor the members run)
//! v2-wal-clean 0 1 2            members whose WAL holds no v2 entries (before 3.6; after pvcs)
//! storage 2Gi from 1Gi expandable  spec.storage.size, the size the PVCs were made with
//!                               (after pvcs), and whether their class allows expansion (or `fixed`)
//! grown 0 1                     these PVCs already ask for spec.storage.size
//! retained 2                    these PVCs were kept aside by an EtcdRestore
//! ----
//! RemoveMember { member: "main-1", id: 161, reason: Dead } (quorum gate passed)
//! ```
//!
//! The expected line is the action's `Debug` form; a destructive action's gate proof is shown as
//! `(quorum gate passed)`. Members are `main-<ordinal>` in namespace `db`, with ID `0xa0 +
//! ordinal` (161 for member 1); the policy is [`super::Policy::default`] (dead after 300 s,
//! learners after 600 s).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{Action, Policy, next_action};
use crate::fixtures::*;
use crate::state::{Member, Observed};

/// Runs every case of `text` (a testdata file), returning the cases that failed, described.
fn run(file: &str, text: &str) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut cases = 0;
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let (input, expected) = block
            .split_once("\n----\n")
            .unwrap_or_else(|| panic!("{file}: a case without ----:\n{block}"));
        let title = input
            .lines()
            .find_map(|l| l.strip_prefix("# "))
            .unwrap_or("(untitled)");
        let observed = parse(file, input);
        let actual = render(&next_action(&observed, &Policy::default()));
        cases += 1;
        if actual != expected.trim() {
            failures.push(format!(
                "{file}: {title}\n  expected: {}\n  actual:   {actual}",
                expected.trim()
            ));
        }
    }
    (cases, failures)
}

fn render(action: &Action) -> String {
    let text = format!("{action:?}");
    match text.strip_suffix(", quorum: QuorumChecked(()) }") {
        Some(head) => format!("{head} }} (quorum gate passed)"),
        None => text,
    }
}

fn ordinals(words: &[&str]) -> Vec<u32> {
    words.iter().map(|w| w.parse().unwrap()).collect()
}

fn parse(file: &str, input: &str) -> Observed {
    let mut observed: Option<Observed> = None;
    let mut members = Vec::new();
    // Set after the members, which otherwise give the lowest minor they run.
    let mut cluster_version = None;
    for line in input.lines().filter(|l| !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&command, args)) = words.split_first() else {
            continue;
        };
        if command == "cluster" {
            observed = Some(cluster(args[0].parse().unwrap(), version_of(args[1])));
            continue;
        }
        let o = observed
            .take()
            .unwrap_or_else(|| panic!("{file}: `cluster` must come first:\n{input}"));
        observed = Some(match (command, args) {
            ("member", [n, "healthy", version, rest @ ..]) => {
                members.push(healthy(
                    n.parse().unwrap(),
                    version_of(version),
                    rest == ["leader"],
                ));
                o
            }
            ("member", [n, "unhealthy", seconds]) => {
                members.push(unhealthy(n.parse().unwrap(), seconds.parse().unwrap()));
                o
            }
            ("member", [n, "learner", "answers"]) => {
                members.push(learner(n.parse().unwrap(), true));
                o
            }
            ("member", [n, "learner", "silent"]) => {
                members.push(learner(n.parse().unwrap(), false));
                o
            }
            ("member", [n, "learner", "silent", seconds]) => {
                let silent = unhealthy(n.parse().unwrap(), seconds.parse().unwrap());
                members.push(Member {
                    learner: true,
                    ..silent
                });
                o
            }
            ("member", [n, "learner", "unstarted"]) => {
                members.push(unstarted_learner(n.parse().unwrap()));
                o
            }
            ("pods", list) => o.pods(&ordinals(list)),
            ("pvcs", list) => o.pvcs(&ordinals(list)),
            ("ready", list) => o.ready(&ordinals(list)),
            ("terminating", [n]) => o.terminating(n.parse().unwrap()),
            ("existed", [list @ .., version]) => o.existed(&ordinals(list), version_of(version)),
            ("paused", []) => {
                let mut o = o;
                o.spec.paused = true;
                o
            }
            ("cluster-version", ["none"]) => {
                cluster_version = Some(None);
                o
            }
            ("cluster-version", [version]) => {
                let (major, minor) = version
                    .split_once('.')
                    .unwrap_or_else(|| panic!("{file}: cluster-version MAJOR.MINOR: {line:?}"));
                cluster_version = Some(Some((major.parse().unwrap(), minor.parse().unwrap())));
                o
            }
            ("v2-wal-clean", list) => o.v2_wal_clean(&ordinals(list)),
            ("storage", [size, "from", made, class]) => {
                let mut o = o;
                o.spec.storage.size = Quantity((*size).to_owned());
                o.member_storage = Some(etcd_api::StorageSpec {
                    size: Quantity((*made).to_owned()),
                    ..etcd_api::StorageSpec::default()
                });
                for pvc in o.pvcs.values_mut() {
                    pvc.class_allows_expansion = match *class {
                        "expandable" => true,
                        "fixed" => false,
                        _ => panic!("{file}: expandable or fixed: {line:?}"),
                    };
                }
                o
            }
            ("grown", list) => {
                let mut o = o;
                let bytes = etcd_api::validation::quantity_to_bytes(&o.spec.storage.size.0);
                for ordinal in ordinals(list) {
                    o.pvcs.get_mut(&name(ordinal)).unwrap().requested_bytes = bytes;
                }
                o
            }
            ("retained", list) => {
                let mut o = o;
                for ordinal in ordinals(list) {
                    o.pvcs.get_mut(&name(ordinal)).unwrap().retained_by_restore = true;
                }
                o
            }
            ("restoring", [name]) => {
                let mut o = o;
                o.restoring = Some((*name).to_owned());
                o
            }
            _ => panic!("{file}: cannot read {line:?}"),
        });
    }
    let observed = observed.unwrap_or_else(|| panic!("{file}: no `cluster` line:\n{input}"));
    let observed = if members.is_empty() {
        observed
    } else {
        observed.members(members)
    };
    match cluster_version {
        Some(version) => observed.cluster_version(version),
        None => observed,
    }
}

/// The fixtures' version constants by their text, so the files say the real version; another
/// version (an old patch release, a refused one) as written.
fn version_of(text: &str) -> &'static str {
    [V34, V35, V36, V37]
        .into_iter()
        .find(|v| *v == text)
        .unwrap_or_else(|| Box::leak(text.to_owned().into_boxed_str()))
}

#[test]
fn membership_scenarios() {
    let (cases, failures) = run("membership.txt", include_str!("testdata/membership.txt"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases >= 15, "{cases} cases");
}

#[test]
fn upgrade_scenarios() {
    let (cases, failures) = run("upgrades.txt", include_str!("testdata/upgrades.txt"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases >= 20, "{cases} cases");
}

#[test]
fn volume_scenarios() {
    let (cases, failures) = run("volumes.txt", include_str!("testdata/volumes.txt"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases >= 8, "{cases} cases");
}
