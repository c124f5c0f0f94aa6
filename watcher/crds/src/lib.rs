//! dovetail's custom resources, compatible with Karpenter v1: [`NodePool`] and [`NodeClaim`]
//! (`karpenter.sh/v1`), [`EC2NodeClass`] (`karpenter.k8s.aws/v1`), [`NodeOverlay`]
//! (`karpenter.sh/v1alpha1`) and Karpenter v1.14's [`CapacityBuffer`]
//! (`autoscaling.x-k8s.io/v1beta1`), with the schemas, defaults, CEL rules, printer columns and
//! status subresources of Karpenter's own CRDs.
//!
//! [`crds`] gives the four `CustomResourceDefinition`s; [`render_yaml`] prints them as the
//! multi-document YAML that `deploy/crds/` holds and `dovetail crds` prints.

pub mod capacitybuffer;
pub mod common;
pub mod ec2nodeclass;
pub mod nodeclaim;
pub mod nodeoverlay;
pub mod nodepool;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;
use thiserror::Error;

pub use capacitybuffer::{CapacityBuffer, CapacityBufferSpec, CapacityBufferStatus};
pub use common::{
    Condition, ConditionStatus, NodeClassReference, NodeSelectorRequirementWithMinValues, Operator,
    Quantity, ResourceList, Taint, TaintEffect,
};
pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
pub use nodeoverlay::{NodeOverlay, NodeOverlaySpec, NodeOverlayStatus};
pub use nodepool::{
    Budget, ConsolidationPolicy, Disruption, NodePool, NodePoolSpec, NodePoolStatus,
};

/// Why the CRDs could not be rendered.
#[derive(Debug, Error)]
pub enum Error {
    /// A CRD could not be written as YAML.
    #[error("rendering the CRD {name} as YAML")]
    Yaml {
        /// The CRD's name, e.g. `nodepools.karpenter.sh`.
        name: String,
        /// What serde_yaml reported.
        #[source]
        source: serde_yaml::Error,
    },
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The CRDs, in the order they are printed: NodePool, NodeClaim, EC2NodeClass, NodeOverlay,
/// CapacityBuffer.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        finish(
            NodePool::crd(),
            "NodePool is the Schema for the NodePools API",
        ),
        finish(
            NodeClaim::crd(),
            "NodeClaim is the Schema for the NodeClaims API",
        ),
        finish(
            EC2NodeClass::crd(),
            "EC2NodeClass is the Schema for the EC2NodeClass API",
        ),
        finish(
            NodeOverlay::crd(),
            "NodeOverlay is the Schema for the NodeOverlays API",
        ),
        finish(
            CapacityBuffer::crd(),
            "CapacityBuffer is the configuration that an autoscaler can use to provision buffer capacity within a cluster.",
        ),
    ]
}

/// Brings a derived CRD to what Karpenter's controller-gen output says: `listKind`, a root
/// description, and typed `anyOf` branches for int-or-string quantities (kube's structural
/// rewrite leaves them empty, which the API server accepts but `kubectl explain` shows poorly).
fn finish(mut crd: CustomResourceDefinition, description: &str) -> CustomResourceDefinition {
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema.description = Some(description.to_owned());
            schema.title = None;
            type_int_or_string(schema);
        }
    }
    crd
}

fn type_int_or_string(schema: &mut JSONSchemaProps) {
    if schema.x_kubernetes_int_or_string == Some(true) {
        schema.any_of = Some(vec![
            JSONSchemaProps {
                type_: Some("integer".to_owned()),
                ..JSONSchemaProps::default()
            },
            JSONSchemaProps {
                type_: Some("string".to_owned()),
                ..JSONSchemaProps::default()
            },
        ]);
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        type_int_or_string(child);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(child)) = schema.additional_properties.as_mut() {
        type_int_or_string(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(child)) = schema.items.as_mut() {
        type_int_or_string(child);
    }
}

/// One CRD as a YAML document (without the `---` separator).
///
/// # Errors
/// [`Error::Yaml`] if serialization fails (it does not for the derived CRDs).
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String> {
    serde_yaml::to_string(crd).map_err(|source| Error::Yaml {
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
    })
}

/// The file name of a CRD under `deploy/crds/`: `<group>_<plural>.yaml`, as Karpenter names them.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// All four CRDs as one multi-document YAML text, each document starting with `---`.
///
/// # Errors
/// [`Error::Yaml`] if serialization fails.
pub fn render_yaml() -> Result<String> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&crd_yaml(&crd)?);
    }
    Ok(out)
}
