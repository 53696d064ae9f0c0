//! Least privilege, proved from the API server's audit log: the verbs and resources each
//! operator's ServiceAccount really used across the end-to-end runs against what the chart's
//! RBAC grants it. A use that is not granted (a 403 in production) or a grant never used (a
//! privilege nobody needs) is a finding.
//!
//! Every [`crate::LocalKube`] copies the audit events of ServiceAccounts (kube-apiserver's
//! `--audit-log-path`, at `Metadata` level) into [`audit_dir`] when it stops; the
//! `rbac-usage` binary (the last step of `make test`) compares them with the chart rendered by
//! helm.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

/// `(apiGroup, resource[/subresource], verb)`, the unit RBAC grants.
pub type Permission = (String, String, String);

/// Where the instances leave their audit events: `$ETCD_OPERATOR_AUDIT_DIR`, else
/// `<target>/audit`.
pub fn audit_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ETCD_OPERATOR_AUDIT_DIR") {
        return PathBuf::from(dir);
    }
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("audit")
}

/// The operator an account stands for: the chart names its ServiceAccounts
/// `<release>-<operator>` (`cluster`, `backup`, `restore`, `scheduled-backup`). The accounts
/// the cluster operator makes for a cluster's `spec.backup` Jobs (`<cluster>-backups`) stand
/// for none: their Role is the operator's (unit-tested in `scheduled_backup.rs`), not the
/// chart's, and they run the same create-backup as the chart's `scheduled-backup` account.
pub fn operator_of(account: &str, operators: &[&str]) -> Option<String> {
    operators
        .iter()
        .filter(|op| account.ends_with(&format!("-{op}")))
        // `scheduled-backup` before `backup`: the longest matching suffix.
        .max_by_key(|op| op.len())
        .map(|op| op.to_string())
}

/// What one audit event used, if it is a resource request of a ServiceAccount:
/// `(account name, permissions)`. A server-side apply that created its object (`patch`
/// answered 201) used `create` too: the API server authorizes that apply as a create, so
/// without the grant it is refused (`cannot create resource`).
pub fn used_by(event: &Value) -> Option<(String, Vec<Permission>)> {
    let user = event["user"]["username"].as_str()?;
    let account = user
        .strip_prefix("system:serviceaccount:")?
        .split(':')
        .nth(1)?;
    let object = event.get("objectRef")?;
    let resource = object["resource"].as_str()?;
    let resource = match object["subresource"].as_str() {
        Some(sub) if !sub.is_empty() => format!("{resource}/{sub}"),
        _ => resource.to_string(),
    };
    let group = object["apiGroup"].as_str().unwrap_or("").to_string();
    let verb = event["verb"].as_str()?.to_string();
    let created_by_patch = verb == "patch" && event["responseStatus"]["code"] == 201;
    let mut used = vec![(group.clone(), resource.clone(), verb)];
    if created_by_patch {
        used.push((group, resource, "create".to_string()));
    }
    Some((account.to_string(), used))
}

/// The permissions each ServiceAccount of the rendered chart is granted, by account name.
/// `docs` are the chart's rendered objects (JSON).
pub fn granted(docs: &[Value]) -> BTreeMap<String, BTreeSet<Permission>> {
    let mut roles: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap_or("");
        if kind == "ClusterRole" || kind == "Role" {
            let name = doc["metadata"]["name"].as_str().unwrap_or("").to_string();
            let rules = doc["rules"].as_array().cloned().unwrap_or_default();
            roles.insert((kind.to_string(), name), rules);
        }
    }
    let mut out: BTreeMap<String, BTreeSet<Permission>> = BTreeMap::new();
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap_or("");
        if kind == "ServiceAccount" {
            let name = doc["metadata"]["name"].as_str().unwrap_or("").to_string();
            out.entry(name).or_default();
        }
        if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
            continue;
        }
        let role_kind = doc["roleRef"]["kind"].as_str().unwrap_or("").to_string();
        let role_name = doc["roleRef"]["name"].as_str().unwrap_or("").to_string();
        let Some(rules) = roles.get(&(role_kind, role_name)) else {
            continue;
        };
        for subject in doc["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] != "ServiceAccount" {
                continue;
            }
            let account = subject["name"].as_str().unwrap_or("").to_string();
            let set = out.entry(account).or_default();
            for rule in rules {
                let strings = |f: &str| -> Vec<String> {
                    rule[f]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                };
                for group in strings("apiGroups") {
                    for resource in strings("resources") {
                        for verb in strings("verbs") {
                            set.insert((group.clone(), resource.clone(), verb));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Grants the scenarios cannot reach but production needs, each with why: `(operator, apiGroup,
/// resource, verb, why)`. Kept short on purpose: every other grant must be used by a scenario.
pub const NEEDED_UNREACHED: &[(&str, &str, &str, &str, &str)] = &[
    (
        "cluster",
        "etcd.operator.rs",
        "etcdbackups",
        "create",
        ESCALATION,
    ),
    (
        "cluster",
        "etcd.operator.rs",
        "etcdbackups",
        "get",
        ESCALATION,
    ),
    (
        "cluster",
        "etcd.operator.rs",
        "etcdbackups",
        "list",
        ESCALATION,
    ),
    (
        "cluster",
        "etcd.operator.rs",
        "etcdbackups",
        "delete",
        ESCALATION,
    ),
    (
        "cluster",
        "etcd.operator.rs",
        "etcdrestores",
        "list",
        ESCALATION,
    ),
    (
        "backup",
        "events.k8s.io",
        "events",
        "patch",
        "kube-rs's event recorder patches an event's series when the same event repeats within \
         minutes; no backup scenario repeats one",
    ),
    (
        "restore",
        "events.k8s.io",
        "events",
        "patch",
        "kube-rs's event recorder patches an event's series when the same event repeats within \
         minutes; no restore scenario repeats one",
    ),
];

/// Why `operator` keeps `perm` although no scenario used it, if it is a known case.
/// Why the cluster operator holds the create-backup Jobs' permissions without using them.
const ESCALATION: &str = "held to grant it: the Role of a cluster's spec.backup CronJob grants it, and the API \
     server refuses to write a Role granting what its writer does not hold (RBAC escalation \
     prevention); the Jobs use it (the backup scenario's per-cluster schedule)";

pub fn needed_unreached(operator: &str, perm: &Permission) -> Option<&'static str> {
    NEEDED_UNREACHED
        .iter()
        .find(|(op, g, r, v, _)| {
            *op == operator && (*g, *r, *v) == (perm.0.as_str(), perm.1.as_str(), perm.2.as_str())
        })
        .map(|(.., why)| *why)
}

/// One operator's comparison.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub used: BTreeSet<Permission>,
    pub granted: BTreeSet<Permission>,
}

impl Usage {
    pub fn used_not_granted(&self) -> Vec<&Permission> {
        self.used.difference(&self.granted).collect()
    }

    pub fn granted_never_used(&self) -> Vec<&Permission> {
        self.granted.difference(&self.used).collect()
    }

    /// The grants never used that no [`NEEDED_UNREACHED`] entry explains: privileges to trim,
    /// or paths a scenario must cover.
    pub fn unexplained_unused(&self, operator: &str) -> Vec<&Permission> {
        self.granted_never_used()
            .into_iter()
            .filter(|p| needed_unreached(operator, p).is_none())
            .collect()
    }
}

pub fn fmt_permission((group, resource, verb): &Permission) -> String {
    if group.is_empty() {
        format!("{verb} {resource}")
    } else {
        format!("{verb} {resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(g: &str, r: &str, v: &str) -> Permission {
        (g.into(), r.into(), v.into())
    }

    #[test]
    fn audit_events_name_the_account_and_the_permission_used() {
        let event = json!({"verb": "patch", "user": {"username": "system:serviceaccount:ops:rel-cluster"},
            "objectRef": {"resource": "etcdclusters", "subresource": "status", "apiGroup": "etcd.operator.rs"}});
        assert_eq!(
            used_by(&event),
            Some((
                "rel-cluster".into(),
                vec![p("etcd.operator.rs", "etcdclusters/status", "patch")]
            ))
        );
        let core = json!({"verb": "list", "user": {"username": "system:serviceaccount:ops:rel-backup"},
            "objectRef": {"resource": "pods", "apiVersion": "v1"}});
        assert_eq!(used_by(&core).unwrap().1, vec![p("", "pods", "list")]);
        // An apply that created the Service also needed create; one that updated it did not.
        let apply = |code: u16| {
            json!({"verb": "patch", "user": {"username": "system:serviceaccount:ops:rel-cluster"},
                "objectRef": {"resource": "services", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "code": code}})
        };
        assert_eq!(
            used_by(&apply(201)).unwrap().1,
            vec![p("", "services", "patch"), p("", "services", "create")]
        );
        assert_eq!(
            used_by(&apply(200)).unwrap().1,
            vec![p("", "services", "patch")]
        );
        let admin = json!({"verb": "list", "user": {"username": "kubernetes-admin"},
            "objectRef": {"resource": "pods"}});
        assert_eq!(used_by(&admin), None);
        let discovery = json!({"verb": "get", "user": {"username": "system:serviceaccount:a:b"},
            "requestURI": "/version"});
        assert_eq!(used_by(&discovery), None);
    }

    #[test]
    fn accounts_map_to_operators_by_suffix() {
        let ops = ["cluster", "backup", "restore", "scheduled-backup"];
        assert_eq!(operator_of("rel-backup", &ops).as_deref(), Some("backup"));
        assert_eq!(
            operator_of("rel-scheduled-backup", &ops).as_deref(),
            Some("scheduled-backup")
        );
        // A cluster's spec.backup Jobs (`<cluster>-backups`) are not the backup operator.
        assert_eq!(operator_of("main-backups", &ops), None);
    }

    #[test]
    fn grants_follow_bindings_to_their_roles() {
        let docs = vec![
            json!({"kind": "ServiceAccount", "metadata": {"name": "rel-cluster"}}),
            json!({"kind": "ClusterRole", "metadata": {"name": "rel-cluster"}, "rules": [
                {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}),
            json!({"kind": "Role", "metadata": {"name": "rel-cluster"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"]}]}),
            json!({"kind": "ClusterRoleBinding", "roleRef": {"kind": "ClusterRole", "name": "rel-cluster"},
                "subjects": [{"kind": "ServiceAccount", "name": "rel-cluster", "namespace": "ops"}]}),
            json!({"kind": "RoleBinding", "roleRef": {"kind": "Role", "name": "rel-cluster"},
                "subjects": [{"kind": "ServiceAccount", "name": "rel-cluster", "namespace": "ops"}]}),
        ];
        let g = granted(&docs);
        let expected: BTreeSet<Permission> = [
            p("", "pods", "get"),
            p("", "pods", "list"),
            p("", "pods/log", "get"),
            p("", "pods/log", "list"),
            p("coordination.k8s.io", "leases", "update"),
        ]
        .into();
        assert_eq!(g["rel-cluster"], expected);
    }

    #[test]
    fn both_directions_of_a_mismatch_are_reported() {
        let usage = Usage {
            used: [
                p("", "pods", "get"),
                p("", "persistentvolumeclaims", "patch"),
            ]
            .into(),
            granted: [p("", "pods", "get"), p("", "pods", "deletecollection")].into(),
        };
        assert_eq!(
            usage.used_not_granted(),
            vec![&p("", "persistentvolumeclaims", "patch")]
        );
        assert_eq!(
            usage.granted_never_used(),
            vec![&p("", "pods", "deletecollection")]
        );
        assert_eq!(
            fmt_permission(&p("etcd.operator.rs", "etcdclusters/status", "patch")),
            "patch etcdclusters/status.etcd.operator.rs"
        );
    }

    #[test]
    fn only_the_listed_unreached_grants_are_excused() {
        let usage = Usage {
            used: [p("events.k8s.io", "events", "create")].into(),
            granted: [
                p("events.k8s.io", "events", "create"),
                p("events.k8s.io", "events", "patch"),
                p("", "pods", "get"),
            ]
            .into(),
        };
        assert_eq!(
            usage.unexplained_unused("backup"),
            vec![&p("", "pods", "get")]
        );
        // The excuse is per operator: the cluster operator has none.
        assert_eq!(
            usage.unexplained_unused("cluster"),
            vec![
                &p("", "pods", "get"),
                &p("events.k8s.io", "events", "patch")
            ]
        );
    }

    #[test]
    fn accounts_map_to_their_operator_by_the_longest_suffix() {
        let ops = ["cluster", "backup", "restore", "scheduled-backup"];
        assert_eq!(
            operator_of("etcd-operator-scheduled-backup", &ops).as_deref(),
            Some("scheduled-backup")
        );
        assert_eq!(
            operator_of("my-release-backup", &ops).as_deref(),
            Some("backup")
        );
        assert_eq!(operator_of("default", &ops), None);
    }
}
