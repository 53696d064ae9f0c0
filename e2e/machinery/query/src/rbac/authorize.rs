//! The RBAC decision and the 403 the API server writes when it says no.
//!
//! Evaluation follows `k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac` (`RBACAuthorizer`,
//! `DefaultRuleResolver.VisitRulesFor`, `rbac/v1` `evaluation_helpers.go`), preceded by the
//! privileged-group authorizer that kube-apiserver puts first (`system:masters` may do anything).
//! The message follows `k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`
//! (`forbiddenMessage`, `ForbiddenStatusError`) and `apierrors.NewForbidden`.

use super::policy::{Binding, PolicyRule, RbacPolicy, SubjectKind};
use crate::gofmt;

/// What is asked, and by whom (`authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub user: String,
    pub groups: Vec<String>,
    /// The authorization verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or a special one (`use`, `bind`, `escalate`, `impersonate`...).
    pub verb: String,
    pub request: Request,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Resource(ResourceRequest),
    /// A path outside the resource API (`/version`, `/healthz`, `/apis`, `/openapi/v3`...).
    NonResource {
        path: String,
    },
}

/// A request on an API resource. Empty strings mean "not part of the request": no
/// subresource, cluster scope (no namespace), no name (`list`, `watch`, `create`,
/// `deletecollection`). For list/watch with `fieldSelector=metadata.name=<n>` the API server
/// sets `name` to `<n>` (`requestinfo.go`), so rules with `resourceNames` can allow them; that is
/// the caller's job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceRequest {
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

/// The server's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(Forbidden),
}

/// Everything needed for the 403 `Status`: `message`, and `details` `{group, kind: resource, name}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    /// Exactly kube-apiserver's message, e.g. `pods "p1" is forbidden: User "alice" cannot get
    /// resource "pods" in API group "" in the namespace "ns"`.
    pub message: String,
    /// `details.group`.
    pub group: String,
    /// `details.kind`: the resource, without subresource (empty for non-resource paths).
    pub resource: String,
    /// `details.name`.
    pub name: String,
}

/// The group whose members are always allowed (`user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// Decides `attributes` against `policy`.
pub fn authorize(policy: &RbacPolicy, attributes: &Attributes) -> Decision {
    if attributes.groups.iter().any(|g| g == SYSTEM_MASTERS) {
        return Decision::Allow;
    }
    let mut errors = Vec::new();
    let namespace = match &attributes.request {
        Request::Resource(r) => r.namespace.as_str(),
        Request::NonResource { .. } => "",
    };
    let cluster = policy.cluster_role_bindings.values().map(|b| (b, ""));
    let local = policy
        .role_bindings
        .range((namespace.to_string(), String::new())..)
        .take_while(|((ns, _), _)| !namespace.is_empty() && ns == namespace)
        .map(|(_, b)| (b, namespace));
    for (binding, subject_namespace) in cluster.chain(local) {
        if !applies_to(attributes, binding, subject_namespace) {
            continue;
        }
        match role_rules(policy, binding) {
            Ok(rules) => {
                if rules.iter().any(|rule| rule_allows(attributes, rule)) {
                    return Decision::Allow;
                }
            }
            Err(e) => errors.push(e),
        }
    }
    let reason = if errors.is_empty() {
        String::new()
    } else {
        format!("RBAC: {}", gofmt::aggregate(&errors))
    };
    Decision::Deny(forbidden(attributes, &reason))
}

/// `appliesTo`: a ServiceAccount subject without a namespace means the binding's own namespace
/// (so a ClusterRoleBinding needs an explicit one).
fn applies_to(attributes: &Attributes, binding: &Binding, namespace: &str) -> bool {
    binding.subjects.iter().any(|s| match s.kind {
        SubjectKind::User => attributes.user == s.name,
        SubjectKind::Group => attributes.groups.contains(&s.name),
        SubjectKind::ServiceAccount => {
            let ns = if s.namespace.is_empty() {
                namespace
            } else {
                s.namespace.as_str()
            };
            !ns.is_empty() && attributes.user == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        SubjectKind::Other => false,
    })
}

/// `GetRoleReferenceRules`: a RoleBinding may name a Role of its namespace or a ClusterRole
/// (whose rules then apply in that namespace only); the error texts are upstream's.
fn role_rules<'p>(policy: &'p RbacPolicy, binding: &Binding) -> Result<&'p [PolicyRule], String> {
    let name = &binding.role_ref.name;
    match binding.role_ref.kind.as_str() {
        "Role" => policy
            .roles
            .get(&(binding.namespace.clone(), name.clone()))
            .map(Vec::as_slice)
            .ok_or_else(|| {
                format!(
                    "role.rbac.authorization.k8s.io {} not found",
                    gofmt::quote(name)
                )
            }),
        "ClusterRole" => policy
            .cluster_roles
            .get(name)
            .map(Vec::as_slice)
            .ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {} not found",
                    gofmt::quote(name)
                )
            }),
        other => Err(format!(
            "unsupported role reference kind: {}",
            gofmt::quote(other)
        )),
    }
}

/// `RuleAllows`.
fn rule_allows(attributes: &Attributes, rule: &PolicyRule) -> bool {
    let verb_ok = rule.verbs.iter().any(|v| v == "*" || *v == attributes.verb);
    if !verb_ok {
        return false;
    }
    match &attributes.request {
        Request::Resource(r) => {
            let combined = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            rule.api_groups
                .iter()
                .any(|g| g == "*" || *g == r.api_group)
                && resource_matches(rule, &combined, &r.subresource)
                && (rule.resource_names.is_empty() || rule.resource_names.contains(&r.name))
        }
        Request::NonResource { path } => rule.non_resource_urls.iter().any(|u| {
            u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        }),
    }
}

/// `ResourceMatches`: `*`, the exact `resource[/subresource]`, or `*/subresource`.
fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|res| {
        res == "*"
            || res == combined
            || (!subresource.is_empty()
                && res.strip_prefix("*/").is_some_and(|sub| sub == subresource))
    })
}

/// Avoids messages that look like HTML, as the API server does (quotes are kept).
fn sanitize(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn forbidden(attributes: &Attributes, reason: &str) -> Forbidden {
    let user = gofmt::quote(&attributes.user);
    let verb = &attributes.verb;
    let (group, resource, name, what) = match &attributes.request {
        Request::NonResource { path } => (
            String::new(),
            String::new(),
            String::new(),
            format!("User {user} cannot {verb} path {}", gofmt::quote(path)),
        ),
        Request::Resource(r) => {
            let combined = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {}", gofmt::quote(&r.namespace))
            };
            let what = format!(
                "User {user} cannot {verb} resource {} in API group {} {scope}",
                gofmt::quote(&combined),
                gofmt::quote(&r.api_group)
            );
            (
                r.api_group.clone(),
                r.resource.clone(),
                r.name.clone(),
                what,
            )
        }
    };
    let mut err = sanitize(&what);
    if !reason.is_empty() {
        err.push_str(": ");
        err.push_str(reason);
    }
    let group_resource = if group.is_empty() {
        resource.clone()
    } else {
        format!("{resource}.{group}")
    };
    let message = if group.is_empty() && resource.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{group_resource} is forbidden: {err}")
    } else {
        format!(
            "{group_resource} {} is forbidden: {err}",
            gofmt::quote(&name)
        )
    };
    Forbidden {
        message,
        group,
        resource,
        name,
    }
}
