use std::collections::BTreeMap;

use proto::v1 as pb;

use super::*;
use crate::fixtures;
use planner::model::{
    self, BudgetNodes, ClusterSnapshot, IntOrPercent, MinValuesPolicy, NodeInclusionPolicy,
    Operator, PlanOptions, PodPhase, PreferencePolicy, Resources, SelectorOperator,
    VolumeBindingMode, WhenUnsatisfiable,
};
use planner::model::{
    LabelSelector, NodeSelectorTerm, PodAffinityTerm, PreferredTerm, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use planner::plan::Plan;

fn rich_snapshot() -> ClusterSnapshot {
    let mut s = fixtures::snapshot(3);
    let sel = LabelSelector {
        match_labels: [("app".to_string(), "web".to_string())].into(),
        match_expressions: vec![model::SelectorExpression {
            key: "tier".into(),
            operator: SelectorOperator::NotIn,
            values: vec!["db".into()],
        }],
    };
    let term = PodAffinityTerm {
        label_selector: Some(sel.clone()),
        namespaces: vec!["default".into()],
        namespace_selector: Some(LabelSelector::default()),
        topology_key: "kubernetes.io/hostname".into(),
        match_label_keys: vec!["pod-template-hash".into()],
        mismatch_label_keys: vec![],
    };
    let p = &mut s.pods[0];
    p.requests.extended.insert("nvidia.com/gpu".into(), 1000);
    p.requests.ephemeral_storage = 1500;
    p.resource_claims = vec!["gpu".into(), "scratch".into()];
    p.required_node_affinity = vec![NodeSelectorTerm {
        requirements: vec![model::Requirement {
            key: "karpenter.k8s.aws/instance-cpu".into(),
            operator: Operator::Gte,
            values: vec!["4".into()],
            min_values: Some(2),
        }],
    }];
    p.preferred_node_affinity = vec![PreferredTerm {
        weight: 50,
        term: NodeSelectorTerm::default(),
    }];
    p.topology_spread = vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "topology.kubernetes.io/zone".into(),
        when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
        label_selector: Some(sel),
        min_domains: Some(3),
        match_label_keys: vec![],
        node_affinity_policy: NodeInclusionPolicy::Ignore,
        node_taints_policy: NodeInclusionPolicy::Honor,
    }];
    p.pod_anti_affinity = vec![term.clone()];
    p.preferred_pod_affinity = vec![WeightedPodAffinityTerm { weight: 10, term }];
    p.host_ports = vec![model::HostPort {
        ip: String::new(),
        protocol: "UDP".into(),
        port: 53,
    }];
    p.owner = Some(model::OwnerRef {
        kind: "ReplicaSet".into(),
        name: "web-abc".into(),
        controller: true,
    });
    p.node_name = Some("ip-10-0-1-5.ec2.internal".into());
    p.phase = PodPhase::Running;
    p.start_time = Some(1_700_000_100);
    s.node_pools[0].limits = Some(Resources::cpu_memory(100_000, 0));
    s.node_pools[0]
        .metadata_annotations
        .insert("karpenter.sh/nodepool-hash".into(), "42".into());
    s.node_pools[0].disruption.budgets.push(model::Budget {
        nodes: BudgetNodes::Count(0),
        reasons: vec!["Drifted".into()],
        schedule: Some("0 9 * * 1-5".into()),
        duration: Some(8 * 3600),
    });
    s.node_classes.push(model::NodeClass {
        name: "tuned".into(),
        ami_family: Some("AL2023".into()),
        kubelet: model::KubeletConfig {
            max_pods: Some(110),
            pods_per_core: None,
            kube_reserved: Some(Resources::cpu_memory(100, 1 << 30)),
            system_reserved: Some(Resources::default()),
            eviction_hard: None,
            eviction_hard_percent: [
                ("memory".to_string(), 7500),
                ("ephemeral-storage".to_string(), 10_000),
            ]
            .into(),
        },
        spec_hash: "123".into(),
        root_volume_size: Some(20 << 30),
        metadata_annotations: [("a".to_string(), "b".to_string())].into(),
        resolved_amis: Some(vec!["ami-0123".into(), "ami-0456".into()]),
        resolved_subnets: Some(vec!["subnet-1".into(), "subnet-2".into()]),
        resolved_security_groups: Some(vec!["sg-1".into()]),
        not_ready: String::new(),
    });
    s.daemon_sets.push(model::DaemonSet {
        namespace: "kube-system".into(),
        name: "aws-node".into(),
        template: model::Pod {
            namespace: "kube-system".into(),
            name: "aws-node".into(),
            uid: "ds-uid".into(),
            requests: Resources {
                pods: 1,
                ..Resources::cpu_memory(25, 0)
            },
            ..model::Pod::default()
        },
    });
    s.pdbs.push(model::PodDisruptionBudget {
        namespace: "default".into(),
        name: "web".into(),
        selector: Some(LabelSelector::default()),
        min_available: Some(IntOrPercent::Percent(50)),
        max_unavailable: None,
        disruptions_allowed: Some(1),
    });
    s.namespaces.push(model::Namespace {
        name: "default".into(),
        labels: BTreeMap::new(),
    });
    s.pvcs.push(model::PersistentVolumeClaim {
        namespace: "default".into(),
        name: "data".into(),
        storage_class: Some("gp3".into()),
        volume_name: Some("pv-1".into()),
    });
    s.pvs.push(model::PersistentVolume {
        name: "pv-1".into(),
        storage_class: Some("gp3".into()),
        node_affinity: vec![NodeSelectorTerm::default()],
        node_local: true,
    });
    s.storage_classes.push(model::StorageClass {
        name: "gp3".into(),
        volume_binding_mode: VolumeBindingMode::WaitForFirstConsumer,
        allowed_topologies: vec![],
    });
    let mut widgets = Resources::default();
    widgets.extended.insert("example.com/widget".into(), 4000);
    for (name, price) in [
        ("preview-price", Some(model::PriceChange::Price(98.32))),
        ("discount", Some(model::PriceChange::Percent(-15.0))),
        ("surcharge", Some(model::PriceChange::Add(0.1))),
        ("widgets", None),
    ] {
        s.node_overlays.push(model::NodeOverlay {
            name: name.into(),
            requirements: vec![model::Requirement {
                key: "node.kubernetes.io/instance-type".into(),
                operator: Operator::In,
                values: vec!["p5e.48xlarge".into()],
                min_values: None,
            }],
            price,
            capacity: if price.is_none() {
                widgets.clone()
            } else {
                Resources::default()
            },
            weight: Some(10),
        });
    }
    let mut chunk = s.pods[0].clone();
    chunk.node_name = None;
    s.capacity_buffers.push(model::CapacityBuffer {
        namespace: "default".into(),
        name: "spare".into(),
        uid: "uid-spare".into(),
        provisioning_strategy: Some("buffer.x-k8s.io/active-capacity".into()),
        pod_template_ref: Some("spare-chunk".into()),
        scalable_ref: None,
        replicas: Some(2),
        percentage: None,
        limits: Some(model::Resources::cpu_memory(4000, 0)),
        template: Some(chunk),
        pod_template_generation: Some(3),
        scalable_replicas: None,
        unresolved: None,
    });
    s.capacity_buffers.push(model::CapacityBuffer {
        namespace: "default".into(),
        name: "lost".into(),
        uid: "uid-lost".into(),
        scalable_ref: Some("Deployment/gone".into()),
        percentage: Some(10),
        unresolved: Some((
            "ScalableRefNotFound".into(),
            "deployments.apps \"gone\" not found".into(),
        )),
        ..model::CapacityBuffer::default()
    });
    s
}

/// NodeOverlays are refused by the CRD's rules, each error naming the field.
#[test]
fn node_overlay_rules_name_the_field() {
    let overlay = |f: fn(&mut pb::NodeOverlay)| {
        let mut o = pb::NodeOverlay {
            name: "o".into(),
            requirements: vec![pb::Requirement {
                key: "node.kubernetes.io/instance-type".into(),
                operator: "In".into(),
                values: vec!["m5.large".into()],
                min_values: None,
            }],
            ..pb::NodeOverlay::default()
        };
        f(&mut o);
        to_model::node_overlay(o, At::ROOT).map(|_| ())
    };
    assert!(overlay(|o| o.price = Some("1.5".into())).is_ok());
    let field = |r: crate::Result<()>| r.expect_err("refused").field().to_string();
    assert_eq!(
        field(overlay(|o| {
            o.price = Some("1".into());
            o.price_adjustment = Some("+1".into());
        })),
        "price_adjustment"
    );
    assert_eq!(field(overlay(|o| o.price = Some("-1".into()))), "price");
    assert_eq!(
        field(overlay(|o| o.price_adjustment = Some("-150%".into()))),
        "price_adjustment"
    );
    assert_eq!(field(overlay(|o| o.weight = Some(0))), "weight");
    assert_eq!(
        field(overlay(|o| {
            o.capacity.insert("cpu".into(), "1".into());
        })),
        "capacity.cpu"
    );
    assert_eq!(
        field(overlay(|o| o.requirements[0].values.clear())),
        "requirements[0].values"
    );
}

#[test]
fn snapshot_round_trips_through_the_wire() {
    let s = rich_snapshot();
    let options = PlanOptions {
        now: 1_700_000_500,
        preference_policy: PreferencePolicy::Ignore,
        min_values_policy: MinValuesPolicy::BestEffort,
        spot_to_spot_consolidation: true,
        no_disruption: false,
        static_capacity: true,
        node_overlay: true,
        capacity_buffer: true,
        reserved_enis: 2,
        vm_memory_overhead_percent: planner::model::VmMemoryOverhead(0.05),
        ignore_dra_requests: false,
    };
    let catalog = CatalogChoice::Inline(fixtures::catalog());
    let req = to_wire::plan_request(&s, &catalog, &options);
    // Through bytes too, as it travels.
    let bytes = prost::Message::encode_to_vec(&req);
    let req: pb::PlanRequest = prost::Message::decode(bytes.as_slice()).expect("decodes");
    let back = to_model::plan_request(req).expect("valid");
    assert_eq!(back.snapshot, s);
    assert_eq!(back.options, options);
    assert_eq!(back.catalog, catalog);
}

/// Moves every quantity of a text map into its milli-unit twin, as k8s-reader sends them.
fn to_milli(text: &mut BTreeMap<String, String>, milli: &mut BTreeMap<String, i64>) {
    for (k, v) in std::mem::take(text) {
        let m = planner::model::quantity::parse_milli(&v).expect("a quantity");
        milli.insert(k, m);
    }
}

fn list_to_milli(l: Option<&mut pb::ResourceList>) {
    if let Some(l) = l {
        to_milli(&mut l.quantities, &mut l.milli);
    }
}

fn pod_to_milli(p: &mut pb::Pod) {
    to_milli(&mut p.requests, &mut p.requests_milli);
}

/// The milli-unit twins (what k8s-reader sends) decode to the model the text quantities decode
/// to: memory, ephemeral-storage and pods rounded up to whole units as the text is.
#[test]
fn milli_units_decode_as_their_quantities_do() {
    let mut s = rich_snapshot();
    s.pods[1].requests.memory = 1; // "1", 1000 milli-units
    s.pods[1].requests.ephemeral_storage = 3;
    let req = to_wire::plan_request(
        &s,
        &CatalogChoice::Inline(fixtures::catalog()),
        &PlanOptions::default(),
    );
    let mut milli = req.clone();
    let snap = milli.snapshot.as_mut().expect("snapshot");
    snap.pods.iter_mut().for_each(pod_to_milli);
    for d in &mut snap.daemon_sets {
        d.template.as_mut().map(pod_to_milli);
    }
    for b in &mut snap.capacity_buffers {
        b.template.as_mut().map(pod_to_milli);
        list_to_milli(b.limits.as_mut());
    }
    for n in &mut snap.nodes {
        to_milli(&mut n.allocatable, &mut n.allocatable_milli);
        to_milli(&mut n.capacity, &mut n.capacity_milli);
    }
    for c in &mut snap.node_claims {
        to_milli(&mut c.requests, &mut c.requests_milli);
        to_milli(&mut c.capacity, &mut c.capacity_milli);
        to_milli(&mut c.allocatable, &mut c.allocatable_milli);
    }
    for p in &mut snap.node_pools {
        list_to_milli(p.limits.as_mut());
    }
    for c in &mut snap.node_classes {
        if let Some(k) = c.kubelet.as_mut() {
            list_to_milli(k.kube_reserved.as_mut());
            list_to_milli(k.system_reserved.as_mut());
            list_to_milli(k.eviction_hard.as_mut());
            for (r, v) in std::mem::take(&mut k.eviction_hard_percent) {
                let p = v.strip_suffix('%').expect("a percentage");
                let m = planner::model::quantity::parse_milli(p).expect("a number");
                k.eviction_hard_percent_milli.insert(r, m);
            }
        }
    }
    for o in &mut snap.node_overlays {
        to_milli(&mut o.capacity, &mut o.capacity_milli);
    }
    assert!(
        snap.pods
            .iter()
            .all(|p| p.requests.is_empty() && !p.requests_milli.is_empty()),
        "every pod's requests in milli-units"
    );
    assert!(snap.node_classes.iter().any(|c| {
        c.kubelet
            .as_ref()
            .is_some_and(|k| !k.eviction_hard_percent_milli.is_empty())
    }));
    let text = to_model::plan_request(req).expect("valid");
    let milli = to_model::plan_request(milli).expect("valid");
    assert_eq!(milli.snapshot, text.snapshot);
    assert_eq!(milli.snapshot, s);
}

/// A resource is given once: in the text map or in its milli-unit twin.
#[test]
fn a_resource_in_both_twins_is_refused_naming_it() {
    let e = error_of(|r| {
        let p = &mut snap(r).pods[17];
        p.requests.insert("cpu".into(), "500m".into());
        p.requests_milli.insert("cpu".into(), 500);
    });
    assert_eq!(e.field(), "snapshot.pods[17].requests_milli.cpu");
    assert!(
        e.reason().contains("snapshot.pods[17].requests.cpu"),
        "names the other twin: {e}"
    );
    // Other resources may be split between the twins.
    let ok = |mutate: fn(&mut pb::Pod)| {
        let mut req = to_wire::plan_request(
            &fixtures::snapshot(2),
            &CatalogChoice::Inline(fixtures::catalog()),
            &PlanOptions::default(),
        );
        mutate(&mut snap(&mut req).pods[0]);
        strict(req)
    };
    ok(|p| {
        p.requests.remove("cpu");
        p.requests_milli.insert("cpu".into(), 250);
    })
    .expect("cpu in milli-units, the rest as text");
}

#[test]
fn a_negative_milli_amount_names_the_pod_and_resource() {
    let e = error_of(|r| {
        let p = &mut snap(r).pods[4];
        p.requests.remove("nvidia.com/gpu");
        p.requests_milli.insert("nvidia.com/gpu".into(), -1000);
    });
    assert_eq!(
        e.field(),
        "snapshot.pods[4].requests_milli[\"nvidia.com/gpu\"]"
    );
    assert!(e.reason().contains("negative"), "{e}");
    let e = error_of(|r| {
        snap(r).node_pools[0].limits = Some(pb::ResourceList {
            milli: [("cpu".to_string(), -1)].into(),
            ..pb::ResourceList::default()
        });
    });
    assert_eq!(e.field(), "snapshot.node_pools[0].limits.milli.cpu");
}

#[test]
fn ignore_dra_requests_unset_is_karpenters_default_true() {
    let mut o = to_wire::options(&PlanOptions::default());
    assert_eq!(o.ignore_dra_requests, Some(true));
    o.ignore_dra_requests = None;
    let back = to_model::options(o, At::ROOT.field("options")).expect("valid");
    assert!(back.ignore_dra_requests);
}

#[test]
fn builtin_catalog_reference_round_trips() {
    let choice = CatalogChoice::Builtin {
        region: "eu-west-1".into(),
    };
    let req = to_wire::plan_request(
        &ClusterSnapshot::default(),
        &choice,
        &PlanOptions::default(),
    );
    assert_eq!(to_model::plan_request(req).expect("valid").catalog, choice);
}

fn error_of(mutate: impl FnOnce(&mut pb::PlanRequest)) -> Error {
    let mut req = to_wire::plan_request(
        &fixtures::snapshot(20),
        &CatalogChoice::Inline(fixtures::catalog()),
        &PlanOptions::default(),
    );
    mutate(&mut req);
    strict(req).expect_err("must be rejected")
}

/// A request decoded the strict way: the snapshot whole ([`to_model::snapshot`] and the rules),
/// so the first error names its path in the request; then the catalog and options.
fn strict(mut req: pb::PlanRequest) -> crate::Result<()> {
    let s = to_model::snapshot(
        req.snapshot.take().unwrap_or_default(),
        crate::At::ROOT.field("snapshot"),
    )?;
    planner::validation::snapshot(&s)?;
    to_model::plan_request(req).map(drop)
}

fn snap(req: &mut pb::PlanRequest) -> &mut pb::ClusterSnapshot {
    req.snapshot.as_mut().expect("snapshot")
}

#[test]
fn bad_quantity_names_the_pod_and_resource() {
    let e = error_of(|r| {
        snap(r).pods[17]
            .requests
            .insert("cpu".into(), "lots".into());
    });
    assert_eq!(e.field(), "snapshot.pods[17].requests.cpu");
    assert!(e.reason().contains("\"lots\""), "{e}");
}

#[test]
fn negative_and_odd_resource_names_are_quoted_in_the_path() {
    let e = error_of(|r| {
        snap(r).pods[2]
            .requests
            .insert("nvidia.com/gpu".into(), "-1".into());
    });
    assert_eq!(e.field(), "snapshot.pods[2].requests[\"nvidia.com/gpu\"]");
    assert!(e.reason().contains("negative"));
}

#[test]
fn unknown_enum_values_list_the_allowed_ones() {
    let e = error_of(|r| {
        snap(r).pods[3].tolerations.push(pb::Toleration {
            key: "k".into(),
            operator: "Equals".into(),
            value: String::new(),
            effect: String::new(),
        });
    });
    assert_eq!(e.field(), "snapshot.pods[3].tolerations[0].operator");
    assert!(e.reason().contains("Equal, Exists"), "{e}");

    let e = error_of(|r| {
        snap(r).node_pools[0].requirements[0].operator = "Within".into();
    });
    assert_eq!(e.field(), "snapshot.node_pools[0].requirements[0].operator");

    let e = error_of(|r| {
        r.options.as_mut().expect("options").preference_policy = "Maybe".into();
    });
    assert_eq!(e.field(), "options.preference_policy");
}

#[test]
fn structural_errors_name_the_field() {
    let e = error_of(|r| snap(r).pods[5].name.clear());
    assert_eq!(e.field(), "snapshot.pods[5].name");
    let e = error_of(|r| {
        snap(r).node_pools[0].requirements[0] = pb::Requirement {
            key: "karpenter.k8s.aws/instance-cpu".into(),
            operator: "Gt".into(),
            values: vec!["four".into()],
            min_values: None,
        };
    });
    assert_eq!(e.field(), "snapshot.node_pools[0].requirements[0].values");
    let e = error_of(|r| {
        if let Some(pb::plan_request::CatalogSource::Catalog(c)) = &mut r.catalog_source {
            c.instance_types[1].offerings[2].price = f64::NAN;
        }
    });
    assert_eq!(e.field(), "catalog.instance_types[1].offerings[2].price");
    let e = error_of(|r| {
        r.catalog_source = Some(pb::plan_request::CatalogSource::CatalogRef(
            pb::CatalogRef::default(),
        ));
    });
    assert_eq!(e.field(), "catalog_ref.region");
    let e = error_of(|r| {
        snap(r).node_pools[0].disruption = Some(pb::Disruption {
            budgets: vec![pb::Budget {
                nodes: "ten".into(),
                ..pb::Budget::default()
            }],
            ..pb::Disruption::default()
        });
    });
    assert_eq!(
        e.field(),
        "snapshot.node_pools[0].disruption.budgets[0].nodes"
    );
}

#[test]
fn plan_round_trips_through_the_wire() {
    let plan = fixtures::plan();
    let resp = to_wire::plan_response(&plan);
    assert_eq!(to_model::plan(resp), plan);
    assert_eq!(
        to_model::plan(to_wire::plan_response(&Plan::default())),
        Plan::default()
    );
}

/// The contract: the proto3 JSON of a PlanResponse (pbjson, default values emitted) is
/// byte for byte the serde JSON of the Plan that `dovetail plan --output json` prints.
#[test]
fn proto3_json_of_the_response_is_the_cli_json() {
    let versioned = Plan {
        catalog_version: Some("0123456789abcdef0123456789abcdef".into()),
        ..fixtures::plan()
    };
    for plan in [fixtures::plan(), Plan::default(), versioned] {
        let resp = to_wire::plan_response(&plan);
        let cli_pretty = serde_json::to_string_pretty(&plan).expect("json");
        let wire_pretty = serde_json::to_string_pretty(&resp).expect("json");
        assert_eq!(wire_pretty, cli_pretty);
        let cli = serde_json::to_string(&plan).expect("json");
        let wire = serde_json::to_string(&resp).expect("json");
        assert_eq!(wire, cli);
        // And the JSON reads back into the proto message unchanged.
        let parsed: pb::PlanResponse = serde_json::from_str(&cli).expect("parses");
        assert_eq!(parsed, resp);
    }
    let json = serde_json::to_string(&to_wire::plan_response(&fixtures::plan())).expect("json");
    assert!(json.contains("\"lowerBoundCostPerHour\":0.031"), "{json}");
    assert!(json.contains("\"replacements\":[]"), "{json}");
    assert!(
        !json.contains("catalogVersion"),
        "absent unless set: {json}"
    );
}

fn live_type(name: &str, vcpu: i64, arch: &str) -> pb::InstanceTypeFacts {
    pb::InstanceTypeFacts {
        name: name.into(),
        vcpu,
        memory_mib: 8192,
        architectures: vec![arch.into()],
        manufacturer: Some("Intel".into()),
        hypervisor: Some("nitro".into()),
        usage_classes: vec!["on-demand".into(), "spot".into()],
        max_network_interfaces: 3,
        ipv4_per_interface: 10,
        offerings: vec![pb::Offering {
            zone: "us-east-1a".into(),
            capacity_type: "spot".into(),
            price: 0.035,
            available: true,
            unpriced: false,
        }],
        ..pb::InstanceTypeFacts::default()
    }
}

#[test]
fn live_catalog_facts_become_karpenter_sized_types() {
    let wire = pb::LiveCatalog {
        region: "us-east-1".into(),
        instance_types: vec![
            live_type("m5.large", 2, "x86_64"),
            live_type("mac1.metal", 12, "x86_64_mac"),
        ],
        notes: vec!["live".into()],
        shifted_zones: vec![],
    };
    let c = to_model::live_catalog(wire, At::ROOT.field("catalog")).expect("valid");
    assert_eq!(c.instance_types.len(), 1, "Mac left out");
    let m5 = &c.instance_types[0];
    assert_eq!(m5.capacity.pods, 29);
    assert_eq!(m5.capacity.memory, 7577 << 20);
    assert_eq!(m5.allocatable().cpu, 1930);
    assert_eq!(m5.labels["karpenter.k8s.aws/instance-family"], "m5");
    assert_eq!(m5.offerings[0].price, 0.035);
    assert!(
        c.notes.iter().any(|n| n.contains("mac1.metal")),
        "{:?}",
        c.notes
    );
    // The same type as the built-in catalog computes it, offerings aside.
    let builtin = planner::catalog::aws::builtin("us-east-1").expect("built-in");
    let b = builtin.get("m5.large").expect("m5.large");
    assert_eq!((&m5.capacity, &m5.overhead), (&b.capacity, &b.overhead));
}

#[test]
fn a_bad_live_catalog_entry_is_named() {
    let check = |f: &dyn Fn(&mut pb::InstanceTypeFacts), field: &str, says: &str| {
        let mut bad = live_type("c5.large", 2, "x86_64");
        f(&mut bad);
        let wire = pb::LiveCatalog {
            region: "us-east-1".into(),
            instance_types: vec![live_type("m5.large", 2, "x86_64"), bad],
            notes: vec![],
            shifted_zones: vec![],
        };
        let e = to_model::live_catalog(wire, At::ROOT.field("catalog")).expect_err("refused");
        assert_eq!(e.field(), field, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    };
    check(
        &|t| t.vcpu = 0,
        "catalog.instance_types[1].vcpu",
        "c5.large",
    );
    check(
        &|t| t.offerings[0].price = f64::NAN,
        "catalog.instance_types[1].offerings[0].price",
        "c5.large",
    );
    check(
        &|t| t.offerings[0].capacity_type = "reserved".into(),
        "catalog.instance_types[1].offerings[0].capacity_type",
        "\"reserved\"",
    );
    check(
        &|t| t.name = "m5.large".into(),
        "catalog.instance_types[1].name",
        "duplicate instance type m5.large",
    );
}

#[test]
fn eviction_percentages_are_checked() {
    let e = error_of(|r| {
        snap(r).node_classes[0].kubelet = Some(pb::KubeletConfig {
            eviction_hard_percent: [("memory".to_string(), "110%".to_string())].into(),
            ..pb::KubeletConfig::default()
        });
    });
    assert_eq!(
        e.field(),
        "snapshot.node_classes[0].kubelet.eviction_hard_percent.memory"
    );
    let e = error_of(|r| {
        snap(r).node_classes[0].root_volume_size = Some("big".into());
    });
    assert_eq!(e.field(), "snapshot.node_classes[0].root_volume_size");
}

#[test]
fn node_pool_weight_absent_is_unset_and_zero_is_refused_as_karpenter_does() {
    // Absent on the wire: the model's 0 ("not set"), and back to absent.
    let mut s = fixtures::snapshot(1);
    s.node_pools[0].weight = 0;
    let req = to_wire::plan_request(&s, &CatalogChoice::Default, &PlanOptions::default());
    assert_eq!(snap(&mut req.clone()).node_pools[0].weight, None);
    let back = to_model::plan_request(req).expect("converts");
    assert_eq!(back.snapshot.node_pools[0].weight, 0);

    // Set: carried as itself.
    s.node_pools[0].weight = 1;
    let req = to_wire::plan_request(&s, &CatalogChoice::Default, &PlanOptions::default());
    assert_eq!(snap(&mut req.clone()).node_pools[0].weight, Some(1));
    let back = to_model::plan_request(req).expect("converts");
    assert_eq!(back.snapshot.node_pools[0].weight, 1);

    // An explicit 0 (which Karpenter's schema refuses, minimum 1) and 101 are refused.
    for w in [0, 101, -1] {
        let e = error_of(|r| snap(r).node_pools[0].weight = Some(w));
        assert_eq!(e.field(), "snapshot.node_pools[0].weight");
        assert_eq!(e.reason(), format!("must be between 1 and 100, got {w}"));
    }
}
