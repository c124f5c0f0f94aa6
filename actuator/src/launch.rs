//! What one launch needs, as the ledger stores it ([`LaunchSpec`], JSON in `claims.spec`), and
//! the pure functions that turn it into a cloud request: the deterministic client token and the
//! offerings and tags of [`cloud::LaunchRequest`].

use std::collections::BTreeMap;

use cloud::{CapacityType, LaunchRequest, NodeSpec, OfferingKey, Tags};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most overrides one CreateFleet call takes.
pub const MAX_OFFERINGS: usize = 60;

/// A taint (`key=value:effect`): the one the cloud provider registers nodes with.
pub use cloud::{Taint, TaintEffect};

/// A node selector requirement of the claim (`key operator values`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`.
    pub operator: String,
    /// Values.
    pub values: Vec<String>,
    /// Karpenter's `minValues`, if set.
    pub min_values: Option<u32>,
}

/// Everything the actuator knows about a claim to launch, from the planner's command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// NodeClaim name (unique in the ledger).
    pub name: String,
    /// NodePool name.
    pub node_pool: String,
    /// Instance types it may launch as, cheapest first as the planner lists them.
    pub instance_types: Vec<String>,
    /// Zones it may launch in.
    pub zones: Vec<String>,
    /// Capacity types it may launch as (`spot`, `on-demand`).
    pub capacity_types: Vec<CapacityType>,
    /// The planner's price estimate per hour (USD).
    pub price: f64,
    /// Labels of the NodeClaim and its Node.
    pub labels: BTreeMap<String, String>,
    /// Taints of the Node.
    pub taints: Vec<Taint>,
    /// EC2NodeClass name, when the planner sent it.
    pub node_class: Option<String>,
    /// Startup taints.
    pub startup_taints: Vec<Taint>,
    /// Seconds after launch before the claim expires; `None` is Never.
    pub expire_after: Option<i64>,
    /// Requirements of the NodeClaim.
    pub requirements: Vec<Requirement>,
    /// Annotations of the NodeClaim.
    pub annotations: BTreeMap<String, String>,
    /// Drain time limit in seconds; `None` is none.
    pub termination_grace_period: Option<i64>,
}

/// The EC2 `ClientToken` of a claim: a hash of its name and idempotency key, so every retry of
/// one claim (after a crash, by another replica) sends the same token and a second command for
/// the same name could never reuse it. 32 hex characters (EC2 allows 64 ASCII).
pub fn client_token(claim_name: &str, idempotency_key: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"dovetail-launch\0");
    h.update(claim_name.as_bytes());
    h.update(b"\0");
    h.update(idempotency_key.as_bytes());
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Kubernetes' name-suffix alphabet (`k8s.io/apimachinery/pkg/util/rand`: no vowels, no
/// confusable characters), which `generateName` draws from.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A NodeClaim name of Karpenter's shape, `<nodepool>-<5 characters>` (Karpenter creates
/// NodeClaims with `generateName: <nodepool>-`, `pkg/controllers/provisioning/scheduling/
/// nodeclaimtemplate.go`), with the suffix derived from `seed` instead of drawn at random, so
/// that a replica repeating the step picks the same name. Used where a command's own name
/// cannot be used: a claim launched again after the one before it is gone, and disruption
/// replacements, whose pods would otherwise give them the name of the claim they replace.
pub fn generated_name(node_pool: &str, seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let mut h = u64::from_le_bytes(digest[..8].try_into().unwrap_or([0; 8]));
    let n = NAME_ALPHABET.len() as u64;
    let mut suffix = String::with_capacity(5);
    for _ in 0..5 {
        suffix.push(char::from(NAME_ALPHABET[(h % n) as usize]));
        h /= n;
    }
    format!("{node_pool}-{suffix}")
}

// === impl LaunchSpec ===

impl LaunchSpec {
    /// The capacity type to launch as: spot when the claim allows it (cheaper; Karpenter
    /// prefers it too), else on-demand. `None` when the claim allows neither.
    pub fn capacity_type(&self) -> Option<CapacityType> {
        if self.capacity_types.contains(&CapacityType::Spot) {
            Some(CapacityType::Spot)
        } else if self.capacity_types.contains(&CapacityType::OnDemand) {
            Some(CapacityType::OnDemand)
        } else {
            None
        }
    }

    /// The offerings of one launch request: instance types × zones in the planner's order, as
    /// one capacity type, at most [`MAX_OFFERINGS`].
    pub fn offerings(&self) -> Vec<OfferingKey> {
        let Some(capacity_type) = self.capacity_type() else {
            return Vec::new();
        };
        self.instance_types
            .iter()
            .flat_map(|t| {
                self.zones.iter().map(move |z| OfferingKey {
                    instance_type: t.clone(),
                    zone: z.clone(),
                    capacity_type,
                })
            })
            .take(MAX_OFFERINGS)
            .collect()
    }

    /// The tags every instance of this claim carries; the NodeClaim tag is how a launch that
    /// crashed after the create call finds its instance again.
    pub fn tags(&self, cluster_name: &str) -> Tags {
        let mut tags = Tags::new();
        tags.insert(cloud::TAG_NODECLAIM.to_string(), self.name.clone());
        tags.insert(cloud::TAG_NODEPOOL.to_string(), self.node_pool.clone());
        if let Some(nc) = &self.node_class {
            tags.insert(cloud::TAG_NODECLASS.to_string(), nc.clone());
        }
        tags.insert(
            format!("{}{cluster_name}", cloud::TAG_CLUSTER_PREFIX),
            "owned".to_string(),
        );
        tags
    }

    /// The cloud request for this claim; `node` is the node class and registration when the
    /// actuator knows them (the EC2 provider needs them, the stand-in does not).
    pub fn request(
        &self,
        client_token: &str,
        cluster_name: &str,
        node: Option<NodeSpec>,
    ) -> LaunchRequest {
        LaunchRequest {
            client_token: client_token.to_string(),
            offerings: self.offerings(),
            tags: self.tags(cluster_name),
            node_class: self.node_class.clone(),
            image_id: None,
            node,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LaunchSpec {
        LaunchSpec {
            name: "default-abcde".into(),
            node_pool: "default".into(),
            instance_types: vec!["m5.large".into(), "c5.large".into()],
            zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            capacity_types: vec![CapacityType::OnDemand, CapacityType::Spot],
            node_class: Some("default".into()),
            ..LaunchSpec::default()
        }
    }

    #[test]
    fn client_token_is_deterministic_and_depends_on_name_and_key() {
        let t = client_token("a", "k1");
        assert_eq!(t, client_token("a", "k1"));
        assert_eq!(t.len(), 32);
        assert_ne!(t, client_token("a", "k2"));
        assert_ne!(t, client_token("b", "k1"));
    }

    #[test]
    fn offerings_prefer_spot_keep_order_and_cap_at_sixty() {
        let o = spec().offerings();
        assert_eq!(o.len(), 4);
        assert!(o.iter().all(|o| o.capacity_type == CapacityType::Spot));
        assert_eq!(o[0].instance_type, "m5.large");
        assert_eq!(o[1].zone, "us-east-1b");

        let mut big = spec();
        big.capacity_types = vec![CapacityType::OnDemand];
        big.instance_types = (0..40).map(|i| format!("t{i}")).collect();
        let o = big.offerings();
        assert_eq!(o.len(), MAX_OFFERINGS);
        assert!(o.iter().all(|o| o.capacity_type == CapacityType::OnDemand));

        big.capacity_types.clear();
        assert!(big.offerings().is_empty());
    }

    #[test]
    fn tags_name_claim_pool_class_and_cluster() {
        let r = spec().request("tok", "prod", None);
        assert_eq!(r.client_token, "tok");
        assert_eq!(r.tags[cloud::TAG_NODECLAIM], "default-abcde");
        assert_eq!(r.tags[cloud::TAG_NODEPOOL], "default");
        assert_eq!(r.tags[cloud::TAG_NODECLASS], "default");
        assert_eq!(r.tags["kubernetes.io/cluster/prod"], "owned");
    }
}
