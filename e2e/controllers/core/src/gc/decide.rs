//! The garbage collector's decisions (upstream `attemptToDeleteItem`, `processDeletingDependentsItem`
//! and `orphanDependents`) over plain data: an object, what is known of its owners, its dependents.

use super::graph::Node;

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// What a look at one owner reference found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OwnerState {
    /// The owner exists with the referenced uid and is not waiting for its dependents.
    Present,
    /// The owner is being deleted in the foreground (`foregroundDeletion` finalizer).
    WaitingForDependents,
    /// 404, or an object of that name with another uid.
    Absent,
    /// The owner's kind cannot be resolved now (discovery lags, an API is down): decide later.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum DependentAction {
    Nothing,
    Retry,
    Delete(Propagation),
    /// Drop the references to these owner uids (dangling ones, and owners waiting for
    /// dependents while another owner still holds the object).
    RemoveOwnerRefs(Vec<String>),
}

/// What to do with an object that has ownerReferences, given the state of each owner (by uid).
pub fn dependent_action(
    node: &Node,
    owners: &[(String, OwnerState)],
    has_dependents: bool,
) -> DependentAction {
    if node.is_deleting() || node.owners().is_empty() {
        return DependentAction::Nothing;
    }
    if owners.iter().any(|(_, s)| *s == OwnerState::Unknown) {
        return DependentAction::Retry;
    }
    let with = |state: OwnerState| -> Vec<String> {
        owners
            .iter()
            .filter(|(_, s)| *s == state)
            .map(|(uid, _)| uid.clone())
            .collect()
    };
    let solid = with(OwnerState::Present);
    let dangling = with(OwnerState::Absent);
    let waiting = with(OwnerState::WaitingForDependents);
    if !solid.is_empty() {
        let mut drop = dangling;
        drop.extend(waiting);
        return if drop.is_empty() {
            DependentAction::Nothing
        } else {
            DependentAction::RemoveOwnerRefs(drop)
        };
    }
    if !waiting.is_empty() && has_dependents {
        // Our own dependents must go before us, so that the owner waits for all of them.
        return DependentAction::Delete(Propagation::Foreground);
    }
    DependentAction::Delete(Propagation::Background)
}

#[derive(Debug, PartialEq)]
pub enum OwnerAction {
    Nothing,
    /// Strip this owner's reference from these dependents, then look again.
    Orphan(Vec<String>),
    /// Evaluate these dependents (each is deleted, or loses the reference if another owner
    /// holds it), then look again.
    ProcessDependents(Vec<String>),
    /// Blocking dependents are still there (being deleted): wait for their removal.
    Wait,
    RemoveFinalizer(&'static str),
}

/// What to do with an object being deleted that carries the `orphan` or `foregroundDeletion`
/// finalizer, given the objects that reference it.
pub fn owner_action(owner: &Node, dependents: &[&Node]) -> OwnerAction {
    if !owner.is_deleting() {
        return OwnerAction::Nothing;
    }
    let uid = owner.uid();
    let referencing: Vec<&&Node> = dependents
        .iter()
        .filter(|d| d.reference_to(uid).is_some())
        .collect();
    if owner.has_finalizer(ORPHAN) {
        return if referencing.is_empty() {
            OwnerAction::RemoveFinalizer(ORPHAN)
        } else {
            OwnerAction::Orphan(referencing.iter().map(|d| d.uid().to_string()).collect())
        };
    }
    if owner.has_finalizer(FOREGROUND) {
        let pending: Vec<String> = referencing
            .iter()
            .filter(|d| !d.is_deleting())
            .map(|d| d.uid().to_string())
            .collect();
        if !pending.is_empty() {
            return OwnerAction::ProcessDependents(pending);
        }
        let blocking = referencing
            .iter()
            .any(|d| d.reference_to(uid).and_then(|r| r.block_owner_deletion) == Some(true));
        return if blocking {
            OwnerAction::Wait
        } else {
            OwnerAction::RemoveFinalizer(FOREGROUND)
        };
    }
    OwnerAction::Nothing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc::graph::tests::node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn deleting(mut n: Node, finalizers: &[&str]) -> Node {
        n.meta.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        n.meta.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        n
    }

    #[test]
    fn dependents() {
        use DependentAction::*;
        use OwnerState::*;
        let one = node("d", &[("o1", true)]);
        let two = node("d", &[("o1", true), ("o2", false)]);
        let s = |uid: &str, st: OwnerState| (uid.to_string(), st);
        type Case<'a> = (
            &'a str,
            Node,
            Vec<(String, OwnerState)>,
            bool,
            DependentAction,
        );
        let cases: Vec<Case> = vec![
            (
                "owner present",
                one.clone(),
                vec![s("o1", Present)],
                false,
                Nothing,
            ),
            (
                "owner gone",
                one.clone(),
                vec![s("o1", Absent)],
                false,
                Delete(Propagation::Background),
            ),
            (
                "owner unknown",
                one.clone(),
                vec![s("o1", Unknown)],
                false,
                Retry,
            ),
            (
                "owner waiting, leaf",
                one.clone(),
                vec![s("o1", WaitingForDependents)],
                false,
                Delete(Propagation::Background),
            ),
            (
                "owner waiting, we have dependents",
                one.clone(),
                vec![s("o1", WaitingForDependents)],
                true,
                Delete(Propagation::Foreground),
            ),
            (
                "one gone, one present",
                two.clone(),
                vec![s("o1", Absent), s("o2", Present)],
                false,
                RemoveOwnerRefs(vec!["o1".into()]),
            ),
            (
                "one waiting, one present",
                two.clone(),
                vec![s("o1", WaitingForDependents), s("o2", Present)],
                false,
                RemoveOwnerRefs(vec!["o1".into()]),
            ),
            (
                "both gone",
                two.clone(),
                vec![s("o1", Absent), s("o2", Absent)],
                false,
                Delete(Propagation::Background),
            ),
            (
                "already deleting",
                deleting(one.clone(), &[]),
                vec![s("o1", Absent)],
                false,
                Nothing,
            ),
            ("no owners", node("d", &[]), vec![], false, Nothing),
        ];
        for (what, n, owners, has_deps, want) in cases {
            assert_eq!(dependent_action(&n, &owners, has_deps), want, "{what}");
        }
    }

    #[test]
    fn owners() {
        use OwnerAction::*;
        let blocking = node("a", &[("o", true)]);
        let loose = node("b", &[("o", false)]);
        let unrelated = node("c", &[("x", true)]);
        let cases: Vec<(&str, Node, Vec<Node>, OwnerAction)> = vec![
            (
                "not deleting",
                node("o", &[]),
                vec![blocking.clone()],
                Nothing,
            ),
            (
                "orphan with dependents",
                deleting(node("o", &[]), &[ORPHAN]),
                vec![blocking.clone(), loose.clone(), unrelated.clone()],
                Orphan(vec!["a".into(), "b".into()]),
            ),
            (
                "orphan done",
                deleting(node("o", &[]), &[ORPHAN]),
                vec![unrelated.clone()],
                RemoveFinalizer(ORPHAN),
            ),
            (
                "foreground: evaluate live dependents",
                deleting(node("o", &[]), &[FOREGROUND]),
                vec![blocking.clone(), deleting(loose.clone(), &[])],
                ProcessDependents(vec!["a".into()]),
            ),
            (
                "foreground: blocking dependent still being deleted",
                deleting(node("o", &[]), &[FOREGROUND]),
                vec![
                    deleting(blocking.clone(), &["x"]),
                    deleting(loose.clone(), &["x"]),
                ],
                Wait,
            ),
            (
                "foreground: only non-blocking left",
                deleting(node("o", &[]), &[FOREGROUND]),
                vec![deleting(loose.clone(), &["x"])],
                RemoveFinalizer(FOREGROUND),
            ),
            (
                "foreground: none left",
                deleting(node("o", &[]), &[FOREGROUND]),
                vec![],
                RemoveFinalizer(FOREGROUND),
            ),
            (
                "other finalizers only",
                deleting(node("o", &[]), &["example.com/x"]),
                vec![blocking.clone()],
                Nothing,
            ),
        ];
        for (what, owner, deps, want) in cases {
            let refs: Vec<&Node> = deps.iter().collect();
            assert_eq!(owner_action(&owner, &refs), want, "{what}");
        }
    }
}
