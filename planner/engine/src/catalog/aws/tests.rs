use std::sync::OnceLock;

use super::*;
use crate::catalog::InstanceType;
use crate::catalog::overhead::{GIB, MIB};
use crate::model::Resources;

/// The us-east-1 catalog, built once for all tests of this module.
fn us_east_1() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| builtin("us-east-1").expect("built-in us-east-1 catalog"))
}

fn get(name: &str) -> &'static InstanceType {
    us_east_1()
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing from the built-in catalog"))
}

#[test]
fn m5_large_matches_karpenter_numbers() {
    let it = get("m5.large");
    // 2 vCPU; 8192 MiB − ceil(8192 × 7.5%) = 8192 − 615 MiB; 3 ENIs × (10 − 1) + 2 pods.
    assert_eq!(it.capacity.cpu, 2000);
    assert_eq!(it.capacity.memory, 7577 * MIB);
    assert_eq!(it.capacity.pods, 29);
    assert_eq!(it.capacity.ephemeral_storage, 20 * GIB);
    assert!(it.capacity.extended.is_empty());
    // kube-reserved: 60m + 10m cpu; 11 × 29 + 255 = 574 MiB; 1Gi disk.
    assert_eq!(
        it.overhead.kube_reserved,
        Resources {
            cpu: 70,
            memory: 574 * MIB,
            ephemeral_storage: GIB,
            ..Resources::default()
        }
    );
    assert!(it.overhead.system_reserved.is_zero());
    assert_eq!(it.overhead.eviction_threshold.memory, 100 * MIB);
    assert_eq!(it.overhead.eviction_threshold.ephemeral_storage, 2 * GIB);
    // What Karpenter's instance-type docs list for m5.large: 1930m, 6903Mi, 17Gi, 29 pods.
    let a = it.allocatable();
    assert_eq!(a.cpu, 1930);
    assert_eq!(a.memory, 6903 * MIB);
    assert_eq!(a.ephemeral_storage, 17 * GIB);
    assert_eq!(a.pods, 29);
}

#[test]
fn m5_large_labels_are_karpenters() {
    let l = &get("m5.large").labels;
    let expect = [
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("topology.kubernetes.io/region", "us-east-1"),
        ("karpenter.k8s.aws/instance-family", "m5"),
        ("karpenter.k8s.aws/instance-category", "m"),
        ("karpenter.k8s.aws/instance-generation", "5"),
        ("karpenter.k8s.aws/instance-size", "large"),
        ("karpenter.k8s.aws/instance-cpu", "2"),
        ("karpenter.k8s.aws/instance-cpu-manufacturer", "intel"),
        ("karpenter.k8s.aws/instance-memory", "8192"),
        ("karpenter.k8s.aws/instance-hypervisor", "nitro"),
        (
            "karpenter.k8s.aws/instance-encryption-in-transit-supported",
            "false",
        ),
        ("karpenter.k8s.aws/instance-network-bandwidth", "750"),
        (
            "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
            "3100",
        ),
        ("karpenter.k8s.aws/instance-ebs-bandwidth", "4750"),
    ];
    for (k, v) in expect {
        assert_eq!(l.get(k).map(String::as_str), Some(v), "label {k}");
    }
    assert_eq!(l.len(), expect.len(), "no other labels: {l:?}");
    assert!(!l.contains_key(labels::ZONE) && !l.contains_key(labels::CAPACITY_TYPE));
}

#[test]
fn m5_large_offerings_cover_its_zones_and_estimate_spot() {
    let it = get("m5.large");
    let zones: BTreeSet<&str> = it.offerings.iter().map(|o| o.zone.as_str()).collect();
    let (_, text) = ZONES
        .iter()
        .find(|(r, _)| *r == "us-east-1")
        .expect("zones");
    let raw: RawZones<'_> = serde_json::from_str(text).expect("zones parse");
    let expected: BTreeSet<String> = raw.types["m5.large"]
        .chars()
        .map(|c| format!("us-east-1{c}"))
        .collect();
    assert_eq!(
        zones,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    assert_eq!(
        it.offerings.len(),
        2 * zones.len(),
        "spot and on-demand per zone"
    );
    for o in &it.offerings {
        assert!(o.available);
        match o.capacity_type.as_str() {
            "on-demand" => assert_eq!(o.price, 0.096),
            "spot" => assert_eq!(o.price, 0.0336),
            other => panic!("unexpected capacity type {other}"),
        }
    }
}

use std::collections::BTreeSet;

#[test]
fn graviton_loses_cma_memory_and_is_arm64() {
    let it = get("m6g.large");
    // (8192 − 64) MiB − ceil(8128 × 7.5%) = 8128 − 610 MiB.
    assert_eq!(it.capacity.memory, 7518 * MIB);
    assert_eq!(it.labels[labels::ARCH], "arm64");
    assert_eq!(it.labels[labels::INSTANCE_CPU_MANUFACTURER], "aws");
}

#[test]
fn nvidia_gpu_type_has_gpu_resources_labels_and_efa() {
    let it = get("p4d.24xlarge");
    assert_eq!(it.capacity.extended[RESOURCE_NVIDIA_GPU], 8000);
    // One EFA interface per network card (4 on p4d).
    assert_eq!(it.capacity.extended[RESOURCE_EFA], 4000);
    // The VPC CNI uses the default network card only: 15 ENIs × 49 + 2.
    assert_eq!(it.capacity.pods, 737);
    assert_eq!(it.overhead.kube_reserved.cpu, 310);
    let l = &it.labels;
    assert_eq!(l[labels::INSTANCE_GPU_NAME], "a100");
    assert_eq!(l[labels::INSTANCE_GPU_MANUFACTURER], "nvidia");
    assert_eq!(l[labels::INSTANCE_GPU_COUNT], "8");
    assert_eq!(l[labels::INSTANCE_GPU_MEMORY], "40960");
    assert_eq!(l[labels::INSTANCE_LOCAL_NVME], "8000");
    assert_eq!(l[labels::INSTANCE_NETWORK_BANDWIDTH], "400000");
    assert!(
        it.offerings
            .iter()
            .all(|o| o.capacity_type != "capacity-block")
    );

    let g5 = get("g5.xlarge");
    assert_eq!(g5.capacity.extended[RESOURCE_NVIDIA_GPU], 1000);
    assert!(!g5.capacity.extended.contains_key(RESOURCE_EFA));
    assert_eq!(g5.labels[labels::INSTANCE_GPU_NAME], "a10g");
    assert_eq!(g5.labels[labels::INSTANCE_GPU_MEMORY], "22888");
}

#[test]
fn neuron_habana_and_amd_accelerators_are_resources() {
    let inf2 = get("inf2.xlarge");
    assert_eq!(inf2.capacity.extended[RESOURCE_AWS_NEURON], 1000);
    assert_eq!(inf2.capacity.extended[RESOURCE_AWS_NEURON_CORE], 2000);
    assert_eq!(
        inf2.labels[labels::INSTANCE_ACCELERATOR_NAME],
        "inferentia2"
    );
    assert_eq!(
        inf2.labels[labels::INSTANCE_ACCELERATOR_MANUFACTURER],
        "aws"
    );
    assert_eq!(inf2.labels[labels::INSTANCE_ACCELERATOR_COUNT], "1");
    assert!(!inf2.labels.contains_key(labels::INSTANCE_GPU_NAME));

    let trn1 = get("trn1.32xlarge");
    assert_eq!(trn1.capacity.extended[RESOURCE_AWS_NEURON], 16_000);
    assert_eq!(trn1.capacity.extended[RESOURCE_EFA], 8000);

    let dl1 = get("dl1.24xlarge");
    assert_eq!(dl1.capacity.extended[RESOURCE_HABANA_GAUDI], 8000);
    assert!(!dl1.capacity.extended.contains_key(RESOURCE_NVIDIA_GPU));
    assert_eq!(dl1.labels[labels::INSTANCE_GPU_NAME], "gaudi-hl-205");
    assert_eq!(dl1.labels[labels::INSTANCE_GPU_MANUFACTURER], "habana");

    let amd = us_east_1()
        .instance_types
        .iter()
        .find(|t| {
            t.labels
                .get(labels::INSTANCE_GPU_MANUFACTURER)
                .map(String::as_str)
                == Some("amd")
        })
        .expect("an AMD GPU type (g4ad)");
    assert!(amd.capacity.extended[RESOURCE_AMD_GPU] >= 1000);
}

#[test]
fn bare_metal_has_empty_hypervisor_and_odd_names_parse() {
    assert_eq!(get("c5.metal").labels[labels::INSTANCE_HYPERVISOR], "");
    let u = &get("u-6tb1.112xlarge").labels;
    assert_eq!(u[labels::INSTANCE_CATEGORY], "u");
    assert_eq!(u[labels::INSTANCE_GENERATION], "1");
    assert_eq!(u[labels::INSTANCE_FAMILY], "u-6tb1");
    // Types whose bandwidth is published only as a word get no bandwidth label, like Karpenter.
    let c4 = &get("c4.large").labels;
    assert!(!c4.contains_key(labels::INSTANCE_NETWORK_BANDWIDTH));
}

#[test]
fn name_labels_follow_karpenters_pattern() {
    let get = |name: &str| -> Vec<(&str, String)> { name_labels(name) };
    let labels_of = |name: &str, key: &str| {
        get(name)
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    };
    assert_eq!(
        labels_of("c7i-flex.large", labels::INSTANCE_CATEGORY).as_deref(),
        Some("c")
    );
    assert_eq!(
        labels_of("c7i-flex.large", labels::INSTANCE_GENERATION).as_deref(),
        Some("7")
    );
    assert_eq!(
        labels_of("c7i-flex.large", labels::INSTANCE_FAMILY).as_deref(),
        Some("c7i-flex")
    );
    assert_eq!(
        labels_of("mac2-m1ultra.metal", labels::INSTANCE_GENERATION).as_deref(),
        Some("2")
    );
    assert_eq!(
        labels_of("u7i-12tb.224xlarge", labels::INSTANCE_GENERATION).as_deref(),
        Some("7")
    );
    assert_eq!(
        labels_of("x2iedn.xlarge", labels::INSTANCE_CATEGORY).as_deref(),
        Some("x")
    );
    assert_eq!(
        labels_of("hpc7g.4xlarge", labels::INSTANCE_CATEGORY).as_deref(),
        Some("hpc")
    );
    assert!(
        get("fake-it-3").is_empty(),
        "no dot, no digits after the letters"
    );
    assert!(get("big").is_empty());
}

#[test]
fn whole_catalog_is_sane() {
    let c = us_east_1();
    assert!(
        c.instance_types.len() > 1200,
        "{} types",
        c.instance_types.len()
    );
    let names: Vec<&str> = c.instance_types.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "sorted, unique names"
    );
    for it in &c.instance_types {
        let a = it.allocatable();
        assert!(a.cpu > 0 && a.memory > 0 && a.pods > 0, "{}: {a}", it.name);
        assert!(!it.offerings.is_empty(), "{}", it.name);
        for o in &it.offerings {
            assert!(o.price.is_finite() && o.price > 0.0, "{} {o:?}", it.name);
            assert!(o.zone.starts_with("us-east-1"), "{} {o:?}", it.name);
        }
        assert_eq!(it.labels[labels::INSTANCE_TYPE], it.name);
    }
    assert!(
        c.get("mac1.metal").is_none(),
        "Mac types have no Kubernetes arch"
    );
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("Spot prices are estimated offline")
                && n.contains("--instance-types"))
    );
}

/// Every region of the zone data gives a catalog: its own zones, and prices from its own table
/// or (Karpenter publishes only us-east-1) us-east-1's, with a note saying which.
#[test]
fn every_known_region_has_a_catalog_with_its_zones_and_a_price_note() {
    for region in regions() {
        let c = builtin(region).unwrap_or_else(|e| panic!("{region}: {e}"));
        assert!(
            c.instance_types.len() > 50,
            "{region}: {}",
            c.instance_types.len()
        );
        for it in &c.instance_types {
            for o in &it.offerings {
                assert!(o.zone.starts_with(region), "{region}: {} {o:?}", it.name);
                assert!(o.price > 0.0, "{region}: {} {o:?}", it.name);
            }
            assert_eq!(it.labels[labels::REGION], region, "{}", it.name);
        }
        let notes = c.notes.join("\n");
        if region == PRICED_REGION {
            assert!(notes.contains("us-east-1's built-in table"), "{notes}");
        } else {
            assert!(
                notes.contains(&format!("No built-in on-demand price table for {region}")),
                "{region}: {notes}"
            );
        }
    }
}

#[test]
fn unknown_regions_are_refused_naming_the_known_ones() {
    let err = builtin("mars-1").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("\"mars-1\""), "{msg}");
    assert!(
        msg.contains("us-east-1") && msg.contains("eu-west-1"),
        "{msg}"
    );
    assert_eq!(regions().count(), 30);
}
