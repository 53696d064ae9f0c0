//! The `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap of every active namespace
//! (kube-controller-manager `serviceaccount-controller` and `root-ca-cert-publisher`): created
//! when missing, re-created when deleted, and the ConfigMap put back when edited.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use crate::Error;
use crate::runner::{Ctx, done, drain, error_policy};

pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

pub async fn run_service_accounts(client: Client, root_ca_pem: String) -> Result<(), Error> {
    let by_name = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
    let to_namespace = |ns: Option<String>| ns.map(|ns| ObjectRef::<Namespace>::new(&ns));
    let controller = Controller::new(
        Api::<Namespace>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(
        Api::<ServiceAccount>::all(client.clone()),
        by_name(DEFAULT_SERVICE_ACCOUNT),
        move |sa: ServiceAccount| to_namespace(sa.namespace()),
    )
    .watches(
        Api::<ConfigMap>::all(client.clone()),
        by_name(ROOT_CA_CONFIG_MAP),
        move |cm: ConfigMap| to_namespace(cm.namespace()),
    )
    .run(reconcile, error_policy, Ctx::new(client, root_ca_pem))
    .boxed();
    drain("serviceaccount", controller).await;
    Ok(())
}

fn is_active(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_none()
        && ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating")
}

/// The ConfigMap as it must be, or `None` when `current` already is.
pub fn desired_root_ca(current: Option<&ConfigMap>, ns: &str, pem: &str) -> Option<ConfigMap> {
    let data = BTreeMap::from([("ca.crt".to_string(), pem.to_string())]);
    let mut cm = current.cloned().unwrap_or_else(|| ConfigMap {
        metadata: ObjectMeta {
            name: Some(ROOT_CA_CONFIG_MAP.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        ..Default::default()
    });
    let described = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .is_some_and(|d| !d.is_empty());
    if current.is_some() && cm.data.as_ref() == Some(&data) && described {
        return None;
    }
    cm.data = Some(data);
    cm.binary_data = None;
    cm.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
    Some(cm)
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx<String>>) -> Result<Action, Error> {
    if !is_active(&ns) {
        return done(ns.as_ref(), &ctx, Action::await_change());
    }
    let name = ns.name_any();
    let accounts = Api::<ServiceAccount>::namespaced(ctx.client.clone(), &name);
    if accounts.get_opt(DEFAULT_SERVICE_ACCOUNT).await?.is_none() {
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(DEFAULT_SERVICE_ACCOUNT.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        create_tolerating_races(accounts.create(&PostParams::default(), &sa).await)?;
    }
    let maps = Api::<ConfigMap>::namespaced(ctx.client.clone(), &name);
    let current = maps.get_opt(ROOT_CA_CONFIG_MAP).await?;
    if let Some(cm) = desired_root_ca(current.as_ref(), &name, &ctx.extra) {
        if current.is_some() {
            maps.replace(ROOT_CA_CONFIG_MAP, &PostParams::default(), &cm)
                .await?;
        } else {
            create_tolerating_races(maps.create(&PostParams::default(), &cm).await)?;
        }
    }
    done(ns.as_ref(), &ctx, Action::await_change())
}

/// AlreadyExists (someone was faster) and Forbidden (the namespace began terminating) are fine.
fn create_tolerating_races<K>(result: Result<K, kube::Error>) -> Result<(), Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_ca_config_map() {
        let made = desired_root_ca(None, "ns", "PEM").unwrap_or_default();
        assert_eq!(made.metadata.name.as_deref(), Some(ROOT_CA_CONFIG_MAP));
        assert_eq!(
            made.data
                .as_ref()
                .and_then(|d| d.get("ca.crt"))
                .map(String::as_str),
            Some("PEM")
        );
        assert_eq!(
            made.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
                .map(String::as_str),
            Some(DESCRIPTION)
        );
        assert_eq!(desired_root_ca(Some(&made), "ns", "PEM"), None);

        let mut edited = made.clone();
        edited.data = Some(BTreeMap::from([
            ("ca.crt".to_string(), "X".to_string()),
            ("extra".to_string(), "y".to_string()),
        ]));
        edited.metadata.labels = Some(BTreeMap::from([("keep".to_string(), "me".to_string())]));
        let fixed = desired_root_ca(Some(&edited), "ns", "PEM").unwrap_or_default();
        assert_eq!(fixed.data, made.data);
        assert_eq!(fixed.metadata.labels, edited.metadata.labels);

        let mut undescribed = made.clone();
        undescribed.metadata.annotations = None;
        assert!(desired_root_ca(Some(&undescribed), "ns", "PEM").is_some());
    }
}
