//! Cluster DNS against a real API server: answers from live Services and EndpointSlices over
//! UDP and TCP, and glibc's resolver walking the pod search list through it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use hickory_proto::op::{Message, OpCode, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};
use localkube_network::{DnsOptions, run_dns};
use serde_json::json;
use test_support::AddressBlock;
use tokio::net::UdpSocket;

fn headless(name: &str, publish: bool) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": publish,
            "ports": [{"name": "client", "port": 2379}, {"name": "peer", "port": 2380}]},
    })
}

fn slice(name: &str, service: &str, endpoints: serde_json::Value) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": "default",
            "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "client", "port": 2379, "protocol": "TCP"},
                  {"name": "peer", "port": 2380, "protocol": "TCP"}],
    })
}

fn member(ip: &str, hostname: &str, ready: bool) -> serde_json::Value {
    json!({"addresses": [ip], "hostname": hostname,
        "conditions": {"ready": ready, "serving": ready, "terminating": false},
        "targetRef": {"kind": "Pod", "namespace": "default", "name": hostname}})
}

fn assert_negative(message: &Message, code: ResponseCode, what: &str) {
    assert_eq!(message.metadata.response_code, code, "{what}: {message}");
    assert!(message.answers.is_empty(), "{what}: {message}");
    assert!(message.metadata.authoritative, "{what}: not authoritative");
    assert_eq!(
        message.authorities.first().map(Record::record_type),
        Some(RecordType::SOA),
        "{what}: the SOA belongs in the authority section"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_answers_from_live_services_and_endpoint_slices() {
    let (_lk, client) = start().await;
    let block = AddressBlock::claim_checking(&[53], 1).unwrap();
    let server = SocketAddr::from((block.ip(1), 53));
    let dns = tokio::spawn(run_dns(
        client.clone(),
        DnsOptions {
            listen: server,
            cluster_domain: "cluster.local".into(),
            upstream: None,
        },
    ));

    let web = create_service(
        &client,
        json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        }),
    )
    .await;
    let web_ip = cluster_ip(&web);
    create_service(&client, headless("etcd", false)).await;
    create_slice(
        &client,
        slice(
            "etcd-abc",
            "etcd",
            json!([
                member("10.0.0.10", "etcd-0", true),
                member("10.0.0.11", "etcd-1", false),
            ]),
        ),
    )
    .await;
    create_service(&client, headless("etcd-pub", true)).await;
    create_slice(
        &client,
        slice(
            "etcd-pub-abc",
            "etcd-pub",
            json!([member("10.0.1.10", "etcd-0", false)]),
        ),
    )
    .await;

    // ClusterIP A, authoritative, TTL 5.
    let message = eventually("web's A record", Duration::from_secs(30), || async {
        let m = ask_udp(server, "web.default.svc.cluster.local.", RecordType::A).await;
        (!m.answers.is_empty()).then_some(m)
    })
    .await;
    assert_eq!(answers(&message), vec![format!("A {web_ip}")]);
    assert!(message.metadata.authoritative);
    assert_eq!(message.answers[0].ttl, 5);

    // Headless: the ready endpoint only; with publishNotReadyAddresses every endpoint.
    // The slices may reach the DNS cache after the Services (separate watches).
    let etcd = eventually("etcd's A record", Duration::from_secs(30), || async {
        let m = ask_udp(server, "etcd.default.svc.cluster.local.", RecordType::A).await;
        (!m.answers.is_empty()).then_some(m)
    })
    .await;
    assert_eq!(answers(&etcd), vec!["A 10.0.0.10"]);
    // etcd-pub's slice was created after etcd's, so seeing etcd's does not mean it has arrived.
    let published = eventually("etcd-pub's A record", Duration::from_secs(30), || async {
        let m = ask_udp(server, "etcd-pub.default.svc.cluster.local.", RecordType::A).await;
        (!m.answers.is_empty()).then_some(m)
    })
    .await;
    assert_eq!(answers(&published), vec!["A 10.0.1.10"]);
    let published = ask_udp(
        server,
        "etcd-0.etcd-pub.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(answers(&published), vec!["A 10.0.1.10"]);

    // Negative answers need every store's first list (Services, Pods, Namespaces): until then
    // the server answers SERVFAIL, as CoreDNS does. Positive answers above came from the
    // Services alone; CI once asked before the Pods' list had arrived.
    eventually("the DNS cache to sync", Duration::from_secs(30), || async {
        let m = ask_udp(server, "nope.default.svc.cluster.local.", RecordType::A).await;
        (m.metadata.response_code != ResponseCode::ServFail).then_some(())
    })
    .await;

    // Hostname records, and the not-ready peer's name does not exist (as etcd sees it).
    let etcd0 = ask_udp(
        server,
        "etcd-0.etcd.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(answers(&etcd0), vec!["A 10.0.0.10"]);
    let etcd1 = ask_udp(
        server,
        "etcd-1.etcd.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_negative(&etcd1, ResponseCode::NXDomain, "not-ready etcd-1");

    // SRV of a named port: target is the hostname record, its A in the additional section.
    let srv = ask_udp(
        server,
        "_peer._tcp.etcd.default.svc.cluster.local.",
        RecordType::SRV,
    )
    .await;
    assert_eq!(
        answers(&srv),
        vec!["SRV 0 100 2380 etcd-0.etcd.default.svc.cluster.local."]
    );
    assert_eq!(srv.additionals.len(), 1, "{srv}");
    assert_eq!(
        srv.additionals[0].name.to_string(),
        "etcd-0.etcd.default.svc.cluster.local."
    );
    assert_eq!(
        srv.additionals[0].data,
        RData::A(A(Ipv4Addr::new(10, 0, 0, 10)))
    );
    let srv = ask_udp(
        server,
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    )
    .await;
    assert_eq!(
        answers(&srv),
        vec!["SRV 0 100 80 web.default.svc.cluster.local."]
    );

    // NODATA for AAAA of an existing name; NXDOMAIN for unknown names, both with the SOA.
    let aaaa = ask_udp(server, "web.default.svc.cluster.local.", RecordType::AAAA).await;
    assert_negative(&aaaa, ResponseCode::NoError, "AAAA of web");
    let missing = ask_udp(server, "nope.default.svc.cluster.local.", RecordType::A).await;
    assert_negative(&missing, ResponseCode::NXDomain, "unknown service");
    let missing = ask_udp(server, "nope.default.svc.cluster.local.", RecordType::AAAA).await;
    assert_negative(&missing, ResponseCode::NXDomain, "AAAA of unknown service");

    // TCP on the same address.
    let over_tcp = ask_tcp(
        server,
        "etcd-0.etcd.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(answers(&over_tcp), vec!["A 10.0.0.10"]);

    // A change of the EndpointSlice is seen within seconds, without a restart.
    set_endpoints(
        &client,
        "etcd-abc",
        json!([
            member("10.0.0.10", "etcd-0", true),
            member("10.0.0.11", "etcd-1", true),
        ]),
    )
    .await;
    eventually("etcd-1 once ready", Duration::from_secs(30), || async {
        let m = ask_udp(
            server,
            "etcd-1.etcd.default.svc.cluster.local.",
            RecordType::A,
        )
        .await;
        (answers(&m) == ["A 10.0.0.11"]).then_some(())
    })
    .await;
    let etcd = ask_udp(server, "etcd.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&etcd), vec!["A 10.0.0.10", "A 10.0.0.11"]);

    // A deleted Service disappears.
    kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), "default")
        .delete("web", &Default::default())
        .await
        .unwrap();
    eventually("web to be gone", Duration::from_secs(30), || async {
        let m = ask_udp(server, "web.default.svc.cluster.local.", RecordType::A).await;
        (m.metadata.response_code == ResponseCode::NXDomain).then_some(())
    })
    .await;

    // Without an upstream, outside names are refused at once: well within the 5 s a client
    // waits for an answer (the bound leaves a loaded machine seconds).
    let started = Instant::now();
    let outside = ask_udp(server, "example.com.", RecordType::A).await;
    assert_eq!(outside.metadata.response_code, ResponseCode::Refused);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "refusal took {:?}",
        started.elapsed()
    );

    // An answer too big for 512 bytes is truncated over UDP and complete over TCP.
    create_service(&client, headless("big", false)).await;
    let many: Vec<serde_json::Value> = (1..=60)
        .map(|i| member(&format!("10.2.0.{i}"), &format!("big-{i}"), true))
        .collect();
    create_slice(&client, slice("big-abc", "big", json!(many))).await;
    let full = eventually(
        "big's 60 records over TCP",
        Duration::from_secs(30),
        || async {
            let m = ask_tcp(server, "big.default.svc.cluster.local.", RecordType::A).await;
            (m.answers.len() == 60).then_some(m)
        },
    )
    .await;
    assert!(!full.metadata.truncation);
    let udp = ask_udp(server, "big.default.svc.cluster.local.", RecordType::A).await;
    assert!(
        udp.metadata.truncation,
        "60 A records cannot fit 512 bytes: {udp}"
    );
    assert!(udp.answers.len() < 60);

    dns.abort();
}

/// A stand-in for the host's nameserver: `outside.example.` is 192.0.2.7, every other name
/// NXDOMAIN.
async fn fake_upstream(socket: UdpSocket) {
    let mut buffer = vec![0; 4096];
    loop {
        let Ok((len, from)) = socket.recv_from(&mut buffer).await else {
            return;
        };
        let Ok(query) = Message::from_vec(&buffer[..len]) else {
            continue;
        };
        let mut reply = Message::response(query.metadata.id, OpCode::Query);
        reply.metadata.recursion_available = true;
        reply.metadata.recursion_desired = query.metadata.recursion_desired;
        let Some(question) = query.queries.first().cloned() else {
            continue;
        };
        if question.name().to_ascii() == "outside.example." {
            if question.query_type() == RecordType::A {
                reply.add_answer(Record::from_rdata(
                    question.name().clone(),
                    60,
                    RData::A(A(Ipv4Addr::new(192, 0, 2, 7))),
                ));
            }
        } else {
            reply.metadata.response_code = ResponseCode::NXDomain;
        }
        reply.add_query(question);
        let _ = socket.send_to(&reply.to_vec().unwrap(), from).await;
    }
}

/// `getent ahosts <name>` (glibc getaddrinfo: A and AAAA in parallel, the search list walked
/// under ndots:5) in a private mount namespace whose /etc/resolv.conf is a pod's.
fn getent(resolv_conf: &std::path::Path, name: &str) -> (bool, String) {
    let output = Command::new("unshare")
        .args([
            "--mount",
            "--",
            "sh",
            "-c",
            "mount --bind \"$0\" /etc/resolv.conf && exec getent ahosts \"$1\"",
        ])
        .arg(resolv_conf)
        .arg(name)
        .output()
        .expect("run unshare");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glibc_resolves_through_the_search_list_and_forwards_outside_names() {
    let (_lk, client) = start().await;
    let block = AddressBlock::claim_checking(&[53], 2).unwrap();
    let server = SocketAddr::from((block.ip(1), 53));
    let upstream = UdpSocket::bind((block.ip(2), 53)).await.unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    let fake = tokio::spawn(fake_upstream(upstream));
    let dns = tokio::spawn(run_dns(
        client.clone(),
        DnsOptions {
            listen: server,
            cluster_domain: "cluster.local".into(),
            upstream: Some(upstream_addr),
        },
    ));

    create_service(&client, headless("etcd", true)).await;
    create_slice(
        &client,
        slice(
            "etcd-abc",
            "etcd",
            json!([member("10.0.0.10", "etcd-0", false)]),
        ),
    )
    .await;
    create_service(&client, headless("forgot", false)).await;
    create_slice(
        &client,
        slice(
            "forgot-abc",
            "forgot",
            json!([member("10.0.0.20", "forgot-0", false)]),
        ),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let resolv_conf = dir.path().join("resolv.conf");
    std::fs::write(
        &resolv_conf,
        format!(
            "nameserver {}\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 timeout:10\n",
            block.ip(1)
        ),
    )
    .unwrap();

    // The short name a pod of `default` uses for its peer, found through the search list.
    let (ok, out) = eventually(
        "glibc to resolve etcd-0.etcd",
        Duration::from_secs(30),
        || {
            let resolv_conf = resolv_conf.clone();
            async move {
                let (ok, out) =
                    tokio::task::spawn_blocking(move || getent(&resolv_conf, "etcd-0.etcd"))
                        .await
                        .unwrap();
                ok.then_some((ok, out))
            }
        },
    )
    .await;
    assert!(
        ok && out.contains("10.0.0.10") && out.contains("etcd-0.etcd.default.svc.cluster.local"),
        "{out}"
    );

    for name in [
        "etcd-0.etcd.default.svc",
        "etcd-0.etcd.default.svc.cluster.local",
        "etcd",
    ] {
        let (ok, out) = tokio::task::spawn_blocking({
            let resolv_conf = resolv_conf.clone();
            move || getent(&resolv_conf, name)
        })
        .await
        .unwrap();
        assert!(ok && out.contains("10.0.0.10"), "{name}: {out}");
    }

    // Without publishNotReadyAddresses a not-ready peer does not resolve, quickly: every name
    // of the search list answered at once, none left to glibc's 10 s timeout (resolv.conf
    // above; the bound leaves a loaded machine seconds for the processes and the queries).
    let started = Instant::now();
    let (ok, out) = tokio::task::spawn_blocking({
        let resolv_conf = resolv_conf.clone();
        move || getent(&resolv_conf, "forgot-0.forgot")
    })
    .await
    .unwrap();
    assert!(
        !ok,
        "a not-ready endpoint without publishNotReadyAddresses resolved: {out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );

    // Names outside the zone go to the upstream.
    let (ok, out) = tokio::task::spawn_blocking({
        let resolv_conf = resolv_conf.clone();
        move || getent(&resolv_conf, "outside.example")
    })
    .await
    .unwrap();
    assert!(ok && out.contains("192.0.2.7"), "{out}");

    // An ExternalName Service is a CNAME whose target the server looks up upstream.
    create_service(
        &client,
        json!({
            "metadata": {"name": "alias", "namespace": "default"},
            "spec": {"type": "ExternalName", "externalName": "outside.example"},
        }),
    )
    .await;
    let (ok, out) = eventually(
        "glibc to resolve the alias",
        Duration::from_secs(30),
        || {
            let resolv_conf = resolv_conf.clone();
            async move {
                let (ok, out) = tokio::task::spawn_blocking(move || getent(&resolv_conf, "alias"))
                    .await
                    .unwrap();
                ok.then_some((ok, out))
            }
        },
    )
    .await;
    assert!(ok && out.contains("192.0.2.7"), "{out}");
    let cname = ask_udp(server, "alias.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(
        answers(&cname),
        vec!["A 192.0.2.7", "CNAME outside.example."]
    );

    dns.abort();
    fake.abort();
}
