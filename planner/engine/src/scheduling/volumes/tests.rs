use crate::labels::ZONE;
use crate::model::{Operator, Requirement as InputRequirement};
use crate::scheduling::test_util::pod;

use super::*;

fn zone_term(zones: &[&str]) -> NodeSelectorTerm {
    NodeSelectorTerm {
        requirements: vec![InputRequirement {
            key: ZONE.into(),
            operator: Operator::In,
            values: zones.iter().map(|z| z.to_string()).collect(),
            min_values: None,
        }],
    }
}

fn claim(name: &str, class: Option<&str>, volume: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        namespace: "default".into(),
        name: name.into(),
        storage_class: class.map(str::to_string),
        volume_name: volume.map(str::to_string),
    }
}

fn snapshot() -> ClusterSnapshot {
    ClusterSnapshot {
        pvcs: vec![
            claim("bound", Some("gp3"), Some("pv-1")),
            claim("wffc", Some("gp3"), None),
            claim("immediate", Some("fast"), None),
            claim("no-class", None, None),
            claim("lost", Some("gp3"), Some("pv-missing")),
            claim("ghost-class", Some("nope"), None),
            claim("bound-b", Some("gp3"), Some("pv-2")),
        ],
        pvs: vec![
            PersistentVolume {
                name: "pv-1".into(),
                storage_class: Some("gp3".into()),
                node_affinity: vec![zone_term(&["us-east-1a"])],
                node_local: false,
            },
            PersistentVolume {
                name: "pv-2".into(),
                storage_class: Some("gp3".into()),
                node_affinity: vec![zone_term(&["us-east-1b"])],
                node_local: false,
            },
        ],
        storage_classes: vec![
            StorageClass {
                name: "gp3".into(),
                volume_binding_mode: VolumeBindingMode::WaitForFirstConsumer,
                allowed_topologies: vec![zone_term(&["us-east-1a", "us-east-1b"])],
            },
            StorageClass {
                name: "fast".into(),
                volume_binding_mode: VolumeBindingMode::Immediate,
                allowed_topologies: vec![],
            },
        ],
        ..ClusterSnapshot::default()
    }
}

fn with_claims(claims: &[&str]) -> Pod {
    let mut p = pod("db-0", &[]);
    p.volume_claims = claims.iter().map(|c| c.to_string()).collect();
    p
}

#[test]
fn bound_volume_pins_the_pod_to_its_zone() {
    let snap = snapshot();
    let v = VolumeTopology::new(&snap);
    let r = v.requirements(&with_claims(&["bound"])).expect("resolves");
    assert_eq!(r.alternatives.len(), 1);
    assert_eq!(
        r.alternatives[0].to_string(),
        "topology.kubernetes.io/zone In [us-east-1a]"
    );
    assert_eq!(
        r.source,
        "volume of PersistentVolumeClaim default/bound (PersistentVolume pv-1)"
    );
}

#[test]
fn wait_for_first_consumer_class_restricts_zones() {
    let snap = snapshot();
    let r = VolumeTopology::new(&snap)
        .requirements(&with_claims(&["wffc"]))
        .expect("resolves");
    assert_eq!(
        r.alternatives[0].to_string(),
        "topology.kubernetes.io/zone In [us-east-1a us-east-1b]"
    );
}

#[test]
fn several_volumes_intersect_and_conflicts_surface() {
    let snap = snapshot();
    let v = VolumeTopology::new(&snap);
    let r = v
        .requirements(&with_claims(&["wffc", "bound"]))
        .expect("resolves");
    assert_eq!(r.alternatives.len(), 1);
    assert_eq!(
        r.alternatives[0].get(ZONE).and_then(|r| r.single_value()),
        Some("us-east-1a")
    );
    // Two volumes pinned to different zones: the combination allows no zone.
    let r = v
        .requirements(&with_claims(&["bound", "bound-b"]))
        .expect("resolves");
    assert!(r.alternatives[0].first_empty().is_some());
}

#[test]
fn pods_without_claims_are_unconstrained() {
    let snap = snapshot();
    let r = VolumeTopology::new(&snap)
        .requirements(&pod("web", &[]))
        .expect("resolves");
    assert!(r.is_empty());
}

#[test]
fn missing_objects_are_errors_naming_them() {
    let snap = snapshot();
    let v = VolumeTopology::new(&snap);
    let err = |c: &str| {
        v.requirements(&with_claims(&[c]))
            .expect_err("fails")
            .to_string()
    };
    assert_eq!(
        err("nothing"),
        "PersistentVolumeClaim default/nothing is not in the input"
    );
    assert_eq!(
        err("lost"),
        "PersistentVolumeClaim default/lost is bound to PersistentVolume pv-missing, which is not in the input"
    );
    assert_eq!(
        err("no-class"),
        "PersistentVolumeClaim default/no-class is unbound and has no storageClassName"
    );
    assert_eq!(
        err("ghost-class"),
        "StorageClass nope of PersistentVolumeClaim default/ghost-class is not in the input"
    );
    assert!(err("immediate").contains("binds Immediately"));
}

#[test]
fn malformed_volume_affinity_names_the_volume() {
    let mut snap = snapshot();
    snap.pvs[0].node_affinity = vec![NodeSelectorTerm {
        requirements: vec![InputRequirement {
            key: "size".into(),
            operator: Operator::Gt,
            values: vec!["big".into()],
            min_values: None,
        }],
    }];
    let v = VolumeTopology::new(&snap);
    let e = v
        .requirements(&with_claims(&["bound"]))
        .expect_err("malformed");
    assert!(
        e.to_string()
            .starts_with("PersistentVolume pv-1: requirement size Gt"),
        "{e}"
    );
}

fn hostname_and_zone_term(host: &str, zone: Option<&str>) -> NodeSelectorTerm {
    let mut t = NodeSelectorTerm {
        requirements: vec![InputRequirement {
            key: labels::HOSTNAME.into(),
            operator: Operator::In,
            values: vec![host.into()],
            min_values: None,
        }],
    };
    if let Some(z) = zone {
        t.requirements.extend(zone_term(&[z]).requirements);
    }
    t
}

#[test]
fn a_local_volume_keeps_its_zone_but_not_its_hostname() {
    // Karpenter's volumetopology.go: the hostname affinity of a local or hostPath volume is
    // ignored (the node it names may be gone); the rest of the term still applies.
    let mut snap = snapshot();
    snap.pvcs
        .push(claim("local", Some("local"), Some("pv-local")));
    snap.pvcs
        .push(claim("host", Some("local"), Some("pv-host-only")));
    snap.pvcs
        .push(claim("remote", Some("gp3"), Some("pv-remote")));
    snap.pvs.push(PersistentVolume {
        name: "pv-local".into(),
        storage_class: Some("local".into()),
        node_affinity: vec![hostname_and_zone_term("ip-10-0-0-1", Some("us-east-1a"))],
        node_local: true,
    });
    snap.pvs.push(PersistentVolume {
        name: "pv-host-only".into(),
        storage_class: Some("local".into()),
        node_affinity: vec![hostname_and_zone_term("ip-10-0-0-2", None)],
        node_local: true,
    });
    // The same affinity on a volume that is not node-local is kept whole.
    snap.pvs.push(PersistentVolume {
        name: "pv-remote".into(),
        storage_class: Some("gp3".into()),
        node_affinity: vec![hostname_and_zone_term("ip-10-0-0-3", Some("us-east-1b"))],
        node_local: false,
    });
    let v = VolumeTopology::new(&snap);
    let r = v.requirements(&with_claims(&["local"])).expect("resolves");
    assert_eq!(r.alternatives.len(), 1);
    assert_eq!(
        r.alternatives[0].to_string(),
        "topology.kubernetes.io/zone In [us-east-1a]"
    );
    let r = v.requirements(&with_claims(&["host"])).expect("resolves");
    assert!(r.is_empty(), "{:?}", r.alternatives);
    let r = v.requirements(&with_claims(&["remote"])).expect("resolves");
    assert!(
        r.alternatives[0].to_string().contains("ip-10-0-0-3"),
        "{}",
        r.alternatives[0]
    );
}
