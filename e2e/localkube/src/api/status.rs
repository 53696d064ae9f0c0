//! Errors as the API server answers them: a `meta/v1 Status` body with the HTTP code, the reason
//! and the message worded like kube-apiserver (`k8s.io/apimachinery/pkg/api/errors`), because
//! clients key on them (kube-rs `Error::Api`, helm's `IsAlreadyExists`, kubectl's
//! `Error from server (<reason>): <message>`).

use serde_json::{Value, json};

/// The `group` and `resource` an error is about; Display gives `pods` or
/// `etcdclusters.etcd.operator.rs` as in kube-apiserver messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// One entry of `details.causes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// An API error: everything needed to write the Status body.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after_seconds: Option<u32>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

fn details(name: &str, gr: &GroupResource) -> Value {
    let mut d = json!({ "kind": gr.resource });
    if !name.is_empty() {
        d["name"] = json!(name);
    }
    if !gr.group.is_empty() {
        d["group"] = json!(gr.group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after_seconds: None,
        }
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found"))
            .with_details(details(name, gr))
    }

    /// The answer for a path that names no served resource.
    pub fn no_such_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn namespace_not_found(name: &str) -> Self {
        Self::not_found(&GroupResource::new("", "namespaces"), name)
    }

    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(details(name, gr))
    }

    /// A stale resourceVersion or a failed precondition.
    pub fn conflict(gr: &GroupResource, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
        )
        .with_details(details(name, gr))
    }

    pub fn modified_conflict(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid. `qualified_kind` is `Pod` or `EtcdCluster.etcd.operator.rs`; `errors` are
    /// the field errors with their full text (`field: Invalid value: ...`), as the aggregated
    /// message shows them; each cause carries the text without the field prefix, since
    /// clients print `<field>: <message>` per cause (kubectl does).
    pub fn invalid(
        qualified_kind: &str,
        group: &str,
        kind: &str,
        name: &str,
        errors: &[Cause],
    ) -> Self {
        let texts: Vec<&str> = errors.iter().map(|c| c.message.as_str()).collect();
        let joined = match texts.as_slice() {
            [] => String::new(),
            [one] => (*one).to_string(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|c| {
                let prefix = format!("{}: ", c.field);
                let body = c.message.strip_prefix(&prefix).unwrap_or(&c.message);
                json!({ "reason": c.reason, "message": body, "field": c.field })
            })
            .collect();
        let mut d = json!({ "name": name, "kind": kind, "causes": causes });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details(d)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn forbidden_message(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn forbidden(gr: &GroupResource, name: &str, why: &str) -> Self {
        let subject = if name.is_empty() {
            format!("{gr}")
        } else {
            format!("{gr} \"{name}\"")
        };
        Self::new(403, "Forbidden", format!("{subject} is forbidden: {why}"))
            .with_details(details(name, gr))
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn request_entity_too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 410 for lists and continue tokens (watches get an ERROR event instead).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 504 for a resourceVersion the server has not reached yet.
    pub fn too_large_resource_version() -> Self {
        let mut e = Self::new(504, "Timeout", "Too large resource version")
            .with_details(json!({ "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }], "retryAfterSeconds": 1 }));
        e.retry_after_seconds = Some(1);
        e
    }

    pub fn too_many_requests(message: impl Into<String>, causes: Value) -> Self {
        Self::new(429, "TooManyRequests", message).with_details(json!({ "causes": causes }))
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({ "causes": [{ "message": message.to_string() }] }))
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The Status object for the body (also the `object` of a watch ERROR event).
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// `Status{status: Success}` as returned by a DELETE that removed the object at once and by
/// deletecollection-style calls.
pub fn success_status(details: Value) -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_like_kube_apiserver() {
        let gr = GroupResource::new("etcd.operator.rs", "etcdclusters");
        assert_eq!(
            ApiError::not_found(&gr, "x").message,
            "etcdclusters.etcd.operator.rs \"x\" not found"
        );
        assert_eq!(
            ApiError::modified_conflict(&GroupResource::new("", "pods"), "p").message,
            "Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let one = ApiError::invalid(
            "EtcdCluster.etcd.operator.rs",
            "etcd.operator.rs",
            "EtcdCluster",
            "x",
            &[Cause {
                reason: "FieldValueInvalid".into(),
                field: "spec.size".into(),
                message: "spec.size: Invalid value: 0: bad".into(),
            }],
        );
        assert_eq!(
            one.message,
            "EtcdCluster.etcd.operator.rs \"x\" is invalid: spec.size: Invalid value: 0: bad"
        );
        let status = one.to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(status["details"]["causes"][0]["field"], "spec.size");
        assert_eq!(
            status["details"]["causes"][0]["message"],
            "Invalid value: 0: bad"
        );
    }
}
