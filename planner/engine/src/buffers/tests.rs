//! CapacityBuffers planned end to end through [`crate::plan`] (the real scheduler), on the
//! consolidation fixtures (`m.large` nodes of 8 vCPU, consolidation on, budgets 100%).

use super::*;
use crate::consolidation::tests::{NOW, catalog, cluster, pod};
use crate::plan::Plan;

const GI: i64 = 1 << 30;

fn template(cpu_m: i64) -> Pod {
    let mut p = pod("template", "unused", cpu_m);
    p.node_name = None;
    p.phase = Default::default();
    p.labels = [("app".to_string(), "spare".to_string())].into();
    p
}

fn buffer(name: &str, replicas: i32, cpu_m: i64) -> CapacityBuffer {
    CapacityBuffer {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        pod_template_ref: Some("spare".into()),
        pod_template_generation: Some(1),
        replicas: Some(replicas),
        template: Some(template(cpu_m)),
        ..CapacityBuffer::default()
    }
}

fn gate_on() -> PlanOptions {
    PlanOptions {
        now: NOW,
        capacity_buffer: true,
        ..PlanOptions::default()
    }
}

fn plan(s: &ClusterSnapshot, o: &PlanOptions) -> Plan {
    crate::plan(s, &catalog(), o)
}

fn no_virtual_pod_named(p: &Plan) {
    let named = |k: &String| k.starts_with("default/capacity-buffer-");
    assert!(
        p.node_claims.iter().all(|c| !c.pods.iter().any(named))
            && p.existing_nodes.iter().all(|e| !e.pods.iter().any(named))
            && p.unschedulable.iter().all(|u| !named(&u.pod))
            && p.disruptions.iter().all(|d| {
                d.replacements.iter().all(|c| !c.pods.iter().any(named))
                    && d.destinations.iter().all(|e| !e.pods.iter().any(named))
            }),
        "a virtual pod is named in {p:#?}"
    );
}

/// kubernetes-sigs/karpenter `pkg/controllers/capacitybuffer/helpers_test.go`
/// (`calculateLimitReplicas`) and `controller.go` `computeReplicas`.
#[test]
fn replicas_follow_karpenters_compute_replicas() {
    let t = template(1000);
    let cpu = |m: i64| Resources {
        cpu: m,
        ..Resources::default()
    };
    let b = |replicas: Option<i32>, pct: Option<i32>, limits: Option<Resources>| CapacityBuffer {
        pod_template_ref: None,
        scalable_ref: Some("Deployment/web".into()),
        scalable_replicas: Some(10),
        replicas,
        percentage: pct,
        limits,
        ..CapacityBuffer::default()
    };
    // "should calculate replicas based on CPU limits": 4 cpu ÷ 1 cpu.
    assert_eq!(desired_replicas(&b(None, None, Some(cpu(4000))), &t), 4);
    // "should floor divide (no rounding up)": 3.5 cpu ÷ 1 cpu.
    assert_eq!(desired_replicas(&b(None, None, Some(cpu(3500))), &t), 3);
    // "should return 0 when limit is smaller than a single pod request".
    assert_eq!(desired_replicas(&b(None, None, Some(cpu(500))), &t), 0);
    // "should take the minimum across multiple resources": 4 cpu, 2 GiB for 1 cpu, 1 GiB.
    let mut t2 = template(1000);
    t2.requests.memory = GI;
    let both = Resources {
        cpu: 4000,
        memory: 2 * GI,
        ..Resources::default()
    };
    assert_eq!(desired_replicas(&b(None, None, Some(both)), &t2), 2);
    // "should return false when no limit resources match pod requests": limits ignored.
    let gpu = Resources {
        extended: [("nvidia.com/gpu".to_string(), 4000)].into(),
        ..Resources::default()
    };
    assert_eq!(desired_replicas(&b(Some(3), None, Some(gpu)), &t), 3);
    // Replicas and percentage: the larger; 20% of 10 is 2.
    assert_eq!(desired_replicas(&b(Some(1), Some(20), None), &t), 2);
    assert_eq!(desired_replicas(&b(Some(5), Some(20), None), &t), 5);
    // A percentage rounds up, and asks for at least one chunk (`calculatePercentageReplicas`).
    assert_eq!(desired_replicas(&b(None, Some(1), None), &t), 1);
    assert_eq!(desired_replicas(&b(None, Some(25), None), &t), 3);
    // Limits cap the size: min(5, 4).
    assert_eq!(desired_replicas(&b(Some(5), None, Some(cpu(4000))), &t), 4);
    // Nothing set: no chunk.
    assert_eq!(desired_replicas(&b(None, None, None), &t), 0);
    // A percentage means nothing for a podTemplateRef.
    let mut by_template = b(None, Some(50), None);
    by_template.pod_template_ref = Some("spare".into());
    assert_eq!(desired_replicas(&by_template, &t), 0);
}

/// `pkg/state/virtualpods/virtualpods_test.go`: names, UIDs, labels, annotations and the
/// lowest priority; PVCs and the node name dropped.
#[test]
fn virtual_pods_are_karpenters() {
    let mut t = template(1000);
    t.volume_claims = vec!["data".into()];
    t.annotations
        .insert(labels::DO_NOT_DISRUPT.into(), "true".into());
    t.priority = 1000;
    let pods = virtual_pods(&buffer("spare", 2, 1000), &t, 2);
    let names: Vec<String> = pods.iter().map(Pod::key).collect();
    assert_eq!(
        names,
        [
            "default/capacity-buffer-spare-1",
            "default/capacity-buffer-spare-2"
        ]
    );
    assert_eq!(pods[1].uid, "uid-spare-2");
    for p in &pods {
        assert!(is_virtual(p));
        assert_eq!(p.priority, i32::MIN);
        assert_eq!(p.labels.get("app").map(String::as_str), Some("spare"));
        assert_eq!(
            p.annotations
                .get(labels::CAPACITY_BUFFER_NAME)
                .map(String::as_str),
            Some("spare")
        );
        assert!(!p.annotations.contains_key(labels::DO_NOT_DISRUPT));
        assert!(p.volume_claims.is_empty() && p.node_name.is_none());
    }
}

/// `pkg/controllers/provisioning/buffers_test.go`: a ready buffer with no room launches
/// capacity (`RequiresNewCapacity`), and no pod is nominated for it.
#[test]
fn a_buffer_with_no_room_launches_capacity_and_names_no_pod() {
    let mut s = cluster(&[]);
    s.capacity_buffers.push(buffer("spare", 2, 1000));
    let p = plan(&s, &gate_on());
    assert_eq!(p.node_claims.len(), 1, "{p:#?}");
    no_virtual_pod_named(&p);
    assert_eq!(p.summary.pending_pods, 0);
    let st = &p.capacity_buffers[0];
    assert!(st.ready_for_provisioning && st.ready_reason == "Resolved");
    assert_eq!(st.replicas, Some(2));
    assert_eq!(st.pod_template, "spare");
    assert_eq!(
        (st.provisioning.as_str(), st.provisioning_reason.as_str()),
        ("False", "RequiresNewCapacity")
    );
    assert_eq!(
        st.provisioning_message,
        "2/2 virtual pods required new capacity, 0 failed"
    );

    // The gate off (Karpenter's default): the buffer is not planned and has no status.
    let off = plan(
        &s,
        &PlanOptions {
            now: NOW,
            ..PlanOptions::default()
        },
    );
    assert!(off.node_claims.is_empty() && off.capacity_buffers.is_empty());
}

/// A buffer that fits on existing capacity is `FitsExistingCapacity`; one whose reference did
/// not resolve is not ready, and one of zero replicas is `BufferEmpty`.
#[test]
fn buffer_conditions_say_where_the_chunks_went() {
    let mut s = cluster(&[&[1000]]);
    s.capacity_buffers.push(buffer("fits", 2, 1000));
    s.capacity_buffers.push(buffer("none", 0, 1000));
    s.capacity_buffers.push(CapacityBuffer {
        template: None,
        unresolved: Some((
            "PodTemplateNotFound".into(),
            "podtemplates \"gone\" not found".into(),
        )),
        ..buffer("broken", 1, 1000)
    });
    let p = plan(&s, &gate_on());
    let by = |n: &str| p.capacity_buffers.iter().find(|b| b.name == n).unwrap();
    assert_eq!(by("fits").provisioning, "True");
    assert_eq!(by("fits").provisioning_reason, "FitsExistingCapacity");
    assert_eq!(
        by("fits").provisioning_message,
        "All 2 virtual pods fit on existing capacity"
    );
    assert_eq!(by("fits").nodes, ["n0"]);
    assert_eq!(by("none").provisioning_reason, "BufferEmpty");
    let broken = by("broken");
    assert!(!broken.ready_for_provisioning && broken.replicas.is_none());
    assert_eq!(broken.ready_reason, "PodTemplateNotFound");
    assert_eq!(broken.provisioning_reason, "NotReadyForProvisioning");
    assert!(p.node_claims.is_empty());
    no_virtual_pod_named(&p);
}

/// A real pending pod gets the room on an existing node before a buffer does, even when the
/// buffer's chunk is larger (Karpenter's queue would place the larger first): the buffer's
/// chunk goes to new capacity instead.
#[test]
fn a_real_pod_takes_existing_room_before_a_buffer() {
    let mut s = cluster(&[&[6000]]);
    let mut real = pod("real", "n0", 1500);
    real.node_name = None;
    real.phase = Default::default();
    s.pods.push(real);
    s.capacity_buffers.push(buffer("spare", 1, 1800));
    let p = plan(&s, &gate_on());
    assert_eq!(p.existing_nodes.len(), 1, "{p:#?}");
    assert_eq!(p.existing_nodes[0].pods, ["default/real"]);
    assert_eq!(p.node_claims.len(), 1);
    assert!(p.node_claims[0].pods.is_empty());
    assert_eq!(
        p.capacity_buffers[0].provisioning_reason,
        "RequiresNewCapacity"
    );
    assert_eq!((p.summary.pending_pods, p.summary.scheduled_pods), (1, 1));
}

/// `pkg/controllers/disruption/emptiness.go`: a node hosting buffer pods is not empty (its
/// `Unconsolidatable` Event says so) and is not removed; without the buffer it is.
#[test]
fn a_node_hosting_a_buffer_is_not_removed_as_empty() {
    let mut s = cluster(&[&[]]);
    let without = plan(&s, &gate_on());
    assert_eq!(without.disruptions.len(), 1, "{without:#?}");
    assert_eq!(without.disruptions[0].reason, "Empty");

    s.capacity_buffers.push(buffer("spare", 1, 4000));
    let p = plan(&s, &gate_on());
    assert!(p.disruptions.is_empty(), "{p:#?}");
    assert_eq!(p.capacity_buffers[0].provisioning, "True");
    let n0 = p.node_status.iter().find(|n| n.node == "n0").unwrap();
    assert_eq!(n0.unconsolidatable, r#"Node "n0" has buffer pods"#);
    assert!(!n0.empty);
    no_virtual_pod_named(&p);
}

/// `pkg/controllers/disruption/helpers.go` `SimulateScheduling` schedules the buffer's pods
/// with every candidate's: consolidation keeps the room they reserve. Two nodes with a 1-cpu
/// pod each shrink to 2 cpu of capacity without the buffer; with a 6.5-cpu chunk on one of
/// them, what remains after every decision still holds the pods and the chunk.
#[test]
fn consolidation_keeps_the_room_a_buffer_reserves() {
    let cpu_of = |t: &str| match t {
        "m.small" => 2000,
        "m.medium" => 4000,
        "m.large" => 8000,
        _ => 16000,
    };
    // Cpu left after the plan: the nodes no decision removes (m.large), and each
    // replacement's cheapest type.
    let left = |p: &Plan, nodes: &[&str]| -> i64 {
        let gone: Vec<&String> = p.disruptions.iter().flat_map(|d| &d.nodes).collect();
        let kept = nodes
            .iter()
            .filter(|n| !gone.iter().any(|g| g == *n))
            .count() as i64;
        let new: i64 = p
            .disruptions
            .iter()
            .flat_map(|d| &d.replacements)
            .map(|c| cpu_of(&c.instance_types[0]))
            .sum();
        kept * 8000 + new
    };
    let mut s = cluster(&[&[1000], &[1000]]);
    let without = plan(&s, &gate_on());
    assert!(!without.disruptions.is_empty(), "{without:#?}");
    assert!(left(&without, &["n0", "n1"]) < 8500, "{without:#?}");

    s.capacity_buffers.push(buffer("spare", 1, 6500));
    let p = plan(&s, &gate_on());
    assert!(left(&p, &["n0", "n1"]) >= 8500, "{p:#?}");
    no_virtual_pod_named(&p);
}
