//! Configuration of `dovetail-actuator`: flags and `DOVETAIL_*` environment variables, read once
//! at start-up and validated before any port is bound (bad configuration exits 64, the message
//! naming the setting).
//!
//! The settings are the actuator's own; how they are read is the service shell's
//! (`service_shell::config`: a flag wins over its environment variable, which wins over the
//! default; the environment comes through a [`Source`] that tests replace; durations are Go
//! durations), and so are the authentication and TLS flags ([`AuthFlags`]) and the meaning of
//! `--kubeconfig` ([`KubeSource`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use service_shell::auth::{Auth, AuthFlags};
use service_shell::config::{
    self, Error, Input, Settings, Source, addr_or, addr_or_off, duration_or, positive_duration_or,
};
use service_shell::kube::{ENV_KUBECONFIG, KubeSource};
use service_shell::tls::ServerTls;

use crate::worker::Step;

/// `DOVETAIL_LISTEN`: gRPC address.
pub const ENV_LISTEN: &str = "DOVETAIL_LISTEN";
/// `DOVETAIL_METRICS_LISTEN`: Prometheus address (`off` disables).
pub const ENV_METRICS_LISTEN: &str = "DOVETAIL_METRICS_LISTEN";
/// `DOVETAIL_LEDGER`: `postgres://...` or `sqlite://PATH`.
pub const ENV_LEDGER: &str = "DOVETAIL_LEDGER";
/// `DOVETAIL_CLOUD`: `sim` or `aws`.
pub const ENV_CLOUD: &str = "DOVETAIL_CLOUD";
/// `DOVETAIL_CLOUD_STATE`: file the `sim` cloud keeps its instances in.
pub const ENV_CLOUD_STATE: &str = "DOVETAIL_CLOUD_STATE";
/// `DOVETAIL_SIM_IGNORE_CLIENT_TOKEN`: `true` makes the `sim` cloud ignore client tokens (as moto).
pub const ENV_SIM_IGNORE_CLIENT_TOKEN: &str = "DOVETAIL_SIM_IGNORE_CLIENT_TOKEN";
/// `AWS_REGION`: the region `--cloud aws` launches in (the SDK's own variable).
pub const ENV_AWS_REGION: &str = "AWS_REGION";
/// `DOVETAIL_AWS_ENDPOINT`: endpoint override for EC2 and SSM (a local moto_server in tests).
pub const ENV_AWS_ENDPOINT: &str = "DOVETAIL_AWS_ENDPOINT";
/// `DOVETAIL_AWS_SSM_PREFIX`: prefix of the SSM parameters AMI aliases resolve under.
pub const ENV_AWS_SSM_PREFIX: &str = "DOVETAIL_AWS_SSM_PREFIX";
/// Environment variable of `--reserved-enis`.
pub const ENV_RESERVED_ENIS: &str = "DOVETAIL_RESERVED_ENIS";
/// Environment variable of `--enable-zonal-shift` (Karpenter's `ENABLE_ZONAL_SHIFT`).
pub const ENV_ENABLE_ZONAL_SHIFT: &str = "DOVETAIL_ENABLE_ZONAL_SHIFT";
/// `DOVETAIL_CLUSTER_ARN`: the EKS cluster's ARN, ARC's resource identifier of its zonal shifts.
pub const ENV_CLUSTER_ARN: &str = "DOVETAIL_CLUSTER_ARN";
/// `DOVETAIL_AWS_ARC_ENDPOINT`: endpoint override for ARC zonal shift alone.
pub const ENV_AWS_ARC_ENDPOINT: &str = "DOVETAIL_AWS_ARC_ENDPOINT";
/// `DOVETAIL_ZONAL_SHIFT_INTERVAL`: time between reads of the cluster's zonal shifts.
pub const ENV_ZONAL_SHIFT_INTERVAL: &str = "DOVETAIL_ZONAL_SHIFT_INTERVAL";
/// Environment variable of `--aws-isolated-vpc`.
pub const ENV_ISOLATED_VPC: &str = "DOVETAIL_ISOLATED_VPC";
/// `DOVETAIL_INTERRUPTION_QUEUE`: the SQS queue of interruption events (name or URL); unset,
/// interruptions are not handled. Needs `--cloud aws` and a cluster (`DOVETAIL_KUBECONFIG` not `none`).
pub const ENV_INTERRUPTION_QUEUE: &str = "DOVETAIL_INTERRUPTION_QUEUE";
/// `DOVETAIL_CLUSTER_ENDPOINT`: the API server URL the nodes' bootstrap joins.
pub const ENV_CLUSTER_ENDPOINT: &str = "DOVETAIL_CLUSTER_ENDPOINT";
/// `DOVETAIL_CLUSTER_CA_BUNDLE`: base64 of the cluster CA (PEM), as EKS returns it.
pub const ENV_CLUSTER_CA_BUNDLE: &str = "DOVETAIL_CLUSTER_CA_BUNDLE";
/// `DOVETAIL_KUBERNETES_VERSION`: the cluster's minor version (`1.33`), for AMI aliases.
pub const ENV_KUBERNETES_VERSION: &str = "DOVETAIL_KUBERNETES_VERSION";
/// `DOVETAIL_CLUSTER_NAME`: cluster name in instance tags.
pub const ENV_CLUSTER_NAME: &str = "DOVETAIL_CLUSTER_NAME";
/// `DOVETAIL_INSTANCE`: this replica's name (default `$HOSTNAME`).
pub const ENV_INSTANCE: &str = "DOVETAIL_INSTANCE";
/// `DOVETAIL_LEASE`: how long a worker holds a claim without renewing it.
pub const ENV_LEASE: &str = "DOVETAIL_LEASE";
/// `DOVETAIL_POLL_INTERVAL`: how often the worker looks for claims when not woken.
pub const ENV_POLL_INTERVAL: &str = "DOVETAIL_POLL_INTERVAL";
/// `DOVETAIL_CATALOG_REFRESH`: how often the live catalog (types, offerings, spot prices) is
/// read from the cloud.
pub const ENV_CATALOG_REFRESH: &str = "DOVETAIL_CATALOG_REFRESH";
/// `DOVETAIL_DRAIN_DELAY`: time between NOT_SERVING and closing the listener on SIGTERM.
pub const ENV_DRAIN_DELAY: &str = "DOVETAIL_DRAIN_DELAY";
/// `DOVETAIL_TEST_PAUSE_AT`: crash tests only: the worker stops for good at this launch step
/// (`requested`, `launching`, `created`, `launched`) so that the test can SIGKILL it there.
pub const ENV_TEST_PAUSE_AT: &str = "DOVETAIL_TEST_PAUSE_AT";

/// `DOVETAIL_REGISTRATION_TIMEOUT`: a launched claim with no Node after this long is terminated.
pub const ENV_REGISTRATION_TIMEOUT: &str = "DOVETAIL_REGISTRATION_TIMEOUT";
/// `DOVETAIL_LIFECYCLE_INTERVAL`: time between NodeClaim lifecycle passes.
pub const ENV_LIFECYCLE_INTERVAL: &str = "DOVETAIL_LIFECYCLE_INTERVAL";
/// `DOVETAIL_GC_GRACE`: an instance no claim owns is terminated once it is this old.
pub const ENV_GC_GRACE: &str = "DOVETAIL_GC_GRACE";
/// `DOVETAIL_GC_INTERVAL`: time between garbage collections.
pub const ENV_GC_INTERVAL: &str = "DOVETAIL_GC_INTERVAL";
/// `DOVETAIL_NODE_CLASS_STATUS_INTERVAL`: time between EC2NodeClass status passes.
pub const ENV_NODE_CLASS_STATUS_INTERVAL: &str = "DOVETAIL_NODE_CLASS_STATUS_INTERVAL";
/// `DOVETAIL_DISRUPTION_CONFIRM_AFTER`: a disruption executes only when a plan at least this
/// much later (by the plans' `basis.now`) proposes it again.
pub const ENV_DISRUPTION_CONFIRM_AFTER: &str = "DOVETAIL_DISRUPTION_CONFIRM_AFTER";
/// `DOVETAIL_FEATURE_GATES`: Karpenter's feature gates (`Name=bool,...`, its defaults); the
/// actuator reads `NodeRepair` ([`crate::repair`]).
pub const ENV_FEATURE_GATES: &str = "DOVETAIL_FEATURE_GATES";

/// Command-line flags; each one overrides its environment variable.
#[derive(Debug, Default, Parser)]
#[command(
    name = "dovetail-actuator",
    version,
    about = "The dovetail actuator gRPC service: executes plans exactly once"
)]
pub struct Flags {
    /// gRPC listen address [env DOVETAIL_LISTEN, default 0.0.0.0:50052]
    #[arg(long)]
    pub listen: Option<String>,
    /// Prometheus /metrics listen address or `off` [env DOVETAIL_METRICS_LISTEN, default 0.0.0.0:9091]
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Ledger: postgres://USER@HOST:PORT/DB or sqlite://PATH [env DOVETAIL_LEDGER, required]
    #[arg(long)]
    pub ledger: Option<String>,
    /// Cloud: `sim` (a local stand-in) or `aws` [env DOVETAIL_CLOUD, required]
    #[arg(long)]
    pub cloud: Option<String>,
    /// File the `sim` cloud keeps its instances in (default: memory) [env DOVETAIL_CLOUD_STATE]
    #[arg(long)]
    pub cloud_state: Option<String>,
    /// Make the `sim` cloud ignore client tokens, as moto does [env DOVETAIL_SIM_IGNORE_CLIENT_TOKEN=true]
    #[arg(long)]
    pub sim_ignore_client_token: bool,
    /// Cluster name for instance tags [env DOVETAIL_CLUSTER_NAME, default dovetail]
    #[arg(long)]
    pub cluster_name: Option<String>,
    /// `--cloud aws`: region [env AWS_REGION, required]
    #[arg(long)]
    pub aws_region: Option<String>,
    /// `--cloud aws`: endpoint override for EC2, SSM and SQS [env DOVETAIL_AWS_ENDPOINT]
    #[arg(long)]
    pub aws_endpoint: Option<String>,
    /// `--cloud aws`: SSM parameter prefix of AMI aliases [env DOVETAIL_AWS_SSM_PREFIX, default /aws/service]
    #[arg(long)]
    pub aws_ssm_prefix: Option<String>,
    /// `--cloud aws`: the VPC has no route to the Pricing API (Karpenter's `isolatedVPC`): on-demand prices stay the built-in table's [env DOVETAIL_ISOLATED_VPC=true]
    #[arg(long)]
    pub aws_isolated_vpc: bool,
    /// `--cloud aws`: ENIs of each type's default network card left out of the kubelet's max pods (VPC CNI custom networking), as Karpenter's reservedENIs; set it as the watcher's [env DOVETAIL_RESERVED_ENIS, default 0]
    #[arg(long)]
    pub reserved_enis: Option<String>,
    /// `--cloud aws`: read the cluster's ARC zonal shifts (GetManagedResource on --cluster-arn) and plan no capacity and no voluntary disruption in a shifted zone, as Karpenter's enableZonalShift [env DOVETAIL_ENABLE_ZONAL_SHIFT=true]
    #[arg(long)]
    pub enable_zonal_shift: bool,
    /// `--cloud aws` with --enable-zonal-shift: the EKS cluster's ARN, arn:PARTITION:eks:REGION:ACCOUNT:cluster/NAME [env DOVETAIL_CLUSTER_ARN]
    #[arg(long)]
    pub cluster_arn: Option<String>,
    /// Time between reads of the zonal shifts [env DOVETAIL_ZONAL_SHIFT_INTERVAL, default 30s]
    #[arg(long)]
    pub zonal_shift_interval: Option<String>,
    /// `--cloud aws` with --enable-zonal-shift: endpoint override for ARC zonal shift alone (default: --aws-endpoint's) [env DOVETAIL_AWS_ARC_ENDPOINT]
    #[arg(long)]
    pub aws_arc_endpoint: Option<String>,
    /// `--cloud aws`: SQS queue (name or URL) of spot interruptions, rebalance recommendations, scheduled changes and state changes; needs a cluster (not --kubeconfig none) [env DOVETAIL_INTERRUPTION_QUEUE]
    #[arg(long)]
    pub interruption_queue: Option<String>,
    /// `--cloud aws`: API server URL nodes join [env DOVETAIL_CLUSTER_ENDPOINT, required]
    #[arg(long)]
    pub cluster_endpoint: Option<String>,
    /// `--cloud aws`: base64 cluster CA bundle [env DOVETAIL_CLUSTER_CA_BUNDLE]
    #[arg(long)]
    pub cluster_ca_bundle: Option<String>,
    /// `--cloud aws`: Kubernetes minor version, e.g. 1.33 [env DOVETAIL_KUBERNETES_VERSION, default 1.33]
    #[arg(long)]
    pub kubernetes_version: Option<String>,
    /// This replica's name [env DOVETAIL_INSTANCE, default $HOSTNAME]
    #[arg(long)]
    pub instance: Option<String>,
    /// Claim lease length, e.g. 15s [env DOVETAIL_LEASE, default 15s]
    #[arg(long)]
    pub lease: Option<String>,
    /// How often to look for claims when idle [env DOVETAIL_POLL_INTERVAL, default 1s]
    #[arg(long)]
    pub poll_interval: Option<String>,
    /// How often the live catalog is read from the cloud (--cloud aws) [env DOVETAIL_CATALOG_REFRESH, default 5m]
    #[arg(long)]
    pub catalog_refresh: Option<String>,
    /// Time between NOT_SERVING and closing the listener on SIGTERM [env DOVETAIL_DRAIN_DELAY, default 5s]
    #[arg(long)]
    pub drain_delay: Option<String>,
    /// Authentication and TLS of the gRPC port.
    #[command(flatten)]
    pub auth: AuthFlags,
    /// The cluster whose NodeClaims the actuator manages: a kubeconfig PATH, `in-cluster`, or `none` (no NodeClaim lifecycle, no garbage collection); unset: KUBECONFIG, ~/.kube/config, then in-cluster, refused when none exists [env DOVETAIL_KUBECONFIG]
    #[arg(long)]
    pub kubeconfig: Option<String>,
    /// Launched claims with no Node after this are failed [env DOVETAIL_REGISTRATION_TIMEOUT, default 15m]
    #[arg(long)]
    pub registration_timeout: Option<String>,
    /// Time between NodeClaim lifecycle passes [env DOVETAIL_LIFECYCLE_INTERVAL, default 2s]
    #[arg(long)]
    pub lifecycle_interval: Option<String>,
    /// Age at which an instance no claim owns is terminated [env DOVETAIL_GC_GRACE, default 5m]
    #[arg(long)]
    pub gc_grace: Option<String>,
    /// Time between garbage collections [env DOVETAIL_GC_INTERVAL, default 2m]
    #[arg(long)]
    pub gc_interval: Option<String>,
    /// Time between EC2NodeClass status passes (`--cloud aws` with a cluster) [env DOVETAIL_NODE_CLASS_STATUS_INTERVAL, default 1m]
    #[arg(long)]
    pub node_class_status_interval: Option<String>,
    /// Delay after its first proposal before a plan may confirm a disruption [env DOVETAIL_DISRUPTION_CONFIRM_AFTER, default 15s]
    #[arg(long)]
    pub disruption_confirm_after: Option<String>,
    /// Karpenter's feature gates, Name=true|false,... over its v1.14 defaults; the actuator
    /// reads NodeRepair (needs a cluster) [env DOVETAIL_FEATURE_GATES]
    #[arg(long)]
    pub feature_gates: Option<String>,
}

/// Which cloud the actuator launches in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloudChoice {
    /// The local stand-in ([`crate::standin`]).
    Sim {
        /// Persist instances here.
        state_file: Option<PathBuf>,
        /// Ignore client tokens (as moto).
        ignore_client_token: bool,
    },
    /// EC2 (the `cloud-aws` provider). Credentials come from the SDK's default chain
    /// (`AWS_ACCESS_KEY_ID`… in the environment, IRSA, profiles, IMDS), never from a flag.
    Aws(AwsSettings),
}

/// The settings of `--cloud aws`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsSettings {
    /// Region.
    pub region: String,
    /// Endpoint override for EC2, SSM and SQS.
    pub endpoint: Option<String>,
    /// SSM parameter prefix of AMI aliases; `None` is AWS's.
    pub ssm_prefix: Option<String>,
    /// The VPC is isolated: the Pricing API is not asked.
    pub isolated_vpc: bool,
    /// Karpenter's `reservedENIs`.
    pub reserved_enis: u32,
    /// API server URL the nodes join.
    pub cluster_endpoint: String,
    /// Base64 cluster CA bundle.
    pub cluster_ca_bundle: Option<String>,
    /// Kubernetes minor version.
    pub kubernetes_version: String,
    /// ARC zonal shifts (Karpenter's `ENABLE_ZONAL_SHIFT`); `None`: not read.
    pub zonal_shift: Option<ZonalShiftSettings>,
}

/// How the cluster's ARC zonal shifts are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZonalShiftSettings {
    /// The EKS cluster's ARN (ARC's resource identifier).
    pub cluster_arn: String,
    /// Time between reads.
    pub interval: Duration,
    /// Endpoint override for ARC alone.
    pub endpoint: Option<String>,
}

/// The NodeClaim lifecycle and garbage collection settings ([`crate::lifecycle`], [`crate::lifecycle::gc`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// The cluster's API (never [`KubeSource::None`]).
    pub kube: KubeSource,
    /// Registration timeout (liveness).
    pub registration_timeout: Duration,
    /// Time between lifecycle passes.
    pub interval: Duration,
    /// Garbage collection grace period.
    pub gc_grace: Duration,
    /// Time between garbage collections.
    pub gc_interval: Duration,
    /// Time between EC2NodeClass status passes.
    pub node_class_status_interval: Duration,
    /// Node repair (Karpenter's `NodeRepair` feature gate), passing every lifecycle interval.
    pub node_repair: bool,
}

/// The validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// gRPC address.
    pub listen: SocketAddr,
    /// Metrics address; `None` is off.
    pub metrics_listen: Option<SocketAddr>,
    /// Ledger URL.
    pub ledger: String,
    /// Cloud.
    pub cloud: CloudChoice,
    /// Cluster name.
    pub cluster_name: String,
    /// Replica name.
    pub instance: String,
    /// Lease length.
    pub lease: Duration,
    /// Idle poll interval.
    pub poll_interval: Duration,
    /// Interval between live catalog reads.
    pub catalog_refresh: Duration,
    /// Drain delay.
    pub drain_delay: Duration,
    /// Authentication.
    pub auth: Auth,
    /// TLS, when configured.
    pub tls: Option<ServerTls>,
    /// Crash tests only: pause the worker at this step.
    pub pause_at: Option<Step>,
    /// The NodeClaim lifecycle; `None` when no cluster is configured.
    pub lifecycle: Option<LifecycleConfig>,
    /// Delay between a disruption's first proposal and a plan that may confirm it.
    pub disruption_confirm_after: Duration,
    /// The interruption queue (SQS name or URL); `None`: interruptions are not handled.
    pub interruption_queue: Option<String>,
}

/// The zonal shift settings when `enabled`: the cluster ARN is required (an empty value, the
/// deploy/ base's default, is none).
fn zonal_shift_settings(
    enabled: bool,
    arn: Option<Input>,
    interval: Option<Input>,
    endpoint: Option<Input>,
) -> config::Result<Option<ZonalShiftSettings>> {
    if !enabled {
        return Ok(None);
    }
    let Some(arn) = arn.filter(|i| !i.value.trim().is_empty()) else {
        return Err(missing(
            "--cluster-arn",
            ENV_CLUSTER_ARN,
            "the EKS cluster's ARN, whose ARC zonal shifts are read (--enable-zonal-shift)",
        ));
    };
    let v = arn.value.trim();
    let ok = v.starts_with("arn:")
        && v.split(':').nth(2) == Some("eks")
        && v.split(':')
            .nth(5)
            .is_some_and(|r| r.strip_prefix("cluster/").is_some_and(|n| !n.is_empty()));
    if !ok {
        return Err(arn.invalid(
            "expected an EKS cluster ARN, arn:PARTITION:eks:REGION:ACCOUNT:cluster/NAME",
        ));
    }
    let endpoint = match endpoint.filter(|i| !i.value.is_empty()) {
        Some(i) if !(i.value.starts_with("http://") || i.value.starts_with("https://")) => {
            return Err(i.invalid("expected an http:// or https:// URL"));
        }
        other => other.map(|i| i.value),
    };
    Ok(Some(ZonalShiftSettings {
        cluster_arn: v.to_string(),
        interval: positive_duration_or(interval, crate::zonal_shift::DEFAULT_INTERVAL)?,
        endpoint,
    }))
}

fn missing(flag: &str, env: &str, what: &str) -> Error {
    Error::Missing {
        flag: flag.into(),
        env: env.into(),
        what: what.into(),
    }
}

// === impl Config ===

impl Config {
    /// Loads and validates the configuration from `flags` and `env`, reading the files they
    /// name.
    ///
    /// # Errors
    /// The first setting that is invalid, missing, unreadable or in conflict with another.
    pub fn load(flags: Flags, env: &dyn Source) -> config::Result<Config> {
        let s = Settings::new(env);
        let listen = addr_or(
            s.get(flags.listen, "listen", ENV_LISTEN),
            SocketAddr::from(([0, 0, 0, 0], 50052)),
        )?;
        let metrics_listen = addr_or_off(
            s.get(flags.metrics_listen, "metrics-listen", ENV_METRICS_LISTEN),
            SocketAddr::from(([0, 0, 0, 0], 9091)),
        )?;
        let ledger = match s.get(flags.ledger, "ledger", ENV_LEDGER) {
            None => {
                return Err(missing(
                    "--ledger",
                    ENV_LEDGER,
                    "postgres://USER@HOST:PORT/DB or sqlite://PATH",
                ));
            }
            Some(i) => {
                let ok = ["postgres://", "postgresql://", "sqlite://"]
                    .iter()
                    .any(|p| i.value.starts_with(p) && i.value.len() > p.len());
                if !ok {
                    return Err(i.invalid("expected postgres://USER@HOST:PORT/DB or sqlite://PATH"));
                }
                i.value
            }
        };
        let ignore_client_token =
            s.switch(flags.sim_ignore_client_token, ENV_SIM_IGNORE_CLIENT_TOKEN)?;
        let state_file = s
            .get(flags.cloud_state, "cloud-state", ENV_CLOUD_STATE)
            .map(|i| PathBuf::from(i.value));
        let cloud = match s.get(flags.cloud, "cloud", ENV_CLOUD) {
            None => return Err(missing("--cloud", ENV_CLOUD, "sim or aws")),
            Some(i) if i.value == "sim" => CloudChoice::Sim {
                state_file,
                ignore_client_token,
            },
            Some(i) if i.value == "aws" => {
                let Some(region) = s.get(flags.aws_region, "aws-region", ENV_AWS_REGION) else {
                    return Err(missing(
                        "--aws-region",
                        ENV_AWS_REGION,
                        "the AWS region (--cloud aws)",
                    ));
                };
                let Some(cluster_endpoint) = s.get(
                    flags.cluster_endpoint,
                    "cluster-endpoint",
                    ENV_CLUSTER_ENDPOINT,
                ) else {
                    return Err(missing(
                        "--cluster-endpoint",
                        ENV_CLUSTER_ENDPOINT,
                        "the API server URL nodes join (--cloud aws)",
                    ));
                };
                let endpoint = match s.get(flags.aws_endpoint, "aws-endpoint", ENV_AWS_ENDPOINT) {
                    Some(i)
                        if !(i.value.starts_with("http://") || i.value.starts_with("https://")) =>
                    {
                        return Err(i.invalid("expected an http:// or https:// URL"));
                    }
                    other => other.map(|i| i.value),
                };
                CloudChoice::Aws(AwsSettings {
                    region: region.value,
                    endpoint,
                    ssm_prefix: s
                        .get(flags.aws_ssm_prefix, "aws-ssm-prefix", ENV_AWS_SSM_PREFIX)
                        .map(|i| i.value),
                    isolated_vpc: s.switch(flags.aws_isolated_vpc, ENV_ISOLATED_VPC)?,
                    reserved_enis: match s.get(
                        flags.reserved_enis,
                        "reserved-enis",
                        ENV_RESERVED_ENIS,
                    ) {
                        None => 0,
                        Some(i) => {
                            i.value.trim().parse::<u32>().map_err(|_| {
                                i.invalid("expected a whole number of ENIs, 0 or more")
                            })?
                        }
                    },
                    cluster_endpoint: cluster_endpoint.value,
                    cluster_ca_bundle: s
                        .get(
                            flags.cluster_ca_bundle,
                            "cluster-ca-bundle",
                            ENV_CLUSTER_CA_BUNDLE,
                        )
                        .map(|i| i.value)
                        // An empty value (the deploy/ base's default) is no CA bundle.
                        .filter(|v| !v.is_empty()),
                    kubernetes_version: s
                        .get(
                            flags.kubernetes_version,
                            "kubernetes-version",
                            ENV_KUBERNETES_VERSION,
                        )
                        .map_or_else(|| "1.33".to_string(), |i| i.value),
                    zonal_shift: zonal_shift_settings(
                        s.switch(flags.enable_zonal_shift, ENV_ENABLE_ZONAL_SHIFT)?,
                        s.get(flags.cluster_arn.clone(), "cluster-arn", ENV_CLUSTER_ARN),
                        s.get(
                            flags.zonal_shift_interval.clone(),
                            "zonal-shift-interval",
                            ENV_ZONAL_SHIFT_INTERVAL,
                        ),
                        s.get(
                            flags.aws_arc_endpoint.clone(),
                            "aws-arc-endpoint",
                            ENV_AWS_ARC_ENDPOINT,
                        ),
                    )?,
                })
            }
            Some(i) => return Err(i.invalid("expected sim or aws")),
        };
        if !matches!(cloud, CloudChoice::Aws(_))
            && s.switch(flags.enable_zonal_shift, ENV_ENABLE_ZONAL_SHIFT)?
        {
            return Err(Error::Conflict(format!(
                "{ENV_ENABLE_ZONAL_SHIFT} needs --cloud aws (zonal shifts are read from ARC)"
            )));
        }
        let cluster_name = s
            .get(flags.cluster_name, "cluster-name", ENV_CLUSTER_NAME)
            .map_or_else(|| "dovetail".to_string(), |i| i.value);
        let instance = s
            .get(flags.instance, "instance", ENV_INSTANCE)
            .map(|i| i.value)
            .or_else(|| s.env("HOSTNAME"))
            .unwrap_or_else(|| "actuator".to_string());
        let lease = positive_duration_or(
            s.get(flags.lease, "lease", ENV_LEASE),
            Duration::from_secs(15),
        )?;
        let poll_interval = positive_duration_or(
            s.get(flags.poll_interval, "poll-interval", ENV_POLL_INTERVAL),
            Duration::from_secs(1),
        )?;
        let catalog_refresh = positive_duration_or(
            s.get(
                flags.catalog_refresh,
                "catalog-refresh",
                ENV_CATALOG_REFRESH,
            ),
            Duration::from_secs(5 * 60),
        )?;
        let drain_delay = duration_or(
            s.get(flags.drain_delay, "drain-delay", ENV_DRAIN_DELAY),
            Duration::from_secs(5),
        )?;
        let pause_at = match s.env(ENV_TEST_PAUSE_AT) {
            None => None,
            Some(v) => Some(Step::parse(&v).ok_or_else(|| {
                Input {
                    key: ENV_TEST_PAUSE_AT.into(),
                    value: v.clone(),
                }
                .invalid("expected requested, launching, created or launched")
            })?),
        };
        let (auth, tls) = Auth::load(flags.auth, &s)?;
        let kube = KubeSource::load(s.get(flags.kubeconfig, "kubeconfig", ENV_KUBECONFIG), &s)?;
        let feature_gates = match s.get(flags.feature_gates, "feature-gates", ENV_FEATURE_GATES) {
            None => common::feature_gates::FeatureGates::default(),
            Some(i) => {
                common::feature_gates::FeatureGates::parse(&i.value).map_err(|e| i.invalid(e))?
            }
        };
        let lifecycle = match kube {
            KubeSource::None => None,
            kube => Some(LifecycleConfig {
                kube,
                registration_timeout: positive_duration_or(
                    s.get(
                        flags.registration_timeout,
                        "registration-timeout",
                        ENV_REGISTRATION_TIMEOUT,
                    ),
                    crate::lifecycle::liveness::REGISTRATION_TIMEOUT,
                )?,
                interval: positive_duration_or(
                    s.get(
                        flags.lifecycle_interval,
                        "lifecycle-interval",
                        ENV_LIFECYCLE_INTERVAL,
                    ),
                    Duration::from_secs(2),
                )?,
                gc_grace: positive_duration_or(
                    s.get(flags.gc_grace, "gc-grace", ENV_GC_GRACE),
                    Duration::from_secs(5 * 60),
                )?,
                gc_interval: positive_duration_or(
                    s.get(flags.gc_interval, "gc-interval", ENV_GC_INTERVAL),
                    Duration::from_secs(2 * 60),
                )?,
                node_class_status_interval: positive_duration_or(
                    s.get(
                        flags.node_class_status_interval,
                        "node-class-status-interval",
                        ENV_NODE_CLASS_STATUS_INTERVAL,
                    ),
                    Duration::from_secs(60),
                )?,
                node_repair: feature_gates.node_repair,
            }),
        };
        if feature_gates.node_repair && lifecycle.is_none() {
            return Err(Error::Conflict(format!(
                "{ENV_FEATURE_GATES} NodeRepair=true needs a cluster (--kubeconfig or {ENV_KUBECONFIG} other than none): repair acts on Nodes and NodeClaims"
            )));
        }
        let disruption_confirm_after = positive_duration_or(
            s.get(
                flags.disruption_confirm_after,
                "disruption-confirm-after",
                ENV_DISRUPTION_CONFIRM_AFTER,
            ),
            crate::api::CONFIRM_AFTER,
        )?;
        let interruption_queue = match s.get(
            flags.interruption_queue,
            "interruption-queue",
            ENV_INTERRUPTION_QUEUE,
        ) {
            None => None,
            Some(i) => {
                let key = &i.key;
                let v = i.value.trim().to_string();
                if !matches!(cloud, CloudChoice::Aws(_)) {
                    return Err(Error::Conflict(format!(
                        "{key} needs --cloud aws (the queue is SQS)"
                    )));
                }
                if lifecycle.is_none() {
                    return Err(Error::Conflict(format!(
                        "{key} needs a cluster (--kubeconfig or {ENV_KUBECONFIG} other than none): interruptions act on Nodes and NodeClaims"
                    )));
                }
                let url = v.starts_with("https://") || v.starts_with("http://");
                let name_ok = !v.is_empty()
                    && v.len() <= 80
                    && v.strip_suffix(".fifo")
                        .unwrap_or(&v)
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                if !url && !name_ok {
                    return Err(Input {
                        key: i.key.clone(),
                        value: v,
                    }
                    .invalid(
                        "expected an SQS queue name (letters, digits, - and _, at most 80) or a queue URL",
                    ));
                }
                Some(v)
            }
        };
        Ok(Config {
            disruption_confirm_after,
            listen,
            metrics_listen,
            ledger,
            cloud,
            cluster_name,
            instance,
            lease,
            poll_interval,
            catalog_refresh,
            drain_delay,
            auth,
            tls,
            pause_at,
            lifecycle,
            interruption_queue,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use service_shell::config::vars as env;

    fn flags(args: &[&str]) -> Flags {
        let mut all = vec!["dovetail-actuator"];
        all.extend(args);
        Flags::try_parse_from(all).expect("flags parse")
    }

    /// The `sim` cloud without a cluster.
    const BASE: [&str; 7] = [
        "--ledger",
        "sqlite:///tmp/l.db",
        "--cloud",
        "sim",
        "--insecure-no-auth",
        "--kubeconfig",
        "none",
    ];

    /// The `sim` cloud, the cluster left to the test.
    const SIM: [&str; 5] = [
        "--ledger",
        "sqlite:///tmp/l.db",
        "--cloud",
        "sim",
        "--insecure-no-auth",
    ];

    #[test]
    fn flags_override_environment_and_defaults_fill_the_rest() {
        let mut args = BASE.to_vec();
        args.extend(["--listen", "127.0.0.1:7000"]);
        let c = Config::load(
            flags(&args),
            &env(&[(ENV_LISTEN, "127.0.0.1:9999"), (ENV_LEASE, "2s")]),
        )
        .expect("valid");
        assert_eq!(c.listen.port(), 7000);
        assert_eq!(c.lease, Duration::from_secs(2));
        assert_eq!(c.metrics_listen.map(|a| a.port()), Some(9091));
        assert_eq!(c.auth, Auth::Disabled);
        assert_eq!(
            c.cloud,
            CloudChoice::Sim {
                state_file: None,
                ignore_client_token: false
            }
        );
        assert_eq!(c.pause_at, None);
    }

    #[test]
    fn catalog_refresh_defaults_to_five_minutes_and_is_checked() {
        let c = Config::load(flags(&BASE), &env(&[])).expect("valid");
        assert_eq!(c.catalog_refresh, Duration::from_secs(300));
        let c = Config::load(flags(&BASE), &env(&[(ENV_CATALOG_REFRESH, "90s")])).expect("valid");
        assert_eq!(c.catalog_refresh, Duration::from_secs(90));
        let mut args = BASE.to_vec();
        args.extend(["--catalog-refresh", "soon"]);
        let e = Config::load(flags(&args), &env(&[])).expect_err("bad duration");
        assert!(e.to_string().contains("catalog-refresh"), "{e}");
        assert!(e.to_string().contains("\"soon\""), "{e}");
    }

    #[test]
    fn ledger_and_cloud_are_required_and_checked() {
        let e = Config::load(flags(&["--insecure-no-auth"]), &env(&[])).expect_err("no ledger");
        assert!(
            e.to_string().starts_with("--ledger (or DOVETAIL_LEDGER)"),
            "{e}"
        );
        let e = Config::load(
            flags(&["--insecure-no-auth"]),
            &env(&[(ENV_LEDGER, "mysql://x")]),
        )
        .expect_err("bad ledger");
        assert!(e.to_string().starts_with(ENV_LEDGER), "{e}");
        let e = Config::load(
            flags(&["--insecure-no-auth", "--ledger", "sqlite:///x"]),
            &env(&[(ENV_CLOUD, "gcp")]),
        )
        .expect_err("bad cloud");
        assert!(e.to_string().starts_with(ENV_CLOUD), "{e}");
    }

    #[test]
    fn cloud_aws_needs_a_region_and_a_cluster_endpoint_and_checks_the_endpoint_url() {
        let aws = [
            "--insecure-no-auth",
            "--ledger",
            "sqlite:///x",
            "--cloud",
            "aws",
        ];
        let e = Config::load(flags(&aws), &env(&[])).expect_err("no region");
        assert!(
            e.to_string().starts_with("--aws-region (or AWS_REGION)"),
            "{e}"
        );
        let e = Config::load(flags(&aws), &env(&[(ENV_AWS_REGION, "us-east-1")]))
            .expect_err("no cluster endpoint");
        assert!(e.to_string().starts_with("--cluster-endpoint"), "{e}");
        let base = [
            (ENV_AWS_REGION, "us-east-1"),
            (ENV_CLUSTER_ENDPOINT, "https://k8s.example"),
            (ENV_KUBECONFIG, "none"),
        ];
        let mut bad = base.to_vec();
        bad.push((ENV_AWS_ENDPOINT, "localhost:5000"));
        let e = Config::load(flags(&aws), &env(&bad)).expect_err("bad endpoint");
        assert!(e.to_string().starts_with(ENV_AWS_ENDPOINT), "{e}");
        let mut args = aws.to_vec();
        args.extend([
            "--aws-endpoint",
            "http://127.0.0.1:5000",
            "--aws-region",
            "eu-west-1",
        ]);
        let c = Config::load(flags(&args), &env(&base)).expect("valid");
        assert_eq!(
            c.cloud,
            CloudChoice::Aws(AwsSettings {
                region: "eu-west-1".into(),
                endpoint: Some("http://127.0.0.1:5000".into()),
                ssm_prefix: None,
                isolated_vpc: false,
                reserved_enis: 0,
                cluster_endpoint: "https://k8s.example".into(),
                cluster_ca_bundle: None,
                kubernetes_version: "1.33".into(),
                zonal_shift: None,
            })
        );
        // Zonal shift: the cluster ARN is required and checked; the interval defaults to 30s.
        let mut zs = base.to_vec();
        zs.push((ENV_ENABLE_ZONAL_SHIFT, "true"));
        let e = Config::load(flags(&args), &env(&zs)).expect_err("no ARN");
        assert!(e.to_string().starts_with("--cluster-arn"), "{e}");
        let mut bad = zs.clone();
        bad.push((ENV_CLUSTER_ARN, "my-cluster"));
        let e = Config::load(flags(&args), &env(&bad)).expect_err("not an ARN");
        assert!(e.to_string().starts_with(ENV_CLUSTER_ARN), "{e}");
        zs.push((
            ENV_CLUSTER_ARN,
            "arn:aws:eks:eu-west-1:123456789012:cluster/demo",
        ));
        let c = Config::load(flags(&args), &env(&zs)).expect("valid");
        let CloudChoice::Aws(a) = c.cloud else {
            panic!("aws")
        };
        assert_eq!(
            a.zonal_shift,
            Some(ZonalShiftSettings {
                cluster_arn: "arn:aws:eks:eu-west-1:123456789012:cluster/demo".into(),
                interval: crate::zonal_shift::DEFAULT_INTERVAL,
                endpoint: None,
            })
        );
        // The deploy/ ConfigMap's defaults: off, with an empty ARN.
        let mut off = base.to_vec();
        off.extend([(ENV_ENABLE_ZONAL_SHIFT, "false"), (ENV_CLUSTER_ARN, "")]);
        let c = Config::load(flags(&args), &env(&off)).expect("valid");
        assert!(matches!(
            c.cloud,
            CloudChoice::Aws(AwsSettings {
                zonal_shift: None,
                ..
            })
        ));
        let e =
            Config::load(flags(&BASE), &env(&[(ENV_ENABLE_ZONAL_SHIFT, "true")])).expect_err("sim");
        assert!(e.to_string().contains("needs --cloud aws"), "{e}");
        let mut enis = base.to_vec();
        enis.push((ENV_RESERVED_ENIS, "1"));
        let c = Config::load(flags(&args), &env(&enis)).expect("valid");
        assert!(matches!(
            c.cloud,
            CloudChoice::Aws(AwsSettings {
                reserved_enis: 1,
                ..
            })
        ));
        let mut bad = base.to_vec();
        bad.push((ENV_RESERVED_ENIS, "-1"));
        let e = Config::load(flags(&args), &env(&bad)).expect_err("negative");
        assert!(e.to_string().starts_with(ENV_RESERVED_ENIS), "{e}");
    }

    #[test]
    fn durations_are_go_durations_with_a_unit() {
        let mut args = BASE.to_vec();
        args.extend(["--catalog-refresh", "1h30m", "--drain-delay", "0"]);
        let c = Config::load(flags(&args), &env(&[(ENV_POLL_INTERVAL, "250ms")])).expect("ok");
        assert_eq!(c.catalog_refresh, Duration::from_secs(5400));
        assert_eq!(c.poll_interval, Duration::from_millis(250));
        assert_eq!(c.drain_delay, Duration::ZERO);
        let e = Config::load(flags(&BASE), &env(&[(ENV_LEASE, "30")])).expect_err("no unit");
        assert_eq!(
            e.to_string(),
            "DOVETAIL_LEASE: \"30\" is invalid: a duration needs a unit, e.g. 30s, 500ms or 1h30m"
        );
        let e = Config::load(flags(&BASE), &env(&[(ENV_LEASE, "0s")])).expect_err("zero");
        assert!(e.to_string().starts_with("DOVETAIL_LEASE: \"0s\""), "{e}");
    }

    #[test]
    fn bad_values_name_the_setting() {
        let e = Config::load(flags(&BASE), &env(&[(ENV_LEASE, "soon")])).expect_err("lease");
        assert!(e.to_string().starts_with(ENV_LEASE), "{e}");
        let e =
            Config::load(flags(&BASE), &env(&[(ENV_TEST_PAUSE_AT, "midway")])).expect_err("pause");
        assert!(e.to_string().starts_with(ENV_TEST_PAUSE_AT), "{e}");
        let e = Config::load(
            flags(&["--ledger", "sqlite:///x", "--cloud", "sim"]),
            &env(&[]),
        )
        .expect_err("no auth");
        assert!(e.to_string().contains("--insecure-no-auth"), "{e}");
        let c = Config::load(flags(&BASE), &env(&[(ENV_TEST_PAUSE_AT, "created")])).expect("ok");
        assert_eq!(c.pause_at, Some(Step::Created));
    }

    #[test]
    fn the_lifecycle_is_on_with_a_cluster_and_its_durations_are_checked() {
        assert_eq!(
            Config::load(flags(&BASE), &env(&[])).expect("ok").lifecycle,
            None
        );
        let c = Config::load(
            flags(&SIM),
            &env(&[(ENV_KUBECONFIG, "in-cluster"), (ENV_GC_GRACE, "30s")]),
        )
        .expect("ok");
        let lc = c.lifecycle.expect("on");
        assert_eq!(lc.kube, KubeSource::InCluster);
        assert_eq!(lc.gc_grace, Duration::from_secs(30));
        assert_eq!(lc.registration_timeout, Duration::from_secs(15 * 60));
        let e = Config::load(
            flags(&SIM),
            &env(&[
                (ENV_KUBECONFIG, "/k"),
                (ENV_REGISTRATION_TIMEOUT, "forever"),
            ]),
        )
        .expect_err("bad timeout");
        assert!(e.to_string().starts_with(ENV_REGISTRATION_TIMEOUT), "{e}");
        // Unset, the cluster is inferred as kube infers it; with nothing to infer from the
        // actuator says so rather than running without NodeClaims.
        let c = Config::load(flags(&SIM), &env(&[("KUBECONFIG", "/k")])).expect("ok");
        assert_eq!(c.lifecycle.expect("on").kube, KubeSource::Infer);
        let e = Config::load(flags(&SIM), &env(&[("HOME", "/nonexistent")]))
            .expect_err("nothing to infer");
        assert!(
            e.to_string()
                .starts_with("--kubeconfig (or DOVETAIL_KUBECONFIG) is unset"),
            "{e}"
        );
        let mut args = SIM.to_vec();
        args.extend(["--kubeconfig", "/etc/kubeconfig"]);
        let c = Config::load(flags(&args), &env(&[(ENV_KUBECONFIG, "none")])).expect("ok");
        assert_eq!(
            c.lifecycle.expect("on").kube,
            KubeSource::File("/etc/kubeconfig".into())
        );
    }

    #[test]
    fn the_disruption_confirmation_delay_defaults_to_fifteen_seconds_and_is_checked() {
        let c = Config::load(flags(&BASE), &env(&[])).expect("ok");
        assert_eq!(c.disruption_confirm_after, Duration::from_secs(15));
        let mut args = BASE.to_vec();
        args.extend(["--disruption-confirm-after", "30s"]);
        let c = Config::load(flags(&args), &env(&[])).expect("ok");
        assert_eq!(c.disruption_confirm_after, Duration::from_secs(30));
        let e = Config::load(
            flags(&BASE),
            &env(&[(ENV_DISRUPTION_CONFIRM_AFTER, "later")]),
        )
        .expect_err("bad delay");
        assert!(
            e.to_string().starts_with(ENV_DISRUPTION_CONFIRM_AFTER),
            "{e}"
        );
    }

    #[test]
    fn the_interruption_queue_needs_aws_and_a_cluster_and_a_valid_name() {
        let aws = [
            "--insecure-no-auth",
            "--ledger",
            "sqlite:///x",
            "--cloud",
            "aws",
        ];
        let base = [
            (ENV_AWS_REGION, "us-east-1"),
            (ENV_CLUSTER_ENDPOINT, "https://k8s.example"),
            (ENV_KUBECONFIG, "/tmp/kubeconfig"),
        ];
        let c = Config::load(flags(&aws), &env(&base)).expect("valid");
        assert_eq!(c.interruption_queue, None);
        let mut with = base.to_vec();
        with.push((ENV_INTERRUPTION_QUEUE, "my-cluster-dovetail-interruptions"));
        let c = Config::load(flags(&aws), &env(&with)).expect("valid");
        assert_eq!(
            c.interruption_queue.as_deref(),
            Some("my-cluster-dovetail-interruptions")
        );
        let mut args = aws.to_vec();
        args.extend([
            "--interruption-queue",
            "https://sqs.us-east-1.amazonaws.com/111122223333/q",
        ]);
        let c = Config::load(flags(&args), &env(&with)).expect("a flag wins");
        assert_eq!(
            c.interruption_queue.as_deref(),
            Some("https://sqs.us-east-1.amazonaws.com/111122223333/q")
        );
        let mut bad = base.to_vec();
        bad.push((ENV_INTERRUPTION_QUEUE, "my queue!"));
        let e = Config::load(flags(&aws), &env(&bad)).expect_err("bad name");
        assert!(
            e.to_string()
                .starts_with("DOVETAIL_INTERRUPTION_QUEUE: \"my queue!\" is invalid"),
            "{e}"
        );
        let no_cluster = [
            (ENV_AWS_REGION, "us-east-1"),
            (ENV_CLUSTER_ENDPOINT, "https://k8s.example"),
            (ENV_INTERRUPTION_QUEUE, "q"),
            (ENV_KUBECONFIG, "none"),
        ];
        let e = Config::load(flags(&aws), &env(&no_cluster)).expect_err("no cluster");
        assert!(
            e.to_string()
                .starts_with("DOVETAIL_INTERRUPTION_QUEUE needs a cluster"),
            "{e}"
        );
        let e = Config::load(
            flags(&[
                "--insecure-no-auth",
                "--ledger",
                "sqlite:///x",
                "--cloud",
                "sim",
                "--interruption-queue",
                "q",
                "--kubeconfig",
                "none",
            ]),
            &env(&[]),
        )
        .expect_err("sim has no SQS");
        assert!(
            e.to_string()
                .starts_with("--interruption-queue needs --cloud aws"),
            "{e}"
        );
    }

    #[test]
    fn node_repair_follows_the_feature_gate_and_needs_a_cluster() {
        let cluster = env(&[(ENV_KUBECONFIG, "in-cluster")]);
        let c = Config::load(flags(&SIM), &cluster).expect("ok");
        assert!(
            !c.lifecycle.expect("on").node_repair,
            "off by default, as Karpenter"
        );
        let mut args = SIM.to_vec();
        args.extend(["--feature-gates", "NodeRepair=true"]);
        let c = Config::load(flags(&args), &cluster).expect("ok");
        assert!(c.lifecycle.expect("on").node_repair);
        let e = Config::load(
            flags(&BASE),
            &env(&[(ENV_FEATURE_GATES, "NodeRepair=true")]),
        )
        .expect_err("no cluster");
        assert!(
            e.to_string().contains("NodeRepair=true needs a cluster"),
            "{e}"
        );
        let e = Config::load(
            flags(&SIM),
            &env(&[
                (ENV_KUBECONFIG, "in-cluster"),
                (ENV_FEATURE_GATES, "NodeRepair=maybe"),
            ]),
        )
        .expect_err("bad gate");
        assert!(e.to_string().starts_with(ENV_FEATURE_GATES), "{e}");
    }
}
