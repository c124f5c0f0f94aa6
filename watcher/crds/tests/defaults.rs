//! The schemas default what Karpenter v1 defaults, and the typed accessors agree with them.
//! Defaults are applied by kube-cel's `apply_defaults`. The API server also defaults the fields
//! of an object it has just defaulted (`disruption` → its `budgets`); kube-cel 0.8 does not, so
//! [`with_defaults`] repeats it until nothing changes, which gives the server's result.

use serde_json::{Value, json};

fn schema(kind: &str) -> Value {
    let crd = crds::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .expect("the CRD exists");
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("a schema"),
    )
    .expect("serializes")
}

fn with_defaults(kind: &str, object: &Value) -> Value {
    let schema = schema(kind);
    let mut current = object.clone();
    loop {
        let next = kube_cel::apply_defaults(&schema, &current);
        if next == current {
            return next;
        }
        current = next;
    }
}

#[test]
fn a_minimal_nodepool_gets_karpenters_defaults() {
    let minimal = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
        }}}
    });
    let defaulted = with_defaults("NodePool", &minimal);
    assert_eq!(defaulted["spec"]["template"]["spec"]["expireAfter"], "720h");
    assert_eq!(
        defaulted["spec"]["disruption"],
        json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]})
    );

    let typed: crds::NodePool = serde_json::from_value(minimal).expect("reads");
    assert_eq!(typed.spec.template.spec.expire_after(), "720h");
    let disruption = typed.spec.disruption.unwrap_or_default();
    assert_eq!(disruption.consolidate_after(), "0s");
    assert_eq!(
        disruption.consolidation_policy(),
        crds::ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    let budgets = serde_json::to_value(disruption.budgets()).expect("serializes");
    assert_eq!(budgets, json!([{"nodes": "10%"}]));
}

#[test]
fn a_nodeclaim_defaults_expire_after_and_an_ec2nodeclass_requires_imdsv2() {
    let claim = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []}
    });
    let defaulted = with_defaults("NodeClaim", &claim);
    assert_eq!(defaulted["spec"]["expireAfter"], "720h");

    let class = json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "d"},
        "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                 "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
    });
    let defaulted = with_defaults("EC2NodeClass", &class);
    assert_eq!(
        defaulted["spec"]["metadataOptions"],
        json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"})
    );
}
