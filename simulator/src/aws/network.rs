//! The simulated account's fixed network and the EC2 resources that are not instances: one VPC,
//! a private subnet in every zone the catalog sells in, a node security group (and the VPC's
//! `default` group), images per AMI family and architecture, the launch templates callers
//! create, and what each instance was launched with (subnet, groups, template).
//!
//! Subnets and the node security group carry `karpenter.sh/discovery=<cluster>` and a `Name`,
//! so an EC2NodeClass from Karpenter's getting-started guide selects them unchanged; images are
//! named like the EKS optimized AMIs and Bottlerocket's, owned by `amazon`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cloud::{Tags, Timestamp};

use super::AwsError;
use super::query::Params;
use crate::cloud::SimCloud;

/// The Kubernetes version image names carry.
pub const IMAGE_KUBERNETES_VERSION: &str = "1.33";
/// The owner account of the images (EKS's AMI account), with the alias `amazon`.
pub const IMAGE_OWNER: &str = "602401143452";
/// Free addresses of each simulated subnet (a /19).
pub const SUBNET_FREE_ADDRESSES: i64 = 8187;

/// An AMI family the images come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ImageFamily {
    /// Amazon Linux 2023 (nodeadm).
    Al2023,
    /// Amazon Linux 2 (bootstrap.sh).
    Al2,
    /// Bottlerocket.
    Bottlerocket,
}

/// A subnet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subnet {
    /// `subnet-…`.
    pub id: String,
    /// Availability zone.
    pub zone: String,
    /// Zone ID (`use1-az1`).
    pub zone_id: String,
    /// IPv4 CIDR.
    pub cidr: String,
    /// Free addresses.
    pub available_ips: i64,
    /// Tags.
    pub tags: Tags,
}

/// A security group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityGroup {
    /// `sg-…`.
    pub id: String,
    /// Group name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Tags.
    pub tags: Tags,
}

/// A machine image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// `ami-…`.
    pub id: String,
    /// Name.
    pub name: String,
    /// Family.
    pub family: ImageFamily,
    /// `x86_64` or `arm64`.
    pub architecture: String,
    /// Owner account.
    pub owner: String,
    /// RFC 3339 creation date.
    pub creation_date: String,
    /// Tags.
    pub tags: Tags,
}

/// A launch template (one version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchTemplate {
    /// `lt-…`.
    pub id: String,
    /// Name.
    pub name: String,
    /// Creation time.
    pub created: Timestamp,
    /// Image ID of the template data.
    pub image_id: Option<String>,
    /// Instance type of the template data.
    pub instance_type: Option<String>,
    /// User data (base64, as sent).
    pub user_data: Option<String>,
    /// Security group IDs (top-level or of the first network interface).
    pub security_groups: Vec<String>,
    /// Instance profile name or ARN.
    pub instance_profile: Option<String>,
    /// Tags the template gives instances.
    pub instance_tags: Tags,
    /// The template's own tags.
    pub tags: Tags,
}

/// What an instance was launched with, beyond what `cloud::Instance` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Launch {
    /// Subnet.
    pub subnet_id: String,
    /// Security group IDs.
    pub security_groups: Vec<String>,
    /// Instance profile.
    pub instance_profile: Option<String>,
    /// The template it came from.
    pub launch_template_id: Option<String>,
    /// User data (base64).
    pub user_data: Option<String>,
    /// The client token of the fleet.
    pub client_token: String,
}

/// The account's EC2 resources other than instances.
#[derive(Clone, Debug, Default)]
pub struct Network {
    /// The VPC ID.
    pub vpc_id: String,
    /// The VPC's CIDR.
    pub vpc_cidr: String,
    /// One subnet per zone.
    pub subnets: Vec<Subnet>,
    /// The node group first, then `default`.
    pub security_groups: Vec<SecurityGroup>,
    /// Images, one per family and architecture.
    pub images: Vec<Image>,
    /// Launch templates by ID.
    pub templates: BTreeMap<String, LaunchTemplate>,
    /// Launch details by instance ID.
    pub launches: HashMap<String, Launch>,
    next_id: u64,
}

// === impl Network ===

impl Network {
    /// The network for the zones `cloud` sells in, tagged for `cluster`.
    pub fn new(cloud: &SimCloud, cluster: &str) -> Self {
        let zones: BTreeSet<String> = cloud
            .catalog()
            .instance_types
            .iter()
            .flat_map(|t| t.offerings.iter().map(|o| o.zone.clone()))
            .collect();
        let mut n = Network {
            vpc_cidr: "10.0.0.0/16".into(),
            ..Network::default()
        };
        n.vpc_id = n.new_id("vpc");
        let discovery = ("karpenter.sh/discovery".to_string(), cluster.to_string());
        // `us-east-1` → `use1`, as AWS's zone IDs (`use1-az1`).
        let region_short: String = cloud
            .region()
            .split('-')
            .enumerate()
            .map(|(i, p)| match i {
                0 => p.chars().take(2).collect(),
                1 => p.chars().take(1).collect(),
                _ => p.to_string(),
            })
            .collect();
        for (i, zone) in zones.iter().enumerate() {
            let id = n.new_id("subnet");
            n.subnets.push(Subnet {
                id,
                zone: zone.clone(),
                zone_id: format!("{region_short}-az{}", i + 1),
                cidr: format!("10.0.{}.0/19", i * 32),
                available_ips: SUBNET_FREE_ADDRESSES,
                tags: Tags::from([
                    discovery.clone(),
                    ("Name".to_string(), format!("{cluster}-private-{zone}")),
                    (
                        "kubernetes.io/role/internal-elb".to_string(),
                        "1".to_string(),
                    ),
                ]),
            });
        }
        let id = n.new_id("sg");
        n.security_groups.push(SecurityGroup {
            id,
            name: format!("{cluster}-node"),
            description: format!("Nodes of cluster {cluster}"),
            tags: Tags::from([discovery, ("Name".to_string(), format!("{cluster}-node"))]),
        });
        let id = n.new_id("sg");
        n.security_groups.push(SecurityGroup {
            id,
            name: "default".into(),
            description: "default VPC security group".into(),
            tags: Tags::new(),
        });
        let k = IMAGE_KUBERNETES_VERSION;
        for (family, arch, name) in [
            (
                ImageFamily::Al2023,
                "x86_64",
                format!("amazon-eks-node-al2023-x86_64-standard-{k}-v20251120"),
            ),
            (
                ImageFamily::Al2023,
                "arm64",
                format!("amazon-eks-node-al2023-arm64-standard-{k}-v20251120"),
            ),
            (
                ImageFamily::Al2,
                "x86_64",
                format!("amazon-eks-node-{k}-v20251120"),
            ),
            (
                ImageFamily::Al2,
                "arm64",
                format!("amazon-eks-arm64-node-{k}-v20251120"),
            ),
            (
                ImageFamily::Bottlerocket,
                "x86_64",
                format!("bottlerocket-aws-k8s-{k}-x86_64-v1.50.0-a1b2c3d4"),
            ),
            (
                ImageFamily::Bottlerocket,
                "arm64",
                format!("bottlerocket-aws-k8s-{k}-aarch64-v1.50.0-a1b2c3d4"),
            ),
        ] {
            let id = n.new_id("ami");
            n.images.push(Image {
                id,
                name,
                family,
                architecture: arch.into(),
                owner: IMAGE_OWNER.into(),
                creation_date: "2025-11-20T00:00:00.000Z".into(),
                tags: Tags::new(),
            });
        }
        n
    }

    /// A new resource ID `<prefix>-<17 hex digits>`, unique in this account.
    pub fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{:017x}", 0x0d0e_7a11_0000u64 + self.next_id)
    }

    /// The image of a family and architecture.
    pub fn image(&self, family: ImageFamily, architecture: &str) -> Option<&Image> {
        self.images
            .iter()
            .find(|i| i.family == family && i.architecture == architecture)
    }

    /// The subnet with this ID.
    pub fn subnet(&self, id: &str) -> Option<&Subnet> {
        self.subnets.iter().find(|s| s.id == id)
    }

    /// The security group with this ID.
    pub fn security_group(&self, id: &str) -> Option<&SecurityGroup> {
        self.security_groups.iter().find(|g| g.id == id)
    }

    /// The template with this ID or name.
    pub fn template(&self, id: Option<&str>, name: Option<&str>) -> Option<&LaunchTemplate> {
        self.templates
            .values()
            .find(|t| id.is_some_and(|id| t.id == id) || name.is_some_and(|n| t.name == n))
    }

    /// The tags of a non-instance resource, to change them; `None` for an unknown ID.
    pub(crate) fn tags_mut(&mut self, id: &str) -> Option<&mut Tags> {
        if let Some(s) = self.subnets.iter_mut().find(|s| s.id == id) {
            return Some(&mut s.tags);
        }
        if let Some(g) = self.security_groups.iter_mut().find(|g| g.id == id) {
            return Some(&mut g.tags);
        }
        if let Some(i) = self.images.iter_mut().find(|i| i.id == id) {
            return Some(&mut i.tags);
        }
        self.templates.get_mut(id).map(|t| &mut t.tags)
    }
}

/// One `Filter.N` of a Describe call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Filter {
    pub(crate) name: String,
    pub(crate) values: Vec<String>,
}

/// The `Filter.N.Name` / `Filter.N.Value.M` of a request, each name checked against `known`
/// (plus `tag:<key>` and `tag-key`, when `tagged`).
///
/// # Errors
/// `InvalidParameterValue` naming an unknown filter.
pub(crate) fn filters(p: &Params, known: &[&str], tagged: bool) -> Result<Vec<Filter>, AwsError> {
    let mut out = Vec::new();
    for f in p.list("Filter") {
        let name = f.require("Name")?.to_string();
        let ok = known.contains(&name.as_str())
            || (tagged && (name.starts_with("tag:") || name == "tag-key"));
        if !ok {
            return Err(AwsError::invalid_value(format!(
                "The filter '{name}' is invalid"
            )));
        }
        out.push(Filter {
            values: f.strings("Value"),
            name,
        });
    }
    Ok(out)
}

/// True when every filter matches: `tag:K` by the tag's value, `tag-key` by any key, other
/// names by `field(name)`; values are ORed and may hold `*` and `?` wildcards.
pub(crate) fn matches(
    filters: &[Filter],
    tags: &Tags,
    field: impl Fn(&str) -> Vec<String>,
) -> bool {
    filters.iter().all(|f| {
        let candidates: Vec<String> = if let Some(key) = f.name.strip_prefix("tag:") {
            tags.get(key).cloned().into_iter().collect()
        } else if f.name == "tag-key" {
            tags.keys().cloned().collect()
        } else {
            field(&f.name)
        };
        candidates
            .iter()
            .any(|c| f.values.iter().any(|v| wildcard(v, c)))
    })
}

/// EC2's filter wildcards: `*` any run of characters, `?` one character.
pub(crate) fn wildcard(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard(
            "amazon-eks-node-al2023-*",
            "amazon-eks-node-al2023-x86_64"
        ));
        assert!(wildcard("m5.?large", "m5.xlarge"));
        assert!(!wildcard("m5.?large", "m5.large"));
        assert!(wildcard("*", ""));
        assert!(!wildcard("a", "ab"));
    }

    #[test]
    fn unknown_filters_are_named() {
        let p = Params::parse(b"Filter.1.Name=colour&Filter.1.Value.1=red");
        let e = filters(&p, &["subnet-id"], true).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");
        assert!(e.message.contains("'colour'"), "{}", e.message);
        let p = Params::parse(b"Filter.1.Name=tag:a&Filter.1.Value.1=x*&Filter.1.Value.2=y");
        let f = filters(&p, &[], true).unwrap();
        let tags = Tags::from([("a".to_string(), "xyz".to_string())]);
        assert!(matches(&f, &tags, |_| vec![]));
        assert!(!matches(&f, &Tags::new(), |_| vec![]));
    }
}
