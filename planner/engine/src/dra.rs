//! Dynamic Resource Allocation (DRA) as Karpenter v1.14 (AWS) plans it, under Karpenter's
//! `ignoreDRARequests` setting ([`PlanOptions::ignore_dra_requests`], env
//! `IGNORE_DRA_REQUESTS`, default true), read from kubernetes-sigs/karpenter v1.14.1:
//!
//! - `pkg/utils/pod/scheduling.go` `HasDRARequirements`: a pod has DRA requirements when
//!   `spec.resourceClaims` or any (init) container's `resources.claims` is non-empty
//!   ([`Pod::has_dra_requirements`]).
//! - `pkg/controllers/provisioning/scheduling/scheduler.go` `add`: with the setting on, such a
//!   pod fails with a `DRAError`, "pod has Dynamic Resource Allocation requirements that are not
//!   yet supported by Karpenter" ([`REFUSED`]); `trySchedule` never relaxes its preferences for
//!   it, and `Results.Record` publishes it as the pod's `FailedScheduling` Event. The same
//!   scheduler runs consolidation's simulations, so a node whose pods include one that cannot
//!   move is no candidate to remove.
//! - `shouldSkipDaemonPod` and `buildDaemonOverheadGroups`: DaemonSet pods with DRA
//!   requirements add no daemon overhead while the setting is on ([`daemon_counts`]).
//! - With the setting off, v1.14 simulates device allocation (`pkg/scheduling/dynamicresources`,
//!   the provisioner's `gatherResourceSlices`/`gatherAllocatedDevices`) against the cluster's
//!   ResourceSlices and the cloud provider's per-instance-type `ResourceSliceTemplates`. The AWS
//!   provider v1.14 publishes no templates (and NodeOverlays carry none), so a new NodeClaim
//!   offers only devices reachable from any node: [`apply`] is that simulation, run once
//!   before scheduling. See its documentation for what it does and does not model.

mod alloc;
mod cel;

pub use alloc::{UNSATISFIABLE, apply};

use crate::model::{PlanOptions, Pod};

/// The reason of a pod refused while `ignoreDRARequests` is on: Karpenter's `DRAError`.
pub use common::dra::REFUSED;

/// Karpenter's default of `ignoreDRARequests`.
pub fn ignore_default() -> bool {
    common::dra::IGNORE_DRA_REQUESTS_DEFAULT
}

/// True when `pod` is not planned for: it has DRA requirements and `ignoreDRARequests` is on.
pub fn refused(pod: &Pod, options: &PlanOptions) -> bool {
    options.ignore_dra_requests && pod.has_dra_requirements()
}

/// Why `pod` cannot be planned, if it cannot: Karpenter's `DRAError` while `ignoreDRARequests`
/// is on; with it off, why its claims cannot be allocated anywhere ([`apply`]).
pub fn refusal(pod: &Pod, options: &PlanOptions) -> Option<String> {
    if refused(pod, options) {
        return Some(REFUSED.to_string());
    }
    pod.dra_unsatisfiable.clone()
}

/// True when a DaemonSet whose pod template is `template` adds daemon overhead to nodes.
pub fn daemon_counts(template: &Pod, options: &PlanOptions) -> bool {
    !refused(template, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_only_with_claims_and_the_setting_on() {
        let plain = Pod::default();
        let dra = Pod {
            resource_claims: vec!["gpu".into()],
            ..Pod::default()
        };
        let on = PlanOptions::default();
        assert!(on.ignore_dra_requests, "Karpenter's default is true");
        let off = PlanOptions {
            ignore_dra_requests: false,
            ..PlanOptions::default()
        };
        assert!(refused(&dra, &on));
        assert!(!refused(&plain, &on));
        assert!(!refused(&dra, &off));
        assert!(!daemon_counts(&dra, &on));
        assert!(daemon_counts(&dra, &off));
    }
}
