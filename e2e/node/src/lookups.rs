//! The API objects a pod's env and volumes read, fetched once per attempt so the pure
//! derivations in `localkube-podspec` can look them up synchronously.
//!
//! As the kubelet does, each Secret and ConfigMap the pod names is read by name: the node's
//! credentials (`system:node:<name>`, Node authorizer) allow reading exactly the objects the pods
//! bound to it reference, never listing a namespace's Secrets.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::ListParams;
use kube::{Api, Client};
use localkube_podspec::{ConfigMapData, Lookups};

pub struct Snapshot {
    secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    config_maps: BTreeMap<String, ConfigMapData>,
    /// Every Service the node knows (for the service-link environment variables).
    pub services: Vec<Service>,
}

/// The Secrets and ConfigMaps a pod names: in its containers' `env` and `envFrom`, and in its
/// `secret`, `configMap` and `projected` volumes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct References {
    pub secrets: BTreeSet<String>,
    pub config_maps: BTreeSet<String>,
}

pub fn references(pod: &Pod) -> References {
    let mut refs = References::default();
    let Some(spec) = &pod.spec else { return refs };
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    for c in containers {
        for env in c.env.iter().flatten() {
            let Some(from) = &env.value_from else {
                continue;
            };
            if let Some(s) = &from.secret_key_ref {
                refs.secrets.insert(s.name.clone());
            }
            if let Some(m) = &from.config_map_key_ref {
                refs.config_maps.insert(m.name.clone());
            }
        }
        for from in c.env_from.iter().flatten() {
            if let Some(s) = &from.secret_ref {
                refs.secrets.insert(s.name.clone());
            }
            if let Some(m) = &from.config_map_ref {
                refs.config_maps.insert(m.name.clone());
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            refs.secrets.insert(name);
        }
        if let Some(m) = &v.config_map {
            refs.config_maps.insert(m.name.clone());
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(s) = &source.secret {
                refs.secrets.insert(s.name.clone());
            }
            if let Some(m) = &source.config_map {
                refs.config_maps.insert(m.name.clone());
            }
        }
    }
    refs
}

impl Snapshot {
    /// Reads what `pod` references (an object that does not exist is absent, and the pod's
    /// env or volume reports it as the kubelet does) and every Service.
    pub async fn fetch(client: &Client, pod: &Pod) -> Result<Snapshot, kube::Error> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let refs = references(pod);
        let secrets_api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        let config_maps_api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let mut secrets = BTreeMap::new();
        for name in refs.secrets {
            if let Some(s) = secrets_api.get_opt(&name).await? {
                let data = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                secrets.insert(name, data);
            }
        }
        let mut config_maps = BTreeMap::new();
        for name in refs.config_maps {
            if let Some(c) = config_maps_api.get_opt(&name).await? {
                let data = ConfigMapData {
                    data: c.data.unwrap_or_default(),
                    binary_data: c
                        .binary_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect(),
                };
                config_maps.insert(name, data);
            }
        }
        let services: Api<Service> = Api::all(client.clone());
        let services = services.list(&ListParams::default()).await?.items;
        Ok(Snapshot {
            secrets,
            config_maps,
            services,
        })
    }
}

impl Lookups for Snapshot {
    fn secret(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
        self.secrets.get(name).cloned()
    }

    fn config_map(&self, name: &str) -> Option<ConfigMapData> {
        self.config_maps.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_place_a_pod_names_a_secret_or_config_map_is_found() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
                "containers": [{
                    "name": "main",
                    "env": [
                        {"name": "A", "value": "plain"},
                        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "k"}}},
                        {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "k"}}},
                        {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                    ],
                    "envFrom": [{"configMapRef": {"name": "all-settings"}}]
                }],
                "volumes": [
                    {"name": "v1", "secret": {"secretName": "tls"}},
                    {"name": "v2", "configMap": {"name": "files"}},
                    {"name": "v3", "emptyDir": {}},
                    {"name": "v4", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt"}},
                        {"secret": {"name": "extra"}}
                    ]}}
                ]
            }
        }))
        .unwrap();
        let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        assert_eq!(
            references(&pod),
            References {
                secrets: set(&["creds", "extra", "init-env", "tls"]),
                config_maps: set(&["all-settings", "files", "kube-root-ca.crt", "settings"]),
            }
        );
    }
}
