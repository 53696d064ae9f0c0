//! Test fixtures shared by the planner and status tests: small builders of observed states.
//!
//! Behind the `fixtures` feature for the cluster operator's status and metrics tests.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_api::EtcdClusterSpec;
use etcd_api::validation::EtcdVersion;

use crate::naming::ClusterName;
use crate::state::{DbStats, Member, MemberHealth, Membership, Observed, PodState, PvcState};

pub const V34: &str = "3.4.23";
pub const V35: &str = "3.5.35";
pub const V36: &str = "3.6.16";
pub const V37: &str = "3.7.3";

pub fn v(text: &str) -> EtcdVersion {
    EtcdVersion::parse(text).unwrap()
}

pub fn main() -> ClusterName {
    ClusterName::new("db", "main")
}

pub fn name(ordinal: u32) -> String {
    main().member_name(ordinal)
}

pub fn cluster(size: i32, version: &str) -> Observed {
    Observed {
        cluster: main(),
        spec: EtcdClusterSpec::new(size, version),
        restoring: None,
        recorded_cluster_id: None,
        last_known_members: vec![],
        last_known_version: None,
        member_storage: None,
        membership: Membership::Unknown,
        cluster_id: None,
        cluster_version: None,
        pods: BTreeMap::new(),
        pvcs: BTreeMap::new(),
        alarms: vec![],
        compacted_revision: None,
        defragmented_at: BTreeMap::new(),
        tls_hashes: BTreeMap::new(),
        wall_clock: None,
        drop_plaintext_clients: false,
    }
}

pub fn healthy(ordinal: u32, version: &str, leader: bool) -> Member {
    Member {
        id: 0xa0 + u64::from(ordinal),
        name: name(ordinal),
        peer_url: main().peer_url(&name(ordinal)),
        client_url: Some(main().client_url(&name(ordinal))),
        client_url_on_switch_port: false,
        learner: false,
        health: MemberHealth::Healthy {
            version: v(version),
            leader,
        },
        // A small database with little free space: nothing worth defragmenting.
        db: Some(DbStats {
            size: 16 << 20,
            in_use: 15 << 20,
            quota: 0,
            revision: 1000,
        }),
    }
}

pub fn unhealthy(ordinal: u32, seconds: u64) -> Member {
    Member {
        health: MemberHealth::Unhealthy {
            unhealthy_for: Duration::from_secs(seconds),
        },
        db: None,
        ..healthy(ordinal, V35, false)
    }
}

pub fn learner(ordinal: u32, answers: bool) -> Member {
    let base = if answers {
        healthy(ordinal, V35, false)
    } else {
        Member {
            name: String::new(),
            client_url: None,
            ..unhealthy(ordinal, 0)
        }
    };
    Member {
        learner: true,
        ..base
    }
}

pub trait Build {
    fn members(self, members: Vec<Member>) -> Self;
    fn pods(self, ordinals: &[u32]) -> Self;
    fn terminating(self, ordinal: u32) -> Self;
    fn pvcs(self, ordinals: &[u32]) -> Self;
    /// The kubelet reports these members' Pods Ready (they must have Pods).
    fn ready(self, ordinals: &[u32]) -> Self;
    fn existed(self, ordinals: &[u32], version: &str) -> Self;
    fn cluster_version(self, version: Option<(u64, u64)>) -> Self;
    /// These members' PVCs record a v2 snapshot taken before an upgrade to 3.6.
    fn v2_wal_clean(self, ordinals: &[u32]) -> Self;
}

impl Build for Observed {
    fn members(mut self, members: Vec<Member>) -> Self {
        self.recorded_cluster_id = Some("c0ffee".into());
        self.cluster_id = Some(0xc0ffee);
        // A settled cluster: etcd reports the lowest minor its answering members run.
        self.cluster_version = members
            .iter()
            .filter_map(Member::version)
            .min()
            .map(|v| (v.major, v.minor));
        self.membership = Membership::Known(members);
        self
    }
    fn cluster_version(mut self, version: Option<(u64, u64)>) -> Self {
        self.cluster_version = version;
        self
    }
    fn v2_wal_clean(mut self, ordinals: &[u32]) -> Self {
        for &o in ordinals {
            if let Some(pvc) = self.pvcs.get_mut(&name(o)) {
                pvc.v2_wal_clean = true;
            }
        }
        self
    }
    /// Pods built from the spec as it is now: a later change of the spec makes them drift.
    fn pods(mut self, ordinals: &[u32]) -> Self {
        let config_hash = Some(crate::build::config_hash(&self.spec));
        for &o in ordinals {
            self.pods.insert(
                name(o),
                PodState {
                    terminating: false,
                    ready: false,
                    config_hash: config_hash.clone(),
                    tls_hash: None,
                    snapshot_before_upgrade: false,
                    v2_snapshot_saved: false,
                    raft_caught_up: false,
                    etcd_started_at: None,
                    listen: None,
                    tls_switch_reverted: false,
                    serving_gate: None,
                },
            );
        }
        self
    }
    fn terminating(mut self, ordinal: u32) -> Self {
        self.pods.insert(
            name(ordinal),
            PodState {
                terminating: true,
                ready: false,
                config_hash: Some(crate::build::config_hash(&self.spec)),
                tls_hash: None,
                snapshot_before_upgrade: false,
                v2_snapshot_saved: false,
                raft_caught_up: false,
                etcd_started_at: None,
                listen: None,
                tls_switch_reverted: false,
                serving_gate: None,
            },
        );
        self
    }
    fn ready(mut self, ordinals: &[u32]) -> Self {
        for &o in ordinals {
            if let Some(pod) = self.pods.get_mut(&name(o)) {
                pod.ready = true;
            }
        }
        self
    }
    fn pvcs(mut self, ordinals: &[u32]) -> Self {
        for &o in ordinals {
            // Created from the spec as it is now: the requested size is the spec's.
            let pvc = PvcState {
                retained_by_restore: false,
                terminating: false,
                predates_cluster: false,
                snapshot_before_upgrade: None,
                v2_wal_clean: false,
                requested_bytes: etcd_api::validation::quantity_to_bytes(&self.spec.storage.size.0),
                storage_class: Some(
                    self.spec
                        .storage
                        .storage_class_name
                        .clone()
                        .unwrap_or_else(|| "standard".into()),
                ),
                class_allows_expansion: false,
            };
            self.pvcs.insert(name(o), pvc);
        }
        self
    }
    fn existed(mut self, ordinals: &[u32], version: &str) -> Self {
        self.recorded_cluster_id = Some("c0ffee".into());
        self.last_known_members = ordinals.iter().map(|&o| name(o)).collect();
        self.last_known_version = Some(v(version));
        self
    }
}

/// A learner added by `MemberAdd` that never started (etcd does not know its name yet).
pub fn unstarted_learner(ordinal: u32) -> Member {
    learner(ordinal, false)
}

/// The proof a destructive action carries, for expected actions in tests: from the gate itself
/// (one healthy voter of one taken down), so tests hold no way around it either.
pub fn quorum_checked() -> crate::plan::QuorumChecked {
    crate::plan::quorum_gate(crate::plan::Disruption::TakeDownHealthyVoter, 1, 1).unwrap()
}
