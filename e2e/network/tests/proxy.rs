//! The ClusterIP proxy against a real API server. The API server allocates ClusterIPs from
//! 10.96.0.0/16, so the test needs those addresses to be local: it re-runs itself under
//! `unshare --net` (a private network namespace with only `lo`), where its `ServiceAddresses`
//! adds them to `lo` without touching the host, and starts its own API server there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use kube::Api;
use localkube_network::{ServiceAddresses, run_proxy};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const INNER: &str = "LOCALKUBE_NETWORK_TEST_IN_NETNS";

/// True inside the namespace (run the test body); outside, runs this test again inside one and
/// asserts that it passed.
fn in_private_netns(test: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let status = Command::new("unshare")
        .args([
            "--net",
            "--",
            "sh",
            "-c",
            // The backends get non-loopback addresses (on lo, inside this namespace only):
            // kube-apiserver refuses loopback addresses in EndpointSlices ("may not be in the
            // loopback range").
            "ip link set lo up && for i in 2 3 4 5; do ip addr add 10.255.0.$i/32 dev lo; done \
             && exec \"$0\" \"$@\"",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(INNER, "1")
        .status()
        .expect("run unshare --net");
    assert!(
        status.success(),
        "{test} failed inside its network namespace"
    );
    false
}

/// Puts ClusterIPs on `lo` of the private namespace and remembers what it was asked.
#[derive(Default)]
struct LoopbackAddresses {
    calls: Mutex<Vec<String>>,
}

impl LoopbackAddresses {
    fn ip(&self, verb: &str, ip: Ipv4Addr) -> std::io::Result<()> {
        self.calls.lock().unwrap().push(format!("{verb} {ip}"));
        let output = Command::new("ip")
            .args(["addr", verb, &format!("{ip}/32"), "dev", "lo"])
            .output()?;
        if output.status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(
                String::from_utf8_lossy(&output.stderr).into_owned(),
            ))
        }
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl ServiceAddresses for LoopbackAddresses {
    fn add(&self, ip: Ipv4Addr) -> std::io::Result<()> {
        self.ip("add", ip)
    }
    fn remove(&self, ip: Ipv4Addr) -> std::io::Result<()> {
        self.ip("del", ip)
    }
}

fn on_lo(ip: Ipv4Addr) -> bool {
    let out = Command::new("ip")
        .args(["-4", "addr", "show", "dev", "lo"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains(&format!("inet {ip}/32"))
}

/// A backend that greets every connection with its name and closes it.
async fn greeter(addr: SocketAddrV4, name: &'static str) -> tokio::task::JoinHandle<()> {
    let listener = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(name.as_bytes()).await;
        }
    })
}

/// Connects through the proxy and reads what the backend says; `None` when the connection is
/// refused or closed without a greeting.
async fn greeting(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    (!out.is_empty()).then_some(out)
}

fn endpoint(ip: &str, ready: bool) -> serde_json::Value {
    json!({"addresses": [ip], "conditions": {"ready": ready, "serving": ready, "terminating": false}})
}

#[test]
fn proxy_balances_ready_endpoints_and_follows_services() {
    if !in_private_netns("proxy_balances_ready_endpoints_and_follows_services") {
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(proxy_scenario());
}

async fn proxy_scenario() {
    let (_lk, client) = start().await;
    let a = SocketAddrV4::new(Ipv4Addr::new(10, 255, 0, 2), 8080);
    let b = SocketAddrV4::new(Ipv4Addr::new(10, 255, 0, 3), 8080);
    let c = SocketAddrV4::new(Ipv4Addr::new(10, 255, 0, 4), 8080);
    let _backends = [
        greeter(a, "a").await,
        greeter(b, "b").await,
        greeter(c, "c").await,
    ];

    let addresses = Arc::new(LoopbackAddresses::default());
    let proxy = tokio::spawn(run_proxy(client.clone(), addresses.clone()));

    let web = create_service(
        &client,
        json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        }),
    )
    .await;
    let web_ip = cluster_ip(&web);
    let web_addr = SocketAddr::from((web_ip, 80));
    create_slice(&client, json!({
        "metadata": {"name": "web-abc", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [endpoint("10.255.0.2", true), endpoint("10.255.0.3", true), endpoint("10.255.0.4", false)],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }))
    .await;

    eventually(
        "the web ClusterIP to answer",
        Duration::from_secs(30),
        || greeting(web_addr),
    )
    .await;
    assert!(on_lo(web_ip), "the ClusterIP was not added");

    // Round robin over the two ready endpoints; the not-ready one ("c") is never used.
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(greeting(web_addr).await.expect("a greeting"));
    }
    assert!(seen.iter().all(|s| s == "a" || s == "b"), "{seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0] != w[1]),
        "connections must alternate: {seen:?}"
    );

    // An endpoint that refuses (nothing listens on .5) is skipped for the next one.
    set_endpoints(
        &client,
        "web-abc",
        json!([endpoint("10.255.0.2", true), endpoint("10.255.0.5", true)]),
    )
    .await;
    eventually(
        "the refusing endpoint in rotation",
        Duration::from_secs(30),
        || async {
            // Two connections cover both endpoints; both must still reach "a".
            let first = greeting(web_addr).await?;
            let second = greeting(web_addr).await?;
            (first == "a" && second == "a").then_some(())
        },
    )
    .await;

    // No ready endpoint: the connection is closed at once.
    set_endpoints(&client, "web-abc", json!([endpoint("10.255.0.2", false)])).await;
    eventually(
        "connections to be rejected",
        Duration::from_secs(30),
        || async {
            let started = Instant::now();
            let mut stream = TcpStream::connect(web_addr).await.ok()?;
            let mut buffer = Vec::new();
            let read =
                tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut buffer)).await;
            (matches!(read, Ok(Ok(0))) && started.elapsed() < Duration::from_secs(1)).then_some(())
        },
    )
    .await;

    // (The `kubernetes` Service through the proxy is not checked here: with --api-only the
    // API server listens on loopback, which kube-apiserver never publishes as an endpoint. Every
    // e2e scenario checks it: the operators in Pods reach the API only through that Service.)

    // Deleting the Service closes its listener and removes its address.
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), "default")
        .delete("web", &Default::default())
        .await
        .unwrap();
    eventually(
        "the web address to be removed",
        Duration::from_secs(30),
        || async { (!on_lo(web_ip) && TcpStream::connect(web_addr).await.is_err()).then_some(()) },
    )
    .await;
    assert!(
        addresses.calls().contains(&format!("del {web_ip}")),
        "{:?}",
        addresses.calls()
    );
    assert!(on_lo(Ipv4Addr::new(10, 96, 0, 1)));

    // Dropping the proxy removes every address it added.
    proxy.abort();
    let _ = proxy.await;
    assert!(!on_lo(Ipv4Addr::new(10, 96, 0, 1)), "10.96.0.1 left behind");
    assert!(
        addresses.calls().contains(&"del 10.96.0.1".to_owned()),
        "{:?}",
        addresses.calls()
    );
}
