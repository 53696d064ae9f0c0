//! The second plan: the cluster's own objects (its peer and client Services, its
//! PodDisruptionBudget, its NetworkPolicy and the owner references of its member PVCs). Pure.
//!
//! From what is known of those objects and what the spec wants, the writes that are needed;
//! none when they already match. The operator performs them before the membership step of the
//! same pass (none of them makes that step unsafe, and a failed one does not stop it: issue 17).
//!
//! What is "known" of the Services, the budget and the NetworkPolicy is what this process last
//! wrote, by digest, for less than the operator's reapply period: they are written by
//! server-side apply (which writes nothing when the object is already so), and the Services and
//! the budget are watched, so a change anyone else makes forgets what was written and the pass
//! it triggers writes them again (issue 24: an idle pass sends no request). The PVCs' owner
//! references are read from the PVCs themselves.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use etcd_api::EtcdCluster;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use crate::build::{self, BuildError};
use crate::observe::RETAINED_BY_RESTORE_LABEL;

/// Which of the cluster's objects a digest is of (the key of what was last written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    /// The headless peer Service.
    PeerService,
    /// The client Service.
    ClientService,
    /// The PodDisruptionBudget.
    Budget,
    /// The NetworkPolicy, or that the cluster has none of its own.
    NetworkPolicy,
}

impl ObjectKind {
    /// Every kind, in the order their writes are made.
    pub const ALL: [ObjectKind; 4] = [
        ObjectKind::PeerService,
        ObjectKind::ClientService,
        ObjectKind::Budget,
        ObjectKind::NetworkPolicy,
    ];

    /// A stable name (keys and logs).
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::PeerService => "peer-service",
            ObjectKind::ClientService => "client-service",
            ObjectKind::Budget => "budget",
            ObjectKind::NetworkPolicy => "network-policy",
        }
    }
}

/// One object of the cluster as wanted, ready to be applied.
#[derive(Clone, Debug, PartialEq)]
pub enum ClusterObject {
    /// The headless peer Service.
    PeerService(Service),
    /// The client Service.
    ClientService(Service),
    /// The PodDisruptionBudget.
    Budget(PodDisruptionBudget),
    /// The NetworkPolicy.
    NetworkPolicy(NetworkPolicy),
}

impl ClusterObject {
    /// Which object it is.
    pub fn kind(&self) -> ObjectKind {
        match self {
            ClusterObject::PeerService(_) => ObjectKind::PeerService,
            ClusterObject::ClientService(_) => ObjectKind::ClientService,
            ClusterObject::Budget(_) => ObjectKind::Budget,
            ClusterObject::NetworkPolicy(_) => ObjectKind::NetworkPolicy,
        }
    }

    /// The digest of the object as it would be written: equal digests, equal writes.
    pub fn digest(&self) -> u64 {
        match self {
            ClusterObject::PeerService(o) | ClusterObject::ClientService(o) => digest_of(o),
            ClusterObject::Budget(o) => digest_of(o),
            ClusterObject::NetworkPolicy(o) => digest_of(o),
        }
    }
}

/// The digest of "the cluster has no NetworkPolicy of its own" (none wanted, one it owned
/// removed).
pub fn no_network_policy_digest() -> u64 {
    digest_of(&Option::<NetworkPolicy>::None)
}

fn digest_of<T: serde::Serialize>(object: &T) -> u64 {
    // Serialising a built object does not fail (no maps with non-string keys); an empty text
    // only makes every pass write again.
    let rendered = serde_json::to_string(object).unwrap_or_default();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    rendered.hash(&mut hasher);
    hasher.finish()
}

/// The cluster's objects as the spec and the voters want them.
#[derive(Clone, Debug, PartialEq)]
pub struct WantedObjects {
    /// The Services, the budget and the NetworkPolicy when one is wanted, in write order.
    pub objects: Vec<ClusterObject>,
    /// The name of the cluster's NetworkPolicy (removed, if the cluster owns it, when none is
    /// wanted).
    pub network_policy_name: String,
    /// Per member PVC (by member name) the owner references it should carry: the EtcdCluster
    /// only under `reclaimPolicy: Delete` (the garbage collector then deletes it with the
    /// cluster), none under `Retain` or when an EtcdRestore retained it.
    pub pvc_owners: BTreeMap<String, Option<Vec<OwnerReference>>>,
}

impl WantedObjects {
    /// Builds what `cluster` wants with `voters` voters (the budget's, see
    /// [`crate::state::Observed::budget_voters`]), `network_policy` (built by the operator, or
    /// `None` when the cluster wants none; named `network_policy_name`), and the owner
    /// references of the member PVCs in `pvcs` (empty: the PVCs are not looked after this pass).
    pub fn build(
        cluster: &EtcdCluster,
        voters: usize,
        switch_port: bool,
        network_policy: Option<NetworkPolicy>,
        network_policy_name: String,
        pvcs: &BTreeMap<String, PersistentVolumeClaim>,
    ) -> Result<Self, BuildError> {
        let mut objects = vec![
            ClusterObject::PeerService(build::peer_service(cluster)?),
            ClusterObject::ClientService(build::client_service(cluster, switch_port)?),
            ClusterObject::Budget(build::pod_disruption_budget(cluster, voters)?),
        ];
        objects.extend(network_policy.map(ClusterObject::NetworkPolicy));
        let mut pvc_owners = BTreeMap::new();
        for (member, pvc) in pvcs {
            let owners = if pvc.labels().contains_key(RETAINED_BY_RESTORE_LABEL) {
                None
            } else {
                build::member_pvc(cluster, member)?
                    .metadata
                    .owner_references
            };
            pvc_owners.insert(member.clone(), owners.filter(|o| !o.is_empty()));
        }
        Ok(WantedObjects {
            objects,
            network_policy_name,
            pvc_owners,
        })
    }
}

/// What is known of the cluster's objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedObjects {
    /// The digest of each object this process wrote for the cluster less than the reapply
    /// period ago and that nobody changed since (see the module doc).
    pub written: BTreeMap<ObjectKind, u64>,
    /// Per member PVC: its name and the owner references it carries (none: `None`).
    pub pvc_owners: BTreeMap<String, (String, Option<Vec<OwnerReference>>)>,
}

impl ObservedObjects {
    /// `written` as recorded, and the owner references of `pvcs` as read.
    pub fn new(
        written: BTreeMap<ObjectKind, u64>,
        pvcs: &BTreeMap<String, PersistentVolumeClaim>,
    ) -> Self {
        let pvc_owners = pvcs
            .iter()
            .map(|(member, pvc)| {
                let owners = pvc
                    .metadata
                    .owner_references
                    .clone()
                    .filter(|o| !o.is_empty());
                (member.clone(), (pvc.name_any(), owners))
            })
            .collect();
        ObservedObjects {
            written,
            pvc_owners,
        }
    }
}

/// One write of the cluster's own objects.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjectWrite {
    /// Apply (server-side) the object; its digest is then what was written.
    Apply(Box<ClusterObject>),
    /// No NetworkPolicy is wanted: remove the one of this name if the cluster owns it (one of
    /// the same name someone else made is left alone).
    RemoveNetworkPolicy {
        /// The policy's name.
        name: String,
    },
    /// Set the owner references of a member's PVC (`None`: remove them).
    SetPvcOwners {
        /// The PVC's name.
        pvc: String,
        /// The owner references it should carry.
        owners: Option<Vec<OwnerReference>>,
    },
}

impl ObjectWrite {
    /// What a successful write leaves known: the kind and digest (none for a PVC, whose
    /// owners are read each pass).
    pub fn written(&self) -> Option<(ObjectKind, u64)> {
        match self {
            ObjectWrite::Apply(object) => Some((object.kind(), object.digest())),
            ObjectWrite::RemoveNetworkPolicy { .. } => {
                Some((ObjectKind::NetworkPolicy, no_network_policy_digest()))
            }
            ObjectWrite::SetPvcOwners { .. } => None,
        }
    }
}

/// The writes that make `observed` what `wanted` says, in order: the Services, the budget, the
/// NetworkPolicy, then the PVCs by member name. None when everything already matches.
pub fn object_writes(observed: &ObservedObjects, wanted: &WantedObjects) -> Vec<ObjectWrite> {
    let written = |kind: ObjectKind, digest: u64| observed.written.get(&kind) == Some(&digest);
    let mut writes: Vec<ObjectWrite> = wanted
        .objects
        .iter()
        .filter(|object| !written(object.kind(), object.digest()))
        .map(|object| ObjectWrite::Apply(Box::new(object.clone())))
        .collect();
    let policy_wanted = wanted
        .objects
        .iter()
        .any(|o| o.kind() == ObjectKind::NetworkPolicy);
    if !policy_wanted && !written(ObjectKind::NetworkPolicy, no_network_policy_digest()) {
        writes.push(ObjectWrite::RemoveNetworkPolicy {
            name: wanted.network_policy_name.clone(),
        });
    }
    for (member, owners) in &wanted.pvc_owners {
        if let Some((pvc, current)) = observed.pvc_owners.get(member)
            && current != owners
        {
            writes.push(ObjectWrite::SetPvcOwners {
                pvc: pvc.clone(),
                owners: owners.clone(),
            });
        }
    }
    writes
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use etcd_api::{EtcdClusterSpec, ReclaimPolicy};
    use k8s_openapi::api::networking::v1::NetworkPolicySpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn cluster(reclaim: ReclaimPolicy) -> EtcdCluster {
        let mut spec = EtcdClusterSpec::new(3, "3.5.17");
        spec.storage.reclaim_policy = reclaim;
        let mut cluster = EtcdCluster::new("main", spec);
        cluster.metadata.namespace = Some("db".into());
        cluster.metadata.uid = Some("uid-main".into());
        cluster
    }

    fn policy() -> NetworkPolicy {
        NetworkPolicy {
            metadata: ObjectMeta {
                name: Some("main-etcd".into()),
                ..Default::default()
            },
            spec: Some(NetworkPolicySpec::default()),
        }
    }

    fn pvc(cluster: &EtcdCluster, member: &str) -> PersistentVolumeClaim {
        build::member_pvc(cluster, member).unwrap()
    }

    fn wanted(
        cluster: &EtcdCluster,
        voters: usize,
        policy: Option<NetworkPolicy>,
        pvcs: &BTreeMap<String, PersistentVolumeClaim>,
    ) -> WantedObjects {
        WantedObjects::build(cluster, voters, false, policy, "main-etcd".into(), pvcs).unwrap()
    }

    /// Everything `wanted` holds, as written.
    fn all_written(wanted: &WantedObjects) -> BTreeMap<ObjectKind, u64> {
        let mut written: BTreeMap<_, _> = wanted
            .objects
            .iter()
            .map(|o| (o.kind(), o.digest()))
            .collect();
        written
            .entry(ObjectKind::NetworkPolicy)
            .or_insert_with(no_network_policy_digest);
        written
    }

    fn kinds(writes: &[ObjectWrite]) -> Vec<String> {
        writes
            .iter()
            .map(|w| match w {
                ObjectWrite::Apply(o) => format!("apply {}", o.kind().name()),
                ObjectWrite::RemoveNetworkPolicy { name } => format!("remove policy {name}"),
                ObjectWrite::SetPvcOwners { pvc, owners } => {
                    format!("owners {pvc} {}", owners.as_ref().map_or(0, Vec::len))
                }
            })
            .collect()
    }

    #[test]
    fn missing_objects_are_all_written_in_order() {
        let cluster = cluster(ReclaimPolicy::Retain);
        let wanted = wanted(&cluster, 3, Some(policy()), &BTreeMap::new());
        let writes = object_writes(&ObservedObjects::default(), &wanted);
        assert_eq!(
            kinds(&writes),
            [
                "apply peer-service",
                "apply client-service",
                "apply budget",
                "apply network-policy"
            ]
        );
        // A cluster that wants no policy: its own is removed, once.
        let wanted = self::wanted(&cluster, 3, None, &BTreeMap::new());
        let writes = object_writes(&ObservedObjects::default(), &wanted);
        assert_eq!(kinds(&writes)[3..], ["remove policy main-etcd".to_string()]);
        assert_eq!(
            writes[3].written(),
            Some((ObjectKind::NetworkPolicy, no_network_policy_digest()))
        );
    }

    #[test]
    fn matching_objects_need_no_write() {
        for (reclaim, policy) in [
            (ReclaimPolicy::Retain, None),
            (ReclaimPolicy::Delete, Some(policy())),
        ] {
            let cluster = cluster(reclaim);
            let pvcs = BTreeMap::from([("main-0".to_string(), pvc(&cluster, "main-0"))]);
            let wanted = wanted(&cluster, 3, policy, &pvcs);
            let observed = ObservedObjects::new(all_written(&wanted), &pvcs);
            assert_eq!(object_writes(&observed, &wanted), [], "{reclaim:?}");
        }
    }

    #[test]
    fn a_drifted_object_alone_is_written_again() {
        let cluster = cluster(ReclaimPolicy::Retain);
        let before = wanted(&cluster, 3, Some(policy()), &BTreeMap::new());
        let observed = ObservedObjects::new(all_written(&before), &BTreeMap::new());
        // Five voters (a quorum of three, not two): only the budget changes.
        let after = wanted(&cluster, 5, Some(policy()), &BTreeMap::new());
        let writes = object_writes(&observed, &after);
        assert_eq!(kinds(&writes), ["apply budget"]);
        let ObjectWrite::Apply(object) = &writes[0] else {
            panic!("{writes:?}");
        };
        let ClusterObject::Budget(budget) = object.as_ref() else {
            panic!("{object:?}");
        };
        assert_eq!(
            budget.spec.as_ref().unwrap().min_available,
            build::pod_disruption_budget(&cluster, 5)
                .unwrap()
                .spec
                .unwrap()
                .min_available
        );
        // The policy no longer wanted: removed; wanted again: applied.
        let without = wanted(&cluster, 3, None, &BTreeMap::new());
        assert_eq!(
            kinds(&object_writes(&observed, &without)),
            ["remove policy main-etcd"]
        );
        let removed = ObservedObjects::new(all_written(&without), &BTreeMap::new());
        assert_eq!(
            kinds(&object_writes(&removed, &before)),
            ["apply network-policy"]
        );
        // A Service changed by hand is forgotten by its watch: that one is written again.
        let mut forgotten = observed.clone();
        forgotten.written.remove(&ObjectKind::ClientService);
        assert_eq!(
            kinds(&object_writes(&forgotten, &before)),
            ["apply client-service"]
        );
    }

    #[test]
    fn pvc_owners_follow_the_reclaim_policy_and_a_restore_keeps_its_own() {
        let delete = cluster(ReclaimPolicy::Delete);
        let retain = cluster(ReclaimPolicy::Retain);
        let owned = pvc(&delete, "main-0");
        assert!(owned.metadata.owner_references.is_some());
        let unowned = pvc(&retain, "main-1");
        let mut restored = pvc(&delete, "main-2");
        restored
            .labels_mut()
            .insert(RETAINED_BY_RESTORE_LABEL.into(), "restore-a".into());
        let pvcs = BTreeMap::from([
            ("main-0".to_string(), owned.clone()),
            ("main-1".to_string(), unowned),
            ("main-2".to_string(), restored),
        ]);
        // Retain: the owned one loses its owner, and so does the restore's.
        let wanted_retain = wanted(&retain, 3, None, &pvcs);
        let observed = ObservedObjects::new(all_written(&wanted_retain), &pvcs);
        assert_eq!(
            kinds(&object_writes(&observed, &wanted_retain)),
            ["owners main-0 0", "owners main-2 0"]
        );
        // Delete: the one without an owner gets the cluster; the restore's loses it.
        let wanted_delete = wanted(&delete, 3, None, &pvcs);
        let writes = object_writes(&observed, &wanted_delete);
        assert_eq!(kinds(&writes), ["owners main-1 1", "owners main-2 0"]);
        assert_eq!(
            writes[0],
            ObjectWrite::SetPvcOwners {
                pvc: "main-1".into(),
                owners: owned.metadata.owner_references.clone(),
            }
        );
        assert_eq!(writes[0].written(), None, "owners are read each pass");
        // PVCs not looked after this pass (a restore holds the cluster): no write.
        let none = wanted(&delete, 3, None, &BTreeMap::new());
        assert_eq!(object_writes(&observed, &none), []);
    }
}
