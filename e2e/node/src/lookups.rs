//! The API objects a pod's env and volumes read, fetched once per attempt so the pure
//! derivations in `localkube-podspec` can look them up synchronously.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::ListParams;
use kube::{Api, Client};
use localkube_podspec::{ConfigMapData, Lookups};

pub struct Snapshot {
    secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    config_maps: BTreeMap<String, ConfigMapData>,
    /// Every Service the node knows (for the service-link environment variables).
    pub services: Vec<Service>,
}

impl Snapshot {
    pub async fn fetch(client: &Client, namespace: &str) -> Result<Snapshot, kube::Error> {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let services: Api<Service> = Api::all(client.clone());
        let lp = ListParams::default();
        let secrets = secrets
            .list(&lp)
            .await?
            .items
            .into_iter()
            .map(|s| {
                let data = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                (s.metadata.name.unwrap_or_default(), data)
            })
            .collect();
        let config_maps = config_maps
            .list(&lp)
            .await?
            .items
            .into_iter()
            .map(|c| {
                let data = ConfigMapData {
                    data: c.data.unwrap_or_default(),
                    binary_data: c
                        .binary_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect(),
                };
                (c.metadata.name.unwrap_or_default(), data)
            })
            .collect();
        let services = services.list(&lp).await?.items;
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
