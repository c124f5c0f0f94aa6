//! Karpenter's `ignoreDRARequests` setting and the words it uses for a pod it refuses, shared by
//! the planner (which refuses the pod) and the watcher (which logs the refusal as Karpenter's
//! `Results.Record` does). kubernetes-sigs/karpenter `pkg/operator/options/options.go` and
//! `pkg/controllers/provisioning/scheduling/scheduler.go`.

/// Karpenter's default of `ignoreDRARequests` (`IGNORE_DRA_REQUESTS`, `--ignore-dra-requests`).
pub const IGNORE_DRA_REQUESTS_DEFAULT: bool = true;

/// The error of a pod with DRA requirements while `ignoreDRARequests` is on (Karpenter's
/// `DRAError`); its `FailedScheduling` Event reads "Failed to schedule pod, " and this.
pub const REFUSED: &str =
    "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter";

/// What Karpenter logs (at info) for such a pod.
pub const REFUSED_LOG: &str =
    "skipping pod with Dynamic Resource Allocation requirements, not yet supported by Karpenter";
