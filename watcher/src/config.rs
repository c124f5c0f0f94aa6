//! Configuration of `dovetail-watcher`: flags and `DOVETAIL_*` environment variables, read once
//! at start-up and validated before anything connects (bad configuration exits 64).
//!
//! The settings are the watcher's own; how they are read is the service shell's
//! (`service_shell::config`: a flag wins over its environment variable, which wins over the
//! default; the environment comes through a [`Source`] that tests replace; durations are Go
//! durations), and so are the planners' client TLS ([`ClientTls`]) and the meaning of
//! `--kubeconfig` ([`KubeSource`]).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use service_shell::config::{self, Error, Settings, Source, addr_or, positive_duration_or};
use service_shell::kube::{ENV_KUBECONFIG, KubeSource};
use service_shell::tls::ClientTls;
/// `DOVETAIL_PLANNER`: planner replicas, `host:port[,host:port...]`.
pub const ENV_PLANNER: &str = "DOVETAIL_PLANNER";
/// `DOVETAIL_PLANNER_TOKEN`: bearer token sent to the planners.
pub const ENV_PLANNER_TOKEN: &str = "DOVETAIL_PLANNER_TOKEN";
/// `DOVETAIL_PLANNER_TOKEN_FILE`: file holding the bearer token (read once at start-up).
pub const ENV_PLANNER_TOKEN_FILE: &str = "DOVETAIL_PLANNER_TOKEN_FILE";
/// `DOVETAIL_PLANNER_TLS_CA`: CA the planners' certificates chain to (PEM; enables TLS).
pub const ENV_PLANNER_TLS_CA: &str = "DOVETAIL_PLANNER_TLS_CA";
/// `DOVETAIL_PLANNER_TLS_CERT`: client certificate for mTLS (PEM).
pub const ENV_PLANNER_TLS_CERT: &str = "DOVETAIL_PLANNER_TLS_CERT";
/// `DOVETAIL_PLANNER_TLS_KEY`: client private key for mTLS (PEM).
pub const ENV_PLANNER_TLS_KEY: &str = "DOVETAIL_PLANNER_TLS_KEY";
/// `DOVETAIL_PLANNER_TLS_DOMAIN`: name to verify the planners' certificates against.
pub const ENV_PLANNER_TLS_DOMAIN: &str = "DOVETAIL_PLANNER_TLS_DOMAIN";
/// `DOVETAIL_REGION`: region of the planner's built-in catalog.
pub const ENV_REGION: &str = "DOVETAIL_REGION";
/// `DOVETAIL_BATCH_IDLE_DURATION`: a batch closes this long after its last new pending pod.
pub const ENV_BATCH_IDLE: &str = "DOVETAIL_BATCH_IDLE_DURATION";
/// `DOVETAIL_BATCH_MAX_DURATION`: a batch closes at most this long after it opened.
pub const ENV_BATCH_MAX: &str = "DOVETAIL_BATCH_MAX_DURATION";
/// `DOVETAIL_CONSOLIDATION_INTERVAL`: how often a plan is asked for without pending pods.
pub const ENV_CONSOLIDATION_INTERVAL: &str = "DOVETAIL_CONSOLIDATION_INTERVAL";
/// `DOVETAIL_METRICS_LISTEN`: Prometheus address.
pub const ENV_METRICS_LISTEN: &str = "DOVETAIL_METRICS_LISTEN";
/// `DOVETAIL_HEALTH_LISTEN`: `grpc.health.v1` address.
pub const ENV_HEALTH_LISTEN: &str = "DOVETAIL_HEALTH_LISTEN";
/// `DOVETAIL_LEADER_ELECT`: `true` to lead through a Lease (several replicas), `false` alone.
pub const ENV_LEADER_ELECT: &str = "DOVETAIL_LEADER_ELECT";
/// `DOVETAIL_LEASE_NAMESPACE`: namespace of the Lease.
pub const ENV_LEASE_NAMESPACE: &str = "DOVETAIL_LEASE_NAMESPACE";
/// `DOVETAIL_INSTANCE`: this replica's identity (default: `$HOSTNAME`).
pub const ENV_INSTANCE: &str = "DOVETAIL_INSTANCE";
/// `DOVETAIL_FEATURE_GATES`: Karpenter's feature gates (`Name=bool,...`, its defaults).
pub const ENV_FEATURE_GATES: &str = "DOVETAIL_FEATURE_GATES";
/// `DOVETAIL_PREFERENCE_POLICY`: `Respect` (default) or `Ignore`, as Karpenter's setting.
pub const ENV_PREFERENCE_POLICY: &str = "DOVETAIL_PREFERENCE_POLICY";
/// `DOVETAIL_MIN_VALUES_POLICY`: `Strict` (default) or `BestEffort`, as Karpenter's setting.
pub const ENV_MIN_VALUES_POLICY: &str = "DOVETAIL_MIN_VALUES_POLICY";
/// `DOVETAIL_RESERVED_ENIS`: Karpenter's `reservedENIs` (ENIs left out of max pods), default 0.
pub const ENV_RESERVED_ENIS: &str = "DOVETAIL_RESERVED_ENIS";
/// `DOVETAIL_VM_MEMORY_OVERHEAD_PERCENT`: Karpenter's `vmMemoryOverheadPercent` (a fraction),
/// default 0.075.
pub const ENV_VM_MEMORY_OVERHEAD_PERCENT: &str = "DOVETAIL_VM_MEMORY_OVERHEAD_PERCENT";
/// `DOVETAIL_IGNORE_DRA_REQUESTS`: Karpenter's `ignoreDRARequests` (`IGNORE_DRA_REQUESTS`),
/// default true.
pub const ENV_IGNORE_DRA_REQUESTS: &str = "DOVETAIL_IGNORE_DRA_REQUESTS";

/// Command-line flags; each one overrides its environment variable.
#[derive(Debug, Default, Parser)]
#[command(
    name = "dovetail-watcher",
    version,
    about = "The dovetail watcher: streams the cluster to the planners"
)]
pub struct Flags {
    /// The cluster: a kubeconfig PATH or `in-cluster`; unset: KUBECONFIG, ~/.kube/config, then in-cluster, refused when none exists [env DOVETAIL_KUBECONFIG]
    #[arg(long)]
    pub kubeconfig: Option<String>,
    /// Planner replicas, host:port[,host:port...] [env DOVETAIL_PLANNER; required]
    #[arg(long)]
    pub planner: Option<String>,
    /// Bearer token for the planners [env DOVETAIL_PLANNER_TOKEN]
    #[arg(long)]
    pub planner_token: Option<String>,
    /// File holding the planners' bearer token [env DOVETAIL_PLANNER_TOKEN_FILE]
    #[arg(long)]
    pub planner_token_file: Option<String>,
    /// CA of the planners' certificates, PEM; enables TLS [env DOVETAIL_PLANNER_TLS_CA]
    #[arg(long)]
    pub planner_tls_ca: Option<String>,
    /// Client certificate for mTLS, PEM [env DOVETAIL_PLANNER_TLS_CERT]
    #[arg(long)]
    pub planner_tls_cert: Option<String>,
    /// Client key for mTLS, PEM [env DOVETAIL_PLANNER_TLS_KEY]
    #[arg(long)]
    pub planner_tls_key: Option<String>,
    /// Name to verify the planners' certificates against [env DOVETAIL_PLANNER_TLS_DOMAIN]
    #[arg(long)]
    pub planner_tls_domain: Option<String>,
    /// Region of the planner's built-in catalog [env DOVETAIL_REGION, default us-east-1]
    #[arg(long)]
    pub region: Option<String>,
    /// Batch idle duration [env DOVETAIL_BATCH_IDLE_DURATION, default 1s]
    #[arg(long)]
    pub batch_idle_duration: Option<String>,
    /// Batch max duration [env DOVETAIL_BATCH_MAX_DURATION, default 10s]
    #[arg(long)]
    pub batch_max_duration: Option<String>,
    /// Consolidation interval [env DOVETAIL_CONSOLIDATION_INTERVAL, default 60s]
    #[arg(long)]
    pub consolidation_interval: Option<String>,
    /// Prometheus address [env DOVETAIL_METRICS_LISTEN, default 0.0.0.0:9090]
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// grpc.health.v1 address [env DOVETAIL_HEALTH_LISTEN, default 0.0.0.0:50052]
    #[arg(long)]
    pub health_listen: Option<String>,
    /// Lead through a Lease: true or false [env DOVETAIL_LEADER_ELECT, default true]
    #[arg(long)]
    pub leader_elect: Option<String>,
    /// Namespace of the Lease [env DOVETAIL_LEASE_NAMESPACE, default kube-system]
    #[arg(long)]
    pub lease_namespace: Option<String>,
    /// This replica's identity [env DOVETAIL_INSTANCE, default $HOSTNAME]
    #[arg(long)]
    pub instance: Option<String>,
    /// Karpenter's feature gates, Name=true|false,... over its v1.14 defaults; plans read
    /// SpotToSpotConsolidation and StaticCapacity [env DOVETAIL_FEATURE_GATES]
    #[arg(long)]
    pub feature_gates: Option<String>,
    /// How preferences are treated: Respect or Ignore [env DOVETAIL_PREFERENCE_POLICY, default Respect]
    #[arg(long)]
    pub preference_policy: Option<String>,
    /// What happens when minValues cannot be met: Strict or BestEffort
    /// [env DOVETAIL_MIN_VALUES_POLICY, default Strict]
    #[arg(long)]
    pub min_values_policy: Option<String>,
    /// ENIs of each type's default network card left out of its max pods (VPC CNI custom
    /// networking), as Karpenter's reservedENIs [env DOVETAIL_RESERVED_ENIS, default 0]
    #[arg(long)]
    pub reserved_enis: Option<String>,
    /// Fraction of an instance type's memory taken off for the hypervisor, as Karpenter's
    /// vmMemoryOverheadPercent [env DOVETAIL_VM_MEMORY_OVERHEAD_PERCENT, default 0.075]
    #[arg(long)]
    pub vm_memory_overhead_percent: Option<String>,
    /// true: pods with Dynamic Resource Allocation requests (ResourceClaims) are not planned
    /// for, as Karpenter's ignoreDRARequests; false: they are planned on their other requests,
    /// devices not simulated [env DOVETAIL_IGNORE_DRA_REQUESTS, default true]
    #[arg(long)]
    pub ignore_dra_requests: Option<String>,
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The cluster (never [`KubeSource::None`]).
    pub kubeconfig: KubeSource,
    /// Planner endpoints.
    pub planners: Vec<String>,
    /// Bearer token for the planners.
    pub planner_token: Option<String>,
    /// TLS to the planners; `None` is plaintext.
    pub planner_tls: Option<ClientTls>,
    /// Catalog region.
    pub region: String,
    /// Batch idle duration.
    pub batch_idle: Duration,
    /// Batch max duration.
    pub batch_max: Duration,
    /// Consolidation interval.
    pub consolidation_interval: Duration,
    /// Prometheus address.
    pub metrics_listen: SocketAddr,
    /// Health address.
    pub health_listen: SocketAddr,
    /// Lead through a Lease.
    pub leader_elect: bool,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// Karpenter's feature gates.
    pub feature_gates: common::feature_gates::FeatureGates,
    /// `Respect` or `Ignore`.
    pub preference_policy: String,
    /// `Strict` or `BestEffort`.
    pub min_values_policy: String,
    /// Karpenter's `reservedENIs`.
    pub reserved_enis: u32,
    /// Karpenter's `vmMemoryOverheadPercent` (a fraction).
    pub vm_memory_overhead_percent: f64,
    /// Karpenter's `ignoreDRARequests`.
    pub ignore_dra_requests: bool,
    /// This replica's identity.
    pub instance: String,
}

// === impl Config ===

impl Config {
    /// Merges flags over the environment over defaults and validates everything.
    ///
    /// # Errors
    /// The first setting that is missing or unusable, named by flag and variable.
    pub fn load(flags: Flags, src: &dyn Source) -> config::Result<Self> {
        let s = Settings::new(src);
        let planner = s.get(flags.planner, "planner", ENV_PLANNER);
        let planners: Vec<String> = planner
            .iter()
            .flat_map(|i| i.value.split(','))
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        let Some(planner) = planner.filter(|_| !planners.is_empty()) else {
            return Err(Error::Missing {
                flag: "--planner".into(),
                env: ENV_PLANNER.into(),
                what: "planner replicas, host:port[,host:port...]".into(),
            });
        };
        for p in &planners {
            let hostport = p.split_once("://").map_or(p.as_str(), |(_, r)| r);
            let ok = hostport
                .rsplit_once(':')
                .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok());
            if !ok {
                return Err(planner.invalid(format!("{p:?} is not host:port")));
            }
        }
        let batch_idle = positive_duration_or(
            s.get(
                flags.batch_idle_duration,
                "batch-idle-duration",
                ENV_BATCH_IDLE,
            ),
            Duration::from_secs(1),
        )?;
        let batch_max_input = s.get(
            flags.batch_max_duration,
            "batch-max-duration",
            ENV_BATCH_MAX,
        );
        let batch_max = positive_duration_or(batch_max_input.clone(), Duration::from_secs(10))?;
        if batch_max < batch_idle
            && let Some(i) = batch_max_input
        {
            return Err(i.invalid(format!("shorter than the idle duration {batch_idle:?}")));
        }
        let planner_token = match s.get(flags.planner_token, "planner-token", ENV_PLANNER_TOKEN) {
            Some(t) => Some(t.value),
            None => s
                .get(
                    flags.planner_token_file,
                    "planner-token-file",
                    ENV_PLANNER_TOKEN_FILE,
                )
                .map(|f| f.read())
                .transpose()?
                .map(|b| String::from_utf8_lossy(&b).trim().to_string()),
        };
        let planner_tls = ClientTls::load(
            s.get(flags.planner_tls_ca, "planner-tls-ca", ENV_PLANNER_TLS_CA),
            s.get(
                flags.planner_tls_cert,
                "planner-tls-cert",
                ENV_PLANNER_TLS_CERT,
            ),
            s.get(
                flags.planner_tls_key,
                "planner-tls-key",
                ENV_PLANNER_TLS_KEY,
            ),
            s.get(
                flags.planner_tls_domain,
                "planner-tls-domain",
                ENV_PLANNER_TLS_DOMAIN,
            ),
        )?;
        let leader_elect = match s.get(flags.leader_elect, "leader-elect", ENV_LEADER_ELECT) {
            None => true,
            Some(i) => i.bool()?,
        };
        let kube_input = s.get(flags.kubeconfig, "kubeconfig", ENV_KUBECONFIG);
        if let Some(i) = kube_input.as_ref().filter(|i| i.value.trim() == "none") {
            return Err(i.invalid("the watcher needs a cluster: a kubeconfig PATH or in-cluster"));
        }
        let kubeconfig = KubeSource::load(kube_input, &s)?;
        let feature_gates = match s.get(flags.feature_gates, "feature-gates", ENV_FEATURE_GATES) {
            None => common::feature_gates::FeatureGates::default(),
            Some(i) => {
                common::feature_gates::FeatureGates::parse(&i.value).map_err(|e| i.invalid(e))?
            }
        };
        let one_of = |input: Option<config::Input>, allowed: [&str; 2]| match input {
            None => Ok(allowed[0].to_string()),
            Some(i) => allowed
                .iter()
                .find(|a| a.eq_ignore_ascii_case(i.value.trim()))
                .map(|a| a.to_string())
                .ok_or_else(|| i.invalid(format!("must be {} or {}", allowed[0], allowed[1]))),
        };
        let preference_policy = one_of(
            s.get(
                flags.preference_policy,
                "preference-policy",
                ENV_PREFERENCE_POLICY,
            ),
            ["Respect", "Ignore"],
        )?;
        let min_values_policy = one_of(
            s.get(
                flags.min_values_policy,
                "min-values-policy",
                ENV_MIN_VALUES_POLICY,
            ),
            ["Strict", "BestEffort"],
        )?;
        let reserved_enis = match s.get(flags.reserved_enis, "reserved-enis", ENV_RESERVED_ENIS) {
            None => 0,
            Some(i) => i
                .value
                .trim()
                .parse::<u32>()
                .map_err(|_| i.invalid("expected a whole number of ENIs, 0 or more"))?,
        };
        let vm_memory_overhead_percent = match s.get(
            flags.vm_memory_overhead_percent,
            "vm-memory-overhead-percent",
            ENV_VM_MEMORY_OVERHEAD_PERCENT,
        ) {
            None => common::ec2::overhead::VM_MEMORY_OVERHEAD_FRACTION,
            Some(i) => match i.value.trim().parse::<f64>() {
                Ok(f) if f.is_finite() && (0.0..1.0).contains(&f) => f,
                _ => {
                    return Err(
                        i.invalid("expected a fraction at least 0 and below 1, e.g. 0.075 (7.5%)")
                    );
                }
            },
        };
        let ignore_dra_requests = match s.get(
            flags.ignore_dra_requests,
            "ignore-dra-requests",
            ENV_IGNORE_DRA_REQUESTS,
        ) {
            None => common::dra::IGNORE_DRA_REQUESTS_DEFAULT,
            Some(i) => i.bool()?,
        };
        Ok(Self {
            ignore_dra_requests,
            feature_gates,
            preference_policy,
            min_values_policy,
            reserved_enis,
            vm_memory_overhead_percent,
            kubeconfig,
            planners,
            planner_token,
            planner_tls,
            region: s
                .get(flags.region, "region", ENV_REGION)
                .map_or_else(|| "us-east-1".into(), |i| i.value),
            batch_idle,
            batch_max,
            consolidation_interval: positive_duration_or(
                s.get(
                    flags.consolidation_interval,
                    "consolidation-interval",
                    ENV_CONSOLIDATION_INTERVAL,
                ),
                Duration::from_secs(60),
            )?,
            metrics_listen: addr_or(
                s.get(flags.metrics_listen, "metrics-listen", ENV_METRICS_LISTEN),
                SocketAddr::from(([0, 0, 0, 0], 9090)),
            )?,
            health_listen: addr_or(
                s.get(flags.health_listen, "health-listen", ENV_HEALTH_LISTEN),
                SocketAddr::from(([0, 0, 0, 0], 50052)),
            )?,
            leader_elect,
            lease_namespace: s
                .get(
                    flags.lease_namespace,
                    "lease-namespace",
                    ENV_LEASE_NAMESPACE,
                )
                .map_or_else(|| "kube-system".into(), |i| i.value),
            instance: s
                .get(flags.instance, "instance", ENV_INSTANCE)
                .map(|i| i.value)
                .or_else(|| s.env("HOSTNAME"))
                .unwrap_or_else(|| format!("dovetail-watcher-{}", std::process::id())),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// `pairs` on a machine with a `KUBECONFIG`.
    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        let mut vars = service_shell::config::vars(pairs);
        vars.insert("KUBECONFIG".into(), "/tmp/kubeconfig".into());
        vars
    }

    #[test]
    fn flags_win_over_env_over_defaults() {
        let src = env(&[(ENV_PLANNER, "a:1,b:2"), (ENV_BATCH_IDLE, "2s")]);
        let flags = Flags {
            batch_idle_duration: Some("3s".into()),
            ..Flags::default()
        };
        let c = Config::load(flags, &src).expect("valid");
        assert_eq!(c.planners, vec!["a:1", "b:2"]);
        assert_eq!(c.batch_idle, Duration::from_secs(3));
        assert_eq!(c.batch_max, Duration::from_secs(10));
        assert!(c.leader_elect);
        assert_eq!(
            c.feature_gates,
            common::feature_gates::FeatureGates::default()
        );
        assert_eq!(c.preference_policy, "Respect");
        assert_eq!(c.min_values_policy, "Strict");
    }

    #[test]
    fn karpenters_settings_are_read_and_refused_by_name() {
        let src = env(&[
            (ENV_PLANNER, "a:1"),
            (
                ENV_FEATURE_GATES,
                "StaticCapacity=true,SpotToSpotConsolidation=true",
            ),
            (ENV_MIN_VALUES_POLICY, "bestEffort"),
        ]);
        let c = Config::load(Flags::default(), &src).expect("valid");
        assert!(c.feature_gates.static_capacity && c.feature_gates.spot_to_spot_consolidation);
        assert_eq!(c.min_values_policy, "BestEffort");
        let bad = env(&[(ENV_PLANNER, "a:1"), (ENV_FEATURE_GATES, "Static=true")]);
        let e = Config::load(Flags::default(), &bad).expect_err("unknown gate");
        assert!(
            e.to_string().contains(ENV_FEATURE_GATES) && e.to_string().contains("\"Static\""),
            "{e}"
        );
        let flags = Flags {
            preference_policy: Some("Sometimes".into()),
            ..Flags::default()
        };
        let e = Config::load(flags, &env(&[(ENV_PLANNER, "a:1")])).expect_err("bad policy");
        assert!(e.to_string().contains("--preference-policy"), "{e}");
    }

    #[test]
    fn ignore_dra_requests_defaults_to_true_as_karpenter_and_is_checked() {
        let c = Config::load(Flags::default(), &env(&[(ENV_PLANNER, "a:1")])).expect("valid");
        assert!(c.ignore_dra_requests);
        let src = env(&[(ENV_PLANNER, "a:1"), (ENV_IGNORE_DRA_REQUESTS, "false")]);
        let c = Config::load(Flags::default(), &src).expect("valid");
        assert!(!c.ignore_dra_requests);
        let src = env(&[(ENV_PLANNER, "a:1"), (ENV_IGNORE_DRA_REQUESTS, "maybe")]);
        let e = Config::load(Flags::default(), &src).expect_err("not a bool");
        assert!(
            e.to_string().contains("DOVETAIL_IGNORE_DRA_REQUESTS"),
            "{e}"
        );
    }

    #[test]
    fn reserved_enis_and_vm_memory_overhead_default_as_karpenter_and_are_checked() {
        let c = Config::load(Flags::default(), &env(&[(ENV_PLANNER, "a:1")])).expect("valid");
        assert_eq!((c.reserved_enis, c.vm_memory_overhead_percent), (0, 0.075));
        let src = env(&[
            (ENV_PLANNER, "a:1"),
            (ENV_RESERVED_ENIS, "1"),
            (ENV_VM_MEMORY_OVERHEAD_PERCENT, "0.1"),
        ]);
        let c = Config::load(Flags::default(), &src).expect("valid");
        assert_eq!((c.reserved_enis, c.vm_memory_overhead_percent), (1, 0.1));
        for (key, value) in [
            (ENV_RESERVED_ENIS, "-1"),
            (ENV_VM_MEMORY_OVERHEAD_PERCENT, "7.5"),
            (ENV_VM_MEMORY_OVERHEAD_PERCENT, "NaN"),
        ] {
            let e = Config::load(
                Flags::default(),
                &env(&[(ENV_PLANNER, "a:1"), (key, value)]),
            )
            .expect_err("refused");
            assert!(e.to_string().starts_with(key), "{e}");
        }
    }

    #[test]
    fn errors_name_the_setting() {
        let e = Config::load(Flags::default(), &env(&[])).expect_err("missing");
        assert_eq!(
            e.to_string(),
            "--planner (or DOVETAIL_PLANNER) is required: planner replicas, host:port[,host:port...]"
        );
        let e = Config::load(
            Flags::default(),
            &env(&[(ENV_PLANNER, "a:1"), (ENV_BATCH_MAX, "soon")]),
        )
        .expect_err("bad duration");
        assert!(
            e.to_string().starts_with(
                "DOVETAIL_BATCH_MAX_DURATION: \"soon\" is invalid: expected a duration like 30s"
            ),
            "{e}"
        );
        let e = Config::load(Flags::default(), &env(&[(ENV_PLANNER, "nohost")]))
            .expect_err("bad endpoint");
        assert!(e.to_string().contains("\"nohost\" is not host:port"), "{e}");
        let e = Config::load(
            Flags::default(),
            &env(&[
                (ENV_PLANNER, "a:1"),
                (ENV_PLANNER_TLS_CERT, "/nonexistent/cert.pem"),
            ]),
        )
        .expect_err("cert without key");
        assert_eq!(
            e.to_string(),
            "DOVETAIL_PLANNER_TLS_CERT: \"/nonexistent/cert.pem\" is invalid: a client certificate needs its key"
        );
        let e = Config::load(
            Flags::default(),
            &env(&[
                (ENV_PLANNER, "a:1"),
                (ENV_PLANNER_TLS_CA, "/nonexistent/ca.pem"),
            ]),
        )
        .expect_err("unreadable CA");
        assert!(
            e.to_string()
                .starts_with("DOVETAIL_PLANNER_TLS_CA: cannot read /nonexistent/ca.pem"),
            "{e}"
        );
    }

    #[test]
    fn durations_are_go_durations_with_a_unit() {
        let c = Config::load(
            Flags {
                consolidation_interval: Some("1h30m".into()),
                ..Flags::default()
            },
            &env(&[(ENV_PLANNER, "a:1"), (ENV_BATCH_IDLE, "500ms")]),
        )
        .expect("valid");
        assert_eq!(c.consolidation_interval, Duration::from_secs(5400));
        assert_eq!(c.batch_idle, Duration::from_millis(500));
        let e = Config::load(
            Flags {
                batch_max_duration: Some("30".into()),
                ..Flags::default()
            },
            &env(&[(ENV_PLANNER, "a:1")]),
        )
        .expect_err("no unit");
        assert_eq!(
            e.to_string(),
            "--batch-max-duration: \"30\" is invalid: a duration needs a unit, e.g. 30s, 500ms or 1h30m"
        );
    }

    #[test]
    fn the_cluster_is_a_path_in_cluster_or_inferred_never_none() {
        let c = Config::load(Flags::default(), &env(&[(ENV_PLANNER, "a:1")])).expect("valid");
        assert_eq!(c.kubeconfig, KubeSource::Infer);
        let c = Config::load(
            Flags::default(),
            &env(&[(ENV_PLANNER, "a:1"), (ENV_KUBECONFIG, "in-cluster")]),
        )
        .expect("valid");
        assert_eq!(c.kubeconfig, KubeSource::InCluster);
        let e = Config::load(
            Flags {
                kubeconfig: Some("none".into()),
                ..Flags::default()
            },
            &env(&[(ENV_PLANNER, "a:1")]),
        )
        .expect_err("none");
        assert!(
            e.to_string()
                .starts_with("--kubeconfig: \"none\" is invalid: the watcher needs a cluster"),
            "{e}"
        );
        let bare: HashMap<String, String> =
            HashMap::from([(ENV_PLANNER.to_string(), "a:1".to_string())]);
        let e = Config::load(Flags::default(), &bare).expect_err("nothing to infer");
        assert!(
            e.to_string()
                .starts_with("--kubeconfig (or DOVETAIL_KUBECONFIG) is unset"),
            "{e}"
        );
    }
}
