//! Configuration of `dovetail-planner`: flags and `DOVETAIL_*` environment variables, read once
//! at start-up and validated before any port is bound (bad configuration exits 64).
//!
//! A flag wins over its environment variable, which wins over the default. Environment is read
//! through [`Source`] so that tests never touch the process environment.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use thiserror::Error;

/// `DOVETAIL_LISTEN`: gRPC address.
pub const ENV_LISTEN: &str = "DOVETAIL_LISTEN";
/// `DOVETAIL_METRICS_LISTEN`: Prometheus address (`off` disables).
pub const ENV_METRICS_LISTEN: &str = "DOVETAIL_METRICS_LISTEN";
/// `DOVETAIL_REGION`: region of the default built-in catalog.
pub const ENV_REGION: &str = "DOVETAIL_REGION";
/// `DOVETAIL_REQUEST_TIMEOUT`: per-request timeout (`30s`, `500ms`, `2m`).
pub const ENV_REQUEST_TIMEOUT: &str = "DOVETAIL_REQUEST_TIMEOUT";
/// `DOVETAIL_MAX_CONCURRENT_REQUESTS`: requests served at once; more are refused.
pub const ENV_MAX_CONCURRENT: &str = "DOVETAIL_MAX_CONCURRENT_REQUESTS";
/// `DOVETAIL_MAX_MESSAGE_BYTES`: largest request or response.
pub const ENV_MAX_MESSAGE_BYTES: &str = "DOVETAIL_MAX_MESSAGE_BYTES";
/// `DOVETAIL_SESSION_MAX_OBJECTS`: most objects one Session may hold.
pub const ENV_SESSION_MAX_OBJECTS: &str = "DOVETAIL_SESSION_MAX_OBJECTS";
/// `DOVETAIL_SESSION_IDLE_TIMEOUT`: a Session silent this long is ended (`10m`).
pub const ENV_SESSION_IDLE_TIMEOUT: &str = "DOVETAIL_SESSION_IDLE_TIMEOUT";
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
/// `DOVETAIL_ACTUATOR_ENDPOINT`: where Session plans are submitted (`http://host:port`).
pub const ENV_ACTUATOR_ENDPOINT: &str = "DOVETAIL_ACTUATOR_ENDPOINT";
/// `DOVETAIL_CATALOG_FROM_ACTUATOR`: `true` to plan from the actuator's live catalog.
pub const ENV_CATALOG_FROM_ACTUATOR: &str = "DOVETAIL_CATALOG_FROM_ACTUATOR";
/// `DOVETAIL_CATALOG_POLL_INTERVAL`: how often the live catalog's version is checked.
pub const ENV_CATALOG_POLL_INTERVAL: &str = "DOVETAIL_CATALOG_POLL_INTERVAL";
/// `DOVETAIL_ACTUATOR_TOKEN`: bearer token for the actuator.
pub const ENV_ACTUATOR_TOKEN: &str = "DOVETAIL_ACTUATOR_TOKEN";
/// `DOVETAIL_DRAIN_DELAY`: time between NOT_SERVING and closing the listener on SIGTERM.
pub const ENV_DRAIN_DELAY: &str = "DOVETAIL_DRAIN_DELAY";
/// `DOVETAIL_INSTANCE`: this replica's name (default: `$HOSTNAME`).
pub const ENV_INSTANCE: &str = "DOVETAIL_INSTANCE";

/// Command-line flags; each one overrides its environment variable.
#[derive(Debug, Default, Parser)]
#[command(
    name = "dovetail-planner",
    version,
    about = "The dovetail planner gRPC service"
)]
pub struct Flags {
    /// gRPC listen address [env DOVETAIL_LISTEN, default 0.0.0.0:50051]
    #[arg(long)]
    pub listen: Option<String>,
    /// Prometheus /metrics listen address or `off` [env DOVETAIL_METRICS_LISTEN, default 0.0.0.0:9090]
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Region of the built-in catalog used when a request names none [env DOVETAIL_REGION, default us-east-1]
    #[arg(long)]
    pub region: Option<String>,
    /// Per-request timeout, e.g. 30s [env DOVETAIL_REQUEST_TIMEOUT, default 30s]
    #[arg(long)]
    pub request_timeout: Option<String>,
    /// Requests served at once; more are refused with RESOURCE_EXHAUSTED [env DOVETAIL_MAX_CONCURRENT_REQUESTS, default 8]
    #[arg(long)]
    pub max_concurrent_requests: Option<String>,
    /// Largest request or response in bytes [env DOVETAIL_MAX_MESSAGE_BYTES, default 268435456]
    #[arg(long)]
    pub max_message_bytes: Option<String>,
    /// Most objects one Session may hold [env DOVETAIL_SESSION_MAX_OBJECTS, default 250000]
    #[arg(long)]
    pub session_max_objects: Option<String>,
    /// A Session that sends nothing this long is ended [env DOVETAIL_SESSION_IDLE_TIMEOUT, default 10m]
    #[arg(long)]
    pub session_idle_timeout: Option<String>,
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
    /// Actuator endpoint for Session plans, e.g. http://actuator:50052 [env DOVETAIL_ACTUATOR_ENDPOINT]
    #[arg(long)]
    pub actuator_endpoint: Option<String>,
    /// Bearer token for the actuator [env DOVETAIL_ACTUATOR_TOKEN]
    #[arg(long)]
    pub actuator_token: Option<String>,
    /// Plan requests without a catalog from the actuator's live catalog (needs
    /// --actuator-endpoint); the built-in catalog until the first fetch [env DOVETAIL_CATALOG_FROM_ACTUATOR=true]
    #[arg(long)]
    pub catalog_from_actuator: bool,
    /// How often the live catalog's version is checked [env DOVETAIL_CATALOG_POLL_INTERVAL, default 30s]
    #[arg(long)]
    pub catalog_poll_interval: Option<String>,
    /// Time between NOT_SERVING and closing the listener on SIGTERM [env DOVETAIL_DRAIN_DELAY, default 5s]
    #[arg(long)]
    pub drain_delay: Option<String>,
    /// This replica's name [env DOVETAIL_INSTANCE, default $HOSTNAME]
    #[arg(long)]
    pub instance: Option<String>,
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

/// The validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// gRPC address.
    pub listen: SocketAddr,
    /// Metrics address; `None` is off.
    pub metrics_listen: Option<SocketAddr>,
    /// Default catalog region.
    pub region: String,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Concurrency limit.
    pub max_concurrent_requests: usize,
    /// Message size limit.
    pub max_message_bytes: usize,
    /// Session object limit.
    pub session_max_objects: usize,
    /// Session idle timeout.
    pub session_idle_timeout: Duration,
    /// Authentication.
    pub auth: Auth,
    /// TLS, when configured.
    pub tls: Option<Tls>,
    /// Actuator endpoint.
    pub actuator_endpoint: Option<String>,
    /// Actuator token.
    pub actuator_token: Option<String>,
    /// Plan from the actuator's live catalog.
    pub catalog_from_actuator: bool,
    /// Live catalog poll interval.
    pub catalog_poll_interval: Duration,
    /// Drain delay.
    pub drain_delay: Duration,
    /// Replica name.
    pub instance: String,
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

fn positive(v: Option<(String, String)>, default: usize) -> Result<usize> {
    match v {
        None => Ok(default),
        Some((key, value)) => match value.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(invalid(&key, &value, "expected a positive integer")),
        },
    }
}

/// Parses a Go duration (`30s`, `500ms`, `2m`, `1h30m`; the one parser in `common`) or a
/// plain number of seconds. `None` when it is neither, or negative.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok().map(Duration::from_secs);
    }
    common::duration::parse_std_duration(s).ok()
}

fn duration(v: Option<(String, String)>, default: Duration) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some((key, value)) => parse_duration(&value)
            .ok_or_else(|| invalid(&key, &value, "expected a duration like 30s, 500ms or 2m")),
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
    /// Settings for tests: gRPC on 127.0.0.1 with an OS-chosen port, no metrics port, region
    /// `us-east-1`, no auth, no TLS, no actuator, no drain delay, a 10 s request timeout. Change
    /// fields as a test needs (`Config { auth, ..Config::for_tests() }`).
    #[cfg(any(test, feature = "test-util"))]
    pub fn for_tests() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics_listen: None,
            region: "us-east-1".into(),
            request_timeout: Duration::from_secs(10),
            max_concurrent_requests: 8,
            max_message_bytes: 64 << 20,
            session_max_objects: 10_000,
            session_idle_timeout: Duration::from_secs(600),
            auth: Auth::Disabled,
            tls: None,
            actuator_endpoint: None,
            actuator_token: None,
            catalog_from_actuator: false,
            catalog_poll_interval: Duration::from_secs(30),
            drain_delay: Duration::ZERO,
            instance: "test".into(),
        }
    }

    /// Loads and validates the configuration from `flags` and `env`, reading the files they
    /// name.
    ///
    /// # Errors
    /// The first setting that is invalid, unreadable or in conflict with another.
    pub fn load(flags: Flags, env: &dyn Source) -> Result<Config> {
        let l = Lookup { env };
        let listen = addr(l.get(flags.listen, "listen", ENV_LISTEN), "0.0.0.0:50051")?;
        let metrics_listen = match l.get(flags.metrics_listen, "metrics-listen", ENV_METRICS_LISTEN)
        {
            Some((_, v)) if v == "off" => None,
            other => Some(addr(other, "0.0.0.0:9090")?),
        };
        let region = l
            .get(flags.region, "region", ENV_REGION)
            .map_or_else(|| "us-east-1".to_string(), |(_, v)| v);
        let request_timeout = duration(
            l.get(
                flags.request_timeout,
                "request-timeout",
                ENV_REQUEST_TIMEOUT,
            ),
            Duration::from_secs(30),
        )?;
        if request_timeout.is_zero() {
            return Err(Error::Conflict("request timeout must be positive".into()));
        }
        let max_concurrent_requests = positive(
            l.get(
                flags.max_concurrent_requests,
                "max-concurrent-requests",
                ENV_MAX_CONCURRENT,
            ),
            8,
        )?;
        let max_message_bytes = positive(
            l.get(
                flags.max_message_bytes,
                "max-message-bytes",
                ENV_MAX_MESSAGE_BYTES,
            ),
            256 << 20,
        )?;
        let session_max_objects = positive(
            l.get(
                flags.session_max_objects,
                "session-max-objects",
                ENV_SESSION_MAX_OBJECTS,
            ),
            250_000,
        )?;
        let session_idle_timeout = duration(
            l.get(
                flags.session_idle_timeout,
                "session-idle-timeout",
                ENV_SESSION_IDLE_TIMEOUT,
            ),
            Duration::from_secs(600),
        )?;
        if session_idle_timeout.is_zero() {
            return Err(Error::Conflict(
                "session idle timeout must be positive".into(),
            ));
        }
        let drain_delay = duration(
            l.get(flags.drain_delay, "drain-delay", ENV_DRAIN_DELAY),
            Duration::from_secs(5),
        )?;

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

        let insecure = flags.insecure_no_auth
            || match l.env.get(ENV_INSECURE_NO_AUTH).as_deref() {
                None | Some("" | "false" | "0") => false,
                Some("true" | "1") => true,
                Some(other) => {
                    return Err(invalid(
                        ENV_INSECURE_NO_AUTH,
                        other,
                        "expected true or false",
                    ));
                }
            };
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

        let actuator_endpoint = match l.get(
            flags.actuator_endpoint,
            "actuator-endpoint",
            ENV_ACTUATOR_ENDPOINT,
        ) {
            None => None,
            Some((key, v)) => {
                if !(v.starts_with("http://") || v.starts_with("https://"))
                    || v.parse::<http::Uri>().is_err()
                {
                    return Err(invalid(
                        &key,
                        &v,
                        "expected http://HOST:PORT or https://HOST:PORT",
                    ));
                }
                Some(v)
            }
        };
        let actuator_token = l
            .get(flags.actuator_token, "actuator-token", ENV_ACTUATOR_TOKEN)
            .map(|(_, v)| v);
        let catalog_from_actuator = flags.catalog_from_actuator
            || match l.env.get(ENV_CATALOG_FROM_ACTUATOR).as_deref() {
                None | Some("" | "false" | "0") => false,
                Some("true" | "1") => true,
                Some(other) => {
                    return Err(invalid(
                        ENV_CATALOG_FROM_ACTUATOR,
                        other,
                        "expected true or false",
                    ));
                }
            };
        if catalog_from_actuator && actuator_endpoint.is_none() {
            return Err(invalid(
                "--catalog-from-actuator",
                "true",
                "needs --actuator-endpoint (DOVETAIL_ACTUATOR_ENDPOINT): the catalog comes from the actuator",
            ));
        }
        let catalog_poll_interval = match l.get(
            flags.catalog_poll_interval,
            "catalog-poll-interval",
            ENV_CATALOG_POLL_INTERVAL,
        ) {
            None => Duration::from_secs(30),
            Some((key, v)) => match parse_duration(&v) {
                Some(d) if !d.is_zero() => d,
                _ => {
                    return Err(invalid(
                        &key,
                        &v,
                        "expected a positive duration like 30s or 2m",
                    ));
                }
            },
        };
        let instance = l
            .get(flags.instance, "instance", ENV_INSTANCE)
            .map(|(_, v)| v)
            .or_else(|| env.get("HOSTNAME"))
            .unwrap_or_else(|| "planner".to_string());

        Ok(Config {
            listen,
            metrics_listen,
            region,
            request_timeout,
            max_concurrent_requests,
            max_message_bytes,
            session_max_objects,
            session_idle_timeout,
            auth,
            tls,
            actuator_endpoint,
            actuator_token,
            catalog_from_actuator,
            catalog_poll_interval,
            drain_delay,
            instance,
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
        let mut all = vec!["dovetail-planner"];
        all.extend(args);
        Flags::try_parse_from(all).expect("flags parse")
    }

    #[test]
    fn catalog_from_actuator_needs_the_actuator_and_a_valid_interval() {
        let c = Config::load(
            flags(&[
                "--insecure-no-auth",
                "--catalog-from-actuator",
                "--actuator-endpoint",
                "http://actuator:50052",
            ]),
            &env(&[]),
        )
        .expect("valid");
        assert!(c.catalog_from_actuator);
        assert_eq!(c.catalog_poll_interval, Duration::from_secs(30));
        let e = Config::load(
            flags(&["--insecure-no-auth"]),
            &env(&[(ENV_CATALOG_FROM_ACTUATOR, "true")]),
        )
        .expect_err("no actuator");
        assert!(e.to_string().starts_with("--catalog-from-actuator"), "{e}");
        assert!(e.to_string().contains("--actuator-endpoint"), "{e}");
        let e = Config::load(
            flags(&["--insecure-no-auth"]),
            &env(&[(ENV_CATALOG_FROM_ACTUATOR, "yes")]),
        )
        .expect_err("not a bool");
        assert!(e.to_string().starts_with(ENV_CATALOG_FROM_ACTUATOR), "{e}");
        let e = Config::load(
            flags(&[
                "--insecure-no-auth",
                "--actuator-endpoint",
                "http://actuator:50052",
                "--catalog-from-actuator",
            ]),
            &env(&[(ENV_CATALOG_POLL_INTERVAL, "0s")]),
        )
        .expect_err("zero interval");
        assert!(e.to_string().starts_with(ENV_CATALOG_POLL_INTERVAL), "{e}");
    }

    #[test]
    fn flags_override_environment_and_defaults_fill_the_rest() {
        let c = Config::load(
            flags(&["--listen", "127.0.0.1:7000", "--insecure-no-auth"]),
            &env(&[
                (ENV_LISTEN, "127.0.0.1:9999"),
                (ENV_REQUEST_TIMEOUT, "250ms"),
            ]),
        )
        .expect("valid");
        assert_eq!(c.listen.port(), 7000);
        assert_eq!(c.request_timeout, Duration::from_millis(250));
        assert_eq!(c.max_concurrent_requests, 8);
        assert_eq!(c.auth, Auth::Disabled);
        assert_eq!(c.metrics_listen.map(|a| a.port()), Some(9090));
    }

    #[test]
    fn auth_must_be_chosen_explicitly() {
        let e = Config::load(flags(&[]), &env(&[])).expect_err("no auth");
        assert!(e.to_string().contains("--insecure-no-auth"), "{e}");
        let c = Config::load(flags(&[]), &env(&[(ENV_AUTH_TOKEN, "t0k3n")])).expect("token");
        assert_eq!(c.auth, Auth::Bearer("t0k3n".into()));
        let e = Config::load(
            flags(&["--insecure-no-auth", "--auth-token", "x"]),
            &env(&[]),
        )
        .expect_err("contradiction");
        assert!(e.to_string().contains("contradicts"));
    }

    #[test]
    fn bad_values_name_the_setting() {
        let e = Config::load(
            flags(&["--insecure-no-auth"]),
            &env(&[(ENV_MAX_CONCURRENT, "zero")]),
        )
        .expect_err("bad number");
        assert!(e.to_string().starts_with(ENV_MAX_CONCURRENT), "{e}");
        let e = Config::load(
            flags(&["--insecure-no-auth", "--listen", "localhost"]),
            &env(&[]),
        )
        .expect_err("bad addr");
        assert!(e.to_string().starts_with("--listen"), "{e}");
        let e = Config::load(
            flags(&["--insecure-no-auth", "--tls-cert", "/nonexistent/cert.pem"]),
            &env(&[]),
        )
        .expect_err("missing file");
        assert!(e.to_string().contains("/nonexistent/cert.pem"), "{e}");
        let e = Config::load(
            flags(&[
                "--insecure-no-auth",
                "--actuator-endpoint",
                "actuator:50052",
            ]),
            &env(&[]),
        )
        .expect_err("bad endpoint");
        assert!(e.to_string().starts_with("--actuator-endpoint"), "{e}");
    }

    #[test]
    fn durations_parse_in_common_units() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("15"), Some(Duration::from_secs(15)));
        assert_eq!(parse_duration("5 parsecs"), None);
    }
}
