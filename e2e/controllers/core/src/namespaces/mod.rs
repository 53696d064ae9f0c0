//! Namespace deletion (kube-controller-manager `namespace` controller): once a namespace has a
//! deletionTimestamp and still carries the `kubernetes` finalizer, delete every namespaced
//! object of every served kind (custom resources included) with deletecollection, wait until
//! they are really gone (their own finalizers, e.g. an operator's, get to run), keep the
//! namespace's status conditions current, and finally `PUT .../finalize` without `kubernetes`.

pub mod conditions;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use crate::Error;
use crate::discovery::{Served, served};
use crate::runner::{Ctx, done, drain, error_policy};
use conditions::Pass;

/// The finalizer the namespace controller owns.
pub const FINALIZER: &str = "kubernetes";
/// How soon a namespace whose content is still going away is looked at again.
const RECHECK: Duration = Duration::from_secs(1);

pub async fn run_namespaces(client: Client) -> Result<(), Error> {
    let controller = Controller::new(
        Api::<Namespace>::all(client.clone()),
        watcher::Config::default(),
    )
    .run(reconcile, error_policy, Ctx::new(client, ()))
    .boxed();
    drain("namespace", controller).await;
    Ok(())
}

fn spec_finalizers(ns: &Namespace) -> Vec<String> {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default()
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ns.metadata.deletion_timestamp.is_none()
        || !spec_finalizers(&ns).iter().any(|f| f == FINALIZER)
    {
        return done(ns.as_ref(), &ctx, Action::await_change());
    }
    let name = ns.name_any();
    let pass = delete_content(&ctx.client, &name).await;
    let namespaces = Api::<Namespace>::all(ctx.client.clone());
    let current = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let (merged, changed) = conditions::merge(&current, &pass, &now);
    if changed {
        let mut updated = ns.as_ref().clone();
        updated
            .status
            .get_or_insert_with(Default::default)
            .conditions = Some(merged);
        namespaces
            .replace_status(&name, &PostParams::default(), &updated)
            .await?;
    }
    if !pass.is_done() {
        return done(ns.as_ref(), &ctx, Action::requeue(RECHECK));
    }
    let mut finalized = namespaces.get(&name).await?;
    let rest: Vec<String> = spec_finalizers(&finalized)
        .into_iter()
        .filter(|f| f != FINALIZER)
        .collect();
    finalized
        .spec
        .get_or_insert_with(Default::default)
        .finalizers = Some(rest);
    namespaces
        .replace_subresource("finalize", &name, &PostParams::default(), &finalized)
        .await?;
    done(ns.as_ref(), &ctx, Action::await_change())
}

/// One pass: deletecollection for every namespaced kind that has it (list + delete each for
/// those that do not), then count what is left and the finalizers that hold it.
async fn delete_content(client: &Client, ns: &str) -> Pass {
    let mut pass = Pass::default();
    let resources = match served(client).await {
        Ok(r) => r,
        Err(e) => {
            pass.discovery_error = Some(e.to_string());
            return pass;
        }
    };
    for r in resources
        .iter()
        .filter(|r| r.namespaced && r.supports("list"))
    {
        if let Err(e) = delete_all(client, ns, r).await {
            pass.delete_errors.push(e.to_string());
            continue;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &r.ar);
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                if list.items.is_empty() {
                    continue;
                }
                *pass.remaining.entry(r.group_resource()).or_default() += list.items.len();
                for obj in &list.items {
                    for f in obj.finalizers() {
                        *pass.finalizers.entry(f.clone()).or_default() += 1;
                    }
                }
            }
            Err(e) => pass.delete_errors.push(e.to_string()),
        }
    }
    pass
}

async fn delete_all(client: &Client, ns: &str, r: &Served) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &r.ar);
    let dp = DeleteParams::background();
    if r.supports("deletecollection") {
        api.delete_collection(&dp, &ListParams::default()).await?;
        return Ok(());
    }
    if !r.supports("delete") {
        return Ok(());
    }
    for obj in api.list(&ListParams::default()).await? {
        if obj.metadata.deletion_timestamp.is_none() {
            match api.delete(&obj.name_any(), &dp).await {
                Ok(_) => {}
                Err(e) if crate::error::is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}
