//! An EC2NodeClass resolved against the account: the subnets and security groups its selector
//! terms match, its AMIs (aliases through SSM public parameters, or ids, names, tags and owners
//! through DescribeImages) and its instance profile.
//!
//! Selector terms are ORed; the fields of one term are ANDed, as in Karpenter. A tag value of
//! `*` matches any value of the key. The zones of the matched subnets are the zones a node of
//! this class can be offered in.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::Filter;
use cloud::node_class::{AmiSelectorTerm, NodeClassSpec, SelectorTerm};

use crate::config::Config;
use crate::error::from_sdk;
use crate::user_data::AmiFamily;

/// Errors resolving a node class. Each names the node class and the field at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A selector matched nothing.
    #[error("EC2NodeClass {class}: spec.{field} matched no {what}")]
    NothingMatched {
        /// The node class.
        class: String,
        /// The field, e.g. `subnetSelectorTerms`.
        field: &'static str,
        /// What was looked for, e.g. `subnet`.
        what: &'static str,
    },
    /// A field holds a value that cannot be used.
    #[error("EC2NodeClass {class}: spec.{field}: {reason}")]
    Invalid {
        /// The node class.
        class: String,
        /// The field.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// An AWS call failed.
    #[error(transparent)]
    Cloud(#[from] cloud::Error),
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

// === impl Error ===

impl From<Error> for cloud::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Cloud(c) => c,
            other => cloud::Error::InvalidRequest {
                reason: other.to_string(),
            },
        }
    }
}

/// A subnet a node may be launched into.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Subnet {
    /// `subnet-…`.
    pub id: String,
    /// Availability zone.
    pub zone: String,
    /// Free IPv4 addresses (the launch picks the subnet of a zone with the most).
    pub available_ips: i32,
    /// Availability zone ID (`use1-az1`), when EC2 says.
    pub zone_id: Option<String>,
}

/// An AMI with its architecture.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ami {
    /// `ami-…`.
    pub id: String,
    /// `x86_64` or `arm64`.
    pub architecture: String,
    /// The image's name, when it was found by DescribeImages.
    pub name: Option<String>,
    /// The hardware an alias's image is for (from the SSM parameter it came from); empty for
    /// images found by selector terms, which serve every type of their architecture.
    pub variants: Vec<Variant>,
}

/// The hardware an EKS optimized or Bottlerocket image is built for (Karpenter's
/// `pkg/providers/amifamily/types.go` `Variant`): a type with GPUs needs an NVIDIA image, one
/// with Neuron/Inferentia accelerators a Neuron image, any other a standard one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// No accelerator (Karpenter: instance-gpu-count and instance-accelerator-count absent).
    Standard,
    /// GPUs (instance-gpu-count exists).
    Nvidia,
    /// Neuron / Inferentia accelerators (instance-accelerator-count exists).
    Neuron,
}

impl Variant {
    /// `standard`, `nvidia`, `neuron`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Nvidia => "nvidia",
            Self::Neuron => "neuron",
        }
    }

    /// The variant a type of these facts needs: GPUs first, then other accelerators.
    pub fn for_hardware(gpus: bool, accelerators: bool) -> Self {
        if gpus {
            Self::Nvidia
        } else if accelerators {
            Self::Neuron
        } else {
            Self::Standard
        }
    }
}

/// Everything a launch needs from a node class.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// Matching subnets, by ID.
    pub subnets: Vec<Subnet>,
    /// Matching security group IDs, sorted.
    pub security_groups: Vec<String>,
    /// One AMI per architecture (the newest match), sorted by architecture.
    pub amis: Vec<Ami>,
    /// How those AMIs bootstrap.
    pub family: AmiFamily,
    /// Instance profile name, if any.
    pub instance_profile: Option<String>,
}

// === impl Resolved ===

impl Resolved {
    /// The zones of the subnets: where nodes of this class can be offered.
    pub fn zones(&self) -> BTreeSet<String> {
        self.subnets.iter().map(|s| s.zone.clone()).collect()
    }

    /// The subnet used for `zone`: the one with the most free addresses (ties: lowest ID).
    pub fn subnet_for(&self, zone: &str) -> Option<&Subnet> {
        self.subnets
            .iter()
            .filter(|s| s.zone == zone)
            .max_by(|a, b| a.available_ips.cmp(&b.available_ips).then(b.id.cmp(&a.id)))
    }

    /// The AMI for an architecture and the hardware's variant: an alias image of that variant,
    /// or an image from selector terms (any variant).
    pub fn ami_for(&self, architecture: &str, variant: Variant) -> Option<&Ami> {
        self.amis.iter().find(|a| {
            a.architecture == architecture
                && (a.variants.is_empty() || a.variants.contains(&variant))
        })
    }
}

/// The EC2 filters of one selector term.
fn term_filters(term: &SelectorTerm, id_filter: &str, name_filter: &str) -> Vec<Filter> {
    let mut filters = tag_filters(&term.tags);
    if let Some(id) = &term.id {
        filters.push(filter(id_filter, id));
    }
    if let Some(name) = &term.name {
        filters.push(filter(name_filter, name));
    }
    filters
}

/// `tag:K=V` filters, `tag-key=K` for a `*` value.
fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                filter("tag-key", k)
            } else {
                filter(&format!("tag:{k}"), v)
            }
        })
        .collect()
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

fn is_empty_term(term: &SelectorTerm) -> bool {
    term.tags.is_empty() && term.id.is_none() && term.name.is_none()
}

/// Resolves a node class.
///
/// # Errors
/// [`Error::NothingMatched`] when subnets, security groups or AMIs match nothing,
/// [`Error::Invalid`] for a bad alias or family, [`Error::Cloud`] when AWS fails.
pub async fn resolve(
    ec2: &aws_sdk_ec2::Client,
    ssm: &aws_sdk_ssm::Client,
    config: &Config,
    class: &NodeClassSpec,
) -> Result<Resolved> {
    let subnets = subnets(ec2, class).await?;
    let security_groups = security_groups(ec2, class).await?;
    let (family, amis) = amis(ec2, ssm, config, class).await?;
    let instance_profile = instance_profile(class)?;
    Ok(Resolved {
        subnets,
        security_groups,
        amis,
        family,
        instance_profile,
    })
}

/// What `class` resolves to now, part by part (the EC2NodeClass status): a part whose selector
/// matched nothing or is invalid says why; AMI names come from one DescribeImages of the chosen
/// IDs (absent when EC2 does not know the image).
///
/// # Errors
/// When AWS cannot be asked ([`cloud::Error`]: throttled, unavailable, refused).
pub async fn resolution(
    ec2: &aws_sdk_ec2::Client,
    ssm: &aws_sdk_ssm::Client,
    config: &Config,
    class: &NodeClassSpec,
) -> std::result::Result<cloud::NodeClassResolution, cloud::Error> {
    fn part<T>(r: Result<T>) -> std::result::Result<std::result::Result<T, String>, cloud::Error> {
        match r {
            Ok(v) => Ok(Ok(v)),
            Err(Error::Cloud(c)) => Err(c),
            Err(e) => Ok(Err(e.to_string())),
        }
    }
    let subnets = part(subnets(ec2, class).await)?.map(|v| {
        v.into_iter()
            .map(|s| cloud::ResolvedSubnet {
                id: s.id,
                zone: s.zone,
                zone_id: s.zone_id,
            })
            .collect()
    });
    let security_groups = part(named_security_groups(ec2, class).await)?.map(|v| {
        v.into_iter()
            .map(|(id, name)| cloud::ResolvedSecurityGroup { id, name })
            .collect()
    });
    let amis = match part(amis(ec2, ssm, config, class).await)? {
        Ok((_, amis)) => {
            let ids: Vec<String> = amis.iter().map(|a| a.id.clone()).collect();
            let names = image_names(ec2, &ids).await?;
            Ok(amis
                .into_iter()
                .map(|a| cloud::ResolvedAmi {
                    name: a.name.or_else(|| names.get(&a.id).cloned()),
                    id: a.id,
                    architecture: a.architecture,
                    variants: a.variants.iter().map(|v| v.as_str().to_string()).collect(),
                })
                .collect())
        }
        Err(e) => Err(e),
    };
    let instance_profile = part(instance_profile(class))?;
    Ok(cloud::NodeClassResolution {
        subnets,
        security_groups,
        amis,
        instance_profile,
    })
}

/// Names of the images `ids` that EC2 knows (an unknown ID is left out, not an error).
async fn image_names(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
) -> std::result::Result<BTreeMap<String, String>, cloud::Error> {
    if ids.is_empty() {
        return Ok(BTreeMap::new());
    }
    let out = ec2
        .describe_images()
        .set_filters(Some(vec![
            Filter::builder()
                .name("image-id")
                .set_values(Some(ids.to_vec()))
                .build(),
        ]))
        .send()
        .await
        .map_err(|e| from_sdk("DescribeImages of the resolved AMIs", &e, &[]))?;
    Ok(out
        .images()
        .iter()
        .filter_map(|i| Some((i.image_id()?.to_string(), i.name()?.to_string())))
        .collect())
}

/// Subnets matching `subnetSelectorTerms`.
async fn subnets(ec2: &aws_sdk_ec2::Client, class: &NodeClassSpec) -> Result<Vec<Subnet>> {
    let mut found = BTreeMap::new();
    for (i, term) in class.subnet_selector_terms.iter().enumerate() {
        if is_empty_term(term) {
            return Err(invalid(
                class,
                format!("subnetSelectorTerms[{i}]"),
                "empty term",
            ));
        }
        let filters = term_filters(term, "subnet-id", "tag:Name");
        let mut next: Option<String> = None;
        loop {
            let out = ec2
                .describe_subnets()
                .set_filters(Some(filters.clone()))
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| {
                    from_sdk(
                        &format!("DescribeSubnets for EC2NodeClass {}", class.name),
                        &e,
                        &[],
                    )
                })?;
            for s in out.subnets() {
                let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else {
                    continue;
                };
                found.insert(
                    id.to_string(),
                    Subnet {
                        id: id.to_string(),
                        zone: zone.to_string(),
                        available_ips: s.available_ip_address_count().unwrap_or(0),
                        zone_id: s.availability_zone_id().map(str::to_string),
                    },
                );
            }
            match out.next_token() {
                Some(t) if !t.is_empty() => next = Some(t.to_string()),
                _ => break,
            }
        }
    }
    if found.is_empty() {
        return Err(Error::NothingMatched {
            class: class.name.clone(),
            field: "subnetSelectorTerms",
            what: "subnet",
        });
    }
    Ok(found.into_values().collect())
}

/// Security group IDs matching `securityGroupSelectorTerms`.
async fn security_groups(ec2: &aws_sdk_ec2::Client, class: &NodeClassSpec) -> Result<Vec<String>> {
    Ok(named_security_groups(ec2, class)
        .await?
        .into_keys()
        .collect())
}

/// Security groups matching `securityGroupSelectorTerms`: ID → name.
async fn named_security_groups(
    ec2: &aws_sdk_ec2::Client,
    class: &NodeClassSpec,
) -> Result<BTreeMap<String, Option<String>>> {
    let mut found = BTreeMap::new();
    for (i, term) in class.security_group_selector_terms.iter().enumerate() {
        if is_empty_term(term) {
            return Err(invalid(
                class,
                format!("securityGroupSelectorTerms[{i}]"),
                "empty term",
            ));
        }
        let filters = term_filters(term, "group-id", "group-name");
        let mut next: Option<String> = None;
        loop {
            let out = ec2
                .describe_security_groups()
                .set_filters(Some(filters.clone()))
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| {
                    from_sdk(
                        &format!("DescribeSecurityGroups for EC2NodeClass {}", class.name),
                        &e,
                        &[],
                    )
                })?;
            found.extend(out.security_groups().iter().filter_map(|g| {
                Some((
                    g.group_id()?.to_string(),
                    g.group_name().map(str::to_string),
                ))
            }));
            match out.next_token() {
                Some(t) if !t.is_empty() => next = Some(t.to_string()),
                _ => break,
            }
        }
    }
    if found.is_empty() {
        return Err(Error::NothingMatched {
            class: class.name.clone(),
            field: "securityGroupSelectorTerms",
            what: "security group",
        });
    }
    Ok(found)
}

/// The instance profile a class names itself: `instanceProfile` as given; `None` for `role`,
/// whose profile the provider manages through IAM (`crate::instance_profile`). Checks that the
/// two are not both set and that a role has a name.
fn instance_profile(class: &NodeClassSpec) -> Result<Option<String>> {
    match (&class.instance_profile, &class.role) {
        (Some(_), Some(_)) => Err(invalid(
            class,
            "role".into(),
            "role and instanceProfile are mutually exclusive",
        )),
        (Some(p), None) => Ok(Some(p.clone())),
        (None, Some(role)) => {
            if crate::instance_profile::role_name(role).is_empty() {
                return Err(invalid(class, "role".into(), "empty role name"));
            }
            Ok(None)
        }
        (None, None) => Ok(None),
    }
}

fn invalid(class: &NodeClassSpec, field: String, reason: impl Into<String>) -> Error {
    Error::Invalid {
        class: class.name.clone(),
        field,
        reason: reason.into(),
    }
}

/// A parsed `family@version` alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alias {
    /// The family.
    pub family: AmiFamily,
    /// `latest` or a pinned version such as `v20240807` (AL) or `v1.20.3` (Bottlerocket).
    pub version: String,
}

// === impl Alias ===

impl Alias {
    /// Parses `al2023@latest`, `bottlerocket@v1.20.3`, ...
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (family, version) = s
            .split_once('@')
            .ok_or_else(|| format!("alias {s:?} is not family@version"))?;
        let family = match family.to_ascii_lowercase().as_str() {
            "al2023" => AmiFamily::Al2023,
            "al2" => AmiFamily::Al2,
            "bottlerocket" => AmiFamily::Bottlerocket,
            other => {
                return Err(format!(
                    "alias family {other:?} is not al2023, al2 or bottlerocket"
                ));
            }
        };
        if version != "latest" && !version.starts_with('v') {
            return Err(format!(
                "alias version {version:?} is not latest or v<version>"
            ));
        }
        Ok(Self {
            family,
            version: version.to_string(),
        })
    }

    /// Every SSM parameter Karpenter reads for the alias (`pkg/providers/amifamily`:
    /// `al2023.go`, `al2.go`, `bottlerocket.go` `DescribeImageQuery`), with the architecture
    /// and the variants its image serves:
    /// - AL2023: `amazon-linux-2023/<arch>/<variant>/…`: x86_64 standard, nvidia, neuron;
    ///   arm64 standard, nvidia;
    /// - AL2: `amazon-linux-2` (x86_64 standard), `amazon-linux-2-arm64` (arm64 standard),
    ///   `amazon-linux-2-gpu` (x86_64 nvidia and neuron);
    /// - Bottlerocket: `aws-k8s-<k8s>/x86_64` (standard and neuron), `aws-k8s-<k8s>/arm64`
    ///   (standard), `aws-k8s-<k8s>-nvidia/<arch>` (nvidia).
    pub fn parameters(&self, prefix: &str, k8s: &str) -> Vec<(String, &'static str, Vec<Variant>)> {
        use Variant::{Neuron, Nvidia, Standard};
        let prefix = prefix.trim_end_matches('/');
        let latest = self.version == "latest";
        let v = &self.version;
        match self.family {
            AmiFamily::Al2023 => [
                ("x86_64", Standard),
                ("x86_64", Nvidia),
                ("x86_64", Neuron),
                ("arm64", Standard),
                ("arm64", Nvidia),
            ]
            .into_iter()
            .map(|(arch, variant)| {
                let variant_name = variant.as_str();
                let leaf = if latest {
                    "recommended".to_string()
                } else {
                    format!("amazon-eks-node-al2023-{arch}-{variant_name}-{k8s}-{v}")
                };
                (
                    format!(
                        "{prefix}/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant_name}/{leaf}/image_id"
                    ),
                    arch,
                    vec![variant],
                )
            })
            .collect(),
            AmiFamily::Al2 => [
                ("amazon-linux-2", "amazon-eks-node", "x86_64", vec![Standard]),
                ("amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64", vec![Standard]),
                ("amazon-linux-2-gpu", "amazon-eks-gpu-node", "x86_64", vec![Nvidia, Neuron]),
            ]
            .into_iter()
            .map(|(dir, node, arch, variants)| {
                let leaf = if latest {
                    "recommended".to_string()
                } else {
                    format!("{node}-{k8s}-{v}")
                };
                (
                    format!("{prefix}/eks/optimized-ami/{k8s}/{dir}/{leaf}/image_id"),
                    arch,
                    variants,
                )
            })
            .collect(),
            AmiFamily::Bottlerocket | AmiFamily::Custom => {
                let version = if latest { "latest" } else { v.trim_start_matches('v') };
                [
                    ("", "x86_64", vec![Standard, Neuron]),
                    ("", "arm64", vec![Standard]),
                    ("-nvidia", "x86_64", vec![Nvidia]),
                    ("-nvidia", "arm64", vec![Nvidia]),
                ]
                .into_iter()
                .map(|(flavour, arch, variants)| {
                    (
                        format!("{prefix}/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}/{version}/image_id"),
                        arch,
                        variants,
                    )
                })
                .collect()
            }
        }
    }

    /// The SSM parameter holding the standard image ID for `arch` under `prefix` (AWS's layout
    /// of the EKS optimized and Bottlerocket AMI parameters).
    pub fn parameter(&self, prefix: &str, k8s: &str, arch: &str) -> String {
        let prefix = prefix.trim_end_matches('/');
        let latest = self.version == "latest";
        match self.family {
            AmiFamily::Al2023 => {
                let leaf = if latest {
                    "recommended".to_string()
                } else {
                    format!(
                        "amazon-eks-node-al2023-{arch}-standard-{k8s}-{}",
                        self.version
                    )
                };
                format!(
                    "{prefix}/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/standard/{leaf}/image_id"
                )
            }
            AmiFamily::Al2 => {
                let (dir, node) = if arch == "arm64" {
                    ("amazon-linux-2-arm64", "amazon-eks-arm64-node")
                } else {
                    ("amazon-linux-2", "amazon-eks-node")
                };
                let leaf = if latest {
                    "recommended".to_string()
                } else {
                    format!("{node}-{k8s}-{}", self.version)
                };
                format!("{prefix}/eks/optimized-ami/{k8s}/{dir}/{leaf}/image_id")
            }
            AmiFamily::Bottlerocket | AmiFamily::Custom => {
                let v = if latest {
                    "latest"
                } else {
                    self.version.trim_start_matches('v')
                };
                format!("{prefix}/bottlerocket/aws-k8s-{k8s}/{arch}/{v}/image_id")
            }
        }
    }
}

/// The family and the AMIs (one per architecture) of a node class.
async fn amis(
    ec2: &aws_sdk_ec2::Client,
    ssm: &aws_sdk_ssm::Client,
    config: &Config,
    class: &NodeClassSpec,
) -> Result<(AmiFamily, Vec<Ami>)> {
    let terms = &class.ami_selector_terms;
    if let Some((i, term)) = terms.iter().enumerate().find(|(_, t)| t.alias.is_some()) {
        let field = format!("amiSelectorTerms[{i}].alias");
        if terms.len() > 1 {
            return Err(invalid(class, field, "an alias term must be the only term"));
        }
        let alias = Alias::parse(term.alias.as_deref().unwrap_or_default())
            .map_err(|reason| invalid(class, field.clone(), reason))?;
        let mut amis: Vec<Ami> = Vec::new();
        let parameters = alias.parameters(
            &config.ssm_parameter_prefix,
            &config.cluster.kubernetes_version,
        );
        for (name, arch, variants) in parameters {
            match ssm.get_parameter().name(&name).send().await {
                Ok(out) => {
                    if let Some(id) = out.parameter().and_then(|p| p.value()) {
                        // One image may serve several variants (or parameters).
                        match amis
                            .iter_mut()
                            .find(|a| a.id == id && a.architecture == arch)
                        {
                            Some(a) => a.variants.extend(variants),
                            None => amis.push(Ami {
                                id: id.to_string(),
                                architecture: arch.to_string(),
                                name: None,
                                variants,
                            }),
                        }
                    }
                }
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_parameter_not_found()) => {}
                Err(e) => return Err(from_sdk(&format!("GetParameter {name}"), &e, &[]).into()),
            }
        }
        if amis.is_empty() {
            return Err(Error::NothingMatched {
                class: class.name.clone(),
                field: "amiSelectorTerms",
                what: "SSM parameter of the alias",
            });
        }
        for a in &mut amis {
            a.variants.sort();
            a.variants.dedup();
        }
        amis.sort();
        return Ok((alias.family, amis));
    }
    let family = match &class.ami_family {
        Some(f) => {
            AmiFamily::parse(f).map_err(|e| invalid(class, "amiFamily".into(), e.to_string()))?
        }
        None => {
            return Err(invalid(
                class,
                "amiFamily".into(),
                "required when amiSelectorTerms has no alias",
            ));
        }
    };
    // Newest image per architecture over all terms.
    let mut newest: BTreeMap<String, (String, String, Option<String>)> = BTreeMap::new();
    for (i, term) in terms.iter().enumerate() {
        let mut filters = ami_filters(term);
        // `ssmParameter`: the image ID the parameter holds (Karpenter reads it, then selects
        // the image like an `id` term).
        if let Some(name) = &term.ssm_parameter {
            let field = format!("amiSelectorTerms[{i}].ssmParameter");
            let id = match ssm.get_parameter().name(name).send().await {
                Ok(out) => out
                    .parameter()
                    .and_then(|p| p.value())
                    .map(str::to_string)
                    .ok_or_else(|| invalid(class, field.clone(), format!("{name} has no value")))?,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_parameter_not_found()) =>
                {
                    return Err(invalid(
                        class,
                        field,
                        format!("SSM parameter {name} not found"),
                    ));
                }
                Err(e) => return Err(from_sdk(&format!("GetParameter {name}"), &e, &[]).into()),
            };
            filters.push(filter("image-id", &id));
        }
        if filters.is_empty() && term.owner.is_none() {
            return Err(invalid(
                class,
                format!("amiSelectorTerms[{i}]"),
                "empty term",
            ));
        }
        let mut req = ec2.describe_images().set_filters(Some(filters));
        if let Some(owner) = &term.owner {
            req = req.owners(owner);
        }
        let out = req.send().await.map_err(|e| {
            from_sdk(
                &format!("DescribeImages for EC2NodeClass {}", class.name),
                &e,
                &[],
            )
        })?;
        for image in out.images() {
            let (Some(id), Some(arch)) = (image.image_id(), image.architecture()) else {
                continue;
            };
            let arch = arch.as_str().to_string();
            let date = image.creation_date().unwrap_or_default().to_string();
            let better = newest
                .get(&arch)
                .is_none_or(|(d, old, _)| (date.as_str(), id) > (d.as_str(), old.as_str()));
            if better {
                newest.insert(
                    arch,
                    (date, id.to_string(), image.name().map(str::to_string)),
                );
            }
        }
    }
    if newest.is_empty() {
        return Err(Error::NothingMatched {
            class: class.name.clone(),
            field: "amiSelectorTerms",
            what: "image",
        });
    }
    let amis = newest
        .into_iter()
        .map(|(architecture, (_, id, name))| Ami {
            id,
            architecture,
            name,
            variants: Vec::new(),
        })
        .collect();
    Ok((family, amis))
}

fn ami_filters(term: &AmiSelectorTerm) -> Vec<Filter> {
    let mut filters = tag_filters(&term.tags);
    if let Some(id) = &term.id {
        filters.push(filter("image-id", id));
    }
    if let Some(name) = &term.name {
        filters.push(filter("name", name));
    }
    filters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_parameters_follow_aws_layout() {
        let p = "/aws/service";
        let a = Alias::parse("al2023@latest").unwrap();
        assert_eq!(
            a.parameter(p, "1.33", "arm64"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"
        );
        let a = Alias::parse("al2023@v20240807").unwrap();
        assert_eq!(
            a.parameter(p, "1.30", "x86_64"),
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240807/image_id"
        );
        let a = Alias::parse("al2@latest").unwrap();
        assert_eq!(
            a.parameter(p, "1.30", "arm64"),
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id"
        );
        let a = Alias::parse("al2@v20240807").unwrap();
        assert_eq!(
            a.parameter(p, "1.30", "x86_64"),
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/amazon-eks-node-1.30-v20240807/image_id"
        );
        let a = Alias::parse("bottlerocket@latest").unwrap();
        assert_eq!(
            a.parameter("/test/", "1.33", "x86_64"),
            "/test/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id"
        );
        let a = Alias::parse("bottlerocket@v1.20.3").unwrap();
        assert_eq!(
            a.parameter(p, "1.33", "arm64"),
            "/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.20.3/image_id"
        );
    }

    #[test]
    fn bad_aliases_say_why() {
        assert!(
            Alias::parse("al2023")
                .unwrap_err()
                .contains("family@version")
        );
        assert!(
            Alias::parse("windows@latest")
                .unwrap_err()
                .contains("windows")
        );
        assert!(
            Alias::parse("al2023@20240807")
                .unwrap_err()
                .contains("20240807")
        );
    }

    #[test]
    fn role_leaves_the_profile_to_iam_and_excludes_instance_profile() {
        let mut class = NodeClassSpec {
            name: "default".into(),
            role: Some("arn:aws:iam::123456789012:role/nodes/KarpenterNodeRole".into()),
            ..NodeClassSpec::default()
        };
        assert_eq!(instance_profile(&class).unwrap(), None);
        class.role = Some("arn:aws:iam::123456789012:role/".into());
        assert!(instance_profile(&class).is_err());
        class.role = Some("KarpenterNodeRole".into());
        class.instance_profile = Some("p".into());
        let e = instance_profile(&class).unwrap_err();
        assert!(
            e.to_string().contains("EC2NodeClass default: spec.role"),
            "{e}"
        );
    }

    #[test]
    fn subnet_for_a_zone_has_the_most_free_addresses() {
        let r = Resolved {
            subnets: vec![
                Subnet {
                    id: "subnet-a".into(),
                    zone: "z1".into(),
                    available_ips: 10,
                    zone_id: None,
                },
                Subnet {
                    id: "subnet-b".into(),
                    zone: "z1".into(),
                    available_ips: 200,
                    zone_id: None,
                },
                Subnet {
                    id: "subnet-c".into(),
                    zone: "z2".into(),
                    available_ips: 5,
                    zone_id: None,
                },
            ],
            security_groups: vec![],
            amis: vec![],
            family: AmiFamily::Al2023,
            instance_profile: None,
        };
        assert_eq!(r.subnet_for("z1").unwrap().id, "subnet-b");
        assert_eq!(r.subnet_for("z3"), None);
        assert_eq!(r.zones().into_iter().collect::<Vec<_>>(), ["z1", "z2"]);
    }
}
