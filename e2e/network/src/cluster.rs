//! The live cluster: kube-runtime reflector stores of Services, EndpointSlices, Pods and
//! Namespaces, like the informers of CoreDNS's `kubernetes` plugin and of kube-proxy. Readers
//! look objects up at query or connection time, so every change is live without a restart.

use std::fmt::Debug;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, PodStatus, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::model::{ClusterView, ServiceView, SliceView, pod_ips, slice_service_name};

/// A stream that must be polled to keep its store current; it yields once per applied event.
pub type Changes = Pin<Box<dyn Stream<Item = ()> + Send>>;

/// Reflects every object of `K` cluster-wide into a store. `strip` drops what no reader needs
/// (managed fields, pod specs) so the cache stays small. Watch errors are logged and retried
/// with kube-runtime's default backoff: the stream never ends.
fn reflect<K>(client: &Client, strip: fn(&mut K)) -> (Store<K>, Changes)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let resource = K::plural(&()).into_owned();
    let changes = watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(strip)
        .reflect(writer)
        .filter_map(move |event| {
            let outcome = match event {
                Ok(_) => Some(()),
                Err(error) => {
                    tracing::warn!(%resource, %error, "watch failed; retrying");
                    None
                }
            };
            std::future::ready(outcome)
        });
    (store, Box::pin(changes))
}

fn strip_metadata<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
}

fn strip_pod(pod: &mut Pod) {
    strip_metadata(pod);
    pod.spec = None;
    pod.status = pod.status.take().map(|status| PodStatus {
        pod_ip: status.pod_ip,
        pod_ips: status.pod_ips,
        ..PodStatus::default()
    });
}

/// Services and their EndpointSlices: what the proxy needs, and the core of DNS.
#[derive(Clone)]
pub struct ServiceCache {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
}

impl ServiceCache {
    /// The cache and its change streams (Services first, then EndpointSlices).
    pub fn start(client: &Client) -> (ServiceCache, Changes, Changes) {
        let (services, service_changes) = reflect::<Service>(client, strip_metadata);
        let (slices, slice_changes) = reflect::<EndpointSlice>(client, strip_metadata);
        (
            ServiceCache { services, slices },
            service_changes,
            slice_changes,
        )
    }

    pub fn services(&self) -> Vec<ServiceView> {
        self.services
            .state()
            .iter()
            .filter_map(|s| ServiceView::from_service(s))
            .collect()
    }

    pub fn service(&self, namespace: &str, name: &str) -> Option<ServiceView> {
        self.services
            .get(&ObjectRef::new(name).within(namespace))
            .and_then(|s| ServiceView::from_service(&s))
    }

    pub fn slices(&self, namespace: &str, service: &str) -> Vec<SliceView> {
        let mut slices = self.slices.state_filter(|slice| {
            slice.namespace().as_deref() == Some(namespace)
                && slice_service_name(slice) == Some(service)
        });
        // Slice order is a hash map's; sort by name so answers and round robin are stable.
        slices.sort_by_key(|slice| slice.name_any());
        slices
            .iter()
            .filter_map(|slice| SliceView::from_slice(slice))
            .collect()
    }

    async fn wait_until_ready(&self) {
        // An error means the writer is gone, i.e. the watch future was dropped: nothing to wait for.
        let _ = self.services.wait_until_ready().await;
        let _ = self.slices.wait_until_ready().await;
    }
}

/// Everything DNS reads: Services, EndpointSlices, Pods (for `pods verified` answers) and
/// Namespaces (an existing namespace's name gives NODATA, an unknown one NXDOMAIN).
#[derive(Clone)]
pub struct DnsCache {
    services: ServiceCache,
    pods: Store<Pod>,
    namespaces: Store<Namespace>,
    synced: Arc<AtomicBool>,
    serial: Arc<AtomicU32>,
}

impl DnsCache {
    /// The cache and the future that keeps it current (it never returns).
    pub fn start(client: &Client) -> (DnsCache, impl Future<Output = ()> + Send + 'static) {
        let (services, service_changes, slice_changes) = ServiceCache::start(client);
        let (pods, pod_changes) = reflect::<Pod>(client, strip_pod);
        let (namespaces, namespace_changes) = reflect::<Namespace>(client, strip_metadata);
        let cache = DnsCache {
            services,
            pods,
            namespaces,
            synced: Arc::new(AtomicBool::new(false)),
            serial: Arc::new(AtomicU32::new(unix_seconds())),
        };
        let run = {
            let cache = cache.clone();
            async move {
                let synced = async {
                    cache.services.wait_until_ready().await;
                    let _ = cache.pods.wait_until_ready().await;
                    let _ = cache.namespaces.wait_until_ready().await;
                    cache.synced.store(true, Ordering::Release);
                    tracing::info!("cluster DNS cache synced");
                };
                let mut changes = futures_util::stream::select_all([
                    service_changes,
                    slice_changes,
                    pod_changes,
                    namespace_changes,
                ]);
                let follow = async {
                    while changes.next().await.is_some() {
                        cache.serial.store(unix_seconds(), Ordering::Release);
                    }
                };
                futures_util::future::join(synced, follow).await;
            }
        };
        (cache, run)
    }

    /// False until every store has its first full list (CoreDNS answers SERVFAIL then).
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// The SOA serial: the Unix time of the last change seen, as CoreDNS's `Serial`.
    pub fn serial(&self) -> u32 {
        self.serial.load(Ordering::Acquire)
    }
}

fn unix_seconds() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
        .unwrap_or(0)
}

impl ClusterView for DnsCache {
    fn namespace_exists(&self, namespace: &str) -> bool {
        self.namespaces.get(&ObjectRef::new(namespace)).is_some()
    }

    fn service(&self, namespace: &str, name: &str) -> Option<ServiceView> {
        self.services.service(namespace, name)
    }

    fn slices(&self, namespace: &str, service: &str) -> Vec<SliceView> {
        self.services.slices(namespace, service)
    }

    fn pod_has_ip(&self, namespace: &str, ip: Ipv4Addr) -> bool {
        self.pods
            .find(|pod| pod.namespace().as_deref() == Some(namespace) && pod_ips(pod).contains(&ip))
            .is_some()
    }
}
