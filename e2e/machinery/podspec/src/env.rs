//! A container's environment, resolved as kubelet's `makeEnvironmentVariables` does: `envFrom`
//! first, then `env` in order (values expanded against what came before), then the service-link
//! variables; the runtime then puts `HOSTNAME` and the image env underneath.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod, Service};
use thiserror::Error;

use crate::command::expand;
use crate::fieldref::{FieldRefError, env_field, resource_field};
use crate::image_map::ImageEntry;
use crate::{ConfigMapData, Lookups, PodContext};

/// Why a container's config could not be generated. kubelet shows it as the waiting reason
/// `CreateContainerConfigError` with this message, and in a `Failed` event `Error: <message>`.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EnvError {
    #[error("configmap {} not found", localkube_gofmt::quote(.0))]
    ConfigMapNotFound(String),
    #[error("secret {} not found", localkube_gofmt::quote(.0))]
    SecretNotFound(String),
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKeyMissing {
        key: String,
        namespace: String,
        name: String,
    },
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKeyMissing {
        key: String,
        namespace: String,
        name: String,
    },
    #[error(transparent)]
    Field(#[from] FieldRefError),
}

impl EnvError {
    pub fn reason(&self) -> &'static str {
        "CreateContainerConfigError"
    }
}

/// `envFrom` keys left out because they cannot be environment variable names. kubelet used to
/// report them with a Warning event; execve cannot carry a name with `=` either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedKeys {
    /// `configMap` or `secret`, as the event message words it.
    pub source_kind: &'static str,
    pub namespace: String,
    pub name: String,
    /// Sorted.
    pub keys: Vec<String>,
}

impl SkippedKeys {
    pub const EVENT_REASON: &'static str = "InvalidEnvironmentVariableNames";

    pub fn event_message(&self) -> String {
        format!(
            "Keys [{}] from the EnvFrom {} {}/{} were skipped since they are considered invalid environment variable names.",
            self.keys.join(", "),
            self.source_kind,
            self.namespace,
            self.name
        )
    }
}

/// What kubelet hands the runtime for one container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerEnv {
    /// `envFrom` + `env` + service links, each name once. This list (not the image env) is what
    /// `$(VAR)` in `command`, `args` and `subPathExpr` refers to.
    pub vars: Vec<(String, String)>,
    pub skipped: Vec<SkippedKeys>,
}

impl ContainerEnv {
    /// The process environment, as containerd builds it: `HOSTNAME`, then the image env, then
    /// these variables, a later name replacing an earlier one in place. Nothing comes from the
    /// host (kube-rs would otherwise find the host's kubeconfig before the in-cluster config).
    pub fn process_env(&self, hostname: &str, image: Option<&ImageEntry>) -> Vec<(String, String)> {
        let mut out = OrderedEnv::default();
        out.set("HOSTNAME".to_owned(), hostname.to_owned());
        for (k, v) in image.map(|i| &i.env).into_iter().flatten() {
            out.set(k.clone(), v.clone());
        }
        for (k, v) in &self.vars {
            out.set(k.clone(), v.clone());
        }
        out.into_vec()
    }
}

/// Names in first-seen order; setting an existing name replaces its value where it stands.
#[derive(Default)]
struct OrderedEnv {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl OrderedEnv {
    fn set(&mut self, name: String, value: String) {
        match self.index.get(&name) {
            Some(&i) => self.vars[i].1 = value,
            None => {
                self.index.insert(name.clone(), self.vars.len());
                self.vars.push((name, value));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.index.get(name).map(|&i| self.vars[i].1.as_str())
    }

    fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    fn into_vec(self) -> Vec<(String, String)> {
        self.vars
    }
}

/// Resolves one container's env. `services` are the Services the node knows (all namespaces);
/// see [`service_env`] for which of them produce variables.
pub fn container_env(
    pod: &Pod,
    container: &Container,
    lookups: &dyn Lookups,
    ctx: &PodContext,
    services: &[Service],
) -> Result<ContainerEnv, EnvError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let links = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let service_vars = service_env(services, &namespace, links);
    let mut cache = Cache::new(lookups);
    let mut vars = OrderedEnv::default();
    let mut skipped = Vec::new();

    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        let (source_kind, name, pairs): (_, _, Vec<(String, String)>) =
            if let Some(cm) = &from.config_map_ref {
                match cache.config_map(&cm.name) {
                    Some(data) => (
                        "configMap",
                        cm.name.clone(),
                        data.data
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    ),
                    None if cm.optional == Some(true) => continue,
                    None => return Err(EnvError::ConfigMapNotFound(cm.name.clone())),
                }
            } else if let Some(s) = &from.secret_ref {
                match cache.secret(&s.name) {
                    Some(data) => (
                        "secret",
                        s.name.clone(),
                        data.iter()
                            .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
                            .collect(),
                    ),
                    None if s.optional == Some(true) => continue,
                    None => return Err(EnvError::SecretNotFound(s.name.clone())),
                }
            } else {
                continue;
            };
        let mut invalid = Vec::new();
        for (key, value) in pairs {
            let key = format!("{prefix}{key}");
            if is_env_var_name(&key) {
                vars.set(key, value);
            } else {
                invalid.push(key);
            }
        }
        if !invalid.is_empty() {
            invalid.sort();
            skipped.push(SkippedKeys {
                source_kind,
                namespace: namespace.clone(),
                name,
                keys: invalid,
            });
        }
    }

    let service_map: HashMap<&str, &str> = service_vars
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    for var in container.env.iter().flatten() {
        let literal = var.value.as_deref().unwrap_or("");
        let value = if !literal.is_empty() {
            expand(literal, |name| {
                vars.get(name)
                    .or_else(|| service_map.get(name).copied())
                    .map(str::to_owned)
            })
        } else if let Some(from) = &var.value_from {
            if let Some(field) = &from.field_ref {
                env_field(pod, field, ctx)?
            } else if let Some(resource) = &from.resource_field_ref {
                resource_field(resource, pod, Some(container), ctx)?
            } else if let Some(sel) = &from.config_map_key_ref {
                let optional = sel.optional == Some(true);
                match cache.config_map(&sel.name) {
                    None if optional => continue,
                    None => return Err(EnvError::ConfigMapNotFound(sel.name.clone())),
                    Some(cm) => match cm.data.get(&sel.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => {
                            return Err(EnvError::ConfigMapKeyMissing {
                                key: sel.key.clone(),
                                namespace: namespace.clone(),
                                name: sel.name.clone(),
                            });
                        }
                    },
                }
            } else if let Some(sel) = &from.secret_key_ref {
                let optional = sel.optional == Some(true);
                match cache.secret(&sel.name) {
                    None if optional => continue,
                    None => return Err(EnvError::SecretNotFound(sel.name.clone())),
                    Some(s) => match s.get(&sel.key) {
                        Some(v) => String::from_utf8_lossy(v).into_owned(),
                        None if optional => continue,
                        None => {
                            return Err(EnvError::SecretKeyMissing {
                                key: sel.key.clone(),
                                namespace: namespace.clone(),
                                name: sel.name.clone(),
                            });
                        }
                    },
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        vars.set(var.name.clone(), value);
    }

    for (k, v) in service_vars {
        if !vars.contains(&k) {
            vars.set(k, v);
        }
    }
    Ok(ContainerEnv {
        vars: vars.into_vec(),
        skipped,
    })
}

/// `IsRelaxedEnvVarName` (the rule since Kubernetes 1.32): printable ASCII without `=`.
fn is_env_var_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
}

/// Lookups fetched once per container, as kubelet caches them per call.
struct Cache<'a> {
    lookups: &'a dyn Lookups,
    config_maps: HashMap<String, Option<ConfigMapData>>,
    secrets: HashMap<String, Option<BTreeMap<String, Vec<u8>>>>,
}

impl<'a> Cache<'a> {
    fn new(lookups: &'a dyn Lookups) -> Self {
        Cache {
            lookups,
            config_maps: HashMap::new(),
            secrets: HashMap::new(),
        }
    }

    fn config_map(&mut self, name: &str) -> Option<&ConfigMapData> {
        let lookups = self.lookups;
        self.config_maps
            .entry(name.to_owned())
            .or_insert_with(|| lookups.config_map(name))
            .as_ref()
    }

    fn secret(&mut self, name: &str) -> Option<&BTreeMap<String, Vec<u8>>> {
        let lookups = self.lookups;
        self.secrets
            .entry(name.to_owned())
            .or_insert_with(|| lookups.secret(name))
            .as_ref()
    }
}

/// kubelet's `getServiceEnvVarMap` + `envvars.FromServices`: the `kubernetes` Service of the
/// `default` namespace always; with `enableServiceLinks` (default true) every Service of the
/// pod's namespace too. Services without a cluster IP or ports produce nothing. Services are
/// taken in name order (kubelet's order is a Go map's, i.e. none).
pub fn service_env(
    services: &[Service],
    namespace: &str,
    enable_service_links: bool,
) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        let ip = spec.cluster_ip.as_deref().unwrap_or("");
        if ip.is_empty() || ip == "None" {
            continue;
        }
        let name = svc.metadata.name.as_deref().unwrap_or("");
        let ns = svc.metadata.namespace.as_deref().unwrap_or("");
        if ns == "default" && name == "kubernetes" {
            chosen.entry(name).or_insert(svc);
        } else if ns == namespace && enable_service_links {
            chosen.insert(name, svc);
        }
    }
    let mut out = Vec::new();
    for (name, svc) in chosen {
        let Some(spec) = &svc.spec else { continue };
        let ports = spec.ports.as_deref().unwrap_or(&[]);
        let Some(first) = ports.first() else { continue };
        let ip = spec.cluster_ip.clone().unwrap_or_default();
        let prefix = env_name(name);
        out.push((format!("{prefix}_SERVICE_HOST"), ip.clone()));
        let port_var = format!("{prefix}_SERVICE_PORT");
        out.push((port_var.clone(), first.port.to_string()));
        for p in ports {
            if let Some(port_name) = p.name.as_deref().filter(|n| !n.is_empty()) {
                out.push((
                    format!("{port_var}_{}", env_name(port_name)),
                    p.port.to_string(),
                ));
            }
        }
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.clone()
        };
        for (i, p) in ports.iter().enumerate() {
            let protocol = p
                .protocol
                .as_deref()
                .filter(|p| !p.is_empty())
                .unwrap_or("TCP");
            let lower = protocol.to_lowercase();
            let url = format!("{lower}://{host}:{}", p.port);
            if i == 0 {
                out.push((format!("{prefix}_PORT"), url.clone()));
            }
            let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
            out.push((port_prefix.clone(), url));
            out.push((format!("{port_prefix}_PROTO"), lower));
            out.push((format!("{port_prefix}_PORT"), p.port.to_string()));
            out.push((format!("{port_prefix}_ADDR"), ip.clone()));
        }
    }
    out
}

/// `makeEnvVariableName`: upper case, `-` → `_`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Default)]
    struct Objects {
        config_maps: BTreeMap<String, ConfigMapData>,
        secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    }

    impl Lookups for Objects {
        fn secret(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
            self.secrets.get(name).cloned()
        }
        fn config_map(&self, name: &str) -> Option<ConfigMapData> {
            self.config_maps.get(name).cloned()
        }
    }

    fn objects() -> Objects {
        let mut o = Objects::default();
        o.config_maps.insert(
            "cfg".into(),
            ConfigMapData {
                data: [
                    ("LEVEL", "debug"),
                    ("1bad", "x"),
                    ("has=eq", "y"),
                    ("dotted.key", "ok"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
                binary_data: BTreeMap::new(),
            },
        );
        o.secrets.insert(
            "creds".into(),
            [("password".to_owned(), b"s3cret".to_vec())]
                .into_iter()
                .collect(),
        );
        o
    }

    fn services() -> Vec<Service> {
        serde_json::from_value(json!([
            {"metadata": {"name": "kubernetes", "namespace": "default"},
             "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}},
            {"metadata": {"name": "etcd-client", "namespace": "ns"},
             "spec": {"clusterIP": "10.96.0.20", "ports": [{"name": "client", "port": 2379}]}},
            {"metadata": {"name": "headless", "namespace": "ns"},
             "spec": {"clusterIP": "None", "ports": [{"port": 2380}]}},
            {"metadata": {"name": "elsewhere", "namespace": "other"},
             "spec": {"clusterIP": "10.96.0.30", "ports": [{"port": 80}]}}
        ]))
        .unwrap()
    }

    fn pod(container: serde_json::Value, links: Option<bool>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": [container], "enableServiceLinks": links, "nodeName": "n1"}
        }))
        .unwrap()
    }

    fn run(container: serde_json::Value) -> Result<ContainerEnv, EnvError> {
        let p = pod(container, None);
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        let ctx = PodContext {
            pod_ips: vec!["10.244.0.7".into()],
            ..Default::default()
        };
        container_env(&p, &c, &objects(), &ctx, &services())
    }

    fn get<'a>(env: &'a ContainerEnv, name: &str) -> Option<&'a str> {
        env.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn resolves_in_kubelet_order() {
        let env = run(json!({
            "name": "c",
            "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}, {"secretRef": {"name": "creds"}}],
            "env": [
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "URL", "value": "http://$(IP):2379/$(POD)/$(CFG_LEVEL)/$(LATER)/$$(POD)"},
                {"name": "LATER", "value": "x"},
                {"name": "API", "value": "$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
                {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                {"name": "LVL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "LEVEL"}}},
                {"name": "MISSING_OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": true}}},
                {"name": "EMPTY"},
                {"name": "CFG_LEVEL", "value": "override"}
            ]
        }))
        .unwrap();
        assert_eq!(
            get(&env, "URL"),
            Some("http://10.244.0.7:2379/p/debug/$(LATER)/$(POD)")
        );
        assert_eq!(get(&env, "API"), Some("10.96.0.1:443"));
        assert_eq!(get(&env, "PASS"), Some("s3cret"));
        assert_eq!(get(&env, "password"), Some("s3cret"));
        assert_eq!(get(&env, "LVL"), Some("debug"));
        assert_eq!(get(&env, "CFG_dotted.key"), Some("ok"));
        assert_eq!(get(&env, "CFG_LEVEL"), Some("override"));
        assert_eq!(get(&env, "EMPTY"), Some(""));
        assert_eq!(get(&env, "MISSING_OPT"), None);
        // same-namespace service links, not other namespaces', not headless
        assert_eq!(get(&env, "ETCD_CLIENT_SERVICE_HOST"), Some("10.96.0.20"));
        assert_eq!(get(&env, "ETCD_CLIENT_SERVICE_PORT_CLIENT"), Some("2379"));
        assert_eq!(get(&env, "ELSEWHERE_SERVICE_HOST"), None);
        assert_eq!(get(&env, "HEADLESS_SERVICE_HOST"), None);
        // names are unique, env from `env` comes before the service links
        let names: Vec<&str> = env.vars.iter().map(|(k, _)| k.as_str()).collect();
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len());
        assert!(
            names.iter().position(|n| *n == "URL")
                < names.iter().position(|n| *n == "KUBERNETES_SERVICE_HOST")
        );
        assert_eq!(
            env.skipped,
            vec![SkippedKeys {
                source_kind: "configMap",
                namespace: "ns".into(),
                name: "cfg".into(),
                keys: vec!["CFG_has=eq".into()],
            }]
        );
        assert_eq!(
            env.skipped[0].event_message(),
            "Keys [CFG_has=eq] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid environment variable names."
        );
    }

    #[test]
    fn failures_carry_kubelet_messages() {
        let cases = [
            (
                json!({"name": "c", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}),
                "secret \"s\" not found",
            ),
            (
                json!({"name": "c", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "k"}}}]}),
                "couldn't find key k in Secret ns/creds",
            ),
            (
                json!({"name": "c", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]}),
                "configmap \"c\" not found",
            ),
            (
                json!({"name": "c", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}]}),
                "couldn't find key k in ConfigMap ns/cfg",
            ),
            (
                json!({"name": "c", "envFrom": [{"configMapRef": {"name": "gone"}}]}),
                "configmap \"gone\" not found",
            ),
            (
                json!({"name": "c", "envFrom": [{"secretRef": {"name": "gone"}}]}),
                "secret \"gone\" not found",
            ),
            (
                json!({"name": "c", "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}]}),
                "field label not supported: spec.bogus",
            ),
            (
                json!({"name": "c", "env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]}),
                "unsupported container resource : limits.gpu",
            ),
        ];
        for (container, message) in cases {
            let err = run(container).unwrap_err();
            assert_eq!(err.to_string(), message);
            assert_eq!(err.reason(), "CreateContainerConfigError");
        }
        // optional misses are skipped, not errors
        let env = run(json!({"name": "c",
            "envFrom": [{"configMapRef": {"name": "gone", "optional": true}}],
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k", "optional": true}}}]}))
        .unwrap();
        assert_eq!(get(&env, "A"), None);
    }

    #[test]
    fn service_links_follow_enable_service_links() {
        let vars = service_env(&services(), "ns", false);
        let expected: Vec<(String, String)> = [
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(vars, expected);
        let linked = service_env(&services(), "ns", true);
        assert!(linked.contains(&(
            "ETCD_CLIENT_PORT".to_owned(),
            "tcp://10.96.0.20:2379".to_owned()
        )));
        assert_eq!(linked.len(), expected.len() + 8);
    }

    #[test]
    fn process_env_layers_hostname_image_and_pod() {
        let env = ContainerEnv {
            vars: vec![("PATH".into(), "/custom".into()), ("A".into(), "1".into())],
            skipped: vec![],
        };
        let image = ImageEntry {
            env: [
                ("PATH".to_owned(), "/usr/bin".to_owned()),
                ("LANG".to_owned(), "C".to_owned()),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        assert_eq!(
            env.process_env("p", Some(&image)),
            vec![
                ("HOSTNAME".to_owned(), "p".to_owned()),
                ("LANG".to_owned(), "C".to_owned()),
                ("PATH".to_owned(), "/custom".to_owned()),
                ("A".to_owned(), "1".to_owned()),
            ]
        );
    }
}
