//! `make bench` (localkube part): create, get, list and watch-delivery rates through the API
//! server (kube-rs over HTTPS, JSON, RBAC path, etcd transactions) as ratios against the same
//! operations done directly on the same etcd in the same run. With `BENCH_RESULTS` set (as
//! `make bench` does), the rates are appended there for the combined table
//! (`test_support::bench`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use test_support::LocalKube;
use test_support::bench::{self, Figure, Part, Unit};

const N: usize = 500;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"bench": "yes"}}, "data": {"payload": "x".repeat(512)}})).unwrap()
}

struct Row {
    op: &'static str,
    etcd: Duration,
    api: Duration,
}

fn rate(d: Duration) -> f64 {
    N as f64 / d.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let lk = LocalKube::start_with(Path::new(env!("CARGO_BIN_EXE_localkube")))
        .await
        .expect("localkube starts");
    let kubeconfig = Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut etcd = etcd_client::Client::connect([lk.etcd_endpoint().unwrap()], None)
        .await
        .unwrap();
    let value = serde_json::to_vec(&cm("baseline")).unwrap();
    let mut rows = Vec::new();

    // create: a guarded transaction per object vs a POST per object.
    let t = Instant::now();
    for i in 0..N {
        let key = format!("/bench/raw/{i:05}");
        let txn = etcd_client::Txn::new()
            .when(vec![etcd_client::Compare::mod_revision(
                key.as_str(),
                etcd_client::CompareOp::Equal,
                0,
            )])
            .and_then(vec![etcd_client::TxnOp::put(
                key.as_str(),
                value.clone(),
                None,
            )]);
        etcd.txn(txn).await.unwrap();
    }
    let etcd_create = t.elapsed();
    let t = Instant::now();
    for i in 0..N {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:05}")))
            .await
            .unwrap();
    }
    rows.push(Row {
        op: "create",
        etcd: etcd_create,
        api: t.elapsed(),
    });

    // get
    let t = Instant::now();
    for i in 0..N {
        etcd.get(format!("/bench/raw/{i:05}"), None).await.unwrap();
    }
    let etcd_get = t.elapsed();
    let t = Instant::now();
    for i in 0..N {
        api.get(&format!("cm-{i:05}")).await.unwrap();
    }
    rows.push(Row {
        op: "get",
        etcd: etcd_get,
        api: t.elapsed(),
    });

    // list of all N (the rate counts objects listed per second)
    let t = Instant::now();
    let raw = etcd
        .get(
            "/bench/raw/",
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    assert_eq!(raw.kvs().len(), N);
    let etcd_list = t.elapsed();
    let t = Instant::now();
    let listed = api
        .list(&ListParams::default().labels("bench=yes"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), N);
    rows.push(Row {
        op: "list",
        etcd: etcd_list,
        api: t.elapsed(),
    });

    // watch delivery: time from the first write until all N events arrived.
    let mut raw_stream = etcd
        .watch(
            "/bench/watch/",
            Some(etcd_client::WatchOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    let t = Instant::now();
    for i in 0..N {
        etcd.put(format!("/bench/watch/{i:05}"), value.clone(), None)
            .await
            .unwrap();
    }
    let mut seen = 0;
    while seen < N {
        seen += raw_stream.message().await.unwrap().unwrap().events().len();
    }
    let etcd_watch = t.elapsed();
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("bench=watch"), &rv)
        .await
        .unwrap()
        .boxed();
    let t = Instant::now();
    let writer = {
        let api = api.clone();
        tokio::spawn(async move {
            for i in 0..N {
                let mut c = cm(&format!("w-{i:05}"));
                c.metadata.labels = Some([("bench".to_string(), "watch".to_string())].into());
                api.create(&PostParams::default(), &c).await.unwrap();
            }
        })
    };
    let mut seen = 0;
    while seen < N {
        if let WatchEvent::Added(_) = stream.next().await.unwrap().unwrap() {
            seen += 1;
        }
    }
    writer.await.unwrap();
    rows.push(Row {
        op: "watch delivery (incl. writes)",
        etcd: etcd_watch,
        api: t.elapsed(),
    });

    println!("\nlocalkube API server vs raw etcd, {N} ConfigMaps of ~0.6 KiB, same etcd, same run");
    println!(
        "{:<32} {:>14} {:>14} {:>10}",
        "operation", "etcd obj/s", "API obj/s", "API/etcd"
    );
    for r in &rows {
        println!(
            "{:<32} {:>14.0} {:>14.0} {:>10.2}",
            r.op,
            rate(r.etcd),
            rate(r.api),
            rate(r.api) / rate(r.etcd)
        );
    }
    let figures: Vec<Figure> = rows
        .iter()
        .map(|r| {
            Figure::new(
                Part::LocalkubeApi,
                Unit::ObjectsPerSecond,
                (
                    &format!("API server: {}, {N} ConfigMaps of ~0.6 KiB", r.op),
                    rate(r.api),
                ),
                ("the same directly on its etcd", rate(r.etcd)),
            )
        })
        .collect();
    if let Some(path) = bench::record(&figures).expect("recording the figures") {
        println!("figures appended to {}", path.display());
    }
    lk.stop().await.unwrap();
}
