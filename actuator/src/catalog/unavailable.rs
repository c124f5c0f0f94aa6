//! Offerings out of capacity: an insufficient-capacity error marks each (instance type, zone,
//! capacity type) it names unavailable for [`DEFAULT_TTL`] (Karpenter's unavailable-offerings
//! cache), and [`MarkingCloud`] applies the marks around any cloud provider.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cloud::{
    CapacityType, Catalog, CatalogFacts, CloudProvider, Error, Instance, LaunchRequest, ListFilter,
    OfferingKey, ProviderId, Result,
};

use crate::metrics::Metrics;
use service_shell::clock::{Clock, Millis, millis};

/// How long an offering stays unavailable after an insufficient-capacity error.
pub const DEFAULT_TTL: Duration = Duration::from_secs(180);

/// The offerings marked unavailable, each until its mark expires. Cheap to share behind an
/// `Arc`; reads prune expired marks.
#[derive(Debug)]
pub struct UnavailableOfferings {
    clock: Clock,
    ttl: Duration,
    marks: Mutex<BTreeMap<OfferingKey, Millis>>,
}

// === impl UnavailableOfferings ===

impl UnavailableOfferings {
    /// An empty cache whose marks last `ttl` on `clock`.
    pub fn new(clock: Clock, ttl: Duration) -> Self {
        Self {
            clock,
            ttl,
            marks: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<OfferingKey, Millis>> {
        // Every update is one map operation: a panic elsewhere cannot leave it half-written.
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `offerings` unavailable from now for the TTL (a mark already there is extended).
    /// Returns how many were not marked before.
    pub fn mark(&self, offerings: &[OfferingKey]) -> usize {
        let now = self.clock.now_ms();
        let until = now + millis(self.ttl);
        let mut marks = self.lock();
        let mut new = 0;
        for o in offerings {
            match marks.insert(o.clone(), until) {
                Some(old) if old > now => {}
                _ => new += 1,
            }
        }
        new
    }

    /// Whether `offering` is marked now.
    pub fn is_unavailable(&self, offering: &OfferingKey) -> bool {
        let now = self.clock.now_ms();
        self.lock().get(offering).is_some_and(|until| *until > now)
    }

    /// The offerings marked now, sorted; expired marks are dropped.
    pub fn current(&self) -> BTreeSet<OfferingKey> {
        let now = self.clock.now_ms();
        let mut marks = self.lock();
        marks.retain(|_, until| *until > now);
        marks.keys().cloned().collect()
    }

    /// The facts without the offerings marked now (so planners do not plan them).
    pub fn filter_facts(&self, facts: &CatalogFacts) -> CatalogFacts {
        let marked = self.current();
        if marked.is_empty() {
            return facts.clone();
        }
        let mut out = facts.clone();
        for t in &mut out.instance_types {
            let name = t.info.name.clone();
            t.offerings.retain(|o| {
                let Ok(capacity_type) = CapacityType::parse(&o.capacity_type) else {
                    return true;
                };
                !marked.contains(&OfferingKey {
                    instance_type: name.clone(),
                    zone: o.zone.clone(),
                    capacity_type,
                })
            });
        }
        out
    }
}

/// A cloud provider that honours the marks: `create` drops marked offerings from the request
/// (and fails with insufficient capacity when none is left, without calling the cloud) and marks
/// the offerings an insufficient-capacity error names; `instance_types` reports marked offerings
/// as unavailable. Everything else is the inner provider's.
pub struct MarkingCloud {
    inner: Arc<dyn CloudProvider>,
    marks: Arc<UnavailableOfferings>,
    metrics: Metrics,
}

// === impl MarkingCloud ===

impl MarkingCloud {
    /// Wraps `inner`.
    pub fn new(
        inner: Arc<dyn CloudProvider>,
        marks: Arc<UnavailableOfferings>,
        metrics: Metrics,
    ) -> Self {
        Self {
            inner,
            marks,
            metrics,
        }
    }
}

#[async_trait]
impl CloudProvider for MarkingCloud {
    async fn create(&self, request: &LaunchRequest) -> Result<Instance> {
        let mut filtered = request.clone();
        filtered.offerings.retain(|o| !self.marks.is_unavailable(o));
        if filtered.offerings.is_empty() && !request.offerings.is_empty() {
            return Err(Error::InsufficientCapacity {
                offerings: request.offerings.clone(),
            });
        }
        let r = self.inner.create(&filtered).await;
        if let Err(Error::InsufficientCapacity { offerings }) = &r {
            let new = self.marks.mark(offerings);
            self.metrics.ice_marks(new);
            tracing::info!(
                offerings = offerings.len(),
                new,
                "Offerings marked unavailable after insufficient capacity"
            );
        }
        r
    }

    async fn get(&self, provider_id: &ProviderId) -> Result<Instance> {
        self.inner.get(provider_id).await
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<Instance>> {
        self.inner.list(filter).await
    }

    async fn delete(&self, provider_id: &ProviderId) -> Result<()> {
        self.inner.delete(provider_id).await
    }

    async fn tag(&self, provider_id: &ProviderId, tags: &cloud::Tags) -> Result<()> {
        self.inner.tag(provider_id, tags).await
    }

    async fn resolve_node_class(
        &self,
        class: &cloud::NodeClassSpec,
    ) -> Result<cloud::NodeClassResolution> {
        self.inner.resolve_node_class(class).await
    }

    async fn collect_node_classes(&self, classes: &[cloud::NodeClassSpec]) -> Result<Vec<String>> {
        self.inner.collect_node_classes(classes).await
    }

    async fn instance_types(&self) -> Result<Catalog> {
        let mut c = self.inner.instance_types().await?;
        for t in &mut c.instance_types {
            for o in &mut t.offerings {
                if let Ok(capacity_type) = CapacityType::parse(&o.capacity_type)
                    && self.marks.is_unavailable(&OfferingKey {
                        instance_type: t.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type,
                    })
                {
                    o.available = false;
                }
            }
        }
        Ok(c)
    }

    async fn catalog_facts(&self) -> Result<CatalogFacts> {
        Ok(self.marks.filter_facts(&self.inner.catalog_facts().await?))
    }

    async fn instance_type(&self, name: &str) -> Result<Option<cloud::InstanceType>> {
        self.inner.instance_type(name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: &str, zone: &str) -> OfferingKey {
        OfferingKey {
            instance_type: t.into(),
            zone: zone.into(),
            capacity_type: CapacityType::Spot,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn marks_expire_after_the_ttl() {
        let c = UnavailableOfferings::new(Clock::at(Duration::from_secs(1_000)), DEFAULT_TTL);
        assert_eq!(c.mark(&[key("m5.large", "us-east-1a")]), 1);
        assert_eq!(
            c.mark(&[key("m5.large", "us-east-1a")]),
            0,
            "already marked"
        );
        assert!(c.is_unavailable(&key("m5.large", "us-east-1a")));
        assert!(!c.is_unavailable(&key("m5.large", "us-east-1b")));
        tokio::time::advance(Duration::from_secs(179)).await;
        assert!(c.is_unavailable(&key("m5.large", "us-east-1a")));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!c.is_unavailable(&key("m5.large", "us-east-1a")));
        assert!(c.current().is_empty());
        assert_eq!(
            c.mark(&[key("m5.large", "us-east-1a")]),
            1,
            "new after expiry"
        );
    }
}
