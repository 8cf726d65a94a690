//! Port allocation: the first port of the configured range that no branch holds and that a
//! real bind shows free (another program may use it).

use crate::error::refused;
use crate::values::PortRange;
use anyhow::Result;
use std::collections::BTreeSet;
use std::net::{IpAddr, TcpListener};

pub trait PortProbe: Send + Sync {
    fn is_free(&self, addr: IpAddr, port: u16) -> bool;
}

pub struct BindProbe;

impl PortProbe for BindProbe {
    fn is_free(&self, addr: IpAddr, port: u16) -> bool {
        TcpListener::bind((addr, port)).is_ok()
    }
}

#[cfg(any(test, feature = "testing"))]
/// Ports listed are taken, all others free.
#[derive(Default)]
pub struct SimPorts(pub std::sync::Mutex<BTreeSet<u16>>);

#[cfg(any(test, feature = "testing"))]
impl PortProbe for SimPorts {
    fn is_free(&self, _addr: IpAddr, port: u16) -> bool {
        !self.0.lock().unwrap().contains(&port)
    }
}

pub fn allocate(
    range: PortRange,
    addr: IpAddr,
    held: &BTreeSet<u16>,
    probe: &dyn PortProbe,
) -> Result<u16> {
    let mut busy_elsewhere = 0;
    for port in range.iter() {
        if held.contains(&port) {
            continue;
        }
        if probe.is_free(addr, port) {
            return Ok(port);
        }
        busy_elsewhere += 1;
    }
    Err(refused(format!(
        "no free port in {range} on {addr}: {} held by branches, {busy_elsewhere} in use by \
         other programs. Delete unused branches (`db-branch list`) or widen `ports` in the config.",
        held.iter()
            .filter(|p| range.iter().any(|r| r == **p))
            .count()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range() -> PortRange {
        "3400-3403".parse().unwrap()
    }
    const LO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn skips_held_and_busy_ports() {
        let probe = SimPorts::default();
        probe.0.lock().unwrap().insert(3401);
        let held = BTreeSet::from([3400]);
        assert_eq!(allocate(range(), LO, &held, &probe).unwrap(), 3402);
    }

    #[test]
    fn exhausted_range_is_a_clear_refusal() {
        let probe = SimPorts::default();
        probe.0.lock().unwrap().extend([3402, 3403]);
        let held = BTreeSet::from([3400, 3401]);
        let e = allocate(range(), LO, &held, &probe)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("3400-3403") && e.contains("2 held") && e.contains("2 in use"),
            "{e}"
        );
    }

    #[test]
    fn real_bind_sees_a_listener() {
        let l = TcpListener::bind((LO, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!BindProbe.is_free(LO, port));
        drop(l);
    }
}
