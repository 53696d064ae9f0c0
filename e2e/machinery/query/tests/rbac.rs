#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The RBAC authorizer: an allow/deny matrix with kube-apiserver's exact 403 messages, the
//! bootstrap roles, and resilience to malformed RBAC objects.

use localkube_query::{
    Attributes, Decision, RbacPolicy, Request, ResourceRequest, authorize, bootstrap_policy,
};
use serde_json::{Value, json};

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

fn binding(ns: Option<&str>, name: &str, role_kind: &str, role: &str, subjects: Value) -> Value {
    let (kind, metadata) = match ns {
        Some(ns) => ("RoleBinding", json!({"name": name, "namespace": ns})),
        None => ("ClusterRoleBinding", json!({"name": name})),
    };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects
    })
}

fn policy() -> RbacPolicy {
    let objects = vec![
        cluster_role(
            "pod-reader",
            json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]),
        ),
        cluster_role(
            "node-viewer",
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["nodes"]}]),
        ),
        cluster_role(
            "eviction",
            json!([{"verbs": ["create"], "apiGroups": [""], "resources": ["pods/eviction"]}]),
        ),
        cluster_role(
            "status-writer",
            json!([{"verbs": ["update", "patch"], "apiGroups": ["etcd.example.com"], "resources": ["*/status"]}]),
        ),
        cluster_role(
            "named-cm",
            json!([{"verbs": ["get", "update", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cm1"]}]),
        ),
        cluster_role(
            "health",
            json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/debug/*"]}]),
        ),
        cluster_role(
            "wild",
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
        ),
        role(
            "ns",
            "leases",
            json!([{"verbs": ["create", "get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}]),
        ),
        role(
            "other",
            "leases",
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
        ),
        binding(
            None,
            "nodes",
            "ClusterRole",
            "node-viewer",
            json!([{"kind": "User", "name": "alice"}]),
        ),
        binding(
            None,
            "health",
            "ClusterRole",
            "health",
            json!([{"kind": "Group", "name": "system:authenticated"}]),
        ),
        binding(
            None,
            "status",
            "ClusterRole",
            "status-writer",
            json!([{"kind": "User", "name": "carol"}]),
        ),
        binding(
            None,
            "admins",
            "ClusterRole",
            "wild",
            json!([{"kind": "Group", "name": "admins"}]),
        ),
        // a ServiceAccount subject without namespace never applies cluster-wide
        binding(
            None,
            "sa-no-ns",
            "ClusterRole",
            "pod-reader",
            json!([{"kind": "ServiceAccount", "name": "x"}]),
        ),
        // namespace defaults to the RoleBinding's own
        binding(
            Some("ns"),
            "read-pods",
            "ClusterRole",
            "pod-reader",
            json!([{"kind": "ServiceAccount", "name": "sa"}]),
        ),
        binding(
            Some("ns"),
            "leases",
            "Role",
            "leases",
            json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]),
        ),
        binding(
            Some("ns"),
            "evict",
            "ClusterRole",
            "eviction",
            json!([{"kind": "User", "name": "bob"}]),
        ),
        binding(
            Some("ns"),
            "cm",
            "ClusterRole",
            "named-cm",
            json!([{"kind": "User", "name": "bob"}]),
        ),
        // binds a SA of another namespace
        binding(
            Some("ns"),
            "foreign",
            "ClusterRole",
            "pod-reader",
            json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ci"}]),
        ),
        binding(
            Some("ns2"),
            "missing",
            "ClusterRole",
            "ghost",
            json!([{"kind": "User", "name": "dave"}]),
        ),
        binding(
            Some("ns2"),
            "missing-role",
            "Role",
            "nope",
            json!([{"kind": "User", "name": "dave"}]),
        ),
        binding(
            Some("ns2"),
            "not-dave",
            "ClusterRole",
            "ghost2",
            json!([{"kind": "User", "name": "erin"}]),
        ),
    ];
    RbacPolicy::from_objects(&objects)
}

/// `[api group, resource, subresource, namespace, name]`.
fn res(
    user: &str,
    groups: &[&str],
    verb: &str,
    [group, resource, sub, ns, name]: [&str; 5],
) -> Attributes {
    Attributes {
        user: user.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        verb: verb.into(),
        request: Request::Resource(ResourceRequest {
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }),
    }
}

fn path(user: &str, groups: &[&str], verb: &str, p: &str) -> Attributes {
    Attributes {
        user: user.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        verb: verb.into(),
        request: Request::NonResource { path: p.into() },
    }
}

/// `None` for allowed, else the exact 403 message.
fn decide(policy: &RbacPolicy, a: &Attributes) -> Option<String> {
    match authorize(policy, a) {
        Decision::Allow => None,
        Decision::Deny(f) => Some(f.message),
    }
}

const SA: &str = "system:serviceaccount:ns:sa";
const SA_GROUPS: &[&str] = &[
    "system:serviceaccounts",
    "system:serviceaccounts:ns",
    "system:authenticated",
];

#[test]
fn allow_deny_matrix_with_exact_messages() {
    let p = policy();
    let auth = &["system:authenticated"];
    let cases: Vec<(Attributes, Option<&str>)> = vec![
        // RoleBinding -> ClusterRole, ServiceAccount subject defaulted to the binding's namespace
        (res(SA, SA_GROUPS, "list", ["", "pods", "", "ns", ""]), None),
        (
            res(SA, SA_GROUPS, "watch", ["", "pods", "", "ns", ""]),
            None,
        ),
        (
            res(SA, SA_GROUPS, "get", ["", "pods", "", "ns", "p1"]),
            None,
        ),
        (
            res(SA, SA_GROUPS, "list", ["", "pods", "", "other", ""]),
            Some(
                r#"pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" in the namespace "other""#,
            ),
        ),
        (
            res(SA, SA_GROUPS, "list", ["", "pods", "", "", ""]),
            Some(
                r#"pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" at the cluster scope"#,
            ),
        ),
        (
            res(SA, SA_GROUPS, "delete", ["", "pods", "", "ns", "p1"]),
            Some(
                r#"pods "p1" is forbidden: User "system:serviceaccount:ns:sa" cannot delete resource "pods" in API group "" in the namespace "ns""#,
            ),
        ),
        // RoleBinding -> Role
        (
            res(
                SA,
                SA_GROUPS,
                "create",
                ["coordination.k8s.io", "leases", "", "ns", ""],
            ),
            None,
        ),
        (
            res(
                SA,
                SA_GROUPS,
                "delete",
                ["coordination.k8s.io", "leases", "", "ns", "l1"],
            ),
            Some(
                r#"leases.coordination.k8s.io "l1" is forbidden: User "system:serviceaccount:ns:sa" cannot delete resource "leases" in API group "coordination.k8s.io" in the namespace "ns""#,
            ),
        ),
        // the same-named Role in another namespace is not the one bound
        (
            res(
                SA,
                SA_GROUPS,
                "create",
                ["coordination.k8s.io", "leases", "", "other", ""],
            ),
            Some(
                r#"leases.coordination.k8s.io is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "other""#,
            ),
        ),
        // a SA of another namespace, named explicitly
        (
            res(
                "system:serviceaccount:ci:sa",
                &[],
                "list",
                ["", "pods", "", "ns", ""],
            ),
            None,
        ),
        (
            res(
                "system:serviceaccount:default:x",
                &[],
                "list",
                ["", "pods", "", "", ""],
            ),
            Some(
                r#"pods is forbidden: User "system:serviceaccount:default:x" cannot list resource "pods" in API group "" at the cluster scope"#,
            ),
        ),
        // ClusterRoleBinding, cluster-scoped resource
        (res("alice", auth, "list", ["", "nodes", "", "", ""]), None),
        (res("alice", auth, "get", ["", "nodes", "", "", "n1"]), None),
        (
            res("alice", auth, "delete", ["", "nodes", "", "", "n1"]),
            Some(
                r#"nodes "n1" is forbidden: User "alice" cannot delete resource "nodes" in API group "" at the cluster scope"#,
            ),
        ),
        // subresources: exact `pods/eviction`, and the resource alone is not enough
        (
            res("bob", auth, "create", ["", "pods", "eviction", "ns", "p1"]),
            None,
        ),
        (
            res("bob", auth, "create", ["", "pods", "", "ns", ""]),
            Some(
                r#"pods is forbidden: User "bob" cannot create resource "pods" in API group "" in the namespace "ns""#,
            ),
        ),
        (
            res(
                "bob",
                auth,
                "create",
                ["", "pods", "eviction", "other", "p1"],
            ),
            Some(
                r#"pods "p1" is forbidden: User "bob" cannot create resource "pods/eviction" in API group "" in the namespace "other""#,
            ),
        ),
        // `*/status` matches any resource's status subresource, only that
        (
            res(
                "carol",
                auth,
                "update",
                ["etcd.example.com", "etcdclusters", "status", "ns", "c1"],
            ),
            None,
        ),
        (
            res(
                "carol",
                auth,
                "patch",
                ["etcd.example.com", "etcdbackups", "status", "", "b1"],
            ),
            None,
        ),
        (
            res(
                "carol",
                auth,
                "update",
                ["etcd.example.com", "etcdclusters", "", "ns", "c1"],
            ),
            Some(
                r#"etcdclusters.etcd.example.com "c1" is forbidden: User "carol" cannot update resource "etcdclusters" in API group "etcd.example.com" in the namespace "ns""#,
            ),
        ),
        (
            res(
                "carol",
                auth,
                "update",
                ["etcd.example.com", "etcdclusters", "scale", "ns", "c1"],
            ),
            Some(
                r#"etcdclusters.etcd.example.com "c1" is forbidden: User "carol" cannot update resource "etcdclusters/scale" in API group "etcd.example.com" in the namespace "ns""#,
            ),
        ),
        (
            res(
                "carol",
                auth,
                "update",
                ["other.io", "etcdclusters", "status", "ns", "c1"],
            ),
            Some(
                r#"etcdclusters.other.io "c1" is forbidden: User "carol" cannot update resource "etcdclusters/status" in API group "other.io" in the namespace "ns""#,
            ),
        ),
        // resourceNames: only requests naming an allowed object
        (
            res("bob", auth, "get", ["", "configmaps", "", "ns", "cm1"]),
            None,
        ),
        (
            res("bob", auth, "get", ["", "configmaps", "", "ns", "cm2"]),
            Some(
                r#"configmaps "cm2" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "ns""#,
            ),
        ),
        (
            res("bob", auth, "list", ["", "configmaps", "", "ns", ""]),
            Some(
                r#"configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the namespace "ns""#,
            ),
        ),
        // a list narrowed by fieldSelector=metadata.name=cm1 carries the name
        (
            res("bob", auth, "list", ["", "configmaps", "", "ns", "cm1"]),
            None,
        ),
        // wildcard verbs, groups and resources
        (
            res(
                "root",
                &["admins"],
                "deletecollection",
                ["apps", "deployments", "", "x", ""],
            ),
            None,
        ),
        (
            res(
                "root",
                &["admins"],
                "escalate",
                ["rbac.authorization.k8s.io", "clusterroles", "", "", "r"],
            ),
            None,
        ),
        (
            path("root", &["admins"], "get", "/metrics"),
            Some(r#"forbidden: User "root" cannot get path "/metrics""#),
        ),
        // nonResourceURLs: exact, and trailing `*` as a prefix
        (path("eve", auth, "get", "/healthz"), None),
        (path("eve", auth, "get", "/debug/pprof/heap"), None),
        (
            path("eve", auth, "get", "/version"),
            Some(r#"forbidden: User "eve" cannot get path "/version""#),
        ),
        (
            path("eve", auth, "post", "/healthz"),
            Some(r#"forbidden: User "eve" cannot post path "/healthz""#),
        ),
        (
            path("anon", &["system:unauthenticated"], "get", "/healthz"),
            Some(r#"forbidden: User "anon" cannot get path "/healthz""#),
        ),
        // system:masters may do anything, bound or not
        (
            res(
                "admin",
                &["system:masters"],
                "delete",
                ["", "nodes", "", "", "n1"],
            ),
            None,
        ),
        (
            path(
                "admin",
                &["system:masters", "system:authenticated"],
                "get",
                "/anything",
            ),
            None,
        ),
    ];
    for (attributes, want) in &cases {
        assert_eq!(decide(&p, attributes).as_deref(), *want, "{attributes:?}");
    }
}

#[test]
fn missing_roles_become_the_rbac_reason() {
    let p = policy();
    let dave = res("dave", &[], "list", ["", "pods", "", "ns2", ""]);
    assert_eq!(
        decide(&p, &dave).unwrap(),
        r#"pods is forbidden: User "dave" cannot list resource "pods" in API group "" in the namespace "ns2": RBAC: [clusterrole.rbac.authorization.k8s.io "ghost" not found, role.rbac.authorization.k8s.io "nope" not found]"#
    );
    // bindings that do not apply to the user do not report their errors
    let erin = res("erin", &[], "list", ["", "pods", "", "ns", ""]);
    assert_eq!(
        decide(&p, &erin).unwrap(),
        r#"pods is forbidden: User "erin" cannot list resource "pods" in API group "" in the namespace "ns""#
    );
    let single = RbacPolicy::from_objects(&[binding(
        None,
        "b",
        "Cluster",
        "x",
        json!([{"kind": "User", "name": "u"}]),
    )]);
    assert_eq!(
        decide(&single, &path("u", &[], "get", "/x")).unwrap(),
        r#"forbidden: User "u" cannot get path "/x": RBAC: unsupported role reference kind: "Cluster""#
    );
}

#[test]
fn forbidden_carries_status_details_and_sanitizes_html() {
    let p = policy();
    let Decision::Deny(f) = authorize(
        &p,
        &res(
            "x<y>&z",
            &[],
            "create",
            ["apps", "deployments", "scale", "ns", "d\"1"],
        ),
    ) else {
        panic!("allowed");
    };
    assert_eq!(
        f.message,
        r#"deployments.apps "d\"1" is forbidden: User "x&lt;y&gt;&amp;z" cannot create resource "deployments/scale" in API group "apps" in the namespace "ns""#
    );
    assert_eq!(
        (f.group.as_str(), f.resource.as_str(), f.name.as_str()),
        ("apps", "deployments", "d\"1")
    );
}

#[test]
fn malformed_rbac_objects_grant_nothing_and_never_panic() {
    let junk = vec![
        json!(null),
        json!(42),
        json!("ClusterRole"),
        json!([]),
        json!({"kind": 5}),
        json!({"kind": "ClusterRole"}),
        json!({"kind": "ClusterRole", "metadata": {"name": "bad-rules"}, "rules": "everything"}),
        json!({"kind": "ClusterRole", "metadata": {"name": "bad-items"}, "rules": [7, null, {"verbs": "*", "apiGroups": ["*"], "resources": ["*"]}, {"verbs": [1, null], "apiGroups": [[]], "resources": {}}]}),
        json!({"kind": "Role", "metadata": {"name": 3}, "rules": []}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "no-ref"}, "subjects": [{"kind": "User", "name": "mallory"}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "str-ref"}, "roleRef": "wild", "subjects": [{"kind": "User", "name": "mallory"}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "rules1"}, "roleRef": {"kind": "ClusterRole", "name": "bad-rules"}, "subjects": [{"kind": "User", "name": "mallory"}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "rules2"}, "roleRef": {"kind": "ClusterRole", "name": "bad-items"}, "subjects": [{"kind": "User", "name": "mallory"}, 9, {"kind": ["User"], "name": "mallory"}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "subjects-str"}, "roleRef": {"kind": "ClusterRole", "name": "wild"}, "subjects": "mallory"}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "subject-kind"}, "roleRef": {"kind": "ClusterRole", "name": "wild"}, "subjects": [{"kind": "Robot", "name": "mallory"}]}),
        json!({"kind": "RoleBinding", "metadata": {"namespace": "ns"}, "roleRef": {"kind": "ClusterRole", "name": "wild"}, "subjects": [{"kind": "ServiceAccount"}]}),
        cluster_role(
            "wild",
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
        ),
    ];
    let p = RbacPolicy::from_objects(&junk);
    for a in [
        res("mallory", &[], "get", ["", "pods", "", "ns", "p"]),
        res("mallory", &[], "list", ["apps", "deployments", "", "", ""]),
        path("mallory", &[], "get", "/version"),
        res(
            "system:serviceaccount:ns:",
            &[],
            "get",
            ["", "pods", "", "ns", "p"],
        ),
    ] {
        assert!(matches!(authorize(&p, &a), Decision::Deny(_)), "{a:?}");
    }
}

#[test]
fn bootstrap_policy_lets_clients_discover_and_nothing_more() {
    let mut objects = bootstrap_policy();
    objects.push(binding(
        Some("team"),
        "dev",
        "ClusterRole",
        "edit",
        json!([{"kind": "ServiceAccount", "name": "dev"}]),
    ));
    objects.push(binding(
        Some("team"),
        "lead",
        "ClusterRole",
        "admin",
        json!([{"kind": "User", "name": "lead"}]),
    ));
    objects.push(binding(
        Some("team"),
        "auditor",
        "ClusterRole",
        "view",
        json!([{"kind": "User", "name": "auditor"}]),
    ));
    objects.push(binding(
        None,
        "root",
        "ClusterRole",
        "cluster-admin",
        json!([{"kind": "User", "name": "root"}]),
    ));
    let p = RbacPolicy::from_objects(&objects);
    let authed = &["system:authenticated"];
    let dev = "system:serviceaccount:team:dev";
    let allowed = [
        path("eve", authed, "get", "/version"),
        path("eve", authed, "get", "/api"),
        path("eve", authed, "get", "/apis/apps/v1"),
        path("eve", authed, "get", "/openapi/v3/apis/apps/v1"),
        path("eve", authed, "get", "/readyz"),
        res(
            "eve",
            authed,
            "create",
            [
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "",
                "",
                "",
            ],
        ),
        path("anon", &["system:unauthenticated"], "get", "/version"),
        path("anon", &["system:unauthenticated"], "get", "/livez"),
        res(
            dev,
            authed,
            "create",
            ["apps", "deployments", "", "team", ""],
        ),
        res(dev, authed, "get", ["", "secrets", "", "team", "s"]),
        res(dev, authed, "create", ["", "pods", "eviction", "team", "p"]),
        res(
            dev,
            authed,
            "patch",
            ["apps", "deployments", "scale", "team", "d"],
        ),
        res(
            "lead",
            authed,
            "create",
            ["rbac.authorization.k8s.io", "rolebindings", "", "team", ""],
        ),
        res("auditor", authed, "list", ["", "pods", "", "team", ""]),
        res("auditor", authed, "get", ["", "pods", "log", "team", "p"]),
        res("root", authed, "delete", ["", "nodes", "", "", "n1"]),
        path("root", authed, "get", "/metrics"),
    ];
    for a in &allowed {
        assert_eq!(decide(&p, a), None, "{a:?}");
    }
    let denied = [
        path("eve", authed, "get", "/metrics"),
        res("eve", authed, "list", ["", "pods", "", "default", ""]),
        path("anon", &["system:unauthenticated"], "get", "/apis"),
        res(
            dev,
            authed,
            "create",
            ["rbac.authorization.k8s.io", "roles", "", "team", ""],
        ),
        res(
            dev,
            authed,
            "create",
            ["apps", "deployments", "", "prod", ""],
        ),
        res(
            dev,
            authed,
            "update",
            ["apps", "deployments", "status", "team", "d"],
        ),
        res("auditor", authed, "get", ["", "secrets", "", "team", "s"]),
        res("auditor", authed, "create", ["", "pods", "", "team", ""]),
    ];
    for a in &denied {
        assert!(decide(&p, a).is_some(), "{a:?}");
    }
    let defaults = bootstrap_policy();
    let names: Vec<&str> = defaults
        .iter()
        .map(|o| o.pointer("/metadata/name").and_then(Value::as_str).unwrap())
        .collect();
    for want in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        assert!(names.contains(&want), "{want}");
    }
    for o in &defaults {
        assert_eq!(o["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(
            o["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
    }
}
