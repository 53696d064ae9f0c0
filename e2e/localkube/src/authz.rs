//! RBAC enforcement for every identity outside `system:masters` (spec §a11): the policy is read
//! from etcd (ClusterRoles, Roles, and their bindings) for each decision, so a Role created a
//! moment ago applies at once, and evaluated by `localkube_query::authorize`, which words the 403
//! exactly as kube-apiserver does.

use localkube_query::{Attributes, Decision, RbacPolicy, Request, ResourceRequest};
use serde_json::json;

use crate::api::request::ResourceRequest as ApiRequest;
use crate::api::status::ApiError;
use crate::api::{Shared, User};

const RBAC_PREFIXES: &[&str] = &[
    "/registry/clusterroles/",
    "/registry/clusterrolebindings/",
    "/registry/roles/",
    "/registry/rolebindings/",
];

async fn policy(server: &Shared, namespace: &str) -> Result<RbacPolicy, ApiError> {
    let mut objects = Vec::new();
    for prefix in RBAC_PREFIXES {
        // Only the request's namespace matters for Roles and RoleBindings.
        let prefix = if prefix.starts_with("/registry/role") {
            format!("{prefix}{namespace}/")
        } else {
            prefix.to_string()
        };
        if prefix.ends_with("//") {
            continue;
        }
        let page = server
            .store
            .list(&prefix, None, 0, 0)
            .await
            .map_err(ApiError::internal)?;
        objects.extend(page.items.into_iter().map(|s| s.object));
    }
    Ok(RbacPolicy::from_objects(objects.iter()))
}

fn decide(policy: &RbacPolicy, user: &User, verb: &str, request: Request) -> Result<(), ApiError> {
    let attributes = Attributes {
        user: user.name.clone(),
        groups: user.groups.clone(),
        verb: verb.to_string(),
        request,
    };
    match localkube_query::authorize(policy, &attributes) {
        Decision::Allow => Ok(()),
        Decision::Deny(f) => {
            let mut details = json!({ "kind": f.resource });
            if !f.name.is_empty() {
                details["name"] = json!(f.name);
            }
            if !f.group.is_empty() {
                details["group"] = json!(f.group);
            }
            Err(ApiError::forbidden_message(f.message).with_details(details))
        }
    }
}

/// Authorize a resource request.
pub async fn authorize(server: &Shared, user: &User, req: &ApiRequest) -> Result<(), ApiError> {
    if user.is_master() {
        return Ok(());
    }
    let namespace = req.namespace.clone().unwrap_or_default();
    let policy = policy(server, &namespace).await?;
    let request = Request::Resource(ResourceRequest {
        api_group: req.group.clone(),
        resource: req.resource.clone(),
        subresource: req.subresource.clone().unwrap_or_default(),
        namespace,
        name: req.name.clone().unwrap_or_default(),
    });
    decide(&policy, user, req.verb, request)
}

/// Authorize a non-resource request (`/version`, `/openapi/v3`, discovery).
pub async fn authorize_path(
    server: &Shared,
    user: &User,
    verb: &str,
    path: &str,
) -> Result<(), ApiError> {
    if user.is_master() {
        return Ok(());
    }
    let policy = policy(server, "").await?;
    decide(
        &policy,
        user,
        verb,
        Request::NonResource {
            path: path.to_string(),
        },
    )
}
