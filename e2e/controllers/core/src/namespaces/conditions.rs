//! The status conditions and the next step of a namespace deletion (upstream
//! `namespaced_resources_deleter` and its `namespaceConditionUpdater`), from what one pass over
//! the namespace's content found.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NamespaceCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What one deletion pass found.
#[derive(Debug, Default, PartialEq)]
pub struct Pass {
    /// Discovery failed: nothing can be known to be gone.
    pub discovery_error: Option<String>,
    /// Errors of deletecollection/list per resource.
    pub delete_errors: Vec<String>,
    /// `resource.group` -> objects still there.
    pub remaining: BTreeMap<String, usize>,
    /// finalizer -> objects still carrying it.
    pub finalizers: BTreeMap<String, usize>,
}

impl Pass {
    /// The namespace may be finalized: everything was seen and everything is gone.
    pub fn is_done(&self) -> bool {
        self.discovery_error.is_none()
            && self.delete_errors.is_empty()
            && self.remaining.values().all(|n| *n == 0)
    }
}

const TYPES: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// (type, status, reason, message) of the five conditions for a pass.
pub fn desired(pass: &Pass) -> Vec<(String, String, String, String)> {
    let mut failing: BTreeMap<&str, (&str, String)> = BTreeMap::new();
    if let Some(e) = &pass.discovery_error {
        failing.insert(
            "NamespaceDeletionDiscoveryFailure",
            (
                "DiscoveryFailed",
                format!("Discovery failed for some groups, 1 failing: {e}"),
            ),
        );
    }
    if !pass.delete_errors.is_empty() {
        let mut msgs = pass.delete_errors.clone();
        msgs.sort();
        failing.insert(
            "NamespaceDeletionContentFailure",
            (
                "ContentDeletionFailed",
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    msgs.len(),
                    msgs.join(", ")
                ),
            ),
        );
    }
    let remaining: Vec<String> = pass
        .remaining
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(gr, n)| format!("{gr} has {n} resource instances"))
        .collect();
    if !remaining.is_empty() {
        failing.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain",
                format!("Some resources are remaining: {}", remaining.join(", ")),
            ),
        );
    }
    let finalizers: Vec<String> = pass
        .finalizers
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    if !finalizers.is_empty() {
        failing.insert(
            "NamespaceFinalizersRemaining",
            (
                "SomeFinalizersRemain",
                format!(
                    "Some content in the namespace has finalizers remaining: {}",
                    finalizers.join(", ")
                ),
            ),
        );
    }
    TYPES
        .iter()
        .map(|(type_, ok_reason, ok_message)| match failing.get(type_) {
            Some((reason, message)) => (
                type_.to_string(),
                "True".into(),
                reason.to_string(),
                message.clone(),
            ),
            None => (
                type_.to_string(),
                "False".into(),
                ok_reason.to_string(),
                ok_message.to_string(),
            ),
        })
        .collect()
}

/// Merge the desired conditions into the current ones: a condition's lastTransitionTime moves
/// only when its status changes. Returns the merged list and whether anything changed.
pub fn merge(
    current: &[NamespaceCondition],
    pass: &Pass,
    now: &Time,
) -> (Vec<NamespaceCondition>, bool) {
    let mut out = current.to_vec();
    let mut changed = false;
    for (type_, status, reason, message) in desired(pass) {
        match out.iter_mut().find(|c| c.type_ == type_) {
            None => {
                out.push(NamespaceCondition {
                    type_,
                    status,
                    reason: Some(reason),
                    message: Some(message),
                    last_transition_time: Some(now.clone()),
                });
                changed = true;
            }
            Some(c) => {
                if c.status != status
                    || c.reason.as_deref() != Some(&reason)
                    || c.message.as_deref() != Some(&message)
                {
                    if c.status != status {
                        c.last_transition_time = Some(now.clone());
                    }
                    c.status = status;
                    c.reason = Some(reason);
                    c.message = Some(message);
                    changed = true;
                }
            }
        }
    }
    (out, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Time {
        Time(
            k8s_openapi::jiff::Timestamp::from_second(secs)
                .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        )
    }

    #[test]
    fn conditions_of_passes() {
        let clean = Pass::default();
        assert!(clean.is_done());
        let d = desired(&clean);
        assert!(d.iter().all(|c| c.1 == "False"));
        assert_eq!(
            d[3],
            (
                "NamespaceContentRemaining".to_string(),
                "False".to_string(),
                "ContentRemoved".to_string(),
                "All content successfully removed".to_string()
            )
        );

        let waiting = Pass {
            remaining: BTreeMap::from([
                ("widgets.example.com".to_string(), 1),
                ("configmaps.".to_string(), 2),
                ("pods.".to_string(), 0),
            ]),
            finalizers: BTreeMap::from([("example.com/cleanup".to_string(), 1)]),
            ..Default::default()
        };
        assert!(!waiting.is_done());
        let d = desired(&waiting);
        assert_eq!(d[3].1, "True");
        assert_eq!(d[3].2, "SomeResourcesRemain");
        assert_eq!(
            d[3].3,
            "Some resources are remaining: configmaps. has 2 resource instances, widgets.example.com has 1 resource instances"
        );
        assert_eq!(d[4].2, "SomeFinalizersRemain");
        assert_eq!(
            d[4].3,
            "Some content in the namespace has finalizers remaining: example.com/cleanup in 1 resource instances"
        );

        let broken = Pass {
            discovery_error: Some("widgets.example.com/v1: 503".into()),
            delete_errors: vec!["b".into(), "a".into()],
            ..Default::default()
        };
        assert!(!broken.is_done());
        let d = desired(&broken);
        assert_eq!(
            (d[0].1.as_str(), d[0].2.as_str()),
            ("True", "DiscoveryFailed")
        );
        assert_eq!(
            d[2].3,
            "Failed to delete all resource types, 2 remaining: a, b"
        );
    }

    #[test]
    fn merging_moves_transition_time_only_on_status_change() {
        let waiting = Pass {
            remaining: BTreeMap::from([("configmaps.".to_string(), 1)]),
            ..Default::default()
        };
        let (first, changed) = merge(&[], &waiting, &t(10));
        assert!(changed);
        assert_eq!(first.len(), 5);
        let (same, changed) = merge(&first, &waiting, &t(20));
        assert!(!changed);
        assert_eq!(same, first);
        let less = Pass {
            remaining: BTreeMap::from([
                ("configmaps.".to_string(), 1),
                ("secrets.".to_string(), 1),
            ]),
            ..Default::default()
        };
        let (updated, changed) = merge(&first, &less, &t(30));
        assert!(changed);
        // message changed, status did not: the transition time stays
        assert_eq!(updated[3].last_transition_time, Some(t(10)));
        let (done, _) = merge(&updated, &Pass::default(), &t(40));
        assert_eq!(done[3].status, "False");
        assert_eq!(done[3].last_transition_time, Some(t(40)));
    }
}
