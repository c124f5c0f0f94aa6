//! A simulated EC2 behind the [`cloud::CloudProvider`] interface, with a control surface for
//! tests: insufficient capacity per offering, spot interruptions (warning, then termination),
//! external terminations, leaked instances, throttling and outages.
//!
//! Instances start `Pending`, become `Running` after [`CloudConfig::pending_for`], and go
//! `ShuttingDown` → `Terminated` after [`CloudConfig::shutting_down_for`]. Every state change
//! also lands on the interruption queue as a state-change event, as EventBridge delivers them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use cloud::{
    CapacityType, Catalog, CloudProvider, Error, Instance, InstanceState, InstanceType,
    InterruptionEvent, InterruptionKind, InterruptionQueue, LaunchRequest, ListFilter, OfferingKey,
    ProviderId, Result, Tags,
};
use tokio::sync::watch;

use crate::clock::Clock;

/// Timings of the simulated cloud.
#[derive(Clone, Debug)]
pub struct CloudConfig {
    /// Region name (used in labels and DNS names).
    pub region: String,
    /// How long an instance stays `Pending`.
    pub pending_for: Duration,
    /// How long an instance stays `ShuttingDown`.
    pub shutting_down_for: Duration,
    /// Time between a spot interruption warning and the termination (two minutes on EC2).
    pub interruption_notice: Duration,
    /// How long a received queue event stays invisible before it is delivered again.
    pub visibility_timeout: Duration,
}

impl Default for CloudConfig {
    fn default() -> Self {
        Self {
            region: "us-east-1".into(),
            pending_for: Duration::from_secs(5),
            shutting_down_for: Duration::from_secs(5),
            interruption_notice: Duration::from_secs(120),
            visibility_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Debug)]
struct QueuedEvent {
    event: InterruptionEvent,
    visible_at: tokio::time::Instant,
}

#[derive(Debug, Default)]
struct State {
    instances: BTreeMap<String, Instance>,
    tokens: HashMap<String, String>,
    no_capacity: BTreeSet<OfferingKey>,
    throttle_next: u32,
    fail_next: u32,
    next_id: u64,
    queue: Vec<QueuedEvent>,
    next_event: u64,
    create_calls: u64,
    /// Kubelets do not register Nodes ([`SimCloud::block_node_registration`]).
    no_registration: bool,
    /// Kubelets register with the unregistered taint ([`SimCloud::register_nodes_unregistered`]).
    unregistered_taint: bool,
}

/// A listener of the cloud's events ([`SimCloud::on_event`]).
type EventSink = Box<dyn Fn(&InterruptionEvent) + Send + Sync>;

struct Inner {
    state: Mutex<State>,
    sinks: Mutex<Vec<EventSink>>,
    catalog: Catalog,
    clock: Clock,
    config: CloudConfig,
    changed: watch::Sender<u64>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("state", &self.state)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The simulated cloud. Clones share one cloud.
#[derive(Debug, Clone)]
pub struct SimCloud {
    inner: Arc<Inner>,
}

// === impl SimCloud ===

impl SimCloud {
    /// A cloud selling the types of `catalog`.
    pub fn new(catalog: Catalog, clock: Clock, config: CloudConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::default(),
                sinks: Mutex::default(),
                catalog,
                clock,
                config,
                changed: watch::channel(0).0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.inner.changed.send_modify(|g| *g += 1);
    }

    /// The simulation's clock.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// One instance by ID (terminated ones included).
    pub fn instance(&self, id: &str) -> Option<Instance> {
        self.lock().instances.get(id).cloned()
    }

    /// True when `offering` is sold and has capacity now (not marked with
    /// [`SimCloud::insufficient_capacity`]).
    pub fn has_capacity(&self, offering: &OfferingKey) -> bool {
        let s = self.lock();
        self.offering_available(&s, offering)
    }

    /// Changes one instance in place (tags, image); false when there is no such instance.
    pub(crate) fn update_instance(&self, id: &str, f: impl FnOnce(&mut Instance)) -> bool {
        let found = match self.lock().instances.get_mut(id) {
            Some(i) => {
                f(i);
                true
            }
            None => false,
        };
        if found {
            self.bump();
        }
        found
    }

    /// Calls `sink` with every event the cloud puts on its interruption queue from now on
    /// (spot interruption warnings, rebalance recommendations, scheduled changes, state
    /// changes), as EventBridge rules forward them to SQS queues.
    pub fn on_event(&self, sink: impl Fn(&InterruptionEvent) + Send + Sync + 'static) {
        self.inner
            .sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(sink));
    }

    /// Applies the throttling and outage switches to one API request (as every
    /// `CloudProvider` call does).
    ///
    /// # Errors
    /// [`Error::Throttled`] or [`Error::Unavailable`] while [`SimCloud::throttle_next`] or
    /// [`SimCloud::fail_next`] have calls left.
    pub(crate) fn admit(&self) -> Result<()> {
        self.gate()
    }

    /// The catalog the cloud sells.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The region.
    pub fn region(&self) -> &str {
        &self.inner.config.region
    }

    /// Changes whenever an instance changes state (for the simulated kubelet).
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Every instance, terminated ones included, ordered by ID.
    pub fn instances(&self) -> Vec<Instance> {
        self.lock().instances.values().cloned().collect()
    }

    /// How many `create` calls were made (idempotent repeats included).
    pub fn create_calls(&self) -> u64 {
        self.lock().create_calls
    }

    /// The instance type named `name`.
    pub fn instance_type(&self, name: &str) -> Option<&InstanceType> {
        self.inner
            .catalog
            .instance_types
            .iter()
            .find(|t| t.name == name)
    }

    /// While `on`, the kubelets of running instances never register a Node (user data that
    /// fails to join the cluster), so that a NodeClaim's liveness check has something to find.
    pub fn block_node_registration(&self, on: bool) {
        self.lock().no_registration = on;
        self.bump();
    }

    /// While `on`, kubelets register their Nodes with the `karpenter.sh/unregistered:NoExecute`
    /// taint, as the user data Karpenter generates makes them do (the actuator's registration
    /// removes it).
    pub fn register_nodes_unregistered(&self, on: bool) {
        self.lock().unregistered_taint = on;
    }

    /// `(registration blocked, register with the unregistered taint)`, for the kubelet.
    pub(crate) fn kubelet_switches(&self) -> (bool, bool) {
        let s = self.lock();
        (s.no_registration, s.unregistered_taint)
    }

    /// Makes `offering` fail with insufficient capacity until [`SimCloud::restore_capacity`].
    pub fn insufficient_capacity(&self, offering: OfferingKey) {
        self.lock().no_capacity.insert(offering);
    }

    /// Gives `offering` capacity again.
    pub fn restore_capacity(&self, offering: &OfferingKey) {
        self.lock().no_capacity.remove(offering);
    }

    /// The next `n` calls fail with [`Error::Throttled`].
    pub fn throttle_next(&self, n: u32) {
        self.lock().throttle_next += n;
    }

    /// The next `n` calls fail with [`Error::Unavailable`].
    pub fn fail_next(&self, n: u32) {
        self.lock().fail_next += n;
    }

    /// Interrupts a spot instance: a spot interruption warning now, termination after
    /// [`CloudConfig::interruption_notice`].
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown or terminated instance, [`Error::InvalidRequest`] for
    /// an on-demand one.
    pub fn interrupt(&self, provider_id: &ProviderId) -> Result<()> {
        {
            let mut s = self.lock();
            let i = live_instance(&s, provider_id)?;
            if i.capacity_type != CapacityType::Spot {
                return Err(Error::InvalidRequest {
                    reason: format!(
                        "instance {provider_id} is on-demand; only spot instances are interrupted"
                    ),
                });
            }
            self.enqueue(
                &mut s,
                provider_id.clone(),
                InterruptionKind::SpotInterruptionWarning,
            );
        }
        let this = self.clone();
        let id = provider_id.clone();
        let notice = self.inner.config.interruption_notice;
        tokio::spawn(async move {
            tokio::time::sleep(notice).await;
            let _ = this.terminate(&id);
        });
        Ok(())
    }

    /// Sends a rebalance recommendation for an instance.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown or terminated instance.
    pub fn rebalance(&self, provider_id: &ProviderId) -> Result<()> {
        let mut s = self.lock();
        live_instance(&s, provider_id)?;
        self.enqueue(
            &mut s,
            provider_id.clone(),
            InterruptionKind::RebalanceRecommendation,
        );
        Ok(())
    }

    /// Sends a scheduled-change (maintenance) event for an instance.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown or terminated instance.
    pub fn schedule_maintenance(&self, provider_id: &ProviderId) -> Result<()> {
        let mut s = self.lock();
        live_instance(&s, provider_id)?;
        self.enqueue(
            &mut s,
            provider_id.clone(),
            InterruptionKind::ScheduledChange,
        );
        Ok(())
    }

    /// Terminates an instance from outside (the console, a spot reclaim): the same as
    /// [`CloudProvider::delete`] but never throttled.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown or already terminated instance.
    pub fn terminate(&self, provider_id: &ProviderId) -> Result<()> {
        {
            let mut s = self.lock();
            let i = live_instance(&s, provider_id)?;
            if i.state == InstanceState::ShuttingDown {
                return Ok(());
            }
            let id = i.id.clone();
            if let Some(i) = s.instances.get_mut(&id) {
                i.state = InstanceState::ShuttingDown;
            }
            self.enqueue(
                &mut s,
                provider_id.clone(),
                InterruptionKind::StateChange(InstanceState::ShuttingDown),
            );
        }
        self.bump();
        let this = self.clone();
        let pid = provider_id.clone();
        let after = self.inner.config.shutting_down_for;
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            {
                let mut s = this.lock();
                if let Some(i) = s.instances.get_mut(pid.instance_id()) {
                    i.state = InstanceState::Terminated;
                }
                this.enqueue(
                    &mut s,
                    pid.clone(),
                    InterruptionKind::StateChange(InstanceState::Terminated),
                );
            }
            this.bump();
        });
        Ok(())
    }

    /// Creates a running instance that no NodeClaim knows about (a leak the actuator's garbage
    /// collection must find), with the given tags.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for an offering the catalog does not have.
    pub fn leak(&self, offering: &OfferingKey, tags: Tags) -> Result<Instance> {
        let price = self.offering_price(offering)?;
        let mut s = self.lock();
        let mut i = self.new_instance(&mut s, offering, tags, None, price);
        i.state = InstanceState::Running;
        s.instances.insert(i.id.clone(), i.clone());
        drop(s);
        self.bump();
        Ok(i)
    }

    fn offering_price(&self, key: &OfferingKey) -> Result<f64> {
        let t = self
            .instance_type(&key.instance_type)
            .ok_or_else(|| Error::InvalidRequest {
                reason: format!("offerings: unknown instance type {:?}", key.instance_type),
            })?;
        t.offerings
            .iter()
            .find(|o| o.zone == key.zone && o.capacity_type == key.capacity_type.as_str())
            .map(|o| o.price)
            .ok_or_else(|| Error::InvalidRequest {
                reason: format!("offerings: {key} is not offered"),
            })
    }

    fn offering_available(&self, s: &State, key: &OfferingKey) -> bool {
        !s.no_capacity.contains(key)
            && self.instance_type(&key.instance_type).is_some_and(|t| {
                t.offerings.iter().any(|o| {
                    // An unpriced offering (a preview type) has capacity; only its price is
                    // unpublished.
                    o.zone == key.zone
                        && o.capacity_type == key.capacity_type.as_str()
                        && (o.available || o.unpriced)
                })
            })
    }

    fn new_instance(
        &self,
        s: &mut State,
        offering: &OfferingKey,
        tags: Tags,
        image_id: Option<String>,
        price: f64,
    ) -> Instance {
        s.next_id += 1;
        let n = s.next_id;
        let id = format!("i-{:017x}", 0x0a11_0000_0000u64 + n);
        let ip = format!("10.0.{}.{}", (n / 250) % 256, n % 250 + 2);
        let dns_suffix = if self.inner.config.region == "us-east-1" {
            "ec2.internal".to_string()
        } else {
            format!("{}.compute.internal", self.inner.config.region)
        };
        Instance {
            provider_id: ProviderId::new(&offering.zone, &id),
            id,
            instance_type: offering.instance_type.clone(),
            zone: offering.zone.clone(),
            capacity_type: offering.capacity_type,
            state: InstanceState::Pending,
            tags,
            private_dns_name: format!("ip-{}.{dns_suffix}", ip.replace('.', "-")),
            private_ip: ip,
            image_id,
            subnet_id: None,
            security_group_ids: Vec::new(),
            launch_time: self.inner.clock.now(),
            price,
        }
    }

    fn enqueue(&self, s: &mut State, provider_id: ProviderId, kind: InterruptionKind) {
        s.next_event += 1;
        let id = format!("evt-{:08}", s.next_event);
        let event = InterruptionEvent {
            receipt_handle: format!("rh-{id}"),
            id,
            provider_id,
            kind,
            time: self.inner.clock.now(),
        };
        for sink in self
            .inner
            .sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            sink(&event);
        }
        s.queue.push(QueuedEvent {
            event,
            visible_at: tokio::time::Instant::now(),
        });
    }

    fn gate(&self) -> Result<()> {
        let mut s = self.lock();
        if s.throttle_next > 0 {
            s.throttle_next -= 1;
            return Err(Error::Throttled {
                retry_after: Duration::from_secs(1),
            });
        }
        if s.fail_next > 0 {
            s.fail_next -= 1;
            return Err(Error::Unavailable {
                message: "simulated cloud outage".into(),
            });
        }
        Ok(())
    }
}

fn live_instance<'a>(s: &'a State, pid: &ProviderId) -> Result<&'a Instance> {
    s.instances
        .get(pid.instance_id())
        .filter(|i| i.zone == pid.zone() && i.state != InstanceState::Terminated)
        .ok_or_else(|| Error::NotFound {
            provider_id: pid.to_string(),
        })
}

#[async_trait]
impl CloudProvider for SimCloud {
    async fn create(&self, request: &LaunchRequest) -> Result<Instance> {
        self.lock().create_calls += 1;
        self.gate()?;
        if request.client_token.is_empty() {
            return Err(Error::InvalidRequest {
                reason: "client_token: must not be empty".into(),
            });
        }
        let Some(first) = request.offerings.first() else {
            return Err(Error::InvalidRequest {
                reason: "offerings: at least one offering is required".into(),
            });
        };
        if let Some(o) = request
            .offerings
            .iter()
            .find(|o| o.capacity_type != first.capacity_type)
        {
            return Err(Error::InvalidRequest {
                reason: format!("offerings: {o} mixes capacity types with {first}"),
            });
        }
        let mut priced = Vec::with_capacity(request.offerings.len());
        for o in &request.offerings {
            priced.push((o, self.offering_price(o)?));
        }
        if first.capacity_type == CapacityType::Spot {
            priced.sort_by(|a, b| a.1.total_cmp(&b.1));
        }
        let instance = {
            let mut s = self.lock();
            if let Some(id) = s.tokens.get(&request.client_token)
                && let Some(i) = s.instances.get(id)
            {
                return Ok(i.clone());
            }
            let Some((offering, price)) =
                priced.iter().find(|(o, _)| self.offering_available(&s, o))
            else {
                return Err(Error::InsufficientCapacity {
                    offerings: request.offerings.clone(),
                });
            };
            let i = self.new_instance(
                &mut s,
                offering,
                request.tags.clone(),
                request.image_id.clone(),
                *price,
            );
            s.tokens.insert(request.client_token.clone(), i.id.clone());
            s.instances.insert(i.id.clone(), i.clone());
            i
        };
        self.bump();
        let this = self.clone();
        let id = instance.id.clone();
        let after = self.inner.config.pending_for;
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let changed = {
                let mut s = this.lock();
                match s.instances.get_mut(&id) {
                    Some(i) if i.state == InstanceState::Pending => {
                        i.state = InstanceState::Running;
                        true
                    }
                    _ => false,
                }
            };
            if changed {
                this.bump();
            }
        });
        Ok(instance)
    }

    async fn get(&self, provider_id: &ProviderId) -> Result<Instance> {
        self.gate()?;
        let s = self.lock();
        s.instances
            .get(provider_id.instance_id())
            .filter(|i| i.zone == provider_id.zone())
            .cloned()
            .ok_or_else(|| Error::NotFound {
                provider_id: provider_id.to_string(),
            })
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<Instance>> {
        self.gate()?;
        Ok(self
            .lock()
            .instances
            .values()
            .filter(|i| filter.matches(i))
            .cloned()
            .collect())
    }

    async fn delete(&self, provider_id: &ProviderId) -> Result<()> {
        self.gate()?;
        self.terminate(provider_id)
    }

    async fn tag(&self, provider_id: &ProviderId, tags: &cloud::Tags) -> Result<()> {
        self.gate()?;
        if self.update_instance(provider_id.instance_id(), |i| {
            i.tags.extend(tags.clone());
        }) {
            Ok(())
        } else {
            Err(Error::NotFound {
                provider_id: provider_id.to_string(),
            })
        }
    }

    async fn instance_types(&self) -> Result<Catalog> {
        self.gate()?;
        let s = self.lock();
        let mut c = self.inner.catalog.clone();
        for t in &mut c.instance_types {
            for o in &mut t.offerings {
                if let Ok(ct) = CapacityType::parse(&o.capacity_type) {
                    let key = OfferingKey {
                        instance_type: t.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: ct,
                    };
                    if s.no_capacity.contains(&key) {
                        o.available = false;
                    }
                }
            }
        }
        Ok(c)
    }
}

#[async_trait]
impl InterruptionQueue for SimCloud {
    async fn receive(&self, max: usize) -> Result<Vec<InterruptionEvent>> {
        self.gate()?;
        let now = tokio::time::Instant::now();
        let hide = self.inner.config.visibility_timeout;
        let mut s = self.lock();
        let mut out = Vec::new();
        for q in s.queue.iter_mut().filter(|q| q.visible_at <= now).take(max) {
            q.visible_at = now + hide;
            out.push(q.event.clone());
        }
        Ok(out)
    }

    async fn delete(&self, receipt_handle: &str) -> Result<()> {
        self.gate()?;
        self.lock()
            .queue
            .retain(|q| q.event.receipt_handle != receipt_handle);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloud() -> SimCloud {
        SimCloud::new(
            crate::instance_types::sample_catalog("us-east-1"),
            Clock::at(Duration::from_secs(1_800_000_000)),
            CloudConfig::default(),
        )
    }

    fn offering(t: &str, z: &str, ct: CapacityType) -> OfferingKey {
        OfferingKey {
            instance_type: t.into(),
            zone: z.into(),
            capacity_type: ct,
        }
    }

    fn request(token: &str, offerings: Vec<OfferingKey>) -> LaunchRequest {
        LaunchRequest {
            client_token: token.into(),
            offerings,
            tags: Tags::from([(cloud::TAG_NODECLAIM.to_string(), "c1".to_string())]),
            node_class: None,
            image_id: None,
            node: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn launch_is_idempotent_and_becomes_running() {
        let c = cloud();
        let r = request(
            "t1",
            vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)],
        );
        let a = c.create(&r).await.unwrap();
        let b = c.create(&r).await.unwrap();
        assert_eq!(a.id, b.id);
        assert_eq!(c.instances().len(), 1);
        assert_eq!(a.state, InstanceState::Pending);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(
            c.get(&a.provider_id).await.unwrap().state,
            InstanceState::Running
        );
    }

    #[tokio::test(start_paused = true)]
    async fn spot_takes_the_cheapest_available_offering_and_ice_is_typed() {
        let c = cloud();
        let m5 = offering("m5.large", "us-east-1a", CapacityType::Spot);
        let c5 = offering("c5.large", "us-east-1a", CapacityType::Spot);
        let i = c
            .create(&request("t1", vec![m5.clone(), c5.clone()]))
            .await
            .unwrap();
        assert_eq!(i.instance_type, "c5.large", "cheapest first for spot");
        c.insufficient_capacity(c5.clone());
        let i = c
            .create(&request("t2", vec![m5.clone(), c5.clone()]))
            .await
            .unwrap();
        assert_eq!(i.instance_type, "m5.large");
        c.insufficient_capacity(m5.clone());
        let e = c
            .create(&request("t3", vec![m5.clone(), c5.clone()]))
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::InsufficientCapacity { ref offerings } if offerings.len() == 2),
            "{e:?}"
        );
        let cat = c.instance_types().await.unwrap();
        let t = cat
            .instance_types
            .iter()
            .find(|t| t.name == "c5.large")
            .unwrap();
        assert!(
            !t.offerings
                .iter()
                .find(|o| o.zone == "us-east-1a" && o.capacity_type == "spot")
                .unwrap()
                .available
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bad_requests_name_the_field() {
        let c = cloud();
        let e = c.create(&request("t", vec![])).await.unwrap_err();
        assert!(e.to_string().contains("offerings"), "{e}");
        let e = c
            .create(&request(
                "t",
                vec![offering("x9.huge", "us-east-1a", CapacityType::Spot)],
            ))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("x9.huge"), "{e}");
        let e = c
            .create(&request(
                "t",
                vec![
                    offering("m5.large", "us-east-1a", CapacityType::Spot),
                    offering("m5.large", "us-east-1a", CapacityType::OnDemand),
                ],
            ))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("mixes capacity types"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn interruption_warns_then_terminates() {
        let c = cloud();
        let i = c
            .create(&request(
                "t1",
                vec![offering("m5.large", "us-east-1b", CapacityType::Spot)],
            ))
            .await
            .unwrap();
        c.interrupt(&i.provider_id).unwrap();
        let events = c.receive(10).await.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, InterruptionKind::SpotInterruptionWarning);
        assert!(
            c.receive(10).await.unwrap().is_empty(),
            "in flight until the visibility timeout"
        );
        InterruptionQueue::delete(&c, &events[0].receipt_handle)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(119)).await;
        assert_ne!(
            c.get(&i.provider_id).await.unwrap().state,
            InstanceState::Terminated
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            c.get(&i.provider_id).await.unwrap().state,
            InstanceState::Terminated
        );
        let e = CloudProvider::delete(&c, &i.provider_id).await.unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }));
        assert!(c.list(&ListFilter::default()).await.unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn usable_as_trait_objects() {
        let c = cloud();
        let provider: Arc<dyn CloudProvider> = Arc::new(c.clone());
        let queue: Arc<dyn InterruptionQueue> = Arc::new(c.clone());
        let i = provider
            .create(&request(
                "dyn",
                vec![offering("m5.large", "us-east-1a", CapacityType::Spot)],
            ))
            .await
            .unwrap();
        provider.delete(&i.provider_id).await.unwrap();
        let events = queue.receive(10).await.unwrap();
        assert_eq!(
            events.iter().map(|e| e.kind.clone()).collect::<Vec<_>>(),
            vec![InterruptionKind::StateChange(InstanceState::ShuttingDown)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_and_leaks() {
        let c = cloud();
        c.throttle_next(1);
        assert!(matches!(
            c.list(&ListFilter::default()).await,
            Err(Error::Throttled { .. })
        ));
        let leaked = c
            .leak(
                &offering("m5.large", "us-east-1c", CapacityType::OnDemand),
                Tags::new(),
            )
            .unwrap();
        let all = c.list(&ListFilter::default()).await.unwrap();
        assert_eq!(all, vec![leaked.clone()]);
        let tagged = ListFilter {
            tags: Tags::from([(cloud::TAG_NODECLAIM.to_string(), "x".to_string())]),
            include_terminated: false,
        };
        assert!(c.list(&tagged).await.unwrap().is_empty());
    }
}
