//! Configuration of `dovetail-actuator`: flags and `DOVETAIL_*` environment variables, read once
//! at start-up and validated before any port is bound (bad configuration exits 64, the message
//! naming the setting).
//!
//! A flag wins over its environment variable, which wins over the default. Environment is read
//! through [`Source`] so that tests never touch the process environment. The helpers follow the
//! planner's `config.rs` (copied, not shared: the actuator must not depend on the planner).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use thiserror::Error;

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
/// `DOVETAIL_INTERRUPTION_QUEUE`: the SQS queue of interruption events (name or URL); unset,
/// interruptions are not handled. Needs `--cloud aws` and a cluster (`DOVETAIL_KUBECONFIG`).
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
/// `DOVETAIL_AUTH_TOKEN`: bearer token clients must send.
pub const ENV_AUTH_TOKEN: &str = "DOVETAIL_AUTH_TOKEN";
/// `DOVETAIL_AUTH_TOKEN_FILE`: file holding the bearer token.
pub const ENV_AUTH_TOKEN_FILE: &str = "DOVETAIL_AUTH_TOKEN_FILE";
/// `DOVETAIL_TLS_CERT`: server certificate chain (PEM).
pub const ENV_TLS_CERT: &str = "DOVETAIL_TLS_CERT";
/// `DOVETAIL_TLS_KEY`: server private key (PEM).
pub const ENV_TLS_KEY: &str = "DOVETAIL_TLS_KEY";
/// `DOVETAIL_TLS_CLIENT_CA`: CA that client certificates must chain to (enables mTLS).
pub const ENV_TLS_CLIENT_CA: &str = "DOVETAIL_TLS_CLIENT_CA";
/// `DOVETAIL_INSECURE_NO_AUTH`: `true` to serve without authentication (local use only).
pub const ENV_INSECURE_NO_AUTH: &str = "DOVETAIL_INSECURE_NO_AUTH";
/// `DOVETAIL_TEST_PAUSE_AT`: crash tests only: the worker stops for good at this launch step
/// (`requested`, `launching`, `created`, `launched`) so that the test can SIGKILL it there.
pub const ENV_TEST_PAUSE_AT: &str = "DOVETAIL_TEST_PAUSE_AT";

/// `DOVETAIL_KUBECONFIG`: the kubeconfig of the cluster whose NodeClaims the actuator manages, or
/// `in-cluster`; unset, the NodeClaim lifecycle and garbage collection are off.
pub const ENV_KUBECONFIG: &str = "DOVETAIL_KUBECONFIG";
/// `DOVETAIL_REGISTRATION_TIMEOUT`: a launched claim with no Node after this long is terminated.
pub const ENV_REGISTRATION_TIMEOUT: &str = "DOVETAIL_REGISTRATION_TIMEOUT";
/// `DOVETAIL_LIFECYCLE_INTERVAL`: time between NodeClaim lifecycle passes.
pub const ENV_LIFECYCLE_INTERVAL: &str = "DOVETAIL_LIFECYCLE_INTERVAL";
/// `DOVETAIL_GC_GRACE`: an instance no claim owns is terminated once it is this old.
pub const ENV_GC_GRACE: &str = "DOVETAIL_GC_GRACE";
/// `DOVETAIL_GC_INTERVAL`: time between garbage collections.
pub const ENV_GC_INTERVAL: &str = "DOVETAIL_GC_INTERVAL";
/// `DOVETAIL_DISRUPTION_CONFIRM_AFTER`: a disruption executes only when a plan at least this
/// much later (by the plans' `basis.now`) proposes it again.
pub const ENV_DISRUPTION_CONFIRM_AFTER: &str = "DOVETAIL_DISRUPTION_CONFIRM_AFTER";

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
    /// `--cloud aws`: SQS queue (name or URL) of spot interruptions, rebalance recommendations, scheduled changes and state changes; needs --kubeconfig [env DOVETAIL_INTERRUPTION_QUEUE]
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
    /// Bearer token clients must send [env DOVETAIL_AUTH_TOKEN]
    #[arg(long)]
    pub auth_token: Option<String>,
    /// File holding the bearer token [env DOVETAIL_AUTH_TOKEN_FILE]
    #[arg(long)]
    pub auth_token_file: Option<String>,
    /// Server certificate chain, PEM [env DOVETAIL_TLS_CERT]
    #[arg(long)]
    pub tls_cert: Option<String>,
    /// Server private key, PEM [env DOVETAIL_TLS_KEY]
    #[arg(long)]
    pub tls_key: Option<String>,
    /// CA for client certificates, PEM; enables mTLS [env DOVETAIL_TLS_CLIENT_CA]
    #[arg(long)]
    pub tls_client_ca: Option<String>,
    /// Serve without any authentication (local use only) [env DOVETAIL_INSECURE_NO_AUTH=true]
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Kubeconfig file or `in-cluster`; unset: no NodeClaim lifecycle [env DOVETAIL_KUBECONFIG]
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
    /// Delay after its first proposal before a plan may confirm a disruption [env DOVETAIL_DISRUPTION_CONFIRM_AFTER, default 15s]
    #[arg(long)]
    pub disruption_confirm_after: Option<String>,
}

/// Where environment variables come from.
pub trait Source {
    /// The value of `key`, if set.
    fn get(&self, key: &str) -> Option<String>;
}

/// The process environment.
pub struct Env;

impl Source for Env {
    fn get(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }
}

impl Source for HashMap<String, String> {
    fn get(&self, key: &str) -> Option<String> {
        HashMap::get(self, key).cloned()
    }
}

/// TLS material, read at start-up.
#[derive(Clone, Debug)]
pub struct Tls {
    /// Certificate chain, PEM.
    pub cert: Vec<u8>,
    /// Private key, PEM.
    pub key: Vec<u8>,
    /// Client CA, PEM; set means mTLS.
    pub client_ca: Option<Vec<u8>>,
}

/// How clients are authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// A bearer token (possibly on top of mTLS).
    Bearer(String),
    /// Client certificates only.
    MutualTls,
    /// Nothing: `--insecure-no-auth`.
    Disabled,
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
    /// API server URL the nodes join.
    pub cluster_endpoint: String,
    /// Base64 cluster CA bundle.
    pub cluster_ca_bundle: Option<String>,
    /// Kubernetes minor version.
    pub kubernetes_version: String,
}

/// Where the Kubernetes API of the managed cluster is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeSource {
    /// The service account of the pod the actuator runs in.
    InCluster,
    /// A kubeconfig file.
    File(PathBuf),
}

/// The NodeClaim lifecycle and garbage collection settings ([`crate::lifecycle`], [`crate::gc`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// The cluster's API.
    pub kube: KubeSource,
    /// Registration timeout (liveness).
    pub registration_timeout: Duration,
    /// Time between lifecycle passes.
    pub interval: Duration,
    /// Garbage collection grace period.
    pub gc_grace: Duration,
    /// Time between garbage collections.
    pub gc_interval: Duration,
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
    pub tls: Option<Tls>,
    /// Crash tests only: pause the worker at this step.
    pub pause_at: Option<Step>,
    /// The NodeClaim lifecycle; `None` when no cluster is configured.
    pub lifecycle: Option<LifecycleConfig>,
    /// Delay between a disruption's first proposal and a plan that may confirm it.
    pub disruption_confirm_after: Duration,
    /// The interruption queue (SQS name or URL); `None`: interruptions are not handled.
    pub interruption_queue: Option<String>,
}

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum Error {
    /// A setting has a value that cannot be used.
    #[error("{key}: {value:?} is invalid: {reason}")]
    Invalid {
        /// The flag or variable (`--listen` / `DOVETAIL_LISTEN`).
        key: String,
        /// The value given.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A required setting is missing.
    #[error("{flag} (or {env}) is required: {what}")]
    Missing {
        /// The flag.
        flag: &'static str,
        /// The variable.
        env: &'static str,
        /// What it takes.
        what: &'static str,
    },
    /// A file named by a setting cannot be read.
    #[error("{key}: cannot read {path}")]
    Read {
        /// The flag or variable.
        key: String,
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// Settings that do not go together, or a required choice left open.
    #[error("{0}")]
    Conflict(String),
}

/// Result of loading configuration.
pub type Result<T, E = Error> = std::result::Result<T, E>;

struct Lookup<'a> {
    env: &'a dyn Source,
}

impl Lookup<'_> {
    /// The flag's value, else the variable's, with the name to blame on error.
    fn get(&self, flag: Option<String>, flag_name: &str, env: &str) -> Option<(String, String)> {
        match flag {
            Some(v) => Some((format!("--{flag_name}"), v)),
            None => self
                .env
                .get(env)
                .filter(|v| !v.is_empty())
                .map(|v| (env.to_string(), v)),
        }
    }

    fn flag_bool(&self, flag: bool, env: &str) -> Result<bool> {
        if flag {
            return Ok(true);
        }
        match self.env.get(env).as_deref() {
            None | Some("" | "false" | "0") => Ok(false),
            Some("true" | "1") => Ok(true),
            Some(other) => Err(invalid(env, other, "expected true or false")),
        }
    }
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> Error {
    Error::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn addr(v: Option<(String, String)>, default: &str) -> Result<SocketAddr> {
    let (key, value) = v.unwrap_or_else(|| ("default".into(), default.into()));
    value
        .parse()
        .map_err(|e| invalid(&key, &value, format!("expected IP:PORT ({e})")))
}

/// Parses `30s`, `500ms`, `2m`, `1h` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, ""), |i| s.split_at(i));
    let n: u64 = num.parse().ok()?;
    match unit {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => Some(Duration::from_secs(n.checked_mul(60)?)),
        "h" => Some(Duration::from_secs(n.checked_mul(3600)?)),
        _ => None,
    }
}

fn duration(v: Option<(String, String)>, default: Duration) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some((key, value)) => match parse_duration(&value) {
            Some(d) if !d.is_zero() => Ok(d),
            _ => Err(invalid(
                &key,
                &value,
                "expected a positive duration like 30s, 500ms or 2m",
            )),
        },
    }
}

fn read(v: Option<(String, String)>) -> Result<Option<Vec<u8>>> {
    v.map(|(key, path)| {
        std::fs::read(&path).map_err(|source| Error::Read {
            key,
            path: PathBuf::from(path),
            source,
        })
    })
    .transpose()
}

// === impl Config ===

impl Config {
    /// Loads and validates the configuration from `flags` and `env`, reading the files they
    /// name.
    ///
    /// # Errors
    /// The first setting that is invalid, missing, unreadable or in conflict with another.
    pub fn load(flags: Flags, env: &dyn Source) -> Result<Config> {
        let l = Lookup { env };
        let listen = addr(l.get(flags.listen, "listen", ENV_LISTEN), "0.0.0.0:50052")?;
        let metrics_listen = match l.get(flags.metrics_listen, "metrics-listen", ENV_METRICS_LISTEN)
        {
            Some((_, v)) if v == "off" => None,
            other => Some(addr(other, "0.0.0.0:9091")?),
        };
        let ledger = match l.get(flags.ledger, "ledger", ENV_LEDGER) {
            None => {
                return Err(Error::Missing {
                    flag: "--ledger",
                    env: ENV_LEDGER,
                    what: "postgres://USER@HOST:PORT/DB or sqlite://PATH",
                });
            }
            Some((key, v)) => {
                let ok = ["postgres://", "postgresql://", "sqlite://"]
                    .iter()
                    .any(|p| v.starts_with(p) && v.len() > p.len());
                if !ok {
                    return Err(invalid(
                        &key,
                        &v,
                        "expected postgres://USER@HOST:PORT/DB or sqlite://PATH",
                    ));
                }
                v
            }
        };
        let ignore_client_token =
            l.flag_bool(flags.sim_ignore_client_token, ENV_SIM_IGNORE_CLIENT_TOKEN)?;
        let state_file = l
            .get(flags.cloud_state, "cloud-state", ENV_CLOUD_STATE)
            .map(|(_, v)| PathBuf::from(v));
        let cloud = match l.get(flags.cloud, "cloud", ENV_CLOUD) {
            None => {
                return Err(Error::Missing {
                    flag: "--cloud",
                    env: ENV_CLOUD,
                    what: "sim or aws",
                });
            }
            Some((_, v)) if v == "sim" => CloudChoice::Sim {
                state_file,
                ignore_client_token,
            },
            Some((_, v)) if v == "aws" => {
                let Some((_, region)) = l.get(flags.aws_region, "aws-region", ENV_AWS_REGION)
                else {
                    return Err(Error::Missing {
                        flag: "--aws-region",
                        env: ENV_AWS_REGION,
                        what: "the AWS region (--cloud aws)",
                    });
                };
                let Some((_, cluster_endpoint)) = l.get(
                    flags.cluster_endpoint,
                    "cluster-endpoint",
                    ENV_CLUSTER_ENDPOINT,
                ) else {
                    return Err(Error::Missing {
                        flag: "--cluster-endpoint",
                        env: ENV_CLUSTER_ENDPOINT,
                        what: "the API server URL nodes join (--cloud aws)",
                    });
                };
                let endpoint = match l.get(flags.aws_endpoint, "aws-endpoint", ENV_AWS_ENDPOINT) {
                    Some((key, v)) if !(v.starts_with("http://") || v.starts_with("https://")) => {
                        return Err(invalid(&key, &v, "expected an http:// or https:// URL"));
                    }
                    other => other.map(|(_, v)| v),
                };
                CloudChoice::Aws(AwsSettings {
                    region,
                    endpoint,
                    ssm_prefix: l
                        .get(flags.aws_ssm_prefix, "aws-ssm-prefix", ENV_AWS_SSM_PREFIX)
                        .map(|(_, v)| v),
                    cluster_endpoint,
                    cluster_ca_bundle: l
                        .get(
                            flags.cluster_ca_bundle,
                            "cluster-ca-bundle",
                            ENV_CLUSTER_CA_BUNDLE,
                        )
                        .map(|(_, v)| v)
                        // An empty value (the deploy/ base's default) is no CA bundle.
                        .filter(|v| !v.is_empty()),
                    kubernetes_version: l
                        .get(
                            flags.kubernetes_version,
                            "kubernetes-version",
                            ENV_KUBERNETES_VERSION,
                        )
                        .map_or_else(|| "1.33".to_string(), |(_, v)| v),
                })
            }
            Some((key, v)) => return Err(invalid(&key, &v, "expected sim or aws")),
        };
        let cluster_name = l
            .get(flags.cluster_name, "cluster-name", ENV_CLUSTER_NAME)
            .map_or_else(|| "dovetail".to_string(), |(_, v)| v);
        let instance = l
            .get(flags.instance, "instance", ENV_INSTANCE)
            .map(|(_, v)| v)
            .or_else(|| env.get("HOSTNAME"))
            .unwrap_or_else(|| "actuator".to_string());
        let lease = duration(
            l.get(flags.lease, "lease", ENV_LEASE),
            Duration::from_secs(15),
        )?;
        let poll_interval = duration(
            l.get(flags.poll_interval, "poll-interval", ENV_POLL_INTERVAL),
            Duration::from_secs(1),
        )?;
        let catalog_refresh = duration(
            l.get(
                flags.catalog_refresh,
                "catalog-refresh",
                ENV_CATALOG_REFRESH,
            ),
            Duration::from_secs(5 * 60),
        )?;
        let drain_delay = match l.get(flags.drain_delay, "drain-delay", ENV_DRAIN_DELAY) {
            Some((_, v)) if v.trim() == "0" || v.trim() == "0s" => Duration::ZERO,
            other => duration(other, Duration::from_secs(5))?,
        };
        let pause_at = match env.get(ENV_TEST_PAUSE_AT).filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => Some(Step::parse(&v).ok_or_else(|| {
                invalid(
                    ENV_TEST_PAUSE_AT,
                    &v,
                    "expected requested, launching, created or launched",
                )
            })?),
        };

        let token = match (
            l.get(flags.auth_token, "auth-token", ENV_AUTH_TOKEN),
            l.get(
                flags.auth_token_file,
                "auth-token-file",
                ENV_AUTH_TOKEN_FILE,
            ),
        ) {
            (Some(_), Some(_)) => {
                return Err(Error::Conflict(
                    "set either an auth token or an auth token file, not both".into(),
                ));
            }
            (Some((_, t)), None) => Some(t),
            (None, Some(f)) => {
                read(Some(f))?.map(|b| String::from_utf8_lossy(&b).trim().to_string())
            }
            (None, None) => None,
        };
        if let Some(t) = &token
            && (t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(Error::Conflict(
                "the auth token must be non-empty printable ASCII without spaces".into(),
            ));
        }
        let cert = read(l.get(flags.tls_cert, "tls-cert", ENV_TLS_CERT))?;
        let key = read(l.get(flags.tls_key, "tls-key", ENV_TLS_KEY))?;
        let client_ca = read(l.get(flags.tls_client_ca, "tls-client-ca", ENV_TLS_CLIENT_CA))?;
        let tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(Tls {
                cert,
                key,
                client_ca,
            }),
            (None, None) if client_ca.is_none() => None,
            _ => {
                return Err(Error::Conflict(
                    "TLS needs both a certificate and a key (and a client CA only with them)"
                        .into(),
                ));
            }
        };
        let insecure = l.flag_bool(flags.insecure_no_auth, ENV_INSECURE_NO_AUTH)?;
        let mtls = tls.as_ref().is_some_and(|t| t.client_ca.is_some());
        let auth = match (token, mtls, insecure) {
            (Some(_), _, true) | (None, true, true) => {
                return Err(Error::Conflict(
                    "--insecure-no-auth contradicts the configured authentication".into(),
                ));
            }
            (Some(t), _, false) => Auth::Bearer(t),
            (None, true, false) => Auth::MutualTls,
            (None, false, true) => Auth::Disabled,
            (None, false, false) => {
                return Err(Error::Conflict(format!(
                    "no authentication configured: set {ENV_AUTH_TOKEN} (or --auth-token), \
                     {ENV_TLS_CLIENT_CA} with a certificate and key for mTLS, or pass \
                     --insecure-no-auth for local use"
                )));
            }
        };
        let lifecycle = match l.get(flags.kubeconfig, "kubeconfig", ENV_KUBECONFIG) {
            None => None,
            Some((_, v)) => Some(LifecycleConfig {
                kube: if v == "in-cluster" {
                    KubeSource::InCluster
                } else {
                    KubeSource::File(PathBuf::from(v))
                },
                registration_timeout: duration(
                    l.get(
                        flags.registration_timeout,
                        "registration-timeout",
                        ENV_REGISTRATION_TIMEOUT,
                    ),
                    crate::lifecycle::liveness::REGISTRATION_TIMEOUT,
                )?,
                interval: duration(
                    l.get(
                        flags.lifecycle_interval,
                        "lifecycle-interval",
                        ENV_LIFECYCLE_INTERVAL,
                    ),
                    Duration::from_secs(2),
                )?,
                gc_grace: duration(
                    l.get(flags.gc_grace, "gc-grace", ENV_GC_GRACE),
                    Duration::from_secs(5 * 60),
                )?,
                gc_interval: duration(
                    l.get(flags.gc_interval, "gc-interval", ENV_GC_INTERVAL),
                    Duration::from_secs(2 * 60),
                )?,
            }),
        };
        let disruption_confirm_after = duration(
            l.get(
                flags.disruption_confirm_after,
                "disruption-confirm-after",
                ENV_DISRUPTION_CONFIRM_AFTER,
            ),
            crate::api::CONFIRM_AFTER,
        )?;
        let interruption_queue = match l.get(
            flags.interruption_queue,
            "interruption-queue",
            ENV_INTERRUPTION_QUEUE,
        ) {
            None => None,
            Some((key, v)) => {
                let v = v.trim().to_string();
                if !matches!(cloud, CloudChoice::Aws(_)) {
                    return Err(Error::Conflict(format!(
                        "{key} needs --cloud aws (the queue is SQS)"
                    )));
                }
                if lifecycle.is_none() {
                    return Err(Error::Conflict(format!(
                        "{key} needs a cluster (--kubeconfig or {ENV_KUBECONFIG}): interruptions act on Nodes and NodeClaims"
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
                    return Err(invalid(
                        &key,
                        &v,
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

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn flags(args: &[&str]) -> Flags {
        let mut all = vec!["dovetail-actuator"];
        all.extend(args);
        Flags::try_parse_from(all).expect("flags parse")
    }

    const BASE: [&str; 5] = [
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
                cluster_endpoint: "https://k8s.example".into(),
                cluster_ca_bundle: None,
                kubernetes_version: "1.33".into(),
            })
        );
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
            flags(&BASE),
            &env(&[(ENV_KUBECONFIG, "in-cluster"), (ENV_GC_GRACE, "30s")]),
        )
        .expect("ok");
        let lc = c.lifecycle.expect("on");
        assert_eq!(lc.kube, KubeSource::InCluster);
        assert_eq!(lc.gc_grace, Duration::from_secs(30));
        assert_eq!(lc.registration_timeout, Duration::from_secs(15 * 60));
        let e = Config::load(
            flags(&BASE),
            &env(&[
                (ENV_KUBECONFIG, "/k"),
                (ENV_REGISTRATION_TIMEOUT, "forever"),
            ]),
        )
        .expect_err("bad timeout");
        assert!(e.to_string().starts_with(ENV_REGISTRATION_TIMEOUT), "{e}");
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
}
