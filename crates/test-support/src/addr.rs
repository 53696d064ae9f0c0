//! Cross-process allocation of loopback addresses and ports for tests running in parallel.
//!
//! cargo-nextest runs every test in its own process and other programs may hold ports, so an
//! in-process counter is not enough. An [`AddressBlock`] is a `127.A.B.0/24` block (A in
//! 100..=250) held by an exclusive `flock` on `$TMPDIR/etcd-operator-test-locks/127.A.B.lock` for
//! its lifetime (the kernel drops the lock if the process dies), and whose ports were verified
//! free by binding them. A [`PortLease`] is a range of ports unique on the whole machine (SeaweedFS
//! also listens on 127.0.0.1), locked the same way, with each port `P` and its gRPC companion
//! `P + 10000` verified free. Candidates are tried from a pseudo-random starting point.

use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions, TryLockError};
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::HarnessError;

/// Name of the lock directory under `$TMPDIR`.
pub const LOCK_DIR_NAME: &str = "etcd-operator-test-locks";

/// First value of the second octet of claimed blocks.
pub const FIRST_A: u8 = 100;
/// Last value of the second octet of claimed blocks.
pub const LAST_A: u8 = 250;

/// The etcd client and peer ports every member uses on its own address.
pub const ETCD_PORTS: [u16; 2] = [2379, 2380];
/// Host numbers `1..=MAX_HOSTS` of a block are verified free by [`AddressBlock::claim`]
/// (room for a cluster to grow to 9 members).
pub const MAX_HOSTS: u8 = 9;

/// Offset of SeaweedFS's gRPC port from each service port.
pub const GRPC_PORT_OFFSET: u16 = 10000;
/// Lowest base of a [`PortLease`]. Service ports stay in 10000..=19999 and their gRPC companions
/// in 20000..=29999: both below Linux's ephemeral range (32768..), so outgoing connections do
/// not take them, and leases never overlap one another's gRPC ports.
pub const FIRST_PORT: u16 = 10000;
/// Ports in one lease slot (at most this many ports per lease).
pub const PORT_SLOT: u16 = 10;
const PORT_SLOTS: u16 = 1000;

const MAX_ATTEMPTS: usize = 256;

/// The directory holding the lock files: `$TMPDIR/etcd-operator-test-locks`.
pub fn lock_dir() -> PathBuf {
    std::env::temp_dir().join(LOCK_DIR_NAME)
}

/// A claimed block of loopback addresses `127.A.B.1..=127.A.B.254`, held until dropped.
#[derive(Debug)]
pub struct AddressBlock {
    a: u8,
    b: u8,
    lock_path: PathBuf,
    _lock: File,
}

impl AddressBlock {
    /// Claims a block whose etcd ports (2379 and 2380) are free on hosts `1..=9`.
    pub fn claim() -> Result<AddressBlock, HarnessError> {
        Self::claim_checking(&ETCD_PORTS, MAX_HOSTS)
    }

    /// Claims a block whose `ports` are free on hosts `1..=hosts`.
    pub fn claim_checking(ports: &[u16], hosts: u8) -> Result<AddressBlock, HarnessError> {
        let dir = ensure_lock_dir()?;
        let total = usize::from(LAST_A - FIRST_A + 1) * 256;
        let start = (random_u64() % total as u64) as usize;
        let mut last_problem = String::from("no candidate tried");
        for k in 0..MAX_ATTEMPTS {
            let idx = (start + k) % total;
            let a = FIRST_A + (idx / 256) as u8;
            let b = (idx % 256) as u8;
            let lock_path = dir.join(format!("127.{a}.{b}.lock"));
            let Some(lock) = try_lock_file(&lock_path)? else {
                last_problem = format!("{} is held by another test", lock_path.display());
                continue;
            };
            let addrs = (1..=hosts).flat_map(|h| ports.iter().map(move |&p| (h, p)));
            let busy = addrs
                .map(|(h, p)| (Ipv4Addr::new(127, a, b, h), p))
                .find(|&(ip, p)| !port_free(ip, p));
            match busy {
                Some((ip, p)) => {
                    last_problem = format!("{ip}:{p} is in use by another program");
                }
                None => {
                    return Ok(AddressBlock {
                        a,
                        b,
                        lock_path,
                        _lock: lock,
                    });
                }
            }
        }
        Err(HarnessError::Claim {
            what: "a loopback address block 127.A.B.0/24".into(),
            detail: format!(
                "{MAX_ATTEMPTS} candidates tried; last problem: {last_problem} (lock dir {})",
                dir.display()
            ),
        })
    }

    /// The address `127.A.B.host`.
    pub fn ip(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, self.a, self.b, host)
    }

    /// The first three octets, `"127.A.B"`.
    pub fn prefix(&self) -> String {
        format!("127.{}.{}", self.a, self.b)
    }

    /// The lock file held.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }
}

/// A claimed range of TCP ports `base..base + count`, unique on the machine, held until dropped.
/// Each port `P` and `P + 10000` (SeaweedFS's gRPC port) were verified free on 127.0.0.1 and the
/// addresses given.
#[derive(Debug)]
pub struct PortLease {
    base: u16,
    count: u16,
    lock_path: PathBuf,
    _lock: File,
}

impl PortLease {
    /// Claims `count` (1..=10) consecutive ports free on 127.0.0.1 and on every address of `ips`,
    /// together with their `+10000` gRPC companions.
    pub fn claim(count: u16, ips: &[Ipv4Addr]) -> Result<PortLease, HarnessError> {
        if count == 0 || count > PORT_SLOT {
            return Err(HarnessError::InvalidArgument(format!(
                "a port lease holds 1..={PORT_SLOT} ports, not {count}"
            )));
        }
        let dir = ensure_lock_dir()?;
        let mut addrs = vec![Ipv4Addr::LOCALHOST];
        addrs.extend(ips.iter().copied().filter(|ip| *ip != Ipv4Addr::LOCALHOST));
        let start = (random_u64() % u64::from(PORT_SLOTS)) as u16;
        let mut last_problem = String::from("no candidate tried");
        for k in 0..MAX_ATTEMPTS as u16 {
            let slot = (start + k) % PORT_SLOTS;
            let base = FIRST_PORT + slot * PORT_SLOT;
            let lock_path = dir.join(format!("ports-{base}.lock"));
            let Some(lock) = try_lock_file(&lock_path)? else {
                last_problem = format!("{} is held by another test", lock_path.display());
                continue;
            };
            let ports = (base..base + count).flat_map(|p| [p, p + GRPC_PORT_OFFSET]);
            let busy = ports
                .flat_map(|p| addrs.iter().map(move |ip| (*ip, p)))
                .find(|&(ip, p)| !port_free(ip, p));
            match busy {
                Some((ip, p)) => last_problem = format!("{ip}:{p} is in use by another program"),
                None => {
                    return Ok(PortLease {
                        base,
                        count,
                        lock_path,
                        _lock: lock,
                    });
                }
            }
        }
        Err(HarnessError::Claim {
            what: format!("a range of {count} free ports"),
            detail: format!(
                "{MAX_ATTEMPTS} candidates tried; last problem: {last_problem} (lock dir {})",
                dir.display()
            ),
        })
    }

    /// The `i`-th port of the lease (`base + i`); `None` past the end.
    pub fn port(&self, i: u16) -> Option<u16> {
        (i < self.count).then_some(self.base + i)
    }

    /// The first port.
    pub fn base(&self) -> u16 {
        self.base
    }

    /// How many ports the lease holds.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// The lock file held.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }
}

/// True if a TCP listener can be bound on `ip:port` right now.
pub fn port_free(ip: Ipv4Addr, port: u16) -> bool {
    TcpListener::bind((ip, port)).is_ok()
}

fn ensure_lock_dir() -> Result<PathBuf, HarnessError> {
    let dir = lock_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| HarnessError::io(format!("creating lock dir {}", dir.display()), e))?;
    Ok(dir)
}

/// `Some(file)` holding an exclusive lock on `path`, `None` if another holder has it.
fn try_lock_file(path: &Path) -> Result<Option<File>, HarnessError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| HarnessError::io(format!("opening lock file {}", path.display()), e))?;
    match file.try_lock() {
        Ok(()) => {
            // For humans looking at the lock dir; failing to write this is harmless.
            let mut f = &file;
            let _ = file.set_len(0);
            let _ = writeln!(f, "pid {}", std::process::id());
            Ok(Some(file))
        }
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => {
            Err(HarnessError::io(format!("locking {}", path.display()), e))
        }
    }
}

/// A pseudo-random number: std's randomly keyed hasher over time, pid and a counter.
pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// A random lowercase hex string of `len` characters (for tokens and keys).
pub(crate) fn random_hex(len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        s.push_str(&format!("{:016x}", random_u64()));
    }
    s.truncate(len);
    s
}
