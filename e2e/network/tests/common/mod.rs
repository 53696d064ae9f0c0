//! Shared by the integration tests: a private API server, a kube-rs client for it, objects
//! from JSON, a raw DNS client and polling with a deadline.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use e2e_harness::LocalKube;
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::{Name, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

pub async fn start() -> (LocalKube, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let lk = LocalKube::start_api_only(
        // The workspace's localkube (built by `cargo nextest run --workspace`), or $LOCALKUBE_BIN.
        &e2e_harness::localkube_binary().expect("the localkube binary"),
    )
    .await
    .expect("start localkube --api-only");
    let client = client_for(&lk, None).await;
    (lk, client)
}

/// A client from the instance's kubeconfig, optionally reaching the API at another URL.
pub async fn client_for(lk: &LocalKube, url: Option<&str>) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    if let Some(url) = url {
        cfg.cluster_url = url.parse().unwrap();
    }
    kube::Client::try_from(cfg).unwrap()
}

pub async fn create_service(client: &kube::Client, service: Value) -> Service {
    let service: Service = serde_json::from_value(service).unwrap();
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &service)
        .await
        .unwrap()
}

pub async fn create_slice(client: &kube::Client, slice: Value) -> EndpointSlice {
    let slice: EndpointSlice = serde_json::from_value(slice).unwrap();
    Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &slice)
        .await
        .unwrap()
}

/// Replaces a slice's endpoints (a merge patch replaces the whole list).
pub async fn set_endpoints(client: &kube::Client, slice: &str, endpoints: Value) {
    Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .patch(
            slice,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "endpoints": endpoints })),
        )
        .await
        .unwrap();
}

pub fn cluster_ip(service: &Service) -> std::net::Ipv4Addr {
    service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_ref())
        .expect("allocated clusterIP")
        .parse()
        .unwrap()
}

/// Polls `probe` until it returns `Some`, failing the test after `within`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn question(name: &str, qtype: RecordType, edns: bool) -> Vec<u8> {
    let mut message = Message::query();
    message.metadata.id = 4242;
    message.metadata.recursion_desired = true;
    message.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if edns {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        message.set_edns(e);
    }
    message.to_vec().unwrap()
}

/// One question over UDP without EDNS (so the 512-byte limit applies), as glibc asks.
pub async fn ask_udp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.connect(server).await.unwrap();
    socket.send(&question(name, qtype, false)).await.unwrap();
    let mut buffer = vec![0; 4096];
    let len = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buffer))
        .await
        .expect("a DNS answer within 5 s")
        .unwrap();
    Message::from_vec(&buffer[..len]).unwrap()
}

pub async fn ask_tcp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let mut stream = TcpStream::connect(server).await.unwrap();
    let bytes = question(name, qtype, true);
    stream
        .write_all(&(bytes.len() as u16).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(&bytes).await.unwrap();
    let len = tokio::time::timeout(Duration::from_secs(5), stream.read_u16())
        .await
        .expect("a DNS answer within 5 s")
        .unwrap();
    let mut buffer = vec![0; usize::from(len)];
    stream.read_exact(&mut buffer).await.unwrap();
    Message::from_vec(&buffer).unwrap()
}

/// The answer section as sorted `type rdata` strings.
pub fn answers(message: &Message) -> Vec<String> {
    let mut out: Vec<String> = message
        .answers
        .iter()
        .map(|r| format!("{} {}", r.record_type(), r.data))
        .collect();
    out.sort();
    out
}
