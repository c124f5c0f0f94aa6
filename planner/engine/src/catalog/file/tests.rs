use super::*;
use crate::catalog::overhead::{GIB, MIB};

const GOOD: &str = r#"
instanceTypes:
  - name: m5.large
    cpu: "2"
    memory: 8Gi
    pods: 29
    architecture: amd64
    labels:
      karpenter.k8s.aws/instance-family: m5
      team: web
    offerings:
      - {zone: us-east-1a, capacityType: on-demand, price: 0.096, available: true}
      - {zone: us-east-1a, capacityType: spot, price: 0.035}
  - name: g5.xlarge
    cpu: 4
    memory: 16Gi
    ephemeralStorage: 100Gi
    os: [linux]
    resources:
      nvidia.com/gpu: "1"
    overhead:
      kubeReserved: {cpu: 80m, memory: 893Mi}
      evictionThreshold: {memory: 100Mi}
    offerings:
      - {zone: us-east-1b, capacityType: on-demand, price: 1.006}
"#;

fn err(text: &str) -> Error {
    parse(text, "catalog.yaml").expect_err("the catalog should be refused")
}

/// A one-type catalog with `field` replaced by `value` (YAML flow syntax).
fn with(field: &str, value: &str) -> String {
    let mut fields = vec![
        ("name", "m5.large".to_string()),
        ("cpu", "\"2\"".to_string()),
        ("memory", "8Gi".to_string()),
        ("pods", "29".to_string()),
        (
            "offerings",
            "[{zone: us-east-1a, capacityType: on-demand, price: 0.096}]".to_string(),
        ),
    ];
    match fields.iter_mut().find(|(k, _)| *k == field) {
        Some(f) => f.1 = value.to_string(),
        None => fields.push((field_name(field), value.to_string())),
    }
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("instanceTypes:\n  - {}\n", body.join("\n    "))
}

fn field_name(field: &str) -> &'static str {
    match field {
        "architecture" => "architecture",
        "os" => "os",
        "resources" => "resources",
        "labels" => "labels",
        "overhead" => "overhead",
        "ephemeralStorage" => "ephemeralStorage",
        "cpus" => "cpus",
        other => panic!("add {other} to field_name"),
    }
}

#[test]
fn good_catalog_parses() {
    let c = parse(GOOD, "catalog.yaml").expect("valid catalog");
    assert_eq!(c.instance_types.len(), 2);
    let m5 = &c.instance_types[0];
    assert_eq!(m5.capacity.cpu, 2000);
    assert_eq!(
        m5.capacity.memory,
        8 * GIB,
        "memory is taken as the node reports it"
    );
    assert_eq!(m5.capacity.ephemeral_storage, 20 * GIB);
    // No overhead given: the AWS formulas on the given cpu and pods.
    assert_eq!(m5.overhead.kube_reserved.cpu, 70);
    assert_eq!(m5.overhead.kube_reserved.memory, 574 * MIB);
    assert_eq!(m5.overhead.eviction_threshold.memory, 100 * MIB);
    assert_eq!(m5.overhead.eviction_threshold.ephemeral_storage, 2 * GIB);
    assert_eq!(m5.labels[labels::INSTANCE_TYPE], "m5.large");
    assert_eq!(m5.labels[labels::ARCH], "amd64");
    assert_eq!(m5.labels[labels::OS], "linux");
    assert_eq!(m5.labels["team"], "web");
    assert_eq!(
        m5.labels[labels::INSTANCE_CATEGORY],
        "m",
        "derived from the name"
    );
    assert_eq!(m5.labels[labels::INSTANCE_CPU], "2");
    assert_eq!(m5.os, ["linux"]);
    assert_eq!(m5.offerings.len(), 2);
    assert!(m5.offerings[1].available, "available defaults to true");
    assert_eq!(m5.offerings[1].price, 0.035);

    let g5 = &c.instance_types[1];
    assert_eq!(g5.capacity.pods, 110, "pods default to the kubelet's 110");
    assert_eq!(g5.capacity.ephemeral_storage, 100 * GIB);
    assert_eq!(g5.capacity.extended["nvidia.com/gpu"], 1000);
    assert_eq!(
        g5.overhead,
        Overhead {
            kube_reserved: Resources::cpu_memory(80, 893 * MIB),
            system_reserved: Resources::default(),
            eviction_threshold: Resources {
                memory: 100 * MIB,
                ..Resources::default()
            },
        },
        "a given overhead is taken as written"
    );
    assert!(c.notes[0].contains("catalog.yaml"));
}

#[test]
fn json_catalog_parses() {
    let json = r#"{"instanceTypes": [{"name": "t", "cpu": "500m", "memory": "1Gi", "pods": 8,
        "architecture": "arm64",
        "offerings": [{"zone": "z1", "capacityType": "spot", "price": 0.01}]}]}"#;
    let c = parse(json, "c.json").expect("valid JSON catalog");
    let t = &c.instance_types[0];
    assert_eq!(t.capacity.cpu, 500);
    assert_eq!(t.labels[labels::ARCH], "arm64");
    assert!(
        !t.labels.contains_key(labels::INSTANCE_CPU),
        "not a whole core"
    );
}

#[test]
fn bad_quantity_names_the_field() {
    let e = err(&with("cpu", "abc"));
    assert_eq!(
        e.to_string(),
        "catalog.yaml: instanceTypes[0].cpu: invalid quantity \"abc\": expected a number"
    );
    let e = err(&with("memory", "-1Gi"));
    assert!(
        e.to_string()
            .starts_with("catalog.yaml: instanceTypes[0].memory: "),
        "{e}"
    );
    let e = err(&with("pods", "2.5"));
    assert!(
        e.to_string()
            .contains("instanceTypes[0].pods: invalid pod count"),
        "{e}"
    );
    let e = err(&with("resources", "{nvidia.com/gpu: lots}"));
    assert!(
        e.to_string()
            .contains("instanceTypes[0].resources.nvidia.com/gpu: invalid quantity"),
        "{e}"
    );
    let e = err(&with("resources", "{cpu: 2}"));
    assert!(
        e.to_string().contains("instanceTypes[0].resources.cpu: "),
        "{e}"
    );
    let e = err(&with("overhead", "{kubeReserved: {memory: 1Qi}}"));
    assert!(
        e.to_string()
            .contains("instanceTypes[0].overhead.kubeReserved.memory: "),
        "{e}"
    );
}

#[test]
fn third_type_error_has_its_index() {
    let text = format!(
        "{}{}",
        GOOD,
        "  - {name: c5.large, cpu: abc, memory: 4Gi, offerings: [{zone: a, capacityType: spot, price: 1}]}\n"
    );
    let e = err(&text);
    assert!(
        e.to_string()
            .starts_with("catalog.yaml: instanceTypes[2].cpu: invalid quantity \"abc\""),
        "{e}"
    );
}

#[test]
fn duplicate_names_are_refused() {
    let text = format!(
        "{}{}",
        GOOD,
        "  - {name: m5.large, cpu: 2, memory: 8Gi, offerings: [{zone: a, capacityType: spot, price: 1}]}\n"
    );
    let e = err(&text);
    assert_eq!(
        e.to_string(),
        "catalog.yaml: instanceTypes[2].name: duplicate instance type \"m5.large\" (also instanceTypes[0])"
    );
}

#[test]
fn bad_prices_are_refused() {
    for price in ["0", "-0.1", ".nan", ".inf"] {
        let offerings = format!("[{{zone: a, capacityType: spot, price: {price}}}]");
        let e = err(&with("offerings", &offerings));
        assert!(
            e.to_string()
                .starts_with("catalog.yaml: instanceTypes[0].offerings[0].price: "),
            "{price}: {e}"
        );
    }
    let e = err(&with(
        "offerings",
        "[{zone: a, capacityType: spot, price: cheap}]",
    ));
    assert!(
        e.to_string()
            .contains("instanceTypes[0].offerings[0].price"),
        "{e}"
    );
}

#[test]
fn empty_or_duplicate_offerings_are_refused() {
    let e = err(&with("offerings", "[]"));
    assert_eq!(
        e.to_string(),
        "catalog.yaml: instanceTypes[0].offerings: must list at least one offering"
    );
    let e = err(&with(
        "offerings",
        "[{zone: a, capacityType: spot, price: 1}, {zone: a, capacityType: spot, price: 2}]",
    ));
    assert!(
        e.to_string()
            .starts_with("catalog.yaml: instanceTypes[0].offerings[1]: duplicate"),
        "{e}"
    );
}

#[test]
fn unknown_capacity_type_is_refused() {
    let e = err(&with(
        "offerings",
        "[{zone: a, capacityType: preemptible, price: 1}]",
    ));
    assert_eq!(
        e.to_string(),
        "catalog.yaml: instanceTypes[0].offerings[0].capacityType: unknown capacity type \
         \"preemptible\" (expected one of spot, on-demand, reserved)"
    );
}

#[test]
fn unknown_architecture_and_os_are_refused() {
    let e = err(&with("architecture", "x86_64"));
    assert_eq!(
        e.to_string(),
        "catalog.yaml: instanceTypes[0].architecture: unknown architecture \"x86_64\" \
         (expected amd64 or arm64)"
    );
    let e = err(&with("os", "[linux, darwin]"));
    assert!(
        e.to_string()
            .starts_with("catalog.yaml: instanceTypes[0].os[1]: unknown operating system"),
        "{e}"
    );
}

#[test]
fn empty_catalog_is_refused() {
    let e = err("instanceTypes: []\n");
    assert_eq!(
        e,
        Error::Empty {
            file: "catalog.yaml".to_string()
        }
    );
    assert!(e.to_string().contains("no instance types"));
    let e = err("{}\n");
    assert!(e.to_string().contains("instanceTypes"), "{e}");
}

#[test]
fn unknown_fields_and_wrong_shapes_name_the_path() {
    let e = err(&with("cpus", "2"));
    assert!(
        e.to_string()
            .starts_with("catalog.yaml: instanceTypes[0].cpus: unknown field `cpus`"),
        "{e}"
    );
    let e = err("instanceTypes:\n  - name: x\n    cpu: 1\n    memory: 1Gi\n    offerings: nope\n");
    assert!(
        e.to_string()
            .starts_with("catalog.yaml: instanceTypes[0].offerings: "),
        "{e}"
    );
    let e = parse("{\"instanceTypes\": [{\"name\": 3}]}", "c.json").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("c.json: instanceTypes[0].name: invalid type"),
        "{e}"
    );
    let e = err("instanceTypes: [\n");
    assert!(e.to_string().starts_with("catalog.yaml: "), "{e}");
}

#[test]
fn labels_cannot_contradict_or_set_offering_labels() {
    let e = err(&with("labels", "{kubernetes.io/arch: arm64}"));
    assert!(
        e.to_string()
            .starts_with("catalog.yaml: instanceTypes[0].labels.kubernetes.io/arch: "),
        "{e}"
    );
    let e = err(&with("labels", "{topology.kubernetes.io/zone: a}"));
    assert!(e.to_string().contains("comes from the offerings"), "{e}");
    let c = parse(
        &with(
            "labels",
            "{karpenter.k8s.aws/instance-generation: 9, gpu: true}",
        ),
        "c.yaml",
    )
    .expect("numbers and booleans are label text");
    let l = &c.instance_types[0].labels;
    assert_eq!(
        l[labels::INSTANCE_GENERATION],
        "9",
        "given labels win over derived ones"
    );
    assert_eq!(l["gpu"], "true");
}
