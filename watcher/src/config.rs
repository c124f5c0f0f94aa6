//! Configuration of `dovetail-watcher`: flags and `DOVETAIL_*` environment variables, read once
//! at start-up and validated before anything connects (bad configuration exits 64).
//!
//! A flag wins over its environment variable, which wins over the default. Environment is read
//! through [`Source`] so that tests never touch the process environment.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use thiserror::Error;

/// Exit status for invalid configuration (`EX_CONFIG`... sysexits' `EX_USAGE`).
pub const EXIT_CONFIG: u8 = 64;

/// `DOVETAIL_KUBECONFIG`: kubeconfig file (default: `$KUBECONFIG`, `~/.kube/config`, in-cluster).
pub const ENV_KUBECONFIG: &str = "DOVETAIL_KUBECONFIG";
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

/// Command-line flags; each one overrides its environment variable.
#[derive(Debug, Default, Parser)]
#[command(
    name = "dovetail-watcher",
    version,
    about = "The dovetail watcher: streams the cluster to the planners"
)]
pub struct Flags {
    /// Kubeconfig file [env DOVETAIL_KUBECONFIG; default: KUBECONFIG, ~/.kube/config or in-cluster]
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Planner replicas, host:port[,host:port...] [env DOVETAIL_PLANNER; required]
    #[arg(long)]
    pub planner: Option<String>,
    /// Bearer token for the planners [env DOVETAIL_PLANNER_TOKEN]
    #[arg(long)]
    pub planner_token: Option<String>,
    /// File holding the planners' bearer token [env DOVETAIL_PLANNER_TOKEN_FILE]
    #[arg(long)]
    pub planner_token_file: Option<PathBuf>,
    /// CA of the planners' certificates, PEM; enables TLS [env DOVETAIL_PLANNER_TLS_CA]
    #[arg(long)]
    pub planner_tls_ca: Option<PathBuf>,
    /// Client certificate for mTLS, PEM [env DOVETAIL_PLANNER_TLS_CERT]
    #[arg(long)]
    pub planner_tls_cert: Option<PathBuf>,
    /// Client key for mTLS, PEM [env DOVETAIL_PLANNER_TLS_KEY]
    #[arg(long)]
    pub planner_tls_key: Option<PathBuf>,
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
}

/// Where environment variables come from.
pub trait Source {
    /// The value of `key`, if set.
    fn get(&self, key: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy)]
pub struct Env;

impl Source for Env {
    fn get(&self, key: &str) -> Option<String> {
        std::env::var(key).ok().filter(|v| !v.is_empty())
    }
}

impl Source for HashMap<String, String> {
    fn get(&self, key: &str) -> Option<String> {
        HashMap::get(self, key).cloned()
    }
}

/// A setting that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Error {
    /// A required setting is missing.
    #[error("{setting} is required")]
    Missing {
        /// The flag and variable, e.g. `--planner / DOVETAIL_PLANNER`.
        setting: &'static str,
    },
    /// A setting has a value that cannot be used.
    #[error("{setting}: {message}")]
    Invalid {
        /// The flag and variable.
        setting: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Kubeconfig file; `None`: kube's inference (KUBECONFIG, ~/.kube/config, in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// Planner endpoints.
    pub planners: Vec<String>,
    /// Bearer token for the planners.
    pub planner_token: Option<String>,
    /// TLS to the planners; `None` is plaintext.
    pub planner_tls: Option<PlannerTls>,
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
    /// This replica's identity.
    pub instance: String,
}

/// TLS settings for the planner connections, files already read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannerTls {
    /// CA certificate (PEM).
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key (PEM) for mTLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Name to verify the server certificate against.
    pub domain: Option<String>,
}

fn read(setting: &'static str, path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Invalid {
        setting,
        message: format!("cannot read {}: {e}", path.display()),
    })
}

fn pick_path(flag: Option<PathBuf>, src: &dyn Source, env: &str) -> Option<PathBuf> {
    flag.or_else(|| src.get(env).map(PathBuf::from))
}

fn pick(flag: Option<String>, src: &dyn Source, env: &str) -> Option<String> {
    flag.filter(|v| !v.is_empty()).or_else(|| src.get(env))
}

fn duration(setting: &'static str, v: Option<String>, default: Duration) -> Result<Duration> {
    let Some(v) = v else { return Ok(default) };
    match crate::convert::parse_duration(&v) {
        Ok(Some(s)) if s > 0 => Ok(Duration::from_secs(s.unsigned_abs())),
        Ok(_) => Err(Error::Invalid {
            setting,
            message: format!("{v:?} must be at least 1s"),
        }),
        Err(message) => Err(Error::Invalid { setting, message }),
    }
}

fn addr(setting: &'static str, v: Option<String>, default: &str) -> Result<SocketAddr> {
    let v = v.unwrap_or_else(|| default.to_string());
    v.parse().map_err(|_| Error::Invalid {
        setting,
        message: format!("{v:?} is not an IP:PORT address"),
    })
}

// === impl Config ===

impl Config {
    /// Merges flags over the environment over defaults and validates everything.
    ///
    /// # Errors
    /// The first setting that is missing or unusable, named by flag and variable.
    pub fn load(flags: Flags, src: &dyn Source) -> Result<Self> {
        const PLANNER: &str = "--planner / DOVETAIL_PLANNER";
        let planners: Vec<String> = pick(flags.planner, src, ENV_PLANNER)
            .ok_or(Error::Missing { setting: PLANNER })?
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if planners.is_empty() {
            return Err(Error::Missing { setting: PLANNER });
        }
        for p in &planners {
            let hostport = p.split_once("://").map_or(p.as_str(), |(_, r)| r);
            let ok = hostport
                .rsplit_once(':')
                .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok());
            if !ok {
                return Err(Error::Invalid {
                    setting: PLANNER,
                    message: format!("{p:?} is not host:port"),
                });
            }
        }
        let batch_idle = duration(
            "--batch-idle-duration / DOVETAIL_BATCH_IDLE_DURATION",
            pick(flags.batch_idle_duration, src, ENV_BATCH_IDLE),
            Duration::from_secs(1),
        )?;
        let batch_max = duration(
            "--batch-max-duration / DOVETAIL_BATCH_MAX_DURATION",
            pick(flags.batch_max_duration, src, ENV_BATCH_MAX),
            Duration::from_secs(10),
        )?;
        if batch_max < batch_idle {
            return Err(Error::Invalid {
                setting: "--batch-max-duration / DOVETAIL_BATCH_MAX_DURATION",
                message: format!("{batch_max:?} is shorter than the idle duration {batch_idle:?}"),
            });
        }
        let mut planner_token = pick(flags.planner_token, src, ENV_PLANNER_TOKEN);
        if planner_token.is_none()
            && let Some(path) = pick_path(flags.planner_token_file, src, ENV_PLANNER_TOKEN_FILE)
        {
            let bytes = read("--planner-token-file / DOVETAIL_PLANNER_TOKEN_FILE", &path)?;
            planner_token = Some(String::from_utf8_lossy(&bytes).trim().to_string());
        }
        let ca = pick_path(flags.planner_tls_ca, src, ENV_PLANNER_TLS_CA);
        let cert = pick_path(flags.planner_tls_cert, src, ENV_PLANNER_TLS_CERT);
        let key = pick_path(flags.planner_tls_key, src, ENV_PLANNER_TLS_KEY);
        let domain = pick(flags.planner_tls_domain, src, ENV_PLANNER_TLS_DOMAIN);
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((
                read("--planner-tls-cert / DOVETAIL_PLANNER_TLS_CERT", &c)?,
                read("--planner-tls-key / DOVETAIL_PLANNER_TLS_KEY", &k)?,
            )),
            (None, None) => None,
            (Some(_), None) => {
                return Err(Error::Missing {
                    setting: "--planner-tls-key / DOVETAIL_PLANNER_TLS_KEY (with --planner-tls-cert)",
                });
            }
            (None, Some(_)) => {
                return Err(Error::Missing {
                    setting: "--planner-tls-cert / DOVETAIL_PLANNER_TLS_CERT (with --planner-tls-key)",
                });
            }
        };
        let planner_tls = match (ca, identity, domain) {
            (None, None, None) => None,
            (ca, identity, domain) => Some(PlannerTls {
                ca: ca
                    .map(|p| read("--planner-tls-ca / DOVETAIL_PLANNER_TLS_CA", &p))
                    .transpose()?,
                identity,
                domain,
            }),
        };
        let leader_elect = match pick(flags.leader_elect, src, ENV_LEADER_ELECT).as_deref() {
            None | Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(Error::Invalid {
                    setting: "--leader-elect / DOVETAIL_LEADER_ELECT",
                    message: format!("{other:?} is not true or false"),
                });
            }
        };
        Ok(Self {
            kubeconfig: flags
                .kubeconfig
                .or_else(|| src.get(ENV_KUBECONFIG).map(PathBuf::from)),
            planners,
            planner_token,
            planner_tls,
            region: pick(flags.region, src, ENV_REGION).unwrap_or_else(|| "us-east-1".into()),
            batch_idle,
            batch_max,
            consolidation_interval: duration(
                "--consolidation-interval / DOVETAIL_CONSOLIDATION_INTERVAL",
                pick(
                    flags.consolidation_interval,
                    src,
                    ENV_CONSOLIDATION_INTERVAL,
                ),
                Duration::from_secs(60),
            )?,
            metrics_listen: addr(
                "--metrics-listen / DOVETAIL_METRICS_LISTEN",
                pick(flags.metrics_listen, src, ENV_METRICS_LISTEN),
                "0.0.0.0:9090",
            )?,
            health_listen: addr(
                "--health-listen / DOVETAIL_HEALTH_LISTEN",
                pick(flags.health_listen, src, ENV_HEALTH_LISTEN),
                "0.0.0.0:50052",
            )?,
            leader_elect,
            lease_namespace: pick(flags.lease_namespace, src, ENV_LEASE_NAMESPACE)
                .unwrap_or_else(|| "kube-system".into()),
            instance: pick(flags.instance, src, ENV_INSTANCE)
                .or_else(|| src.get("HOSTNAME"))
                .unwrap_or_else(|| format!("dovetail-watcher-{}", std::process::id())),
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
    }

    #[test]
    fn errors_name_the_setting() {
        let e = Config::load(Flags::default(), &env(&[])).expect_err("missing");
        assert_eq!(e.to_string(), "--planner / DOVETAIL_PLANNER is required");
        let e = Config::load(
            Flags::default(),
            &env(&[(ENV_PLANNER, "a:1"), (ENV_BATCH_MAX, "soon")]),
        )
        .expect_err("bad duration");
        assert!(
            e.to_string().starts_with(
                "--batch-max-duration / DOVETAIL_BATCH_MAX_DURATION: invalid duration \"soon\""
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
        assert!(
            e.to_string()
                .starts_with("--planner-tls-key / DOVETAIL_PLANNER_TLS_KEY"),
            "{e}"
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
            e.to_string().starts_with(
                "--planner-tls-ca / DOVETAIL_PLANNER_TLS_CA: cannot read /nonexistent/ca.pem"
            ),
            "{e}"
        );
    }
}
