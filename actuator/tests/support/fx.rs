//! The one fixture of the actuator's tests against the simulator: a simulated cluster holding
//! the NodePool `default`, a migrated ledger, the clock, metrics and the lifecycle controller
//! over a cloud, built by [`Builder`]. A test file that needs more (a disruption executor, an
//! interruption handler, a witness cloud) wraps [`Fx`] and adds its parts.

use std::sync::Arc;
use std::time::Duration;

use actuator::ledger::{self, ClaimState, Ledger};
use actuator::lifecycle::Controller;
use actuator::metrics::Metrics;
use cloud::CloudProvider;
use crds::NodeClaim;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::{Value, json};
use service_shell::clock::Clock;
use simulator::Simulation;

use super::frozen::Frozen;
use super::{TestDb, cluster, lifecycle_options, template_spec};

/// What the tests drive: the simulation and the actuator's parts over it.
pub struct Fx {
    /// The simulation (kube API, cloud, kubelet; its scheduler when asked for).
    pub sim: Simulation,
    /// A client of its kube API.
    pub client: kube::Client,
    /// The ledger's database, dropped by [`Fx::finish`].
    pub db: TestDb,
    /// The migrated ledger on it.
    pub ledger: Arc<dyn Ledger>,
    /// The cloud the controller launches and terminates in.
    pub cloud: Arc<dyn CloudProvider>,
    /// The controller's clock.
    pub clock: Clock,
    /// The controller's metrics.
    pub metrics: Metrics,
    /// The lifecycle controller (owner `lifecycle-1`, garbage collection for the tests'
    /// cluster).
    pub ctl: Controller,
}

/// How to build an [`Fx`]: by default no kube-scheduler, the NodePool `default` of
/// [`template_spec`], a SQLite ledger, lifecycle passes a second apart.
pub struct Builder {
    scheduler: bool,
    pool: Value,
    postgres: bool,
    frozen: bool,
    interval: Duration,
    eviction_client: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            scheduler: false,
            pool: json!({"template": {"spec": template_spec()}}),
            postgres: false,
            frozen: false,
            interval: Duration::from_secs(1),
            eviction_client: false,
        }
    }
}

impl Builder {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The simulator's kube-scheduler on.
    pub fn scheduler(mut self) -> Self {
        self.scheduler = true;
        self
    }

    /// The NodePool `default`'s `spec`.
    pub fn pool(mut self, spec: Value) -> Self {
        self.pool = spec;
        self
    }

    /// The ledger on the shared test Postgres server instead of SQLite.
    pub fn postgres(mut self) -> Self {
        self.postgres = true;
        self
    }

    /// The ledger wrapped for paused tokio time ([`Frozen`]).
    pub fn frozen(mut self) -> Self {
        self.frozen = true;
        self
    }

    /// Lifecycle passes `interval` apart.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Drains evict through a client that does not retry (a refused eviction comes back at
    /// once, as a PodDisruptionBudget's 429 does).
    pub fn eviction_client(mut self) -> Self {
        self.eviction_client = true;
        self
    }

    /// Builds it over the simulator's cloud.
    pub async fn build(self) -> Fx {
        self.build_with(|sim| Arc::new(sim.cloud().clone())).await.0
    }

    /// Builds it over the cloud `cloud` makes from the simulation, which is returned too.
    pub async fn build_with<C: CloudProvider + 'static>(
        self,
        cloud: impl FnOnce(&Simulation) -> Arc<C>,
    ) -> (Fx, Arc<C>) {
        let (sim, client) = cluster(self.scheduler, self.pool).await;
        sim.cloud().register_nodes_unregistered(true);
        let db = if self.postgres {
            TestDb::postgres().await
        } else {
            TestDb::sqlite()
        };
        let opened = ledger::open(db.url()).expect("open the ledger");
        let ledger: Arc<dyn Ledger> = if self.frozen {
            Arc::new(Frozen(opened))
        } else {
            opened
        };
        ledger.migrate().await.expect("migrate");
        let typed = cloud(&sim);
        let cloud: Arc<dyn CloudProvider> = typed.clone();
        let clock = Clock::new();
        let metrics = Metrics::new();
        let mut ctl = Controller::new(
            client.clone(),
            ledger.clone(),
            cloud.clone(),
            clock.clone(),
            metrics.clone(),
            lifecycle_options(self.interval),
        );
        if self.eviction_client {
            let mut no_retry = sim.kube_config().expect("config");
            no_retry.default_retry = false;
            ctl = ctl.with_eviction_client(kube::Client::try_from(no_retry).expect("client"));
        }
        let fx = Fx {
            sim,
            client,
            db,
            ledger,
            cloud,
            clock,
            metrics,
            ctl,
        };
        (fx, typed)
    }
}

impl Fx {
    /// The ledger's state of claim `name`.
    pub async fn state(&self, name: &str) -> ClaimState {
        self.ledger
            .claim(name)
            .await
            .expect("read")
            .expect("claim")
            .state
    }

    /// The Node of claim `name` (by its instance's provider ID), once it has one.
    pub async fn node_of(&self, name: &str) -> Option<Node> {
        let c = self.ledger.claim(name).await.ok()??;
        let pid = c.instance?.provider_id;
        self.nodes()
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid.as_str()))
    }

    /// The Nodes.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// The NodeClaims.
    pub fn nodeclaims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    /// Stops the simulation, closes the ledger and drops its database.
    pub async fn finish(self) {
        self.sim.shutdown().await;
        self.ledger.close().await;
        self.db.drop().await;
    }
}
