//! Pod networking: own IPs and loopbacks, pod↔pod, host↔pod, pod→host on a Service /32 and on
//! the gateway; nothing left after release.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::*;
use localkube_sandbox::{PodSandbox, SandboxSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A TCP server on 0.0.0.0:2379 that greets every client with `greeting`.
fn greeter(dir: &std::path::Path, greeting: &str) -> localkube_sandbox::ContainerSpec {
    let mut spec = sh(dir, greeting, "");
    spec.argv = argv(&[
        "perl",
        "-MIO::Socket::INET",
        "-e",
        r#"$s = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => 2379, Listen => 5, ReuseAddr => 1) or die "listen: $!";
           print "listening\n"; STDOUT->flush;
           while ($c = $s->accept) { print $c "$ARGV[0]\n"; close $c }"#,
        greeting,
    ]);
    spec
}

/// Reads one line from `ip:port` inside the pod, with bash's /dev/tcp.
async fn fetch_in_pod(pod: &PodSandbox, pid: u32, ip: Ipv4Addr, port: u16) -> String {
    let script = format!("exec 3<>/dev/tcp/{ip}/{port} && head -n1 <&3");
    let out = pod
        .exec(
            pid,
            argv(&["bash", "-c", &script]),
            path_env(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0, "{out:?}");
    out.stdout.trim_end().to_string()
}

async fn fetch_from_host(ip: Ipv4Addr, port: u16) -> Option<String> {
    let mut conn = tokio::net::TcpStream::connect((ip, port)).await.ok()?;
    let mut line = String::new();
    conn.read_to_string(&mut line).await.ok()?;
    Some(line.trim_end().to_string())
}

/// A host listener answering `greeting` to every connection.
async fn host_listener(ip: Ipv4Addr, port: u16, greeting: &'static str) {
    let listener = tokio::net::TcpListener::bind((ip, port)).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let _ = conn.write_all(format!("{greeting}\n").as_bytes()).await;
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_have_own_ips_and_reach_each_other_the_host_and_services() {
    let dir = tempfile::tempdir().unwrap();
    let net = claim().await;
    let n = net.index();
    assert_eq!(net.gateway(), Ipv4Addr::new(10, 244, n, 1));
    assert_eq!(net.pod_cidr(), format!("10.244.{n}.0/24"));
    assert_eq!(net.service_cidr(), format!("10.96.{n}.0/24"));

    let a = net.create_sandbox(sandbox_spec("pod-a")).await.unwrap();
    let b = net.create_sandbox(sandbox_spec("pod-b")).await.unwrap();
    assert_ne!(a.ip(), b.ip());
    for pod in [&a, &b] {
        let [x, y, z, _] = pod.ip().octets();
        assert_eq!((x, y, z), (10, 244, n));
    }
    // Both bind 0.0.0.0:2379: no clash, each pod has its own network stack.
    let mut server_a = a.spawn(greeter(dir.path(), "pod-a")).await.unwrap();
    let mut server_b = b.spawn(greeter(dir.path(), "pod-b")).await.unwrap();

    // Host → pods.
    for (pod, want) in [(&a, "pod-a"), (&b, "pod-b")] {
        let got = eventually(Duration::from_secs(30), "the pod's server", || async {
            fetch_from_host(pod.ip(), 2379).await
        })
        .await;
        assert_eq!(got, want);
    }
    // Pod A → pod B, and each pod's own loopback.
    assert_eq!(
        fetch_in_pod(&a, server_a.pid(), b.ip(), 2379).await,
        "pod-b"
    );
    assert_eq!(
        fetch_in_pod(&a, server_a.pid(), Ipv4Addr::LOCALHOST, 2379).await,
        "pod-a"
    );
    assert_eq!(
        fetch_in_pod(&b, server_b.pid(), Ipv4Addr::LOCALHOST, 2379).await,
        "pod-b"
    );

    // Pod → host listeners on a Service /32 and on the gateway.
    let service_ip = Ipv4Addr::new(10, 96, n, 10);
    net.add_service_ip(service_ip).await.unwrap();
    net.add_service_ip(service_ip).await.unwrap(); // idempotent
    host_listener(service_ip, 8080, "service").await;
    host_listener(net.gateway(), 8081, "gateway").await;
    assert_eq!(
        fetch_in_pod(&b, server_b.pid(), service_ip, 8080).await,
        "service"
    );
    assert_eq!(
        fetch_in_pod(&b, server_b.pid(), net.gateway(), 8081).await,
        "gateway"
    );
    assert_eq!(
        fetch_from_host(service_ip, 8080).await.as_deref(),
        Some("service")
    );
    net.remove_service_ip(service_ip).await.unwrap();
    net.remove_service_ip(service_ip).await.unwrap(); // absent: fine
    assert!(
        net.add_service_ip(Ipv4Addr::new(10, 96, n.wrapping_add(1), 10))
            .await
            .is_err(),
        "another instance's Service CIDR"
    );

    let pause_pids = [a.pid(), b.pid()];
    let container_pids = [server_a.pid(), server_b.pid()];
    let stopped = server_a.stop(Duration::from_secs(5)).await;
    assert_eq!(stopped.exit_code, 143, "perl dies of SIGTERM");
    // B is destroyed with its container still running: destroy kills it.
    a.destroy().await.unwrap();
    b.destroy().await.unwrap();
    assert_eq!(server_b.wait().await.exit_code, 137);
    for pid in pause_pids.into_iter().chain(container_pids) {
        assert!(process_gone(pid), "process {pid} survived destroy");
    }
    assert!(
        links_of(n)
            .iter()
            .all(|l| !l.starts_with(&format!("lkv{n}x"))),
        "veths left after destroy: {:?}",
        links_of(n)
    );
    net.release().await.unwrap();
    assert!(
        links_of(n).is_empty(),
        "left after release: {:?}",
        links_of(n)
    );
}

#[tokio::test]
async fn pod_ips_are_not_reused_at_once_and_come_back_after_destroy() {
    let net = claim().await;
    let first = net.create_sandbox(sandbox_spec("first")).await.unwrap();
    let first_ip = first.ip();
    first.destroy().await.unwrap();
    let second = net
        .create_sandbox(SandboxSpec {
            id: "test_second".into(),
            hostname: "second".into(),
        })
        .await
        .unwrap();
    assert_ne!(second.ip(), first_ip, "round robin: no immediate reuse");
    second.destroy().await.unwrap();
    // The destroyed pods' addresses are free again: all 253 can be allocated.
    let all: Vec<_> = std::iter::from_fn(|| net.allocate_pod_ip().ok()).collect();
    assert_eq!(all.len(), 253);
    assert!(all.contains(&first_ip));
    net.release().await.unwrap();
}
