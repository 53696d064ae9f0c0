//! Pod IPs of one instance: 10.244.N.2–254 (.1 is the gateway on the bridge). Like the CNI
//! host-local plugin, allocation goes round-robin from the last address handed out, so a pod
//! that just died does not pass its IP (and peers' cached ARP entries / connections) to the next
//! pod at once.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

const FIRST: u8 = 2;
const LAST: u8 = 254;

#[derive(Debug)]
pub(crate) struct Ipam {
    index: u8,
    used: BTreeSet<u8>,
    /// The host octet tried first by the next allocation.
    next: u8,
}

impl Ipam {
    pub(crate) fn new(index: u8) -> Self {
        Ipam {
            index,
            used: BTreeSet::new(),
            next: FIRST,
        }
    }

    pub(crate) fn allocate(&mut self) -> Option<Ipv4Addr> {
        let span = (LAST - FIRST + 1) as u16;
        let start = (self.next - FIRST) as u16;
        let octet = (0..span)
            .map(|i| FIRST + ((start + i) % span) as u8)
            .find(|o| !self.used.contains(o))?;
        self.used.insert(octet);
        self.next = if octet == LAST { FIRST } else { octet + 1 };
        Some(Ipv4Addr::new(10, 244, self.index, octet))
    }

    /// False when `ip` was not allocated here (another instance's, or already released).
    pub(crate) fn release(&mut self, ip: Ipv4Addr) -> bool {
        let [a, b, c, d] = ip.octets();
        (a, b, c) == (10, 244, self.index) && self.used.remove(&d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_and_exhaustion() {
        let mut ipam = Ipam::new(7);
        assert_eq!(ipam.allocate(), Some(Ipv4Addr::new(10, 244, 7, 2)));
        assert_eq!(ipam.allocate(), Some(Ipv4Addr::new(10, 244, 7, 3)));
        assert!(ipam.release(Ipv4Addr::new(10, 244, 7, 2)));
        // .2 is free again but the next pod gets .4: no immediate reuse.
        assert_eq!(ipam.allocate(), Some(Ipv4Addr::new(10, 244, 7, 4)));
        let rest: Vec<_> = std::iter::from_fn(|| ipam.allocate()).collect();
        // .5–.254, then wrap to the freed .2; .3 and .4 stay taken.
        assert_eq!(rest.len(), 250 + 1);
        assert_eq!(rest.last(), Some(&Ipv4Addr::new(10, 244, 7, 2)));
        assert_eq!(ipam.allocate(), None);
        assert!(ipam.release(Ipv4Addr::new(10, 244, 7, 100)));
        assert_eq!(ipam.allocate(), Some(Ipv4Addr::new(10, 244, 7, 100)));
    }

    #[test]
    fn release_ignores_foreign_and_double_release() {
        let mut ipam = Ipam::new(7);
        let ip = ipam.allocate().unwrap();
        assert!(
            !ipam.release(Ipv4Addr::new(10, 244, 8, 2)),
            "another instance"
        );
        assert!(ipam.release(ip));
        assert!(!ipam.release(ip), "twice");
        assert!(!ipam.release(Ipv4Addr::new(10, 244, 7, 1)), "the gateway");
    }
}
