//! Errors of this crate, and the pure classification of etcd's answers into them. No I/O.
//!
//! etcd reports membership refusals as gRPC statuses whose message is a fixed string
//! (`etcdserver: ...`, from etcd's `api/v3rpc/rpctypes`); the code alone does not separate
//! "retry in a few seconds" from "already done". [`classify`] reads both and is unit-tested on
//! etcd's exact strings.

use std::time::Duration;

use tonic::Code;

/// What an etcd error means to a caller, independent of the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// No connection to the endpoint (refused, DNS failure, server stopped).
    Unreachable,
    /// No answer in time. For a membership change the outcome is unknown: re-observe.
    Timeout,
    /// etcd refused for now and applied nothing: retry after a few seconds.
    RetryLater,
    /// The member ID is not (or no longer) a member.
    NotFound,
    /// Promote of a member that is not a learner (already promoted).
    NotLearner,
    /// Add of a peer URL that a member already has ("Peer URLs already exists", or "member ID
    /// already exist" for an add repeated within a second: the ID hashes the peer URLs).
    PeerUrlExists,
    /// Anything else.
    Other,
}

/// etcd's messages that mean "refused for now, nothing applied". Matched as substrings.
const RETRY_LATER_MESSAGES: &[&str] = &[
    // After a membership change or a start, etcd refuses the next change for ~5 s.
    "etcdserver: unhealthy cluster",
    // Promote of a learner that has not caught up (or not started) yet.
    "etcdserver: can only promote a learner member which is in sync with leader",
    // Only one learner at a time (etcd's default): promote the existing one first.
    "etcdserver: too many learner members in cluster",
    // The balanced client reached a learner; another endpoint can serve the request.
    "etcdserver: rpc not supported for learner",
    "etcdserver: no leader",
    "etcdserver: not leader",
    "etcdserver: leader changed",
    "etcdserver: re-configuration failed due to not enough started members",
    "etcdserver: too many requests",
];

/// Classifies an etcd answer by gRPC code (if it was a status) and message. Pure.
pub fn classify(code: Option<Code>, message: &str) -> ErrorClass {
    // Order matters: "can only promote a learner member" is a prefix of the "in sync" message.
    if RETRY_LATER_MESSAGES.iter().any(|m| message.contains(m)) {
        return ErrorClass::RetryLater;
    }
    if message.contains("etcdserver: member not found") {
        return ErrorClass::NotFound;
    }
    // etcd derives a new member's ID from its peer URLs, the cluster name and the time in
    // seconds: an add repeated within the same second collides on the ID before the peer URL
    // check, so "ID already exists" means the same peer URLs are already a member's.
    if message.contains("etcdserver: Peer URLs already exists")
        || message.contains("etcdserver: member ID already exist")
    {
        return ErrorClass::PeerUrlExists;
    }
    if message.contains("etcdserver: can only promote a learner member") {
        return ErrorClass::NotLearner;
    }
    // "etcdserver: request timed out", "... possibly due to previous leader failure", ...:
    // the proposal may still be applied.
    if message.contains("etcdserver: request timed out") {
        return ErrorClass::Timeout;
    }
    if message.contains("etcdserver: server stopped") {
        return ErrorClass::Unreachable;
    }
    match code {
        // tonic's per-request timeout ("Timeout expired") is reported as Cancelled.
        Some(Code::Cancelled) if message.contains("Timeout expired") => ErrorClass::Timeout,
        Some(Code::DeadlineExceeded) => ErrorClass::Timeout,
        // Transport failures (connection refused, DNS) are Unavailable without an etcd message.
        Some(Code::Unavailable) if !message.contains("etcdserver:") => ErrorClass::Unreachable,
        _ => ErrorClass::Other,
    }
}

/// Classifies an etcd-client error (see [`classify`]).
pub fn classify_error(error: &etcd_client::Error) -> ErrorClass {
    match error {
        etcd_client::Error::GRpcStatus(status) => classify(Some(status.code()), status.message()),
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => {
            ErrorClass::Unreachable
        }
        other => classify(None, &other.to_string()),
    }
}

/// A failed etcd operation. `op` names the operation and its subject, e.g.
/// `member promote 8e9e05c52164694d via http://m1:2379`.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// An endpoint is not a valid URL, or none was given.
    #[error("invalid etcd endpoints {endpoints:?}: {message}")]
    InvalidEndpoint {
        /// The endpoints as given, comma-separated.
        endpoints: String,
        /// Why it was rejected.
        message: String,
    },
    /// No connection to etcd (refused, DNS failure, server stopped).
    #[error("{op}: etcd unreachable: {message}")]
    Unreachable {
        /// The operation.
        op: String,
        /// The transport's error.
        message: String,
    },
    /// No answer in time. For a membership change the outcome is unknown: re-observe.
    #[error("{op}: no answer within {after:?}: {message}")]
    Timeout {
        /// The operation.
        op: String,
        /// The configured timeout.
        after: Duration,
        /// etcd's or the client's message.
        message: String,
    },
    /// etcd refused for now and applied nothing ("unhealthy cluster" for ~5 s after a
    /// membership change, learner not in sync yet, too many learners, no leader): retry later.
    #[error("{op}: etcd asks to retry later: {message}")]
    RetryLater {
        /// The operation.
        op: String,
        /// etcd's message.
        message: String,
    },
    /// The member is not in the cluster: for a remove, it is already done.
    #[error("{op}: member {id:x} not found")]
    NotFound {
        /// The operation.
        op: String,
        /// The member ID.
        id: u64,
    },
    /// Promote of a member that is not a learner: it was already promoted.
    #[error("{op}: member {id:x} is not a learner (already promoted)")]
    AlreadyPromoted {
        /// The operation.
        op: String,
        /// The member ID.
        id: u64,
    },
    /// Add of a peer URL a member already has: for a retried add, it is already done.
    #[error("{op}: peer URL {peer_url} already belongs to a member")]
    PeerUrlExists {
        /// The operation.
        op: String,
        /// The peer URL.
        peer_url: String,
    },
    /// No member could confirm that it is part of a quorum, so no trustworthy member list.
    #[error("{op}: no member confirmed a quorum ({detail})")]
    NoQuorum {
        /// The operation.
        op: String,
        /// What each endpoint answered.
        detail: String,
    },
    /// etcd answered without a field it always sends (e.g. a response header).
    #[error("{op}: incomplete answer: {detail}")]
    Incomplete {
        /// The operation.
        op: String,
        /// What was missing.
        detail: String,
    },
    /// Any other etcd error.
    #[error("{op}: {source}")]
    Etcd {
        /// The operation.
        op: String,
        /// The client's error.
        source: etcd_client::Error,
    },
}

/// What a failed call was about, to build the matching [`AdminError`] variant.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Subject<'a> {
    None,
    Member(u64),
    PeerUrl(&'a str),
}

impl AdminError {
    /// PascalCase cause, for events, conditions and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            AdminError::InvalidEndpoint { .. } => "EtcdInvalidEndpoint",
            AdminError::Unreachable { .. } => "EtcdUnreachable",
            AdminError::Timeout { .. } => "EtcdTimeout",
            AdminError::RetryLater { .. } => "EtcdRetryLater",
            AdminError::NotFound { .. } => "MemberNotFound",
            AdminError::AlreadyPromoted { .. } => "MemberAlreadyPromoted",
            AdminError::PeerUrlExists { .. } => "PeerURLExists",
            AdminError::NoQuorum { .. } => "EtcdNoQuorum",
            AdminError::Incomplete { .. } => "EtcdIncompleteAnswer",
            AdminError::Etcd { .. } => "EtcdError",
        }
    }

    /// etcd applied nothing and asks to try again in a few seconds.
    pub fn is_retry_later(&self) -> bool {
        matches!(self, AdminError::RetryLater { .. })
    }

    /// Builds the variant matching `error`'s class. A class whose variant needs a subject the
    /// call does not have (e.g. NotFound without a member ID) stays a plain [`AdminError::Etcd`].
    pub(crate) fn from_etcd(
        op: String,
        subject: Subject<'_>,
        timeout: Duration,
        error: etcd_client::Error,
    ) -> AdminError {
        let message = match &error {
            etcd_client::Error::GRpcStatus(status) => status.message().to_owned(),
            other => other.to_string(),
        };
        match (classify_error(&error), subject) {
            (ErrorClass::Unreachable, _) => AdminError::Unreachable { op, message },
            (ErrorClass::Timeout, _) => AdminError::Timeout {
                op,
                after: timeout,
                message,
            },
            (ErrorClass::RetryLater, _) => AdminError::RetryLater { op, message },
            (ErrorClass::NotFound, Subject::Member(id)) => AdminError::NotFound { op, id },
            (ErrorClass::NotLearner, Subject::Member(id)) => AdminError::AlreadyPromoted { op, id },
            (ErrorClass::PeerUrlExists, Subject::PeerUrl(url)) => AdminError::PeerUrlExists {
                op,
                peer_url: url.to_owned(),
            },
            _ => AdminError::Etcd { op, source: error },
        }
    }

    /// The whole call (connection included) took longer than `after`.
    pub(crate) fn elapsed(op: String, after: Duration) -> AdminError {
        AdminError::Timeout {
            op,
            after,
            message: "deadline elapsed".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_etcds_membership_messages() {
        let cases: &[(Option<Code>, &str, ErrorClass)] = &[
            (
                Some(Code::Unavailable),
                "etcdserver: unhealthy cluster",
                ErrorClass::RetryLater,
            ),
            (
                Some(Code::FailedPrecondition),
                "etcdserver: can only promote a learner member which is in sync with leader",
                ErrorClass::RetryLater,
            ),
            (
                Some(Code::FailedPrecondition),
                "etcdserver: too many learner members in cluster",
                ErrorClass::RetryLater,
            ),
            (
                Some(Code::Unavailable),
                "etcdserver: rpc not supported for learner",
                ErrorClass::RetryLater,
            ),
            (
                Some(Code::Unavailable),
                "etcdserver: no leader",
                ErrorClass::RetryLater,
            ),
            (
                Some(Code::Unavailable),
                "etcdserver: leader changed",
                ErrorClass::RetryLater,
            ),
            (
                Some(Code::FailedPrecondition),
                "etcdserver: re-configuration failed due to not enough started members",
                ErrorClass::RetryLater,
            ),
            (
                Some(Code::NotFound),
                "etcdserver: member not found",
                ErrorClass::NotFound,
            ),
            (
                Some(Code::FailedPrecondition),
                "etcdserver: Peer URLs already exists",
                ErrorClass::PeerUrlExists,
            ),
            (
                Some(Code::FailedPrecondition),
                "etcdserver: can only promote a learner member",
                ErrorClass::NotLearner,
            ),
            (
                Some(Code::Unavailable),
                "etcdserver: request timed out",
                ErrorClass::Timeout,
            ),
            (
                Some(Code::Unavailable),
                "etcdserver: request timed out, possibly due to previous leader failure",
                ErrorClass::Timeout,
            ),
            (
                Some(Code::Unavailable),
                "etcdserver: server stopped",
                ErrorClass::Unreachable,
            ),
            (
                Some(Code::Cancelled),
                "Timeout expired",
                ErrorClass::Timeout,
            ),
            (
                Some(Code::DeadlineExceeded),
                "context deadline exceeded",
                ErrorClass::Timeout,
            ),
            (
                Some(Code::Unavailable),
                "tcp connect error: Connection refused (os error 111)",
                ErrorClass::Unreachable,
            ),
            (
                Some(Code::Unavailable),
                "dns error: failed to lookup address information",
                ErrorClass::Unreachable,
            ),
            (
                Some(Code::FailedPrecondition),
                "etcdserver: member ID already exist",
                ErrorClass::PeerUrlExists,
            ),
            (
                Some(Code::FailedPrecondition),
                "etcdserver: cluster ID mismatch",
                ErrorClass::Other,
            ),
            (
                Some(Code::Cancelled),
                "cancelled by the caller",
                ErrorClass::Other,
            ),
            (
                None,
                "invalid arguments: empty endpoints",
                ErrorClass::Other,
            ),
        ];
        for (code, message, want) in cases {
            assert_eq!(classify(*code, message), *want, "{code:?} {message:?}");
        }
    }

    #[test]
    fn builds_the_variant_of_the_class_when_the_subject_fits() {
        let status =
            |code: Code, msg: &str| etcd_client::Error::GRpcStatus(tonic::Status::new(code, msg));
        let t = Duration::from_secs(2);
        let e = AdminError::from_etcd(
            "remove".into(),
            Subject::Member(7),
            t,
            status(Code::NotFound, "etcdserver: member not found"),
        );
        assert!(matches!(e, AdminError::NotFound { id: 7, .. }), "{e:?}");
        assert_eq!(e.reason(), "MemberNotFound");

        let e = AdminError::from_etcd(
            "promote".into(),
            Subject::Member(7),
            t,
            status(
                Code::FailedPrecondition,
                "etcdserver: can only promote a learner member",
            ),
        );
        assert!(
            matches!(e, AdminError::AlreadyPromoted { id: 7, .. }),
            "{e:?}"
        );

        let e = AdminError::from_etcd(
            "add".into(),
            Subject::PeerUrl("http://m2:2380"),
            t,
            status(
                Code::FailedPrecondition,
                "etcdserver: Peer URLs already exists",
            ),
        );
        assert!(
            matches!(&e, AdminError::PeerUrlExists { peer_url, .. } if peer_url == "http://m2:2380"),
            "{e:?}"
        );

        let e = AdminError::from_etcd(
            "add".into(),
            Subject::PeerUrl("http://m2:2380"),
            t,
            status(Code::Unavailable, "etcdserver: unhealthy cluster"),
        );
        assert!(e.is_retry_later());
        assert_eq!(e.reason(), "EtcdRetryLater");

        // A NotFound on a call without a member ID stays a plain etcd error.
        let e = AdminError::from_etcd(
            "list".into(),
            Subject::None,
            t,
            status(Code::NotFound, "etcdserver: member not found"),
        );
        assert!(matches!(e, AdminError::Etcd { .. }), "{e:?}");
        assert!(!e.is_retry_later());
    }
}
