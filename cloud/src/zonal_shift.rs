//! ARC (Application Recovery Controller) zonal shifts of the cluster, as Karpenter reads them
//! when `ENABLE_ZONAL_SHIFT` is on (aws/karpenter-provider-aws v1.14.1
//! `pkg/providers/arczonalshift/arczonalshift.go`: `GetManagedResource` with the EKS cluster's
//! ARN; each shift's `awayFrom` zone ID, `expiryTime` and `appliedStatus`).
//!
//! The source only reads; the actuator keeps the last good answer and decides which shifts are
//! in force now (applied, not expired).

use async_trait::async_trait;

use crate::{Result, Timestamp};

/// One zonal shift on the cluster, as ARC reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZonalShift {
    /// The zone ID traffic is shifted away from (ARC's `awayFrom`), e.g. `use1-az1`.
    pub zone_id: String,
    /// Its zone name (e.g. `us-east-1a`) in this account, `None` when the account has no zone
    /// with that ID.
    pub zone: Option<String>,
    /// When the shift ends unless extended (Unix seconds).
    pub expiry: Timestamp,
    /// ARC's `appliedStatus` is `APPLIED` (a shift can be `NOT_APPLIED` when another shift or
    /// autoshift takes precedence).
    pub applied: bool,
}

/// Where the cluster's zonal shifts come from (ARC's `GetManagedResource` in production).
#[async_trait]
pub trait ZonalShiftSource: Send + Sync {
    /// Every zonal shift on the cluster's managed resource now, active or not yet expired.
    ///
    /// # Errors
    /// The call failed (throttled, unreachable, the cluster is not registered with ARC).
    async fn zonal_shifts(&self) -> Result<Vec<ZonalShift>>;
}
