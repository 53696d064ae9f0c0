//! What a request is about, parsed from its path and query the way kube-apiserver's
//! `RequestInfoFactory` does it (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`).

use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/api`, `/apis`, `/apis/<g>`, `/api/v1`, `/apis/<g>/<v>`: discovery documents.
    DiscoveryRoot {
        legacy: bool,
    },
    DiscoveryGroup {
        group: String,
    },
    DiscoveryGroupVersion {
        group: String,
        version: String,
    },
    /// A resource request.
    Resource(ResourceRequest),
    /// Anything else (`/version`, `/healthz`, `/openapi/v3`...): a non-resource URL.
    NonResource(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: &'static str,
}

/// Subresources of a namespace that are not resources inside it.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

pub fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(percent_decode(k), percent_decode(v));
    }
    out
}

/// Decode `%XX` escapes and `+` (form encoding) in a query component.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_watch(query: &HashMap<String, String>) -> bool {
    matches!(query.get("watch").map(String::as_str), Some("true" | "1"))
}

pub fn parse(method: &str, path: &str, query: &HashMap<String, String>) -> Target {
    let trimmed = path.trim_matches('/');
    let parts: Vec<&str> = if trimmed.is_empty() {
        vec![]
    } else {
        trimmed.split('/').collect()
    };
    let (group, version, rest) = match parts.as_slice() {
        ["api"] => return Target::DiscoveryRoot { legacy: true },
        ["apis"] => return Target::DiscoveryRoot { legacy: false },
        ["api", v] => {
            return Target::DiscoveryGroupVersion {
                group: String::new(),
                version: v.to_string(),
            };
        }
        ["apis", g] => {
            return Target::DiscoveryGroup {
                group: g.to_string(),
            };
        }
        ["apis", g, v] => {
            return Target::DiscoveryGroupVersion {
                group: g.to_string(),
                version: v.to_string(),
            };
        }
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return Target::NonResource(path.to_string()),
    };
    let mut rest: Vec<&str> = rest.to_vec();
    // The deprecated `/watch/` path prefix.
    let mut watch = is_watch(query);
    if rest.first() == Some(&"watch") {
        watch = true;
        rest.remove(0);
    }
    let mut namespace = None;
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = Some(rest[1].to_string());
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest.drain(0..2);
        }
    }
    let Some(resource) = rest.first() else {
        return Target::NonResource(path.to_string());
    };
    let name = rest.get(1).map(|s| s.to_string());
    let subresource = rest.get(2).map(|s| s.to_string());
    if rest.len() > 3 {
        return Target::NonResource(path.to_string());
    }
    // `/api/v1/namespaces/foo` names the namespace foo itself, not a namespace scope.
    if *resource == "namespaces" {
        namespace = None;
    }
    let verb = match (method, name.is_some()) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    };
    Target::Resource(ResourceRequest {
        group,
        version,
        namespace,
        resource: resource.to_string(),
        name,
        subresource,
        verb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(method: &str, path: &str, query: &str) -> ResourceRequest {
        match parse(method, path, &parse_query(Some(query))) {
            Target::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths_parse_like_request_info() {
        let r = res("GET", "/api/v1/namespaces/default/pods/p1/log", "");
        assert_eq!(
            (
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref(),
                r.verb
            ),
            (Some("default"), "pods", Some("p1"), Some("log"), "get")
        );
        let r = res("GET", "/api/v1/namespaces/foo", "");
        assert_eq!(
            (r.namespace, r.resource.as_str(), r.name.as_deref()),
            (None, "namespaces", Some("foo"))
        );
        let r = res("PUT", "/api/v1/namespaces/foo/finalize", "");
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("namespaces", Some("foo"), Some("finalize"))
        );
        let r = res("GET", "/apis/apps/v1/deployments", "watch=1");
        assert_eq!(
            (r.group.as_str(), r.verb, r.namespace),
            ("apps", "watch", None)
        );
        let r = res(
            "DELETE",
            "/apis/etcd.operator.rs/v1alpha1/namespaces/a/etcdclusters",
            "",
        );
        assert_eq!(r.verb, "deletecollection");
        assert_eq!(
            parse("GET", "/apis/apps", &HashMap::new()),
            Target::DiscoveryGroup {
                group: "apps".into()
            }
        );
        assert_eq!(
            parse("GET", "/version", &HashMap::new()),
            Target::NonResource("/version".into())
        );
    }

    #[test]
    fn query_values_are_unescaped() {
        let q = parse_query(Some("labelSelector=name%3Drel%2Cowner%3Dhelm&limit=500"));
        assert_eq!(q["labelSelector"], "name=rel,owner=helm");
        assert_eq!(q["limit"], "500");
    }
}
