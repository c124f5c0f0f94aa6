//! Karpenter's global settings that change what an instance type holds, applied to a catalog
//! for one plan ([`for_options`]):
//!
//! - `vmMemoryOverheadPercent` (`VM_MEMORY_OVERHEAD_PERCENT`, default 0.075): memory capacity is
//!   the type's EC2 memory (minus Graviton's 64 MiB) minus `ceil(MiB × percent)` MiB
//!   (aws/karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/types.go` `memory`). The
//!   EC2 memory comes from the type's `karpenter.k8s.aws/instance-memory` label.
//! - `reservedENIs` (`RESERVED_ENIS`, default 0): the ENI-limited max pods counts
//!   `max(0, ENIs of the default card − reserved) × (IPv4 per ENI − 1) + 2`, and 0 when no ENI
//!   is left (`ENILimitedPods`). The ENI facts come from the built-in EC2 data, by type name.
//!   Kube-reserved memory keeps the unreserved ENI-limited pods, as Karpenter computes it for
//!   the families that size it from the ENI limit (`types.go` passes 0 reserved ENIs there);
//!   Bottlerocket, which sizes it from the node's max pods in Karpenter, keeps the unreserved
//!   value here too.
//!
//! Only values still at what the defaults give are changed: a catalog file's explicit
//! capacity, or a type the built-in data does not know, is kept as given. With both settings
//! at their defaults the catalog is used as it is, without a copy.

use std::borrow::Cow;

use common::ec2::overhead::{
    capacity_memory, capacity_memory_with, eni_limited_pods, eni_limited_pods_reserving,
};
use common::labels;

use super::{Catalog, InstanceType, aws};
use crate::model::PlanOptions;

/// The catalog as `options`' `reservedENIs` and `vmMemoryOverheadPercent` make it.
pub fn for_options<'a>(catalog: &'a Catalog, options: &PlanOptions) -> Cow<'a, Catalog> {
    let fraction = options.vm_memory_overhead_percent;
    if options.reserved_enis == 0 && fraction.is_default() {
        return Cow::Borrowed(catalog);
    }
    let mut out = catalog.clone();
    for it in &mut out.instance_types {
        apply(it, i64::from(options.reserved_enis), fraction.0);
    }
    Cow::Owned(out)
}

fn apply(it: &mut InstanceType, reserved_enis: i64, fraction: f64) {
    let arm64 = it.labels.get(labels::ARCH).map(String::as_str) == Some("arm64");
    if let Some(mib) = it
        .labels
        .get(labels::INSTANCE_MEMORY)
        .and_then(|m| m.parse::<i64>().ok())
        && it.capacity.memory == capacity_memory(mib, arm64)
    {
        it.capacity.memory = capacity_memory_with(mib, arm64, fraction);
    }
    if reserved_enis > 0
        && let Some((enis, ipv4)) = aws::eni_facts(&it.name)
        && it.capacity.pods == eni_limited_pods(enis, ipv4)
    {
        it.capacity.pods = eni_limited_pods_reserving(enis, ipv4, reserved_enis);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::overhead::MIB;
    use crate::model::VmMemoryOverhead;

    fn catalog() -> Catalog {
        aws::builtin("us-east-1").expect("built-in catalog")
    }

    #[test]
    fn defaults_leave_the_catalog_alone() {
        let c = catalog();
        assert!(matches!(
            for_options(&c, &PlanOptions::default()),
            Cow::Borrowed(_)
        ));
    }

    /// m5.large: 8192 MiB, 3 ENIs × 10 IPv4 (29 pods). Hand-computed as Karpenter does.
    #[test]
    fn memory_overhead_and_reserved_enis_follow_karpenters_formulas() {
        let c = catalog();
        let options = PlanOptions {
            reserved_enis: 1,
            vm_memory_overhead_percent: VmMemoryOverhead(0.1),
            ..PlanOptions::default()
        };
        let out = for_options(&c, &options);
        let m5 = out.get("m5.large").expect("m5.large");
        // 8192 − ceil(819.2) = 7372 MiB.
        assert_eq!(m5.capacity.memory, 7372 * MIB);
        // (3 − 1) × (10 − 1) + 2.
        assert_eq!(m5.capacity.pods, 20);
        let base = c.get("m5.large").expect("m5.large");
        assert_eq!(
            m5.overhead, base.overhead,
            "kube-reserved memory keeps the unreserved ENI limit"
        );
        // Graviton: 64 MiB of CMA first. m6g.large: 8192 MiB → 8128 − ceil(812.8) = 7315.
        let m6g = out.get("m6g.large").expect("m6g.large");
        assert_eq!(m6g.capacity.memory, 7315 * MIB);
        // Every ENI reserved: no pods (t3.nano has 2 ENIs).
        let all = PlanOptions {
            reserved_enis: 2,
            ..PlanOptions::default()
        };
        let out = for_options(&c, &all);
        assert_eq!(out.get("t3.nano").expect("t3.nano").capacity.pods, 0);
        assert_eq!(
            out.get("t3.nano").expect("t3.nano").capacity.memory,
            c.get("t3.nano").expect("t3.nano").capacity.memory
        );
    }

    #[test]
    fn explicit_capacities_are_kept() {
        let mut c = catalog();
        let it = c
            .instance_types
            .iter_mut()
            .find(|t| t.name == "m5.large")
            .expect("m5.large");
        it.capacity.memory = 4 << 30;
        it.capacity.pods = 58;
        let options = PlanOptions {
            reserved_enis: 1,
            vm_memory_overhead_percent: VmMemoryOverhead(0.0),
            ..PlanOptions::default()
        };
        let out = for_options(&c, &options);
        let m5 = out.get("m5.large").expect("m5.large");
        assert_eq!((m5.capacity.memory, m5.capacity.pods), (4 << 30, 58));
    }
}
