//! What a launch produced, written onto its NodeClaim once the claim is `launched`
//! ([`Controller::record_launch`]): labels, annotations, providerID, imageID, capacity and
//! allocatable. Capacity and labels are the launched instance type's ([`Controller::instance_type`]):
//! from the actuator's live catalog when it has read one (`--cloud aws`), else asked of the
//! cloud for that one type (EC2: one DescribeInstanceTypes call), and remembered. A burst's
//! registrations never wait on a read of the whole catalog (many DescribeInstanceTypes pages,
//! offerings and spot prices: tens of seconds against a loaded endpoint).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud::{Catalog, InstanceType, ProviderId};
use crds::{ConditionStatus, NodeClaim, Quantity, ResourceList};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::nodeclaim::{self, LAUNCHED, is_true, set_condition};
use super::{Controller, INSTANCE_TYPES_LOOP, Result, cloud_err, kube_err};
use crate::catalog::LiveCatalog;
use crate::ledger::ClaimRecord;
use service_shell::backoff::Backoff;

/// Where the lifecycle's instance types come from, and what it has read.
pub(super) struct TypeReads {
    /// The actuator's live catalog, when it has one.
    live: Option<Arc<LiveCatalog>>,
    /// Types read from the cloud, by name.
    known: HashMap<String, Arc<InstanceType>>,
    /// Until when no read is tried, and the last error.
    failed: Option<(tokio::time::Instant, cloud::Error)>,
    backoff: Backoff,
}

impl Default for TypeReads {
    fn default() -> Self {
        Self {
            live: None,
            known: HashMap::new(),
            failed: None,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
        }
    }
}

impl TypeReads {
    /// Instance types taken from `live` once it has read, before asking the cloud.
    pub(super) fn from_live(live: Arc<LiveCatalog>) -> Self {
        Self {
            live: Some(live),
            ..Self::default()
        }
    }
}

/// The shared reads of a controller.
pub(super) type SharedTypeReads = Arc<Mutex<TypeReads>>;

fn cpu(millicores: i64) -> Quantity {
    if millicores % 1000 == 0 {
        Quantity::String((millicores / 1000).to_string())
    } else {
        Quantity::String(format!("{millicores}m"))
    }
}

fn bytes(b: i64) -> Quantity {
    for (unit, size) in [("Gi", 1i64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if b != 0 && b % size == 0 {
            return Quantity::String(format!("{}{unit}", b / size));
        }
    }
    Quantity::String(b.to_string())
}

/// A catalog resource amount (millicores, bytes, pods, extended counts in milli-units) as a
/// Kubernetes resource list.
macro_rules! resource_list {
    ($r:expr) => {{
        let r = $r;
        let mut m = ResourceList::new();
        m.insert("cpu".into(), cpu(r.cpu));
        m.insert("memory".into(), bytes(r.memory));
        m.insert("pods".into(), Quantity::String(r.pods.to_string()));
        if r.ephemeral_storage != 0 {
            m.insert("ephemeral-storage".into(), bytes(r.ephemeral_storage));
        }
        for (k, v) in &r.extended {
            m.insert(k.clone(), cpu(*v));
        }
        m
    }};
}

impl Controller {
    fn type_reads(&self) -> std::sync::MutexGuard<'_, TypeReads> {
        // Each update replaces whole entries: recover from a poisoned lock.
        self.types.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The instance type `name`: from the live catalog when it has read, else from what was
    /// read before, else asked of the cloud (no lock is held while asking). After a failed ask
    /// the next is tried only when its backoff has passed (1 s doubling to 5 min, jittered);
    /// meanwhile every caller gets the last error at once, so that a failing cloud is not asked
    /// once per claim per pass. `None` when the cloud has no such type.
    pub(super) async fn instance_type(&self, name: &str) -> Result<Option<Arc<InstanceType>>> {
        let live = {
            let r = self.type_reads();
            if let Some(t) = r.known.get(name) {
                return Ok(Some(t.clone()));
            }
            let now = tokio::time::Instant::now();
            if let Some((until, e)) = &r.failed
                && now < *until
            {
                return Err(cloud_err(format!(
                    "reading instance type {name} (backing off for {:?} after {} failures)",
                    *until - now,
                    r.backoff.failures()
                ))(e.clone()));
            }
            r.live.as_ref().and_then(|l| l.read())
        };
        let from_live = live.and_then(|(_, facts)| {
            let t = facts.instance_types.iter().find(|t| t.info.name == name)?;
            common::ec2::instance_type(&t.info, &facts.region, t.offerings.clone())
        });
        let read = match from_live {
            Some(t) => Ok(Some(t)),
            None => self.cloud.instance_type(name).await,
        };
        let mut r = self.type_reads();
        match read {
            Ok(t) => {
                if r.backoff.failures() > 0 {
                    tracing::info!(failures = r.backoff.failures(), "Instance types read");
                    self.metrics.loop_recovered(INSTANCE_TYPES_LOOP);
                }
                r.failed = None;
                r.backoff.succeeded();
                let t = t.map(Arc::new);
                if let Some(t) = &t {
                    r.known.insert(name.to_string(), t.clone());
                }
                Ok(t)
            }
            Err(e) => {
                let wait = r
                    .backoff
                    .failed_at_least(e.retry_after().unwrap_or_default());
                self.metrics
                    .loop_failed(INSTANCE_TYPES_LOOP, e.reason(), wait);
                tracing::warn!(error = %e, reason = e.reason(), failures = r.backoff.failures(), retry_in = ?wait, "Reading an instance type failed; backing off");
                r.failed = Some((tokio::time::Instant::now() + wait, e.clone()));
                Err(cloud_err(format!("reading instance type {name}"))(e))
            }
        }
    }

    /// The whole catalog, for NodeClaims a user created ([`super::adopt`]): the live catalog's
    /// read when there is one, else the cloud's instance types (read only when such a NodeClaim
    /// waits).
    pub(super) async fn catalog(&self) -> Result<Catalog> {
        let live = self.type_reads().live.as_ref().and_then(|l| l.read());
        match live {
            Some((_, facts)) => Ok(facts.to_catalog()),
            None => self
                .cloud
                .instance_types()
                .await
                .map_err(cloud_err("reading the instance types".into())),
        }
    }

    /// Writes what the launch produced onto the NodeClaim (once): the offering labels and the
    /// instance type's labels (user labels win), the instance's subnet and security groups
    /// (`nodeclaim::instance_annotations`; the EC2NodeClass status pass keeps them current),
    /// providerID, imageID, capacity and allocatable, and `Launched=True`.
    pub(super) async fn record_launch(
        &self,
        claim: &ClaimRecord,
        nc: &mut NodeClaim,
    ) -> Result<()> {
        let Some(inst) = &claim.instance else {
            return Ok(());
        };
        let status = nc.status.as_ref();
        if is_true(status, LAUNCHED)
            && status.and_then(|s| s.provider_id.as_deref()) == Some(inst.provider_id.as_str())
        {
            return Ok(());
        }
        let itype = self.instance_type(&inst.instance_type).await?;
        let itype = itype.as_deref();
        let mut labels: BTreeMap<String, String> = itype
            .map(|t| t.labels.clone().into_iter().collect())
            .unwrap_or_default();
        labels.insert(
            nodeclaim::INSTANCE_TYPE_LABEL.into(),
            inst.instance_type.clone(),
        );
        labels.insert(nodeclaim::ZONE_LABEL.into(), inst.zone.clone());
        labels.insert(
            nodeclaim::CAPACITY_TYPE_LABEL.into(),
            inst.capacity_type.clone(),
        );
        let existing = nc.metadata.labels.clone().unwrap_or_default();
        labels.retain(|k, _| !existing.contains_key(k));
        // What EC2 says about the instance now: its image, subnet and security groups.
        let described = match inst.provider_id.parse::<ProviderId>() {
            Ok(pid) => self.cloud.get(&pid).await.ok(),
            Err(_) => None,
        };
        let mut annotations = described
            .as_ref()
            .map(nodeclaim::instance_annotations)
            .unwrap_or_default();
        let present = nc.metadata.annotations.clone().unwrap_or_default();
        annotations.retain(|k, v| present.get(k) != Some(v));
        let name = claim.name.clone();
        if !labels.is_empty() || !annotations.is_empty() {
            *nc = self
                .nodeclaims()
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"metadata": {"labels": labels, "annotations": annotations}}),
                    ),
                )
                .await
                .map_err(kube_err(format!("labelling NodeClaim {name}")))?;
        }
        let image_id = described.and_then(|i| i.image_id);
        self.update_status(nc, |s, now| {
            s.provider_id = Some(inst.provider_id.clone());
            s.image_id = image_id.or(s.image_id.take());
            if let Some(t) = itype {
                s.capacity = Some(resource_list!(&t.capacity));
                s.allocatable = Some(resource_list!(&t.allocatable()));
            }
            set_condition(
                s.conditions.get_or_insert_with(Vec::new),
                LAUNCHED,
                ConditionStatus::True,
                LAUNCHED,
                "",
                now,
            );
            true
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_written_like_kubernetes() {
        assert_eq!(cpu(2000), Quantity::String("2".into()));
        assert_eq!(cpu(1500), Quantity::String("1500m".into()));
        assert_eq!(bytes(8 << 30), Quantity::String("8Gi".into()));
        assert_eq!(bytes(3 << 20), Quantity::String("3Mi".into()));
        assert_eq!(bytes(1000), Quantity::String("1000".into()));
    }
}
