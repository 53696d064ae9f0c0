//! Address blocks and port leases: distinct while held, locked across holders, verified free.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::OpenOptions;
use std::net::{Ipv4Addr, TcpListener};

use test_support::addr::{FIRST_A, GRPC_PORT_OFFSET, LAST_A, port_free};
use test_support::{AddressBlock, PortLease};

#[test]
fn blocks_held_at_once_are_distinct_and_locked() {
    let blocks: Vec<AddressBlock> = (0..8).map(|_| AddressBlock::claim().unwrap()).collect();
    let mut prefixes: Vec<String> = blocks.iter().map(AddressBlock::prefix).collect();
    prefixes.sort();
    prefixes.dedup();
    assert_eq!(prefixes.len(), blocks.len());
    for block in &blocks {
        let ip = block.ip(3);
        let [a, _, _, d] = ip.octets();
        assert!((FIRST_A..=LAST_A).contains(&a), "{ip}");
        assert_eq!(d, 3);
        assert!(ip.to_string().starts_with(&block.prefix()));
        // Another open file description of the lock file cannot take the lock (flock), which is
        // what another test process would see.
        let other = OpenOptions::new()
            .write(true)
            .open(block.lock_path())
            .unwrap();
        assert!(
            other.try_lock().is_err(),
            "{} not locked",
            block.lock_path().display()
        );
        assert!(port_free(block.ip(1), 2379));
    }
    let path = blocks[0].lock_path().to_path_buf();
    drop(blocks);
    let other = OpenOptions::new().write(true).open(&path).unwrap();
    other.try_lock().unwrap();
}

#[test]
fn port_free_sees_a_listener() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(!port_free(Ipv4Addr::LOCALHOST, port));
    drop(listener);
    assert!(port_free(Ipv4Addr::LOCALHOST, port));
}

#[test]
fn port_leases_are_distinct_and_low() {
    let ip = Ipv4Addr::new(127, 0, 0, 1);
    let leases: Vec<PortLease> = (0..4)
        .map(|_| PortLease::claim(5, &[ip]).unwrap())
        .collect();
    let mut bases: Vec<u16> = leases.iter().map(PortLease::base).collect();
    bases.sort();
    bases.dedup();
    assert_eq!(bases.len(), leases.len());
    for lease in &leases {
        assert_eq!(lease.count(), 5);
        assert_eq!(lease.port(5), None);
        for i in 0..5 {
            let p = lease.port(i).unwrap();
            assert!(
                p + GRPC_PORT_OFFSET < 32768,
                "{p} would reach the ephemeral range"
            );
            assert!(port_free(ip, p) && port_free(ip, p + GRPC_PORT_OFFSET));
        }
    }
    assert!(PortLease::claim(11, &[]).is_err());
}
