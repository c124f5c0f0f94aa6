//! One call to start a simulated cluster and cloud: [`Simulation::start`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cloud::Catalog;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::server::{ApiState, router};
use crate::api::{ApiError, Store, kinds};
use crate::aws::{Aws, AwsConfig};
use crate::clock::Clock;
use crate::cloud::{CloudConfig, SimCloud};
use crate::controllers::kubelet::{Kubelet, KubeletConfig};
use crate::controllers::{Ctx, scheduler, workloads};
use crate::faults::Faults;

/// Errors starting a simulation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is out of range.
    #[error("invalid simulator config: {field}: {reason}")]
    Config {
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The API server could not bind its port.
    #[error("binding the simulated API server to {addr}")]
    Bind {
        /// The address tried.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Seeding the store (namespaces, CRDs, initial objects) failed.
    #[error("seeding the simulated API with {what}")]
    Seed {
        /// What was being created.
        what: String,
        /// Why.
        #[source]
        source: ApiError,
    },
    /// The API URL is not a valid URI.
    #[error("invalid API URL {url}")]
    Url {
        /// The API URL.
        url: String,
        /// Why.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// Building a `kube::Client` for the simulator failed.
    #[error("building a kube client for {url}")]
    Client {
        /// The API URL.
        url: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to run a simulation. `Config::default()` suits most tests.
#[derive(Clone, Debug)]
pub struct Config {
    /// Port on 127.0.0.1 (0 picks a free one).
    pub port: u16,
    /// The instance types the simulated cloud sells (default: [`crate::instance_types::default_catalog`]).
    pub catalog: Catalog,
    /// Simulated cloud timings.
    pub cloud: CloudConfig,
    /// Simulated kubelet timings.
    pub kubelet: KubeletConfig,
    /// Run the kube-scheduler loop.
    pub scheduler: bool,
    /// Run the kubelet and workload controllers.
    pub controllers: bool,
    /// How often the scheduler looks at pending pods at most.
    pub scheduler_interval: Duration,
    /// Changes kept for watches; a watch from an older version gets 410 Gone.
    pub watch_history: usize,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// The clock (defaults to one anchored at the wall clock now).
    pub clock: Option<Clock>,
    /// The AWS endpoint (EC2, SSM, SQS) over the simulated cloud.
    pub aws: AwsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            port: 0,
            catalog: crate::instance_types::default_catalog(),
            cloud: CloudConfig::default(),
            kubelet: KubeletConfig::default(),
            scheduler: true,
            controllers: true,
            scheduler_interval: Duration::from_millis(200),
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(15),
            clock: None,
            aws: AwsConfig::default(),
        }
    }
}

/// A running simulated cluster and cloud. Dropping it (or [`Simulation::shutdown`]) stops the
/// server and every controller.
#[derive(Debug)]
pub struct Simulation {
    api_url: String,
    addr: SocketAddr,
    store: Arc<Store>,
    cloud: SimCloud,
    aws: Aws,
    faults: Faults,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

// === impl Simulation ===

impl Simulation {
    /// Starts the API server on 127.0.0.1, the simulated cloud and the controllers. The store
    /// starts with the namespaces `default`, `kube-system`, `kube-public`, `kube-node-lease` and
    /// the Karpenter CRDs (NodePool, NodeClaim, EC2NodeClass).
    ///
    /// # Errors
    /// [`Error::Config`] for an out-of-range setting, [`Error::Bind`] when the port is taken.
    pub async fn start(config: Config) -> Result<Self> {
        if config.bookmark_interval.is_zero() {
            return Err(Error::Config {
                field: "bookmark_interval",
                reason: "must be greater than zero",
            });
        }
        if config.watch_history == 0 {
            return Err(Error::Config {
                field: "watch_history",
                reason: "must keep at least one change",
            });
        }
        let clock = config.clock.clone().unwrap_or_default();
        let store = Arc::new(Store::new(clock.clone(), config.watch_history));
        seed(&store)?;
        let cloud = SimCloud::new(config.catalog.clone(), clock, config.cloud.clone());
        let faults = Faults::new();
        let addr = SocketAddr::from(([127, 0, 0, 1], config.port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let (shutdown, _) = watch::channel(false);
        let state = Arc::new(ApiState {
            store: store.clone(),
            faults: faults.clone(),
            bookmark_interval: config.bookmark_interval,
            address: addr.to_string(),
            stop: shutdown.subscribe(),
        });
        let mut tasks = Vec::new();
        let aws = Aws::new(cloud.clone(), config.aws.clone());
        let aws_addr = SocketAddr::from(([127, 0, 0, 1], config.aws.port));
        let (_, aws_task) =
            aws.serve(shutdown.subscribe())
                .await
                .map_err(|source| Error::Bind {
                    addr: aws_addr,
                    source,
                })?;
        tasks.push(aws_task);
        let mut stop = shutdown.subscribe();
        tasks.push(tokio::spawn(async move {
            let serve = axum::serve(listener, router(state)).with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "Simulated API server failed");
            }
        }));
        let ctx = Ctx {
            store: store.clone(),
            cloud: cloud.clone(),
        };
        if config.controllers {
            tasks.push(tokio::spawn(run_controllers(
                ctx.clone(),
                config.kubelet.clone(),
                shutdown.subscribe(),
            )));
        }
        if config.scheduler {
            tasks.push(tokio::spawn(scheduler::run(
                ctx,
                config.scheduler_interval,
                shutdown.subscribe(),
            )));
        }
        tracing::info!(%addr, aws = %aws.endpoint(), "Simulated cluster started");
        Ok(Self {
            api_url: format!("http://{addr}"),
            addr,
            store,
            cloud,
            aws,
            faults,
            shutdown,
            tasks,
        })
    }

    /// The API server URL, e.g. `http://127.0.0.1:40123`.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The API server's socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A `kube::Config` for the simulated API (plain HTTP, default namespace `default`), to
    /// adjust before building a client. Note that kube's default retry layer
    /// (`default_retry`) retries 429, 503 and 504 up to 15 times with exponential backoff (minutes
    /// in total), so a PDB-blocked eviction only fails after a long while unless it is turned off.
    ///
    /// # Errors
    /// [`Error::Url`] when the API URL is not a URI (it always is).
    pub fn kube_config(&self) -> Result<kube::Config> {
        let uri: http::Uri = self.api_url.parse().map_err(|source| Error::Url {
            url: self.api_url.clone(),
            source,
        })?;
        Ok(kube::Config::new(uri))
    }

    /// A `kube::Client` for the simulated API with kube's defaults (see
    /// [`Simulation::kube_config`]).
    ///
    /// # Errors
    /// [`Error::Client`] when the client cannot be built.
    pub fn kube_client(&self) -> Result<kube::Client> {
        kube::Client::try_from(self.kube_config()?).map_err(|source| Error::Client {
            url: self.api_url.clone(),
            source,
        })
    }

    /// A kubeconfig (YAML) whose current context points at the simulated API, for `kubectl`
    /// and for services that read `KUBECONFIG`.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dovetail-simulator\n  cluster:\n    server: {url}\ncontexts:\n- name: dovetail-simulator\n  context:\n    cluster: dovetail-simulator\n    user: dovetail-simulator\n    namespace: default\ncurrent-context: dovetail-simulator\nusers:\n- name: dovetail-simulator\n  user: {{}}\n",
            url = self.api_url
        )
    }

    /// The simulated cloud (implements `cloud::CloudProvider` and
    /// `cloud::InterruptionQueue`, plus controls for tests).
    pub fn cloud(&self) -> &SimCloud {
        &self.cloud
    }

    /// The AWS endpoint URL (`http://127.0.0.1:<port>`): EC2, SSM and SQS over the simulated
    /// cloud, for an SDK's endpoint override (`dovetail-actuator --cloud aws --aws-endpoint`).
    /// Signatures are not checked; any credentials work.
    pub fn aws_endpoint(&self) -> String {
        self.aws.endpoint()
    }

    /// The AWS face of the simulated cloud (network, parameters, queues).
    pub fn aws(&self) -> &Aws {
        &self.aws
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The object store, for direct reads and writes without HTTP.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Stops the server and the controllers and waits for them.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for t in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn seed(store: &Store) -> Result<()> {
    let seed_err = |what: String| move |source| Error::Seed { what, source };
    if let Some(ns) = store.kinds().find("", "v1", "namespaces") {
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            store
                .create(&ns, "", json!({"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}, "status": {"phase": "Active"}}))
                .map_err(seed_err(format!("namespace {name}")))?;
        }
    }
    if let Some(crds) =
        store
            .kinds()
            .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    {
        for crd in kinds::karpenter_crds() {
            let name = crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            store
                .create(&crds, "", crd)
                .map_err(seed_err(format!("CRD {name}")))?;
        }
    }
    Ok(())
}

async fn run_controllers(ctx: Ctx, kubelet: KubeletConfig, mut stop: watch::Receiver<bool>) {
    let mut kubelet = Kubelet::new(kubelet);
    let mut taints = crate::controllers::taint_manager::TaintManager::default();
    let mut store_changed = ctx.store.changed();
    let mut cloud_changed = ctx.cloud.changed();
    loop {
        store_changed.borrow_and_update();
        cloud_changed.borrow_and_update();
        let wake = [
            kubelet.reconcile(&ctx),
            taints.reconcile(&ctx),
            crate::controllers::termination::reconcile(&ctx),
        ]
        .into_iter()
        .flatten()
        .min();
        workloads::reconcile(&ctx);
        let sleep = async {
            match wake {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = store_changed.changed() => {}
            _ = cloud_changed.changed() => {}
            _ = sleep => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        // Let a burst of changes settle so that one pass handles them together.
        tokio::time::sleep(CONTROLLER_BATCH).await;
    }
}

/// How long the controllers wait after a change before looking again.
const CONTROLLER_BATCH: Duration = Duration::from_millis(5);
