//! What a launch needs to know of an instance type's hardware: architecture, AMI variant and
//! the network facts the kubelet's max pods come from, from DescribeInstanceTypes or, where EC2
//! does not describe a type, from its name.

use std::collections::HashMap;

use aws_sdk_ec2::types::InstanceType as Ec2InstanceType;
use cloud::{Error, Result};
use common::ec2::overhead;

use super::Ec2Provider;
use crate::error::from_sdk;
use crate::resolve::Variant;
use crate::user_data::AmiFamily;

// === impl Ec2Provider ===

impl Ec2Provider {
    /// The architecture (`x86_64`, `arm64`) and the AMI variant (GPUs, accelerators, neither)
    /// of each instance type, from DescribeInstanceTypes (remembered), falling back to AWS's
    /// naming (a `g` after the generation means Graviton; `g`/`p` families have GPUs, `inf`/`trn`
    /// Neuron accelerators).
    pub(super) async fn hardware(&self, types: &[&str]) -> Result<HashMap<String, Hardware>> {
        let missing: Vec<String> = {
            let known = self.architectures.lock().unwrap_or_else(|e| e.into_inner());
            let mut m: Vec<String> = types
                .iter()
                .filter(|t| !known.contains_key(**t))
                .map(|t| t.to_string())
                .collect();
            m.sort();
            m.dedup();
            m
        };
        if !missing.is_empty() {
            let out = self
                .ec2
                .describe_instance_types()
                .set_instance_types(Some(
                    missing
                        .iter()
                        .map(|t| Ec2InstanceType::from(t.as_str()))
                        .collect(),
                ))
                .send()
                .await;
            let mut found = HashMap::new();
            match out {
                Ok(out) => {
                    for it in out.instance_types() {
                        // The first architecture Kubernetes knows, as Karpenter reads it
                        // (`getArchitecture`, aws/karpenter-provider-aws
                        // `pkg/providers/instancetype/types.go`): old types list `i386`
                        // first (m1.small: i386, x86_64), and no AMI is ever `i386`.
                        let (Some(name), Some(arch)) = (
                            it.instance_type(),
                            it.processor_info().and_then(|p| {
                                p.supported_architectures()
                                    .iter()
                                    .find(|a| KNOWN_ARCHITECTURES.contains(&a.as_str()))
                            }),
                        ) else {
                            continue;
                        };
                        let gpus = it.gpu_info().is_some_and(|g| !g.gpus().is_empty());
                        let accelerators = it.neuron_info().is_some()
                            || it
                                .inference_accelerator_info()
                                .is_some_and(|a| !a.accelerators().is_empty());
                        let network = it.network_info().map(|n| {
                            let card0 = n
                                .network_cards()
                                .iter()
                                .find(|c| c.network_card_index() == Some(0))
                                .and_then(|c| c.maximum_network_interfaces());
                            Network {
                                vcpus: it
                                    .v_cpu_info()
                                    .and_then(|v| v.default_v_cpus())
                                    .map_or(0, i64::from),
                                enis: i64::from(
                                    card0.or(n.maximum_network_interfaces()).unwrap_or(0),
                                ),
                                ipv4_per_eni: i64::from(
                                    n.ipv4_addresses_per_interface().unwrap_or(0),
                                ),
                            }
                        });
                        found.insert(
                            name.as_str().to_string(),
                            Hardware {
                                arch: arch.as_str().to_string(),
                                variant: Variant::for_hardware(gpus, accelerators),
                                network,
                            },
                        );
                    }
                }
                Err(e) => {
                    let err = from_sdk("DescribeInstanceTypes", &e, &[]);
                    if !matches!(err, Error::InvalidRequest { .. }) {
                        return Err(err);
                    }
                    tracing::debug!(error = %err, "DescribeInstanceTypes failed, guessing hardware from names");
                }
            }
            let mut known = self.architectures.lock().unwrap_or_else(|e| e.into_inner());
            for t in missing {
                let hw = found.remove(&t).unwrap_or_else(|| {
                    let (arch, variant) = guess_hardware(&t);
                    Hardware {
                        arch,
                        variant,
                        network: None,
                    }
                });
                known.insert(t, hw);
            }
        }
        let known = self.architectures.lock().unwrap_or_else(|e| e.into_inner());
        Ok(types
            .iter()
            .filter_map(|t| known.get(*t).map(|a| (t.to_string(), a.clone())))
            .collect())
    }
}

/// What a launch needs to know of an instance type's hardware.
#[derive(Clone, Debug)]
pub(super) struct Hardware {
    /// The EC2 architecture its AMI is for.
    pub(super) arch: String,
    /// The AMI variant (GPUs, accelerators, neither).
    pub(super) variant: Variant,
    /// vCPUs and ENIs, for the kubelet's max pods; `None` when EC2 did not describe the type.
    network: Option<Network>,
}

/// The facts Karpenter sizes max pods from.
#[derive(Clone, Copy, Debug)]
struct Network {
    vcpus: i64,
    /// ENIs of the default network card.
    enis: i64,
    ipv4_per_eni: i64,
}

// === impl Hardware ===

impl Hardware {
    /// The kubelet's max pods on this type for a node class of `family` with `kubelet`, the
    /// count the planner's allocatable assumes (`reserved_enis`: Karpenter's `reservedENIs`);
    /// `None` when the type's ENIs are not known and the class sets no `maxPods`.
    pub(super) fn max_pods(
        &self,
        family: AmiFamily,
        kubelet: Option<&cloud::node_class::KubeletConfig>,
        reserved_enis: u32,
    ) -> Option<i64> {
        let max = kubelet.and_then(|k| k.max_pods).map(i64::from);
        let per_core = kubelet.and_then(|k| k.pods_per_core).map(i64::from);
        let Some(n) = self.network else {
            return max;
        };
        Some(overhead::max_pods(
            overhead::eni_limited_pods_reserving(n.enis, n.ipv4_per_eni, i64::from(reserved_enis)),
            n.vcpus,
            // Every family this provider launches (not Windows) has ENI-limited pod density.
            true,
            family != AmiFamily::Bottlerocket,
            max,
            per_core,
        ))
    }
}

/// `x86_64` unless the family has a `g` after its generation digit (`m7g`, `c6gd`, `t4g`).
fn guess_architecture(instance_type: &str) -> &'static str {
    let family = instance_type.split('.').next().unwrap_or_default();
    let after_digit = family
        .find(|c: char| c.is_ascii_digit())
        .map(|i| &family[i + 1..])
        .unwrap_or_default();
    if after_digit.starts_with('g') {
        "arm64"
    } else {
        "x86_64"
    }
}

/// The EC2 architectures Karpenter maps to Kubernetes' (`AWSToKubeArchitectures`,
/// aws/karpenter-provider-aws `pkg/apis/v1/labels.go`).
const KNOWN_ARCHITECTURES: [&str; 2] = ["x86_64", "arm64"];

/// The architecture and variant of a type EC2 did not describe, from its name: `g`/`p`
/// families (`g5`, `p4d`, `g5g`) have GPUs, `inf`/`trn` families Neuron accelerators.
fn guess_hardware(instance_type: &str) -> (String, Variant) {
    let family = instance_type.split('.').next().unwrap_or_default();
    let letters: String = family
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    let variant = match letters.as_str() {
        "g" | "p" | "gr" => Variant::Nvidia,
        "inf" | "trn" => Variant::Neuron,
        _ => Variant::Standard,
    };
    (guess_architecture(instance_type).to_string(), variant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graviton_types_are_arm64() {
        assert_eq!(guess_architecture("m7g.large"), "arm64");
        assert_eq!(guess_architecture("c6gd.xlarge"), "arm64");
        assert_eq!(guess_architecture("t4g.micro"), "arm64");
        assert_eq!(guess_architecture("m5.large"), "x86_64");
        assert_eq!(guess_architecture("g5.xlarge"), "x86_64");
        assert_eq!(guess_architecture("m7i.large"), "x86_64");
    }

    #[test]
    fn gpu_and_neuron_families_are_guessed_by_name() {
        assert_eq!(guess_hardware("g5.xlarge").1, Variant::Nvidia);
        assert_eq!(guess_hardware("p4d.24xlarge").1, Variant::Nvidia);
        assert_eq!(
            guess_hardware("g5g.xlarge"),
            ("arm64".into(), Variant::Nvidia)
        );
        assert_eq!(guess_hardware("inf2.xlarge").1, Variant::Neuron);
        assert_eq!(guess_hardware("trn1.2xlarge").1, Variant::Neuron);
        assert_eq!(guess_hardware("m5.large").1, Variant::Standard);
    }
}
