use super::*;
use serde_json::json;

fn template(cpu: &str) -> core::PodTemplateSpec {
    serde_json::from_value(json!({
        "metadata": {"labels": {"app": "spare"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    }))
    .unwrap()
}

fn buffer(spec: Value) -> Value {
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "spare", "namespace": "team", "uid": "u1"},
        "spec": spec
    })
}

#[test]
fn a_pod_template_buffer_carries_its_template() {
    let b = buffer(json!({"podTemplateRef": {"name": "chunk"}, "replicas": 3}));
    assert_eq!(reference(&b), Reference::PodTemplate("chunk".into()));
    let pt = core::PodTemplate {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            generation: Some(4),
            ..Default::default()
        },
        template: Some(template("500m")),
    };
    let out = capacity_buffer(&b, Referent::PodTemplate(&pt), &PriorityClasses::default()).unwrap();
    assert_eq!(
        (out.namespace.as_str(), out.name.as_str()),
        ("team", "spare")
    );
    assert_eq!(out.pod_template_ref, "chunk");
    assert_eq!(out.replicas, Some(3));
    assert_eq!(out.pod_template_generation, Some(4));
    let t = out.template.unwrap();
    assert_eq!(t.requests_milli.get("cpu"), Some(&500));
    assert_eq!(t.labels.get("app").map(String::as_str), Some("spare"));
    assert_eq!((t.namespace.as_str(), t.name.as_str()), ("team", "spare"));
}

#[test]
fn a_scalable_ref_buffer_carries_the_workloads_replicas() {
    let b = buffer(
        json!({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}, "percentage": 20, "limits": {"cpu": "4"}}),
    );
    assert_eq!(
        reference(&b),
        Reference::Workload {
            kind: "Deployment".into(),
            name: "web".into()
        }
    );
    let t = template("1");
    let out = capacity_buffer(
        &b,
        Referent::Workload {
            template: &t,
            replicas: None,
        },
        &PriorityClasses::default(),
    )
    .unwrap();
    assert_eq!(out.scalable_ref, "Deployment/web");
    assert_eq!(out.scalable_replicas, Some(1));
    assert_eq!(out.percentage, Some(20));
    assert_eq!(out.limits.unwrap().milli.get("cpu"), Some(&4000));
}

/// Karpenter's `handleResolveError` reasons.
#[test]
fn an_unresolved_reference_says_why_as_karpenter_does() {
    let pc = PriorityClasses::default();
    let b = buffer(json!({"podTemplateRef": {"name": "gone"}, "replicas": 1}));
    let out = capacity_buffer(
        &b,
        Referent::Unresolved("podtemplates \"gone\" not found"),
        &pc,
    )
    .unwrap();
    assert_eq!(out.unresolved_reason, "PodTemplateNotFound");
    assert!(out.template.is_none());
    let b = buffer(json!({"scalableRef": {"kind": "Deployment", "name": "gone"}}));
    let out = capacity_buffer(
        &b,
        Referent::Unresolved("deployments.apps \"gone\" not found"),
        &pc,
    )
    .unwrap();
    assert_eq!(out.unresolved_reason, "ScalableRefNotFound");
    let b = buffer(json!({"scalableRef": {"kind": "CronJob", "name": "x"}}));
    let Reference::Unsupported(why) = reference(&b) else {
        panic!("CronJob is not supported");
    };
    assert_eq!(why, "unsupported kind \"CronJob\"");
    let out = capacity_buffer(&b, Referent::Unresolved(&why), &pc).unwrap();
    assert_eq!(out.unresolved_reason, "ResolutionFailed");
}

#[test]
fn a_bad_field_is_named() {
    let pc = PriorityClasses::default();
    let b = buffer(json!({"podTemplateRef": {"name": "x"}, "replicas": -1}));
    let e = capacity_buffer(&b, Referent::Unresolved("not found"), &pc).unwrap_err();
    assert!(e.to_string().starts_with("spec.replicas:"), "{e}");
    let b = buffer(json!({"podTemplateRef": {"name": "x"}, "limits": {"cpu": "lots"}}));
    let e = capacity_buffer(&b, Referent::Unresolved("not found"), &pc).unwrap_err();
    assert!(e.to_string().starts_with("spec.limits.cpu:"), "{e}");
}
