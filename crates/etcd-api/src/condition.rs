//! Status conditions: the standard `metav1.Condition`, and helpers that set them the way
//! Kubernetes API conventions ask. Pure functions, no I/O.
//!
//! - A condition is identified by its `type`; setting one replaces the old entry of that type.
//! - `lastTransitionTime` moves only when `status` changes: a new reason or message on the same
//!   status keeps the time at which the condition last flipped.
//! - Every condition carries the `observedGeneration` of the spec it was computed from.

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The three values a condition's `status` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The operator cannot tell (e.g. it could not observe the cluster).
    Unknown,
}

impl ConditionStatus {
    /// The string Kubernetes stores: `True`, `False` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(holds: bool) -> Self {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// What a reconcile wants a condition to say; [`set_condition`] turns it into a [`Condition`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionUpdate {
    /// Condition type, e.g. [`types::AVAILABLE`].
    pub type_: &'static str,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// PascalCase machine-readable reason, e.g. `QuorumLost`.
    pub reason: String,
    /// Human-readable detail; name the member or the field concerned.
    pub message: String,
}

impl ConditionUpdate {
    /// A condition update of `type_` with the given status, reason and message.
    pub fn new(
        type_: &'static str,
        status: impl Into<ConditionStatus>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Sets (adds or replaces) the condition of `update.type_` in `conditions`.
///
/// `last_transition_time` is `now` when the condition is new or its status changed, and is kept
/// otherwise. Returns `true` when anything other than timestamps changed, so callers can skip
/// a status write (and an event) when nothing did.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    update: ConditionUpdate,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let status = update.status.as_str();
    match conditions.iter_mut().find(|c| c.type_ == update.type_) {
        Some(existing) => {
            let changed = existing.status != status
                || existing.reason != update.reason
                || existing.message != update.message
                || existing.observed_generation != observed_generation;
            if existing.status != status {
                existing.last_transition_time = now.clone();
            }
            existing.status = status.to_owned();
            existing.reason = update.reason;
            existing.message = update.message;
            existing.observed_generation = observed_generation;
            changed
        }
        None => {
            conditions.push(Condition {
                type_: update.type_.to_owned(),
                status: status.to_owned(),
                reason: update.reason,
                message: update.message,
                observed_generation,
                last_transition_time: now.clone(),
            });
            true
        }
    }
}

/// Removes the condition of `type_`; returns whether one was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

/// Whether two condition lists say the same thing, ignoring `lastTransitionTime` and order.
/// Used to skip status writes that would only move timestamps.
pub fn conditions_equal_ignoring_time(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().all(|x| {
            find_condition(b, &x.type_).is_some_and(|y| {
                x.status == y.status
                    && x.reason == y.reason
                    && x.message == y.message
                    && x.observed_generation == y.observed_generation
            })
        })
}

/// Condition types used by the three resources.
pub mod types {
    /// EtcdCluster: quorum is held and every member is healthy.
    pub const AVAILABLE: &str = "Available";
    /// EtcdCluster: the operator is changing the cluster (scaling, upgrading, restoring).
    pub const PROGRESSING: &str = "Progressing";
    /// EtcdCluster: something is wrong (a member unhealthy, quorum lost, the spec invalid).
    pub const DEGRADED: &str = "Degraded";
    /// EtcdBackup / EtcdRestore: the work is finished, successfully or not (see the phase).
    pub const COMPLETE: &str = "Complete";
    /// EtcdBackup / EtcdRestore: the work failed; the reason names the cause.
    pub const FAILED: &str = "Failed";
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn available(status: bool, reason: &str, message: &str) -> ConditionUpdate {
        ConditionUpdate::new(types::AVAILABLE, status, reason, message)
    }

    #[test]
    fn adding_a_condition_stamps_now_and_generation() {
        let mut conditions = vec![];
        let changed = set_condition(
            &mut conditions,
            available(true, "QuorumHealthy", "3/3 members healthy"),
            Some(4),
            &at(100),
        );
        assert!(changed);
        assert_eq!(
            conditions,
            vec![Condition {
                type_: "Available".into(),
                status: "True".into(),
                reason: "QuorumHealthy".into(),
                message: "3/3 members healthy".into(),
                observed_generation: Some(4),
                last_transition_time: at(100),
            }]
        );
    }

    #[test]
    fn same_condition_again_changes_nothing_not_even_the_time() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            available(true, "A", "m"),
            Some(1),
            &at(100),
        );
        let changed = set_condition(
            &mut conditions,
            available(true, "A", "m"),
            Some(1),
            &at(200),
        );
        assert!(!changed);
        assert_eq!(conditions[0].last_transition_time, at(100));
    }

    #[test]
    fn new_reason_on_same_status_keeps_transition_time() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            available(false, "Bootstrapping", "1/3"),
            Some(1),
            &at(100),
        );
        let changed = set_condition(
            &mut conditions,
            available(false, "MembersUnhealthy", "m2 unreachable"),
            Some(1),
            &at(200),
        );
        assert!(changed);
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].reason, "MembersUnhealthy");
        assert_eq!(conditions[0].message, "m2 unreachable");
        assert_eq!(conditions[0].last_transition_time, at(100));
    }

    #[test]
    fn status_flip_moves_transition_time() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            available(false, "Bootstrapping", "1/3"),
            Some(1),
            &at(100),
        );
        set_condition(
            &mut conditions,
            available(true, "QuorumHealthy", "3/3"),
            Some(1),
            &at(300),
        );
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, at(300));
    }

    #[test]
    fn new_generation_alone_is_a_change() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            available(true, "A", "m"),
            Some(1),
            &at(100),
        );
        assert!(set_condition(
            &mut conditions,
            available(true, "A", "m"),
            Some(2),
            &at(200)
        ));
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(conditions[0].last_transition_time, at(100));
    }

    #[test]
    fn conditions_of_other_types_are_left_alone() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            available(true, "A", "m"),
            Some(1),
            &at(100),
        );
        set_condition(
            &mut conditions,
            ConditionUpdate::new(types::DEGRADED, false, "AllHealthy", ""),
            Some(1),
            &at(150),
        );
        set_condition(
            &mut conditions,
            available(false, "QuorumLost", "x"),
            Some(1),
            &at(200),
        );
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Available", "Degraded"]);
        let degraded = find_condition(&conditions, types::DEGRADED).unwrap();
        assert_eq!(degraded.last_transition_time, at(150));
        assert!(!is_condition_true(&conditions, types::AVAILABLE));
        assert!(!is_condition_true(&conditions, types::PROGRESSING));
    }

    #[test]
    fn remove_reports_whether_it_removed() {
        let mut conditions = vec![];
        set_condition(&mut conditions, available(true, "A", "m"), None, &at(1));
        assert!(!remove_condition(&mut conditions, types::DEGRADED));
        assert!(remove_condition(&mut conditions, types::AVAILABLE));
        assert!(conditions.is_empty());
    }

    #[test]
    fn equality_ignores_time_and_order_but_not_content() {
        let mut a = vec![];
        set_condition(&mut a, available(true, "A", "m"), Some(1), &at(1));
        set_condition(
            &mut a,
            ConditionUpdate::new(types::DEGRADED, false, "B", ""),
            Some(1),
            &at(1),
        );
        let mut b = vec![];
        set_condition(
            &mut b,
            ConditionUpdate::new(types::DEGRADED, false, "B", ""),
            Some(1),
            &at(9),
        );
        set_condition(&mut b, available(true, "A", "m"), Some(1), &at(9));
        assert!(conditions_equal_ignoring_time(&a, &b));
        set_condition(
            &mut b,
            available(true, "A", "other message"),
            Some(1),
            &at(9),
        );
        assert!(!conditions_equal_ignoring_time(&a, &b));
        assert!(!conditions_equal_ignoring_time(&a, &a[..1]));
    }
}
