//! The garbage collector's view of the cluster: every object of every watched kind by uid, its
//! ownerReferences, and the reverse index owner uid -> dependents (upstream's `GraphBuilder`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::discovery::Served;

#[derive(Clone, Debug)]
pub struct Node {
    pub resource: Arc<Served>,
    pub meta: ObjectMeta,
}

impl Node {
    pub fn uid(&self) -> &str {
        self.meta.uid.as_deref().unwrap_or("")
    }

    pub fn owners(&self) -> &[OwnerReference] {
        self.meta.owner_references.as_deref().unwrap_or(&[])
    }

    pub fn is_deleting(&self) -> bool {
        self.meta.deletion_timestamp.is_some()
    }

    pub fn has_finalizer(&self, f: &str) -> bool {
        self.meta.finalizers.iter().flatten().any(|x| x == f)
    }

    /// The reference from this object to `owner`, if it has one.
    pub fn reference_to(&self, owner: &str) -> Option<&OwnerReference> {
        self.owners().iter().find(|r| r.uid == owner)
    }
}

#[derive(Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// Add or replace an object. Returns the uids to look at again: the object itself and its
    /// owners before and after (a waiting owner may be unblocked by a changed reference).
    pub fn upsert(&mut self, node: Node) -> Vec<String> {
        let uid = node.uid().to_string();
        if uid.is_empty() {
            return Vec::new();
        }
        let mut touched: Vec<String> = vec![uid.clone()];
        if let Some(old) = self.nodes.remove(&uid) {
            for r in old.owners() {
                self.unlink(&r.uid, &uid);
                touched.push(r.uid.clone());
            }
        }
        for r in node.owners() {
            self.dependents
                .entry(r.uid.clone())
                .or_default()
                .insert(uid.clone());
            touched.push(r.uid.clone());
        }
        self.nodes.insert(uid, node);
        touched.sort();
        touched.dedup();
        touched
    }

    /// Drop an object. Returns its dependents (they may now dangle) and its owners (one may be
    /// waiting for it).
    pub fn remove(&mut self, uid: &str) -> Vec<String> {
        let Some(old) = self.nodes.remove(uid) else {
            return Vec::new();
        };
        let mut touched: Vec<String> = Vec::new();
        for r in old.owners() {
            self.unlink(&r.uid, uid);
            touched.push(r.uid.clone());
        }
        touched.extend(self.dependents.get(uid).into_iter().flatten().cloned());
        touched.sort();
        touched.dedup();
        touched
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    /// The known objects that reference `owner`.
    pub fn dependents_of(&self, owner: &str) -> Vec<&Node> {
        let mut out: Vec<&Node> = self
            .dependents
            .get(owner)
            .into_iter()
            .flatten()
            .filter_map(|uid| self.nodes.get(uid))
            .collect();
        out.sort_by(|a, b| a.uid().cmp(b.uid()));
        out
    }

    /// The uids of the objects of one resource kind.
    pub fn uids_of(&self, resource: &Served) -> Vec<String> {
        self.nodes
            .values()
            .filter(|n| n.resource.as_ref() == resource)
            .map(|n| n.uid().to_string())
            .collect()
    }

    /// Every object that has owners or is being deleted: what a full resync looks at.
    pub fn interesting(&self) -> Vec<String> {
        self.nodes
            .values()
            .filter(|n| !n.owners().is_empty() || n.is_deleting())
            .map(|n| n.uid().to_string())
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kube::discovery::ApiResource;

    pub fn served(kind: &str) -> Arc<Served> {
        Arc::new(Served {
            ar: ApiResource {
                group: "".into(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: kind.into(),
                plural: format!("{}s", kind.to_lowercase()),
            },
            namespaced: true,
            verbs: vec!["delete".into(), "list".into(), "watch".into()],
        })
    }

    pub fn node(uid: &str, owners: &[(&str, bool)]) -> Node {
        Node {
            resource: served("ConfigMap"),
            meta: ObjectMeta {
                name: Some(format!("n-{uid}")),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                owner_references: Some(
                    owners
                        .iter()
                        .map(|(o, block)| OwnerReference {
                            api_version: "v1".into(),
                            kind: "ConfigMap".into(),
                            name: format!("n-{o}"),
                            uid: o.to_string(),
                            block_owner_deletion: Some(*block),
                            controller: None,
                        })
                        .collect(),
                ),
                ..Default::default()
            },
        }
    }

    #[test]
    fn indexes_dependents_and_reports_what_to_revisit() {
        let mut g = Graph::default();
        assert_eq!(g.upsert(node("owner", &[])), vec!["owner"]);
        assert_eq!(g.upsert(node("a", &[("owner", true)])), vec!["a", "owner"]);
        assert_eq!(
            g.upsert(node("b", &[("owner", false), ("other", false)])),
            vec!["b", "other", "owner"]
        );
        let deps: Vec<&str> = g.dependents_of("owner").iter().map(|n| n.uid()).collect();
        assert_eq!(deps, vec!["a", "b"]);
        // b drops its reference to owner: owner is revisited, b no longer a dependent
        assert_eq!(
            g.upsert(node("b", &[("other", false)])),
            vec!["b", "other", "owner"]
        );
        assert_eq!(g.dependents_of("owner").len(), 1);
        // the owner goes: its dependents are revisited
        assert_eq!(g.remove("owner"), vec!["a"]);
        // a goes: its (absent) owner is revisited, nothing else
        assert_eq!(g.remove("a"), vec!["owner"]);
        assert!(g.dependents_of("owner").is_empty());
        assert_eq!(g.interesting(), vec!["b"]);
    }
}
