//! The whole system on loopback: `dovetail-watcher`, `dovetail-planner` replicas and
//! `dovetail-actuator --cloud aws` as separate processes; the ledger on real Postgres; EC2 and
//! SSM on moto_server (seeded with a VPC, tagged subnets in three zones, a security group and
//! the AMI alias parameters); Kubernetes from the simulator, whose external-EC2 kubelet
//! (`simulator::controllers::ec2_kubelet`) registers a Node for every instance moto runs.
//!
//! [`System::agreement`] checks that the cluster, the ledger and EC2 tell the same story. Every
//! process's output goes to `<dir>/<name>.log`; when a test fails (a panic, or a `System`
//! dropped without [`System::finish`]) the logs' tails are printed and the directory is kept.
//!
//! What moto cannot show (and so these tests do not claim): it launches only the first override
//! of a fleet, ignores `ClientToken` (so exactly-once comes from the actuator's adopt-by-tag),
//! never runs out of capacity, and its instances boot instantly (the simulated kubelet's
//! `register_after` / `ready_after` stand for boot time).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actuator::ledger::{ClaimRecord, ClaimState, Ledger};
use anyhow::{Context, bail};
use cloud_aws::testing::{self, MotoServer, TEST_CLUSTER, TEST_K8S_VERSION, TEST_SSM_PREFIX};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use simulator::controllers::ec2_kubelet::{self, Ec2Instance, Ec2Kubelet, Ec2KubeletConfig};

use crate::process::{self, ServiceProcess, Spec};
use test_support::postgres::{self, Database, PrivateServer};
use test_support::try_eventually;

/// The region of the stand-in.
pub const REGION: &str = "us-east-1";
/// How long a step of a scenario may take on a loaded CI machine (a guard, not a timing
/// assertion).
pub const WAIT: Duration = Duration::from_secs(180);
/// How often a scenario checks a condition it waits for.
pub const POLL: Duration = Duration::from_millis(200);

/// How to run the system.
#[derive(Clone, Debug)]
pub struct Options {
    /// A name for the log directory (the test's name).
    pub name: String,
    /// Planner replicas.
    pub planners: usize,
    /// Run the ledger on a private Postgres server that the test may stop and start.
    pub private_postgres: bool,
    /// Simulated boot: from an instance running to its Node registering.
    pub register_after: Duration,
    /// Simulated boot: from registration to Ready.
    pub ready_after: Duration,
    /// How often the simulated kubelet calls DescribeInstances.
    pub kubelet_poll: Duration,
    /// The watcher's batch idle window (a Go duration, e.g. `1s`).
    pub batch_idle: &'static str,
    /// The watcher's batch max window.
    pub batch_max: &'static str,
    /// The watcher's consolidation tick (also when unplanned pending pods are planned again).
    pub consolidation_interval: &'static str,
    /// `RUST_LOG` of the services.
    pub rust_log: &'static str,
    /// The NodePool's `spec.template.spec.requirements`.
    pub requirements: Value,
    /// The NodePool's `spec.disruption` (`None`: Karpenter's defaults).
    pub disruption: Option<Value>,
    /// `DOVETAIL_TEST_PAUSE_AT` of the first actuator (its worker stops for good at that step).
    pub actuator_pause_at: Option<&'static str>,
    /// ARC zonal shifts: the actuator reads them (`--enable-zonal-shift`, every second) from the
    /// simulator's ARC, whose cluster has moto's zones ([`System::start_zonal_shift`]), and the
    /// planners plan from its live catalog (`--catalog-from-actuator`, checked every second).
    pub zonal_shift: bool,
    /// Extra arguments of the actuator.
    pub actuator_args: Vec<String>,
    /// Extra arguments of the watcher (e.g. `--feature-gates`).
    pub watcher_args: Vec<String>,
}

impl Options {
    /// Two planners, the shared Postgres server, 1 s + 1 s of simulated boot, on-demand
    /// c/m/r instances on amd64.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            planners: 2,
            private_postgres: false,
            register_after: Duration::from_secs(1),
            ready_after: Duration::from_secs(1),
            kubelet_poll: Duration::from_millis(200),
            batch_idle: "1s",
            batch_max: "3s",
            consolidation_interval: "3s",
            rust_log: "info",
            requirements: json!([
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
            ]),
            disruption: None,
            actuator_pause_at: None,
            zonal_shift: false,
            actuator_args: Vec::new(),
            watcher_args: Vec::new(),
        }
    }
}

/// The binaries.
#[derive(Clone, Debug)]
struct Bins {
    planner: PathBuf,
    actuator: PathBuf,
    watcher: PathBuf,
}

/// A planner replica.
#[derive(Debug)]
pub struct Planner {
    /// The process.
    pub process: ServiceProcess,
    /// Its gRPC address.
    pub grpc: SocketAddr,
    /// Its metrics address.
    pub metrics: SocketAddr,
}

/// The running system.
pub struct System {
    /// Where the logs are.
    pub dir: PathBuf,
    moto: MotoServer,
    /// The seeded EC2 world.
    pub world: testing::World,
    /// The private Postgres server, when [`Options::private_postgres`].
    pub pg: Option<PrivateServer>,
    db: Database,
    /// The simulated cluster.
    pub sim: simulator::Simulation,
    kubelet: Option<Ec2Kubelet>,
    kubelet_config: Ec2KubeletConfig,
    /// A client of the simulated cluster.
    pub kube: kube::Client,
    kubeconfig: PathBuf,
    bins: Bins,
    opts: Options,
    /// The planner replicas (`None` once killed).
    pub planners: Vec<Option<Planner>>,
    /// The actuator (`None` while down).
    pub actuator: Option<ServiceProcess>,
    /// The actuator's metrics address (of the last one started).
    pub actuator_metrics: Option<SocketAddr>,
    actuator_port: u16,
    /// The watcher.
    pub watcher: Option<ServiceProcess>,
    /// The watcher's health address.
    pub watcher_health: SocketAddr,
    /// The watcher's metrics address.
    pub watcher_metrics: SocketAddr,
    /// The ledger, read by the test.
    pub ledger: Arc<dyn Ledger>,
    finished: bool,
}

/// What the three witnesses agreed on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    /// Live (pending or running) instances.
    pub instances: usize,
    /// Live claims in the ledger.
    pub claims: usize,
    /// NodeClaims.
    pub node_claims: usize,
    /// Nodes of instances.
    pub nodes: usize,
}

// === impl System ===

/// The EC2NodeClass `default` the system tests apply: the world `cloud_aws::testing::seed`
/// makes, selected by its discovery tag, with `al2023@latest`.
pub fn default_node_class() -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-test-cluster",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": TEST_CLUSTER}}]
        }
    })
}

impl System {
    /// Starts everything and waits until every service is SERVING. `None` when moto_server is
    /// not installed and `DOVETAIL_ALLOW_MISSING` names it (the test then skips, saying so).
    ///
    /// # Errors
    /// When a part cannot start; the logs are printed.
    pub async fn start(opts: Options) -> anyhow::Result<Option<Self>> {
        let Some(moto) = MotoServer::start_or_skip() else {
            return Ok(None);
        };
        let bins = Bins {
            planner: crate::binary("planner-service", "dovetail-planner")?,
            actuator: crate::binary("actuator", "dovetail-actuator")?,
            watcher: crate::binary("watcher", "dovetail-watcher")?,
        };
        let dir =
            std::env::temp_dir().join(format!("dovetail-e2e-{}-{}", opts.name, std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let world = testing::seed(&moto.config()).await;
        let pg = if opts.private_postgres {
            Some(PrivateServer::start().context("a private Postgres server")?)
        } else {
            None
        };
        let admin = pg
            .as_ref()
            .map_or_else(postgres::admin_url, PrivateServer::admin_url);
        let db = Database::create(&admin, "dovetail_e2e")
            .await
            .with_context(|| {
                format!(
                    "creating a database on Postgres at {admin} (set {})",
                    postgres::ADMIN_ENV
                )
            })?;
        let ledger = actuator::ledger::open(&db.url)?;

        let sim = simulator::Simulation::start(simulator::Config::default()).await?;
        if opts.zonal_shift {
            same_zone_ids(&sim, &moto).await?;
        }
        let mut kubelet_config = Ec2KubeletConfig::new(moto.url(), REGION);
        kubelet_config.poll_interval = opts.kubelet_poll;
        kubelet_config.register_after = opts.register_after;
        kubelet_config.ready_after = opts.ready_after;
        let kubelet = Ec2Kubelet::spawn(sim.store().clone(), kubelet_config.clone())?;
        let kube = sim.kube_client()?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, sim.kubeconfig())?;
        let actuator_port = process::free_port()?;
        // Chosen again right before the watcher starts (after the planners took theirs).
        let watcher_health = SocketAddr::from(([127, 0, 0, 1], 0));
        let watcher_metrics = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut sys = Self {
            dir,
            moto,
            world,
            pg,
            db,
            sim,
            kubelet: Some(kubelet),
            kubelet_config,
            kube,
            kubeconfig,
            bins,
            opts,
            planners: Vec::new(),
            actuator: None,
            actuator_metrics: None,
            actuator_port,
            watcher: None,
            watcher_health,
            watcher_metrics,
            ledger,
            finished: false,
        };
        sys.karpenter().await?;
        let pause = sys.opts.actuator_pause_at;
        sys.start_actuator(pause).await?;
        for i in 0..sys.opts.planners {
            let p = sys.start_planner(i).await?;
            sys.planners.push(Some(p));
        }
        sys.start_watcher().await?;
        Ok(Some(sys))
    }

    /// The NodePool `default` as [`System::start`] applies it: the options' requirements and
    /// disruption, the EC2NodeClass `default`.
    pub fn node_pool(&self) -> Value {
        let mut spec = json!({
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": self.opts.requirements,
            }}
        });
        if let Some(d) = &self.opts.disruption {
            spec["disruption"] = d.clone();
        }
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"}, "spec": spec
        })
    }

    /// The EC2NodeClass `default` (selecting the seeded subnets and group, AL2023) and the
    /// NodePool `default`, as a user applies them.
    async fn karpenter(&self) -> anyhow::Result<()> {
        let classes = Api::<DynamicObject>::all_with(
            self.kube.clone(),
            &ar("karpenter.k8s.aws", "EC2NodeClass"),
        );
        classes
            .create(
                &PostParams::default(),
                &serde_json::from_value(default_node_class())?,
            )
            .await
            .context("creating the EC2NodeClass")?;
        let pools =
            Api::<DynamicObject>::all_with(self.kube.clone(), &ar("karpenter.sh", "NodePool"));
        pools
            .create(
                &PostParams::default(),
                &serde_json::from_value(self.node_pool())?,
            )
            .await
            .context("creating the NodePool")?;
        Ok(())
    }

    fn actuator_spec(&self, pause_at: Option<&str>) -> Spec {
        let s = |v: &str| v.to_string();
        let mut env = vec![
            (s("AWS_ACCESS_KEY_ID"), s("testing")),
            (s("AWS_SECRET_ACCESS_KEY"), s("testing")),
            (s("RUST_LOG"), s(self.opts.rust_log)),
        ];
        if let Some(step) = pause_at {
            env.push((s("DOVETAIL_TEST_PAUSE_AT"), s(step)));
        }
        let listen = format!("127.0.0.1:{}", self.actuator_port);
        let kubeconfig = self.kubeconfig.display().to_string();
        Spec {
            name: "actuator".into(),
            binary: self.bins.actuator.clone(),
            args: [
                "--ledger",
                self.db.url.as_str(),
                "--cloud",
                "aws",
                "--aws-endpoint",
                self.moto.url(),
                "--aws-region",
                REGION,
                "--aws-ssm-prefix",
                TEST_SSM_PREFIX,
                "--kubernetes-version",
                TEST_K8S_VERSION,
                "--cluster-name",
                TEST_CLUSTER,
                "--cluster-endpoint",
                self.sim.api_url(),
                "--listen",
                listen.as_str(),
                "--metrics-listen",
                "127.0.0.1:0",
                "--insecure-no-auth",
                "--lease",
                "2s",
                "--poll-interval",
                "100ms",
                "--drain-delay",
                "0",
                "--lifecycle-interval",
                "200ms",
                "--gc-interval",
                "2s",
                "--gc-grace",
                "60s",
                "--kubeconfig",
                kubeconfig.as_str(),
            ]
            .map(str::to_string)
            .into_iter()
            .chain(self.zonal_shift_args())
            .chain(self.opts.actuator_args.iter().cloned())
            .collect(),
            env,
            env_remove: [
                "AWS_SESSION_TOKEN",
                "AWS_PROFILE",
                "DOVETAIL_TEST_PAUSE_AT",
                "DOVETAIL_LEDGER",
            ]
            .map(str::to_string)
            .to_vec(),
        }
    }

    /// Starts the actuator on its fixed port (the planners know it) and waits until SERVING.
    /// `pause_at` sets `DOVETAIL_TEST_PAUSE_AT` (the worker stops for good at that step).
    ///
    /// # Errors
    /// When it does not become ready.
    pub async fn start_actuator(&mut self, pause_at: Option<&str>) -> anyhow::Result<()> {
        let mut p = ServiceProcess::spawn(&self.actuator_spec(pause_at), &self.dir)?;
        let (grpc, metrics) = p.wait_listening(WAIT).await?;
        process::wait_serving(grpc, "", WAIT).await?;
        self.actuator = Some(p);
        self.actuator_metrics = metrics;
        Ok(())
    }

    /// SIGKILLs the actuator.
    ///
    /// # Errors
    /// When it is not running.
    pub async fn kill_actuator(&mut self) -> anyhow::Result<()> {
        let mut p = self
            .actuator
            .take()
            .context("the actuator is not running")?;
        p.sigkill().await
    }

    /// The actuator's zonal shift flags ([`Options::zonal_shift`]).
    fn zonal_shift_args(&self) -> Vec<String> {
        if !self.opts.zonal_shift {
            return Vec::new();
        }
        vec![
            "--enable-zonal-shift".into(),
            "--cluster-arn".into(),
            self.sim.aws().cluster_arn(),
            "--aws-arc-endpoint".into(),
            self.sim.aws_endpoint(),
            "--zonal-shift-interval".into(),
            "1s".into(),
        ]
    }

    /// Starts an ARC zonal shift of the cluster away from `zone` (a name, e.g. `us-east-1a`)
    /// for an hour, as a user does (`aws arc-zonal-shift start-zonal-shift` through the SDK
    /// against the simulator's ARC); returns its ID. Needs [`Options::zonal_shift`].
    ///
    /// # Errors
    /// When ARC refuses it.
    pub async fn start_zonal_shift(&self, zone: &str) -> anyhow::Result<String> {
        let zone_id = self
            .sim
            .aws()
            .network()
            .subnets
            .iter()
            .find(|s| s.zone == zone)
            .map(|s| s.zone_id.clone())
            .with_context(|| format!("no zone {zone}"))?;
        let out = self
            .arc()
            .await
            .start_zonal_shift()
            .resource_identifier(self.sim.aws().cluster_arn())
            .away_from(zone_id)
            .expires_in("1h")
            .comment(format!("{zone} impaired"))
            .send()
            .await
            .context("StartZonalShift")?;
        Ok(out.zonal_shift_id().to_string())
    }

    /// Cancels the zonal shift `id` (`aws arc-zonal-shift cancel-zonal-shift`).
    ///
    /// # Errors
    /// When ARC refuses it.
    pub async fn cancel_zonal_shift(&self, id: &str) -> anyhow::Result<()> {
        self.arc()
            .await
            .cancel_zonal_shift()
            .zonal_shift_id(id)
            .send()
            .await
            .context("CancelZonalShift")?;
        Ok(())
    }

    async fn arc(&self) -> aws_sdk_arczonalshift::Client {
        let config = self
            .moto
            .config()
            .with_endpoint_url(self.sim.aws_endpoint());
        aws_sdk_arczonalshift::Client::new(&config.sdk_config().await)
    }

    async fn start_planner(&self, i: usize) -> anyhow::Result<Planner> {
        let catalog: Vec<String> = if self.opts.zonal_shift {
            ["--catalog-from-actuator", "--catalog-poll-interval", "1s"]
                .map(str::to_string)
                .to_vec()
        } else {
            Vec::new()
        };
        let spec = Spec {
            name: format!("planner-{i}"),
            binary: self.bins.planner.clone(),
            args: vec![
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--metrics-listen".into(),
                "127.0.0.1:0".into(),
                "--insecure-no-auth".into(),
                "--actuator-endpoint".into(),
                format!("http://127.0.0.1:{}", self.actuator_port),
                "--instance".into(),
                format!("planner-{i}"),
            ]
            .into_iter()
            .chain(catalog)
            .collect(),
            env: vec![("RUST_LOG".into(), self.opts.rust_log.into())],
            env_remove: vec!["DOVETAIL_ACTUATOR_ENDPOINT".into()],
        };
        let mut process = ServiceProcess::spawn(&spec, &self.dir)?;
        let (grpc, metrics) = process.wait_listening(WAIT).await?;
        let metrics = metrics.context("the planner serves no metrics")?;
        process::wait_serving(grpc, "", WAIT).await?;
        Ok(Planner {
            process,
            grpc,
            metrics,
        })
    }

    /// SIGKILLs planner replica `i`.
    ///
    /// # Errors
    /// When it is not running.
    pub async fn kill_planner(&mut self, i: usize) -> anyhow::Result<()> {
        let mut p = self
            .planners
            .get_mut(i)
            .and_then(Option::take)
            .with_context(|| format!("planner {i} is not running"))?;
        p.process.sigkill().await
    }

    /// The replica holding the watcher's session (from `dovetail_planner_sessions`).
    ///
    /// # Errors
    /// When a planner's metrics cannot be read.
    pub async fn session_holder(&self) -> anyhow::Result<Option<usize>> {
        for (i, p) in self.planners.iter().enumerate() {
            if let Some(p) = p
                && process::metric(p.metrics, "dovetail_planner_sessions")
                    .await?
                    .unwrap_or(0.0)
                    >= 1.0
            {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    async fn start_watcher(&mut self) -> anyhow::Result<()> {
        // The planners have bound their ports by now, so these free ports cannot be theirs.
        self.watcher_health = SocketAddr::from(([127, 0, 0, 1], process::free_port()?));
        self.watcher_metrics = SocketAddr::from(([127, 0, 0, 1], process::free_port()?));
        let planners: Vec<String> = self
            .planners
            .iter()
            .flatten()
            .map(|p| p.grpc.to_string())
            .collect();
        let spec = Spec {
            name: "watcher".into(),
            binary: self.bins.watcher.clone(),
            args: vec![
                "--kubeconfig".into(),
                self.kubeconfig.display().to_string(),
                "--planner".into(),
                planners.join(","),
                "--health-listen".into(),
                self.watcher_health.to_string(),
                "--metrics-listen".into(),
                self.watcher_metrics.to_string(),
                "--leader-elect".into(),
                "false".into(),
                "--batch-idle-duration".into(),
                self.opts.batch_idle.into(),
                "--batch-max-duration".into(),
                self.opts.batch_max.into(),
                "--consolidation-interval".into(),
                self.opts.consolidation_interval.into(),
                "--instance".into(),
                "e2e-watcher".into(),
            ]
            .into_iter()
            .chain(self.opts.watcher_args.iter().cloned())
            .collect(),
            env: vec![("RUST_LOG".into(), self.opts.rust_log.into())],
            env_remove: vec!["DOVETAIL_PLANNER".into(), "KUBECONFIG".into()],
        };
        let p = ServiceProcess::spawn(&spec, &self.dir)?;
        self.watcher = Some(p);
        process::wait_serving(self.watcher_health, "dovetail.v1.Watcher", WAIT).await?;
        if !self
            .watcher
            .as_mut()
            .is_some_and(ServiceProcess::is_running)
        {
            bail!("the watcher exited (see watcher.log)");
        }
        Ok(())
    }

    /// Extra arguments for the actuator's next start.
    pub fn set_actuator_args(&mut self, args: Vec<String>) {
        self.opts.actuator_args = args;
    }

    /// The kubeconfig of the simulated cluster (for `kubectl --kubeconfig`).
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// `http://127.0.0.1:<port>` of moto_server (EC2, SSM, SQS).
    pub fn moto_url(&self) -> &str {
        self.moto.url()
    }

    /// The ledger's database URL (Postgres).
    pub fn ledger_url(&self) -> &str {
        &self.db.url
    }

    /// The watcher's Prometheus sample `name`.
    ///
    /// # Errors
    /// When its metrics cannot be read.
    pub async fn watcher_metric(&self, name: &str) -> anyhow::Result<Option<f64>> {
        process::metric(self.watcher_metrics, name).await
    }

    /// Creates Deployment `name` of `replicas` pods requesting `cpu` and `memory` each.
    ///
    /// # Errors
    /// When the API refuses it.
    pub async fn deploy(
        &self,
        name: &str,
        replicas: i32,
        cpu: &str,
        memory: &str,
    ) -> anyhow::Result<()> {
        let d: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
                }
            }
        }))?;
        Api::<Deployment>::namespaced(self.kube.clone(), "default")
            .create(&PostParams::default(), &d)
            .await
            .with_context(|| format!("creating Deployment {name}"))?;
        Ok(())
    }

    /// Scales Deployment `name`.
    ///
    /// # Errors
    /// When the API refuses it.
    pub async fn scale(&self, name: &str, replicas: i32) -> anyhow::Result<()> {
        Api::<Deployment>::namespaced(self.kube.clone(), "default")
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .with_context(|| format!("scaling Deployment {name}"))?;
        Ok(())
    }

    /// (pods of `app`, of them bound to a node and Running).
    ///
    /// # Errors
    /// When the API cannot be read.
    pub async fn pods(&self, app: &str) -> anyhow::Result<(usize, usize)> {
        let pods = Api::<Pod>::namespaced(self.kube.clone(), "default")
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await?;
        let running = pods
            .items
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
            .count();
        Ok((pods.items.len(), running))
    }

    /// Waits until `n` pods of `app` exist and all run on nodes.
    ///
    /// # Errors
    /// When they do not within [`WAIT`].
    pub async fn wait_running(&self, app: &str, n: usize) -> anyhow::Result<()> {
        Ok(try_eventually(
            &format!("{n} running pods of {app}"),
            WAIT,
            POLL,
            move || async move {
                match self.pods(app).await {
                    Ok((total, running)) if total == n && running == n => Ok(()),
                    Ok((total, running)) => Err(format!("{running} of {total} running")),
                    Err(e) => Err(format!("{e:#}")),
                }
            },
        )
        .await?)
    }

    /// The stand-in's instances, as the simulated kubelet sees them.
    ///
    /// # Errors
    /// When moto cannot be asked.
    pub async fn instances(&self) -> anyhow::Result<Vec<Ec2Instance>> {
        Ok(ec2_kubelet::describe(&self.kubelet_config).await?)
    }

    /// Live instances per `karpenter.sh/nodeclaim` tag.
    ///
    /// # Errors
    /// When moto cannot be asked.
    pub async fn instances_per_claim(&self) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for i in self.instances().await? {
            if is_live(&i) {
                let claim = i
                    .tags
                    .get(cloud::TAG_NODECLAIM)
                    .cloned()
                    .unwrap_or_default();
                out.entry(claim).or_default().push(i.id);
            }
        }
        Ok(out)
    }

    /// The ledger's claims.
    ///
    /// # Errors
    /// When the ledger cannot be read.
    pub async fn claims(&self) -> anyhow::Result<Vec<ClaimRecord>> {
        Ok(self.ledger.claims().await?)
    }

    /// Checks once that EC2, the ledger and the cluster agree: every live instance carries one
    /// NodeClaim's name and is the only one for it; that claim is live in the ledger with this
    /// instance; exactly one NodeClaim with the instance's providerID and one Node with it
    /// exist; and nothing is left over on any side (no claim in flight, no NodeClaim or Node
    /// without an instance, no leaked instance).
    ///
    /// # Errors
    /// The first disagreement found, in words.
    pub async fn agreement(&self) -> Result<Agreement, String> {
        let instances: Vec<Ec2Instance> = self
            .instances()
            .await
            .map_err(|x| format!("{x:#}"))?
            .into_iter()
            .filter(is_live)
            .collect();
        let claims: Vec<ClaimRecord> = self
            .claims()
            .await
            .map_err(|x| format!("{x:#}"))?
            .into_iter()
            .filter(|c| !c.state.is_terminal())
            .collect();
        let node_claims =
            Api::<DynamicObject>::all_with(self.kube.clone(), &ar("karpenter.sh", "NodeClaim"))
                .list(&ListParams::default())
                .await
                .map_err(|x| x.to_string())?
                .items;
        let nodes = Api::<Node>::all(self.kube.clone())
            .list(&ListParams::default())
            .await
            .map_err(|x| x.to_string())?
            .items;
        let node_pid = |n: &Node| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_default()
        };
        let nc_pid = |nc: &DynamicObject| {
            nc.data["status"]["providerID"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let mut seen_claims = BTreeSet::new();
        for i in &instances {
            let pid = i.provider_id();
            let Some(claim) = i.tags.get(cloud::TAG_NODECLAIM) else {
                return Err(format!(
                    "instance {} has no {} tag",
                    i.id,
                    cloud::TAG_NODECLAIM
                ));
            };
            if !seen_claims.insert(claim.clone()) {
                return Err(format!("claim {claim} has more than one instance"));
            }
            let in_ledger: Vec<&ClaimRecord> = claims.iter().filter(|c| &c.name == claim).collect();
            match in_ledger.as_slice() {
                [c] if c.instance.as_ref().is_some_and(|r| r.instance_id == i.id) => {}
                [c] => {
                    return Err(format!(
                        "ledger claim {claim} ({}) does not record instance {}: {:?}",
                        c.state, i.id, c.instance
                    ));
                }
                _ => {
                    return Err(format!(
                        "instance {} ({claim}) has no live ledger claim",
                        i.id
                    ));
                }
            }
            let ncs = node_claims.iter().filter(|nc| nc_pid(nc) == pid).count();
            if ncs != 1 {
                return Err(format!(
                    "{ncs} NodeClaims with providerID {pid} (claim {claim})"
                ));
            }
            if node_claims
                .iter()
                .find(|nc| nc_pid(nc) == pid)
                .and_then(|nc| nc.metadata.name.as_deref())
                != Some(claim.as_str())
            {
                return Err(format!("the NodeClaim of {pid} is not named {claim}"));
            }
            let ns = nodes.iter().filter(|n| node_pid(n) == pid).count();
            if ns != 1 {
                return Err(format!("{ns} Nodes with providerID {pid} (claim {claim})"));
            }
        }
        for c in &claims {
            if !seen_claims.contains(&c.name) {
                return Err(format!(
                    "ledger claim {} ({}) has no live instance",
                    c.name, c.state
                ));
            }
        }
        for nc in &node_claims {
            let name = nc.metadata.name.clone().unwrap_or_default();
            if !seen_claims.contains(&name) {
                return Err(format!("NodeClaim {name} has no live instance"));
            }
        }
        let pids: BTreeSet<String> = instances.iter().map(Ec2Instance::provider_id).collect();
        let aws_nodes: Vec<&Node> = nodes
            .iter()
            .filter(|n| node_pid(n).starts_with("aws:///"))
            .collect();
        for n in &aws_nodes {
            if !pids.contains(&node_pid(n)) {
                return Err(format!(
                    "Node {} has no live instance",
                    n.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
        Ok(Agreement {
            instances: instances.len(),
            claims: claims.len(),
            node_claims: node_claims.len(),
            nodes: aws_nodes.len(),
        })
    }

    /// Waits until [`System::agreement`] holds.
    ///
    /// # Errors
    /// The last disagreement, when it does not hold within [`WAIT`].
    pub async fn wait_agreement(&self) -> anyhow::Result<Agreement> {
        Ok(
            try_eventually("cluster, ledger and EC2 to agree", WAIT, POLL, move || {
                self.agreement()
            })
            .await?,
        )
    }

    /// Stops everything, drops the database and removes the log directory.
    ///
    /// # Errors
    /// When the database cannot be dropped.
    pub async fn finish(mut self) -> anyhow::Result<()> {
        self.finished = true;
        self.stop_processes().await;
        self.ledger.close().await;
        self.kubelet = None;
        self.db.drop_database().await?;
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }

    async fn stop_processes(&mut self) {
        if let Some(mut w) = self.watcher.take() {
            let _ = w.sigkill().await;
        }
        for p in self.planners.iter_mut().filter_map(Option::take) {
            let mut p = p.process;
            let _ = p.sigkill().await;
        }
        if let Some(mut a) = self.actuator.take() {
            let _ = a.sigkill().await;
        }
    }

    /// Prints the tail of every log (called on failure).
    pub fn print_logs(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut logs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        for l in logs {
            eprintln!(
                "----- {} (last 60 lines) -----\n{}",
                l.display(),
                process::tail(&l, 60)
            );
        }
        eprintln!("----- logs kept in {} -----", self.dir.display());
    }
}

impl Drop for System {
    fn drop(&mut self) {
        if !self.finished {
            self.print_logs();
        }
    }
}

fn is_live(i: &Ec2Instance) -> bool {
    matches!(i.state.as_str(), "pending" | "running")
}

fn ar(group: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind))
}

/// Claims per state, for messages.
pub fn states(claims: &[ClaimRecord]) -> BTreeMap<ClaimState, usize> {
    let mut out = BTreeMap::new();
    for c in claims {
        *out.entry(c.state).or_default() += 1;
    }
    out
}

/// Gives the simulator's network (the zones its ARC knows the cluster in) moto's zone IDs, so
/// that a zonal shift away from a zone ID is the zone moto's EC2 names with it.
async fn same_zone_ids(sim: &simulator::Simulation, moto: &MotoServer) -> anyhow::Result<()> {
    let ec2 = aws_sdk_ec2::Client::new(&moto.config().sdk_config().await);
    let zones = ec2
        .describe_availability_zones()
        .send()
        .await
        .context("DescribeAvailabilityZones on moto")?;
    let ids: BTreeMap<String, String> = zones
        .availability_zones()
        .iter()
        .filter_map(|z| Some((z.zone_name()?.to_string(), z.zone_id()?.to_string())))
        .collect();
    for s in &mut sim.aws().network().subnets {
        if let Some(id) = ids.get(&s.zone) {
            s.zone_id = id.clone();
        }
    }
    Ok(())
}

/// Creates SQS queue `name` on moto (raw Query API) and returns its URL.
///
/// # Errors
/// When moto refuses it.
pub async fn sqs_create_queue(moto: &str, name: &str) -> anyhow::Result<String> {
    let body = format!("Action=CreateQueue&QueueName={name}&Version=2012-11-05");
    let xml = query(moto, "/", "sqs", &body).await?;
    let url = between(&xml, "<QueueUrl>", "</QueueUrl>")
        .with_context(|| format!("no QueueUrl in {xml}"))?;
    Ok(url.to_string())
}

/// Sends `message` to the SQS queue at `queue_url` (raw Query API).
///
/// # Errors
/// When moto refuses it.
pub async fn sqs_send(moto: &str, queue_url: &str, message: &str) -> anyhow::Result<()> {
    let path = queue_url
        .find("://")
        .and_then(|i| {
            queue_url[i + 3..]
                .find('/')
                .map(|j| &queue_url[i + 3 + j..])
        })
        .unwrap_or("/");
    let body = format!(
        "Action=SendMessage&Version=2012-11-05&MessageBody={}",
        form_escape(message)
    );
    query(moto, path, "sqs", &body).await?;
    Ok(())
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let i = text.find(start)? + start.len();
    let j = text[i..].find(end)? + i;
    Some(&text[i..j])
}

fn form_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One AWS Query API call to moto over HTTP/1.0 (moto checks no signature; the credential
/// scope names the region and service).
async fn query(moto: &str, path: &str, service: &str, body: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = moto.trim_start_matches("http://").trim_end_matches('/');
    let mut s = tokio::net::TcpStream::connect(host).await?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded; charset=utf-8\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await?;
    let (head, body) = raw.split_once("\r\n\r\n").context("no end of headers")?;
    if head.split_whitespace().nth(1) != Some("200") {
        bail!("{service} {path}: {head}\n{body}");
    }
    Ok(body.to_string())
}
