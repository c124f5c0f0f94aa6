//! Fuzzing the manifests door with proptest-driven structured inputs: NodePools, Deployments
//! and Pods written as YAML or JSON with hostile values (quantities, weights, durations,
//! replicas, restricted keys, duplicate keys, crons). No input may panic or hang the reader,
//! the validation or the plan, and every refusal names a field (or, for syntax, a line).
//! Bounded: 96 cases (set `PROPTEST_CASES` for longer runs).

use planner::model::PlanOptions;
use planner_manifests::{self as manifests, Limits, Reader};
use proptest::prelude::*;

const MAX_PODS: usize = 64;

const CATALOG: &str = "instanceTypes:
  - name: m5.large
    cpu: \"2\"
    memory: 8Gi
    pods: 29
    offerings:
      - {zone: us-east-1a, capacityType: on-demand, price: 0.096, available: true}
";

fn quantity() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?[0-9]{1,22}(m|Ki|Mi|Gi|Ti|Ei|e3|E)?",
        Just(".inf".to_string()),
        Just("-.inf".to_string()),
        Just(".nan".to_string()),
        Just("\"\"".to_string()),
        "[a-z]{0,6}",
    ]
}

fn duration() -> impl Strategy<Value = String> {
    prop_oneof![
        "-?[0-9]{1,20}(s|m|h|ms)",
        Just("Never".to_string()),
        Just("9223372036854775807s".to_string()),
        "[0-9a-z]{0,6}",
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("kubernetes.io/arch".to_string()),
        Just("karpenter.sh/nodepool".to_string()),
        Just("kubernetes.io/hostname".to_string()),
        Just("karpenter.sh/custom".to_string()),
        "[a-z]{1,8}(/[a-z]{1,8})?",
    ]
}

prop_compose! {
    fn node_pool()(
        weight in prop_oneof![Just(None), (-5i64..110).prop_map(Some), any::<i64>().prop_map(Some)],
        expire in duration(),
        consolidate in duration(),
        key in key(),
        min_values in prop_oneof![Just(None), (-2i64..60).prop_map(Some)],
        nodes in "-?[0-9]{1,4}%?",
        schedule in prop_oneof![Just(None), "[0-9*/]{1,3}( [0-9*/]{1,3}){0,5}".prop_map(Some)],
        budget_duration in duration(),
        name in "[a-c]",
    ) -> String {
        let mut s = format!("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n");
        if let Some(w) = weight {
            s.push_str(&format!("  weight: {w}\n"));
        }
        s.push_str(&format!("  template:\n    spec:\n      expireAfter: {expire}\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n      requirements:\n        - key: {key}\n          operator: Exists\n"));
        if let Some(m) = min_values {
            s.push_str(&format!("          minValues: {m}\n"));
        }
        s.push_str(&format!("  disruption:\n    consolidateAfter: {consolidate}\n    budgets:\n      - nodes: \"{nodes}\"\n"));
        if let Some(c) = schedule {
            s.push_str(&format!("        schedule: \"{c}\"\n        duration: {budget_duration}\n"));
        }
        s
    }
}

prop_compose! {
    fn workload()(
        deployment in any::<bool>(),
        replicas in prop_oneof![0i64..4, any::<i32>().prop_map(i64::from), Just(2147483647i64)],
        cpu in quantity(),
        memory in quantity(),
        duplicate_key in any::<bool>(),
        template in any::<bool>(),
        name in "[a-c]",
    ) -> String {
        let requests = if duplicate_key {
            format!("{{cpu: {cpu}, memory: {memory}, cpu: 1}}")
        } else {
            format!("{{cpu: {cpu}, memory: {memory}}}")
        };
        let spec = format!("containers:\n  - name: c\n    resources:\n      requests: {requests}\n");
        let indent = |t: &str, n: usize| t.lines().map(|l| format!("{}{l}\n", " ".repeat(n))).collect::<String>();
        if deployment {
            let mut s = format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n");
            if template {
                s.push_str(&format!("  template:\n    spec:\n{}", indent(&spec, 6)));
            }
            s
        } else {
            format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{}", indent(&spec, 2))
        }
    }
}

fn names_a_field(e: &manifests::Error) -> bool {
    match e {
        manifests::Error::Field { path, .. } => !path.is_empty(),
        manifests::Error::Syntax { message, .. } => message.contains("line") || !message.is_empty(),
        manifests::Error::TooManyPods { field, .. } => !field.is_empty(),
        manifests::Error::Read { .. } => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn hostile_manifests_are_planned_or_refused_naming_a_field(
        docs in proptest::collection::vec(prop_oneof![node_pool(), workload()], 1..5),
    ) {
        let text = docs.join("---\n");
        let mut b = Reader::with_limits(Limits { max_pods: MAX_PODS, ..Limits::default() });
        let read = b.add_document_text(&text, "fuzz.yaml").and_then(|()| b.finish());
        let loaded = match read {
            Err(e) => {
                prop_assert!(names_a_field(&e), "{e}");
                return Ok(());
            }
            Ok(loaded) => loaded,
        };
        let catalog = planner::catalog::file::parse(CATALOG, "catalog.yaml").expect("catalog");
        let options = PlanOptions { now: 1_796_025_600, ..PlanOptions::default() };
        let plan = planner::plan(&loaded.snapshot, &catalog, &options);
        prop_assert!(plan.summary.pending_pods as usize <= MAX_PODS);
    }
}
