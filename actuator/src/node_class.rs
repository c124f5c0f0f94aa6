//! The node a claim becomes, as the cloud provider needs it ([`cloud::NodeSpec`]): the
//! EC2NodeClass (`crds::EC2NodeClass`) converted to [`cloud::NodeClassSpec`], plus the labels
//! and taints the claim's node registers with.

use cloud::node_class::{
    AmiSelectorTerm, BlockDeviceMapping, Ebs, KubeletConfig, MetadataOptions, NodeClassSpec,
    NodeSpec, SelectorTerm,
};
use crds::EC2NodeClass;
use serde::Serialize;

use crate::launch::LaunchSpec;

/// A value that does not convert.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A block device's `volumeSize` is not a Kubernetes quantity.
    #[error(
        "EC2NodeClass {class}: spec.blockDeviceMappings[{index}].ebs.volumeSize: invalid quantity {value:?}"
    )]
    VolumeSize {
        /// The EC2NodeClass.
        class: String,
        /// Index of the mapping.
        index: usize,
        /// The value given.
        value: String,
    },
}

/// The name serde gives an enum value (`AL2023`, `gp3`, `required`).
fn name_of<T: Serialize>(v: &T) -> Option<String> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => Some(s),
        _ => None,
    }
}

/// The EC2NodeClass as the provider reads it.
///
/// # Errors
/// [`Error::VolumeSize`] when a volume size is not a quantity.
pub fn node_class_spec(class: &EC2NodeClass) -> Result<NodeClassSpec, Error> {
    let name = class.metadata.name.clone().unwrap_or_default();
    let s = &class.spec;
    let mut block_device_mappings = Vec::new();
    for (index, m) in s.block_device_mappings.iter().flatten().enumerate() {
        let ebs = match &m.ebs {
            Some(e) => {
                let volume_size_gib = match &e.volume_size {
                    Some(v) => {
                        let bytes =
                            common::quantity::parse_units(v).map_err(|_| Error::VolumeSize {
                                class: name.clone(),
                                index,
                                value: v.clone(),
                            })?;
                        Some(i32::try_from((bytes + (1 << 30) - 1) >> 30).unwrap_or(i32::MAX))
                    }
                    None => None,
                };
                Ebs {
                    volume_size_gib,
                    volume_type: e.volume_type.as_ref().and_then(name_of),
                    iops: e.iops.map(|v| i32::try_from(v).unwrap_or(i32::MAX)),
                    throughput: e.throughput.map(|v| i32::try_from(v).unwrap_or(i32::MAX)),
                    encrypted: e.encrypted,
                    kms_key_id: e.kms_key_id.clone(),
                    delete_on_termination: e.delete_on_termination,
                    snapshot_id: e.snapshot_id.clone(),
                }
            }
            None => Ebs::default(),
        };
        block_device_mappings.push(BlockDeviceMapping {
            device_name: m.device_name.clone().unwrap_or_default(),
            ebs,
            root_volume: m.root_volume.unwrap_or(false),
        });
    }
    Ok(NodeClassSpec {
        name: name.clone(),
        ami_family: s.ami_family.as_ref().and_then(name_of),
        ami_selector_terms: s
            .ami_selector_terms
            .iter()
            .map(|t| AmiSelectorTerm {
                alias: t.alias.clone(),
                tags: t.tags.clone().unwrap_or_default().into_iter().collect(),
                id: t.id.clone(),
                name: t.name.clone(),
                owner: t.owner.clone(),
                ssm_parameter: t.ssm_parameter.clone(),
            })
            .collect(),
        subnet_selector_terms: s
            .subnet_selector_terms
            .iter()
            .map(|t| SelectorTerm {
                tags: t.tags.clone().unwrap_or_default().into_iter().collect(),
                id: t.id.clone(),
                name: None,
            })
            .collect(),
        security_group_selector_terms: s
            .security_group_selector_terms
            .iter()
            .map(|t| SelectorTerm {
                tags: t.tags.clone().unwrap_or_default().into_iter().collect(),
                id: t.id.clone(),
                name: t.name.clone(),
            })
            .collect(),
        role: s.role.clone(),
        instance_profile: s.instance_profile.clone(),
        user_data: s.user_data.clone(),
        tags: s.tags.clone().unwrap_or_default().into_iter().collect(),
        block_device_mappings,
        metadata_options: s.metadata_options.as_ref().map(|m| MetadataOptions {
            http_endpoint: m.http_endpoint.as_ref().and_then(name_of),
            http_protocol_ipv6: m.http_protocol_ipv6.as_ref().and_then(name_of),
            http_put_response_hop_limit: m
                .http_put_response_hop_limit
                .map(|v| i32::try_from(v).unwrap_or(i32::MAX)),
            http_tokens: m.http_tokens.as_ref().and_then(name_of),
        }),
        kubelet: s.kubelet.as_ref().map(|k| KubeletConfig {
            max_pods: k.max_pods,
            pods_per_core: k.pods_per_core,
            cluster_dns: k.cluster_dns.clone().unwrap_or_default(),
            system_reserved: k.system_reserved.clone().unwrap_or_default(),
            kube_reserved: k.kube_reserved.clone().unwrap_or_default(),
            eviction_hard: k.eviction_hard.clone().unwrap_or_default(),
            eviction_soft: k.eviction_soft.clone().unwrap_or_default(),
        }),
        associate_public_ip_address: s.associate_public_ip_address,
        detailed_monitoring: s.detailed_monitoring,
    })
}

/// The fields of `class` that are set but that no launch honours (`docs` table:
/// `designs/ec2nodeclass-fields.md`), by their path, so that the class is
/// `ValidationSucceeded=False` naming them instead of launching without them.
pub fn unhonoured_fields(class: &EC2NodeClass) -> Vec<String> {
    let s = &class.spec;
    let mut out: Vec<String> = Vec::new();
    let mut set = |on: bool, path: &str| {
        if on {
            out.push(format!("spec.{path}"));
        }
    };
    set(
        s.capacity_reservation_selector_terms
            .as_ref()
            .is_some_and(|t| !t.is_empty()),
        "capacityReservationSelectorTerms",
    );
    set(s.instance_store_policy.is_some(), "instanceStorePolicy");
    set(s.context.is_some(), "context");
    set(s.ip_prefix_count.is_some(), "ipPrefixCount");
    set(s.connection_tracking.is_some(), "connectionTracking");
    set(s.cpu_options.is_some(), "cpuOptions");
    set(
        s.network_interfaces.as_ref().is_some_and(|n| !n.is_empty()),
        "networkInterfaces",
    );
    set(
        s.placement_group_selector.is_some(),
        "placementGroupSelector",
    );
    let windows = |name: &str| name.to_ascii_lowercase().starts_with("windows");
    if let Some(f) = &s.ami_family {
        let name = serde_json::to_value(f)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        set(windows(&name), "amiFamily (Windows)");
    }
    for (i, t) in s.ami_selector_terms.iter().enumerate() {
        set(
            t.alias.as_deref().is_some_and(windows),
            &format!("amiSelectorTerms[{i}].alias (Windows)"),
        );
    }
    for (i, m) in s.block_device_mappings.iter().flatten().enumerate() {
        set(
            m.ebs
                .as_ref()
                .is_some_and(|e| e.volume_initialization_rate.is_some()),
            &format!("blockDeviceMappings[{i}].ebs.volumeInitializationRate"),
        );
    }
    if let Some(k) = &s.kubelet {
        set(
            k.eviction_soft_grace_period.is_some(),
            "kubelet.evictionSoftGracePeriod",
        );
        set(
            k.eviction_max_pod_grace_period.is_some(),
            "kubelet.evictionMaxPodGracePeriod",
        );
        set(
            k.image_gc_high_threshold_percent.is_some(),
            "kubelet.imageGCHighThresholdPercent",
        );
        set(
            k.image_gc_low_threshold_percent.is_some(),
            "kubelet.imageGCLowThresholdPercent",
        );
        set(k.cpu_cfs_quota.is_some(), "kubelet.cpuCFSQuota");
    }
    out
}

/// The node of `spec` launched from `class`: the claim's labels (without per-claim values such
/// as the NodeClaim name) and its taints followed by its startup taints.
pub fn node_spec(spec: &LaunchSpec, class: NodeClassSpec) -> NodeSpec {
    let labels = spec
        .labels
        .iter()
        .filter(|(k, _)| k.as_str() != "karpenter.sh/nodeclaim")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let taints = spec
        .taints
        .iter()
        .chain(&spec.startup_taints)
        .cloned()
        .collect();
    NodeSpec {
        class,
        labels,
        taints,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(json: serde_json::Value) -> EC2NodeClass {
        serde_json::from_value(json).expect("an EC2NodeClass")
    }

    #[test]
    fn fields_set_but_not_honoured_are_named() {
        let c = class(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiSelectorTerms": [{"alias": "windows2022@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-1"}],
                "securityGroupSelectorTerms": [{"id": "sg-1"}],
                "role": "KarpenterNodeRole",
                "instanceStorePolicy": "RAID0",
                "cpuOptions": {"coreCount": 2, "threadsPerCore": 1},
                "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {
                    "volumeSize": "20Gi", "snapshotID": "snap-1", "volumeInitializationRate": 200}}],
                "kubelet": {"maxPods": 50, "cpuCFSQuota": false, "imageGCHighThresholdPercent": 80}
            }
        }));
        assert_eq!(
            unhonoured_fields(&c),
            [
                "spec.instanceStorePolicy",
                "spec.cpuOptions",
                "spec.amiSelectorTerms[0].alias (Windows)",
                "spec.blockDeviceMappings[0].ebs.volumeInitializationRate",
                "spec.kubelet.imageGCHighThresholdPercent",
                "spec.kubelet.cpuCFSQuota",
            ]
        );
        let plain = class(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-1"}],
                "securityGroupSelectorTerms": [{"id": "sg-1"}],
                "role": "KarpenterNodeRole",
                "kubelet": {"maxPods": 50}
            }
        }));
        assert!(unhonoured_fields(&plain).is_empty());
    }

    #[test]
    fn the_node_class_converts_field_by_field_and_volume_sizes_become_gib() {
        let c = class(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiFamily": "AL2023",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}],
                "securityGroupSelectorTerms": [{"id": "sg-1"}],
                "role": "KarpenterNodeRole",
                "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true,
                    "ebs": {"volumeSize": "20Gi", "volumeType": "gp3"}}],
                "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1}
            }
        }));
        let s = node_class_spec(&c).expect("converts");
        assert_eq!(s.name, "default");
        assert_eq!(s.ami_family.as_deref(), Some("AL2023"));
        assert_eq!(
            s.ami_selector_terms[0].alias.as_deref(),
            Some("al2023@latest")
        );
        assert_eq!(
            s.subnet_selector_terms[0].tags["karpenter.sh/discovery"],
            "prod"
        );
        assert_eq!(
            s.security_group_selector_terms[0].id.as_deref(),
            Some("sg-1")
        );
        assert_eq!(s.role.as_deref(), Some("KarpenterNodeRole"));
        let b = &s.block_device_mappings[0];
        assert!(b.root_volume);
        assert_eq!(b.ebs.volume_size_gib, Some(20));
        assert_eq!(b.ebs.volume_type.as_deref(), Some("gp3"));
        let m = s.metadata_options.expect("metadata options");
        assert_eq!(m.http_tokens.as_deref(), Some("required"));
        assert_eq!(m.http_put_response_hop_limit, Some(1));
    }

    #[test]
    fn node_labels_drop_the_claim_name_and_taints_include_startup_taints() {
        let mut spec = LaunchSpec::default();
        spec.labels
            .insert("karpenter.sh/nodeclaim".into(), "c1".into());
        spec.labels.insert("team".into(), "a".into());
        spec.taints.push(crate::launch::Taint {
            key: "gpu".into(),
            value: String::new(),
            effect: crate::launch::TaintEffect::NoSchedule,
        });
        spec.startup_taints.push(crate::launch::Taint {
            key: "init".into(),
            value: String::new(),
            effect: crate::launch::TaintEffect::NoExecute,
        });
        let n = node_spec(&spec, NodeClassSpec::default());
        assert_eq!(n.labels.len(), 1);
        assert_eq!(n.labels["team"], "a");
        let keys: Vec<_> = n.taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["gpu", "init"]);
    }
}
