//! Host ports as scheduling compares them (kube-scheduler's NodePorts filter): normalised once
//! per pod, NodePool template and node, then checked for conflicts.

use crate::model::HostPort;

/// Host ports with defaults filled in (protocol TCP, empty IP as `0.0.0.0`), port 0 dropped.
pub(crate) fn normalize_ports(ports: &[HostPort]) -> Vec<HostPort> {
    let mut out: Vec<HostPort> = ports
        .iter()
        .filter(|p| p.port != 0)
        .map(|p| HostPort {
            ip: if p.ip.is_empty() {
                "0.0.0.0".to_string()
            } else {
                p.ip.clone()
            },
            protocol: if p.protocol.is_empty() {
                "TCP".to_string()
            } else {
                p.protocol.to_uppercase()
            },
            port: p.port,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The first port of `new` that conflicts with `used`: same port and protocol, and the same IP
/// or either side bound to all addresses.
pub(crate) fn port_conflict<'a>(used: &[HostPort], new: &'a [HostPort]) -> Option<&'a HostPort> {
    new.iter().find(|n| conflicts(used, n))
}

/// [`port_conflict`] against the ports of `used` and `more` together (as if concatenated).
pub(crate) fn port_conflict_either<'a>(
    used: &[HostPort],
    more: &[HostPort],
    new: &'a [HostPort],
) -> Option<&'a HostPort> {
    new.iter()
        .find(|n| conflicts(used, n) || conflicts(more, n))
}

/// Whether `n` conflicts with any port of `used`.
fn conflicts(used: &[HostPort], n: &HostPort) -> bool {
    used.iter().any(|u| {
        u.port == n.port
            && u.protocol == n.protocol
            && (u.ip == n.ip || u.ip == "0.0.0.0" || n.ip == "0.0.0.0")
    })
}
