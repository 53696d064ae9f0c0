//! Kubernetes Events (events.k8s.io/v1) about the objects the operators manage, what
//! `kubectl describe` shows under "Events". Does I/O (one create or patch per call) through
//! kube-runtime's [`Recorder`], which also folds repeats of the same event into a series.
//!
//! Events are best effort: a failure to publish is logged at warn and never reaches the caller,
//! because an operator must not stop reconciling a cluster just because an event was rejected.
//! The limits the API server enforces (reason ≤ 128 characters, note ≤ 1 kB) are applied here, so
//! an over-long error message is shortened instead of losing the whole event.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// The most bytes the API server accepts in an event's note (`note` must be at most 1 kB).
pub const MAX_NOTE_BYTES: usize = 1024;
/// The most bytes the API server accepts in an event's reason and action.
pub const MAX_REASON_BYTES: usize = 128;
/// Appended to a note that had to be shortened, so readers know text is missing.
const TRUNCATION_MARK: &str = "…";

/// Publishes events as one reporting controller (and, optionally, one instance: the Pod name).
/// Cheap to clone; clones share the series cache.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// `controller` is the reporting controller (`"etcd-cluster-operator"`), `instance` the Pod
    /// name, so `kubectl describe` tells which replica acted.
    pub fn new(client: kube::Client, controller: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance,
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// A `Normal` event: something the operator did or observed that needs no action.
    pub async fn normal(&self, object: &ObjectReference, reason: &str, note: impl Into<String>) {
        self.publish(EventType::Normal, object, None, reason, note.into())
            .await;
    }

    /// A `Warning` event: something the user should look at (a bad spec, lost quorum).
    pub async fn warning(&self, object: &ObjectReference, reason: &str, note: impl Into<String>) {
        self.publish(EventType::Warning, object, None, reason, note.into())
            .await;
    }

    /// An event that also names a secondary object (`related`), e.g. the member Pod a
    /// `MemberAdded` is about. The recorder folds repeats by (type, reason, action, regarding,
    /// related), so two members' events stay two events instead of one series.
    pub async fn publish_related(
        &self,
        warning: bool,
        object: &ObjectReference,
        related: &ObjectReference,
        reason: &str,
        note: impl Into<String>,
    ) {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.publish(type_, object, Some(related.clone()), reason, note.into())
            .await;
    }

    async fn publish(
        &self,
        type_: EventType,
        object: &ObjectReference,
        related: Option<ObjectReference>,
        reason: &str,
        note: String,
    ) {
        let reason = truncate_utf8(reason, MAX_REASON_BYTES).to_owned();
        let event = Event {
            type_,
            // The Events API requires an action; our reasons already name what happened
            // (MemberAdded, BackupFailed), so they serve as both.
            action: reason.clone(),
            reason,
            note: Some(truncate_note(&note)),
            secondary: related,
        };
        // An Event is a write too: a stale leader sends none (crates/failpoint's fence).
        failpoint::fence::check("event");
        if let Err(error) = self.recorder.publish(&event, object).await {
            tracing::warn!(
                %error,
                reason = %event.reason,
                kind = object.kind.as_deref().unwrap_or_default(),
                namespace = object.namespace.as_deref().unwrap_or_default(),
                name = object.name.as_deref().unwrap_or_default(),
                "could not publish event"
            );
        }
    }
}

/// `note` shortened to at most [`MAX_NOTE_BYTES`] bytes on a character boundary, ending in `…`
/// when something was cut.
pub fn truncate_note(note: &str) -> String {
    if note.len() <= MAX_NOTE_BYTES {
        return note.to_owned();
    }
    let kept = truncate_utf8(note, MAX_NOTE_BYTES - TRUNCATION_MARK.len());
    format!("{kept}{TRUNCATION_MARK}")
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_notes_are_unchanged() {
        let full = "x".repeat(MAX_NOTE_BYTES);
        for note in ["", "member m2 added", full.as_str()] {
            assert_eq!(truncate_note(note), note);
        }
    }

    #[test]
    fn long_ascii_note_is_cut_to_the_limit_with_a_mark() {
        let note = "a".repeat(5000);
        let cut = truncate_note(&note);
        assert_eq!(cut.len(), MAX_NOTE_BYTES);
        assert!(cut.ends_with('…'));
        assert!(note.starts_with(cut.trim_end_matches('…')));
    }

    #[test]
    fn multi_byte_characters_are_never_split() {
        // 2-, 3- and 4-byte characters, offset so the limit falls inside a character
        for (prefix, ch) in [("", 'é'), ("a", '€'), ("ab", '𝄞'), ("abc", '𝄞'), ("", '日')]
        {
            let note = format!("{prefix}{}", ch.to_string().repeat(800));
            let cut = truncate_note(&note);
            assert!(cut.len() <= MAX_NOTE_BYTES, "{} bytes", cut.len());
            assert!(cut.len() > MAX_NOTE_BYTES - 4 - TRUNCATION_MARK.len());
            let body = cut.strip_suffix('…').unwrap();
            assert!(note.starts_with(body));
            assert!(body.ends_with(ch), "ends with a whole {ch:?}");
        }
    }

    #[test]
    fn reasons_are_cut_on_a_char_boundary() {
        assert_eq!(
            truncate_utf8("MemberAdded", MAX_REASON_BYTES),
            "MemberAdded"
        );
        let long = "Ä".repeat(100); // 200 bytes
        let cut = truncate_utf8(&long, MAX_REASON_BYTES);
        assert_eq!(cut.len(), 128);
        assert_eq!(truncate_utf8("aÄ", 2), "a");
    }
}
