//! Instance indexes: exclusive, reclaimed from a dead owner, nothing left behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use localkube_sandbox::{Error, HostNetwork};

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().unwrap();
    assert!(status.success(), "ip {args:?}");
}

fn bridge_addrs(index: u8) -> String {
    let out = Command::new("ip")
        .args(["-br", "addr", "show", "dev", &format!("lkbr{index}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The tests that free an index and claim it again use high ones: the other tests (and other
/// localkube instances) claim the first free index from 1 up and would not take them meanwhile.
async fn claim_high(preferred: u8) -> HostNetwork {
    HostNetwork::claim(Some(preferred), shim()).await.unwrap()
}

#[tokio::test]
async fn two_instances_get_different_indexes() {
    let one = claim().await;
    let two = HostNetwork::claim(Some(one.index()), shim()).await.unwrap();
    assert_ne!(
        one.index(),
        two.index(),
        "the preferred index was taken: another one"
    );
    for net in [&one, &two] {
        assert_eq!(links_of(net.index()), [net.bridge_name()]);
        assert!(bridge_addrs(net.index()).contains(&format!("{}/24", net.gateway())));
    }
    assert!(matches!(
        HostNetwork::claim(Some(0), shim()).await,
        Err(Error::InvalidIndex(0))
    ));
    let (a, b) = (one.index(), two.index());
    one.release().await.unwrap();
    two.release().await.unwrap();
    // A released index may be claimed at once by an instance of a test running in parallel,
    // which then has its own bridge there. Links left under a free index are ours: a failure.
    for index in [a, b] {
        if !links_of(index).is_empty() {
            let probe = HostNetwork::claim(Some(index), shim()).await.unwrap();
            let free = probe.index() == index;
            probe.release().await.unwrap();
            assert!(!free, "links of index {index} were left after its release");
        }
    }
}

#[tokio::test]
async fn a_stale_bridge_under_a_free_lock_is_rebuilt() {
    let net = claim_high(240).await;
    let n = net.index();
    net.release().await.unwrap();
    // What a SIGKILLed owner leaves: its bridge (with a Service address) and a pod veth.
    ip(&["link", "add", &format!("lkbr{n}"), "type", "bridge"]);
    ip(&[
        "addr",
        "add",
        &format!("10.96.{n}.77/32"),
        "dev",
        &format!("lkbr{n}"),
    ]);
    ip(&[
        "link",
        "add",
        &format!("lkv{n}x0"),
        "type",
        "veth",
        "peer",
        "name",
        &format!("lkv{n}p"),
    ]);

    let net = HostNetwork::claim(Some(n), shim()).await.unwrap();
    assert_eq!(net.index(), n);
    assert_eq!(links_of(n), [format!("lkbr{n}")], "the old veth is gone");
    let addrs = bridge_addrs(n);
    assert!(addrs.contains(&format!("10.244.{n}.1/24")), "{addrs}");
    assert!(
        !addrs.contains(&format!("10.96.{n}.77")),
        "a new bridge: {addrs}"
    );
    net.release().await.unwrap();
    assert!(links_of(n).is_empty());
}

#[tokio::test]
async fn dropping_the_host_network_deletes_the_bridge() {
    let net = claim().await;
    let n = net.index();
    drop(net);
    assert!(links_of(n).is_empty());
}

/// Not a test on its own: the owner process that `a_killed_owner_leaves_nothing_running` starts
/// (this test binary again, with LK_SANDBOX_OWNER set) and SIGKILLs.
#[tokio::test]
async fn owner_process_role() {
    if std::env::var_os("LK_SANDBOX_OWNER").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let net = claim_high(241).await;
    let pod = net.create_sandbox(sandbox_spec("orphan")).await.unwrap();
    // The background child does not inherit the container's death signal: the pause process
    // must take it down.
    let c = pod
        .spawn(sh(dir.path(), "c", "sleep 1000 & echo $!; wait"))
        .await
        .unwrap();
    let log = dir.path().join("c.log");
    let grandchild = eventually(Duration::from_secs(30), "the child's pid", || async {
        stdout_lines(&log).first().cloned()
    })
    .await;
    println!(
        "OWNER {} {} {} {grandchild}",
        net.index(),
        pod.pid(),
        c.pid()
    );
    // Killed long before; the limit only ends an owner whose test went wrong.
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test]
async fn a_killed_owner_leaves_nothing_running() {
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "owner_process_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LK_SANDBOX_OWNER", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(owner.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // libtest prints "test owner_process_role ... " on the same line first.
        let report = stdout
            .lines()
            .map_while(Result::ok)
            .find_map(|l| Some(l.split_once("OWNER ")?.1.to_string()));
        let _ = tx.send(report);
    });
    let line = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Some(line)) => line,
        other => {
            owner.kill().unwrap();
            panic!("no report from the owner process: {other:?}");
        }
    };
    let fields: Vec<u32> = line
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    let n = u8::try_from(fields[0]).unwrap();
    let pids = &fields[1..];
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|p| !process_gone(*p)));
    assert!(links_of(n).contains(&format!("lkv{n}x0")));

    owner.kill().unwrap();
    owner.wait().unwrap();
    // PR_SET_PDEATHSIG: the pod's processes die with their owner; the veth with the netns.
    eventually(
        Duration::from_secs(30),
        "the pod processes to die",
        || async { pids.iter().all(|p| process_gone(*p)).then_some(()) },
    )
    .await;
    eventually(Duration::from_secs(20), "the veth to go", || async {
        (links_of(n) == [format!("lkbr{n}")]).then_some(())
    })
    .await;
    // The lock died with the owner: the index can be claimed and its bridge is rebuilt.
    let net = HostNetwork::claim(Some(n), shim()).await.unwrap();
    assert_eq!(net.index(), n);
    net.release().await.unwrap();
    assert!(links_of(n).is_empty());
}

fn link_mac(name: &str) -> String {
    let out = Command::new("ip")
        .args(["-br", "link", "show", "dev", name])
        .output()
        .unwrap();
    assert!(out.status.success(), "ip link show {name}");
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    line.split_whitespace().nth(2).unwrap().to_owned()
}

/// The bridge is every pod's gateway: its MAC is in each pod's ARP cache. A Linux bridge
/// without an address of its own takes the lowest of its ports' and changes it as pods come and
/// go; each pod then sends to a MAC nobody has until its ARP entry is probed again (seconds), so
/// DNS, the Service proxy and the API server on the gateway stop answering it meanwhile.
#[tokio::test]
async fn the_gateways_mac_stays_as_pods_come_and_go() {
    let net = claim().await;
    let bridge = net.bridge_name();
    let gateway_mac = link_mac(&bridge);
    // A pod's veth whose MAC is lower than any the kernel picks at random (02:00:00:00:00:01 is
    // the first locally administered one above zero).
    let veth = format!("lkv{}x99999999", net.index());
    let peer = format!("lkp{}x99", net.index());
    ip(&["link", "add", &veth, "type", "veth", "peer", "name", &peer]);
    ip(&["link", "set", &veth, "address", "02:00:00:00:00:01"]);
    ip(&["link", "set", &veth, "master", &bridge]);
    ip(&["link", "set", &veth, "up"]);
    let with_pod = link_mac(&bridge);
    ip(&["link", "del", &veth]);
    let after_pod = link_mac(&bridge);
    net.release().await.unwrap();
    assert_eq!(
        with_pod, gateway_mac,
        "a pod joining changed the gateway's MAC"
    );
    assert_eq!(
        after_pod, gateway_mac,
        "a pod leaving changed the gateway's MAC"
    );
}
