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
//! spec cpu 250m                 change the spec (also `snapshot-count N`, `size N`,
//!                               `quota-backend-bytes 100Mi`, `compact-on-no-space`,
//!                               `defrag [threshold P] [min-bytes 64Mi] [window MIN]
//!                               [schedule M H DOM MON DOW]`); Pods listed before it drift
//! older-spec 0 2                these Pods were built from an older spec (they drift)
//! hashless 0 1                  these Pods carry no config hash (an older operator built them)
//! tls 0 1 2                     TLS: each member's Secrets hash `certs-N-a`, its Pod mounted them
//! tls-renewed 1                 its Secrets changed since (`certs-1-b`); the Pod still has `-a`
//! tls-mounted 1                 its Pod was rolled onto the Secrets as they are now
//! tls-unadopted 1               its Pod carries no certificate hash
//! tls-unread                    no member's Secrets were read this pass
//! db 0 1 size 400Mi in-use 100Mi revision 9 [quota 100Mi]   members' database figures
//! alarm NOSPACE 1               an alarm raised by member 1
//! compacted 5000                this process compacted the key space to that revision
//! defragmented 0 1 at 5000      ... and defragmented these members at that revision
//! gated 0 1 2                   these Pods have the serving readiness gate, open;
//! gate-closed 1                 closed
//! clock 2026-11-26T02:00Z       the wall clock (maintenance windows)
//! ----
//! RemoveMember { member: "main-1", id: 161, reason: Dead } (quorum gate passed)
//! ```
//!
//! The expected line is the action's `Debug` form; a destructive action's gate proof is shown as
//! `(quorum gate passed)`, the config hash of the spec as it is `<current hash>`. Members are `main-<ordinal>` in namespace `db`, with ID `0xa0 +
//! ordinal` (161 for member 1); the policy is [`super::Policy::default`] (dead after 300 s,
//! learners after 600 s).

use std::collections::BTreeMap;

use etcd_api::{DefragSpec, EtcdOptions, MaintenanceSpec, PodPolicy};
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{Action, Policy, next_action};
use crate::fixtures::*;
use crate::state::{DbStats, Member, MemberAlarm, Observed, PodState};

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
        let actual = render(&next_action(&observed, &Policy::default()), &observed);
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

fn render(action: &Action, observed: &Observed) -> String {
    // The hash changes with every change of the Pod template: the files name it.
    let current = crate::build::config_hash(&observed.spec);
    let text = format!("{action:?}").replace(&current, "<current hash>");
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
            ("spec", change) => spec_change(file, line, o, change),
            ("older-spec", list) => with_pods(o, list, |pod| {
                pod.config_hash = Some("0000000000000000".into());
            }),
            ("hashless", list) => with_pods(o, list, |pod| pod.config_hash = None),
            ("tls", list) => {
                let mut o = o;
                for ordinal in ordinals(list) {
                    let hash = format!("certs-{ordinal}-a");
                    o.tls_hashes.insert(name(ordinal), hash.clone());
                    o.pods.get_mut(&name(ordinal)).unwrap().tls_hash = Some(hash);
                }
                o
            }
            ("tls-renewed", list) => {
                let mut o = o;
                for ordinal in ordinals(list) {
                    o.tls_hashes
                        .insert(name(ordinal), format!("certs-{ordinal}-b"));
                }
                o
            }
            ("tls-mounted", list) => {
                let mut o = o;
                for ordinal in ordinals(list) {
                    let now = o.tls_hashes.get(&name(ordinal)).cloned();
                    o.pods.get_mut(&name(ordinal)).unwrap().tls_hash = now;
                }
                o
            }
            ("tls-unadopted", list) => with_pods(o, list, |pod| pod.tls_hash = None),
            ("tls-unread", []) => {
                let mut o = o;
                o.tls_hashes.clear();
                o
            }
            ("db", words) => {
                let (list, figures) = split_at_word(words, "size");
                let db = db_stats(file, line, figures);
                for ordinal in ordinals(list) {
                    let member = members
                        .iter_mut()
                        .find(|m| m.name == name(ordinal))
                        .unwrap_or_else(|| panic!("{file}: db of an unlisted member: {line:?}"));
                    member.db = Some(db);
                }
                o
            }
            ("alarm", [alarm, n]) => {
                let mut o = o;
                o.alarms.push(MemberAlarm {
                    member: name(n.parse().unwrap()),
                    alarm: (*alarm).to_owned(),
                });
                o.alarms.sort();
                o
            }
            ("compacted", [revision]) => {
                let mut o = o;
                o.compacted_revision = Some(revision.parse().unwrap());
                o
            }
            ("defragmented", words) => {
                let (list, at) = split_at_word(words, "at");
                let [_, revision] = at else {
                    panic!("{file}: defragmented ORDINALS at REVISION: {line:?}");
                };
                let mut o = o;
                for ordinal in ordinals(list) {
                    o.defragmented_at
                        .insert(name(ordinal), revision.parse().unwrap());
                }
                o
            }
            ("gated", list) => with_pods(o, list, |pod| pod.serving_gate = Some(true)),
            ("gate-closed", list) => with_pods(o, list, |pod| pod.serving_gate = Some(false)),
            ("clock", [at]) => {
                let mut o = o;
                o.wall_clock = Some(unix_seconds(file, at));
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

/// Changes `observed.spec` as a `spec ...` line says.
fn spec_change(file: &str, line: &str, mut observed: Observed, change: &[&str]) -> Observed {
    let spec = &mut observed.spec;
    match change {
        ["size", n] => spec.size = n.parse().unwrap(),
        ["cpu", cpu] => {
            spec.pod = Some(PodPolicy {
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "cpu".to_owned(),
                        Quantity((*cpu).to_owned()),
                    )])),
                    ..ResourceRequirements::default()
                }),
                ..PodPolicy::default()
            });
        }
        ["snapshot-count", n] => {
            spec.etcd_options
                .get_or_insert_with(EtcdOptions::default)
                .snapshot_count = Some(n.parse().unwrap());
        }
        ["quota-backend-bytes", size] => {
            let bytes = i64::try_from(bytes_of(file, size)).unwrap();
            spec.etcd_options
                .get_or_insert_with(EtcdOptions::default)
                .quota_backend_bytes = Some(bytes);
        }
        ["compact-on-no-space"] => {
            spec.maintenance
                .get_or_insert_with(MaintenanceSpec::default)
                .compact_on_no_space = true;
        }
        ["defrag", options @ ..] => {
            let mut defrag = DefragSpec::default();
            let mut rest = options;
            while let Some((&option, tail)) = rest.split_first() {
                rest = match (option, tail) {
                    ("threshold", [p, tail @ ..]) => {
                        defrag.threshold_percent = p.parse().unwrap();
                        tail
                    }
                    ("min-bytes", [size, tail @ ..]) => {
                        defrag.min_fragmented_bytes = i64::try_from(bytes_of(file, size)).unwrap();
                        tail
                    }
                    ("window", [minutes, tail @ ..]) => {
                        defrag.window_minutes = minutes.parse().unwrap();
                        tail
                    }
                    ("schedule", [m, h, dom, mon, dow, tail @ ..]) => {
                        defrag.schedule = Some(format!("{m} {h} {dom} {mon} {dow}"));
                        tail
                    }
                    _ => panic!("{file}: cannot read the defrag options of {line:?}"),
                };
            }
            spec.maintenance
                .get_or_insert_with(MaintenanceSpec::default)
                .defrag = Some(defrag);
        }
        _ => panic!("{file}: cannot read {line:?}"),
    }
    observed
}

/// Applies `change` to the Pods of the members `list` names.
fn with_pods(mut observed: Observed, list: &[&str], change: impl Fn(&mut PodState)) -> Observed {
    for ordinal in ordinals(list) {
        change(observed.pods.get_mut(&name(ordinal)).unwrap());
    }
    observed
}

/// `words` before and from the first `word`.
fn split_at_word<'a, 'b>(words: &'a [&'b str], word: &str) -> (&'a [&'b str], &'a [&'b str]) {
    let at = words.iter().position(|w| *w == word).unwrap_or(words.len());
    words.split_at(at)
}

/// `size 400Mi in-use 100Mi revision 9 [quota 100Mi]`.
fn db_stats(file: &str, line: &str, figures: &[&str]) -> DbStats {
    let mut db = DbStats::default();
    for pair in figures.chunks(2) {
        match pair {
            ["size", size] => db.size = bytes_of(file, size),
            ["in-use", size] => db.in_use = bytes_of(file, size),
            ["quota", size] => db.quota = bytes_of(file, size),
            ["revision", revision] => db.revision = revision.parse().unwrap(),
            _ => panic!("{file}: cannot read the database figures of {line:?}"),
        }
    }
    db
}

fn bytes_of(file: &str, quantity: &str) -> u64 {
    etcd_api::validation::quantity_to_bytes(quantity)
        .and_then(|b| u64::try_from(b).ok())
        .unwrap_or_else(|| panic!("{file}: not a size: {quantity:?}"))
}

/// `YYYY-MM-DDTHH:MMZ` (UTC) as Unix seconds.
fn unix_seconds(file: &str, text: &str) -> i64 {
    let parsed = (|| {
        let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
        let mut date = date.split('-').map(|p| p.parse::<i64>().ok());
        let (y, m, d) = (date.next()??, date.next()??, date.next()??);
        let (hour, minute) = time.split_once(':')?;
        // Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        Some(days * 86_400 + hour.parse::<i64>().ok()? * 3600 + minute.parse::<i64>().ok()? * 60)
    })();
    parsed.unwrap_or_else(|| panic!("{file}: clock YYYY-MM-DDTHH:MMZ: {text:?}"))
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
fn rollout_scenarios() {
    let (cases, failures) = run("rollout.txt", include_str!("testdata/rollout.txt"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases >= 20, "{cases} cases");
}

#[test]
fn maintenance_scenarios() {
    let (cases, failures) = run("maintenance.txt", include_str!("testdata/maintenance.txt"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases >= 20, "{cases} cases");
}

/// The clock lines' dates, checked against a known instant.
#[test]
fn clock_lines_read_utc() {
    assert_eq!(unix_seconds("t", "1970-01-01T00:00Z"), 0);
    assert_eq!(unix_seconds("t", "2026-11-26T00:00Z"), 1_795_651_200);
    assert_eq!(unix_seconds("t", "2024-02-29T01:30Z"), 1_709_170_200);
}

#[test]
fn volume_scenarios() {
    let (cases, failures) = run("volumes.txt", include_str!("testdata/volumes.txt"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases >= 8, "{cases} cases");
}
