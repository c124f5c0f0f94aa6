//! Configuration of `dovetail-planner`: flags and `DOVETAIL_*` environment variables, read once
//! at start-up and validated before any port is bound (bad configuration exits 64).
//!
//! The settings are the planner's own; how they are read is the service shell's
//! (`service_shell::config`: a flag wins over its environment variable, which wins over the
//! default; the environment comes through a [`Source`] that tests replace; durations are Go
//! durations), and so are the authentication and TLS flags ([`AuthFlags`]).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use service_shell::auth::AuthFlags;
use service_shell::config::{
    self, Input, Settings, Source, addr_or, addr_or_off, positive_duration_or, positive_or,
};
use service_shell::tls::ServerTls;

/// How clients are authenticated ([`Config::auth`]; the shell's).
pub use service_shell::auth::Auth;

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
/// Default of `--max-held-objects`: objects all open Sessions may hold together.
pub const DEFAULT_MAX_HELD_OBJECTS: usize = 250_000;
/// Variable of `--max-held-objects`.
pub const ENV_MAX_HELD_OBJECTS: &str = "DOVETAIL_MAX_HELD_OBJECTS";
/// `DOVETAIL_SESSION_IDLE_TIMEOUT`: a Session silent this long is ended (`10m`).
pub const ENV_SESSION_IDLE_TIMEOUT: &str = "DOVETAIL_SESSION_IDLE_TIMEOUT";
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
    /// Most objects all open Sessions may hold together (the planner's memory for sessions); a
    /// snapshot or delta past it ends its Session with RESOURCE_EXHAUSTED [env DOVETAIL_MAX_HELD_OBJECTS, default 250000]
    #[arg(long)]
    pub max_held_objects: Option<String>,
    /// Authentication and TLS of the gRPC port.
    #[command(flatten)]
    pub auth: AuthFlags,
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
    /// Objects all open Sessions may hold together.
    pub max_held_objects: usize,
    /// Authentication.
    pub auth: Auth,
    /// TLS, when configured.
    pub tls: Option<ServerTls>,
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
            max_held_objects: DEFAULT_MAX_HELD_OBJECTS,
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
    pub fn load(flags: Flags, env: &dyn Source) -> config::Result<Config> {
        let s = Settings::new(env);
        let listen = addr_or(
            s.get(flags.listen, "listen", ENV_LISTEN),
            SocketAddr::from(([0, 0, 0, 0], 50051)),
        )?;
        let metrics_listen = addr_or_off(
            s.get(flags.metrics_listen, "metrics-listen", ENV_METRICS_LISTEN),
            SocketAddr::from(([0, 0, 0, 0], 9090)),
        )?;
        let region = s
            .get(flags.region, "region", ENV_REGION)
            .map_or_else(|| "us-east-1".to_string(), |i| i.value);
        let request_timeout = positive_duration_or(
            s.get(
                flags.request_timeout,
                "request-timeout",
                ENV_REQUEST_TIMEOUT,
            ),
            Duration::from_secs(30),
        )?;
        let max_concurrent_requests = positive_or(
            s.get(
                flags.max_concurrent_requests,
                "max-concurrent-requests",
                ENV_MAX_CONCURRENT,
            ),
            8,
        )?;
        let max_message_bytes = positive_or(
            s.get(
                flags.max_message_bytes,
                "max-message-bytes",
                ENV_MAX_MESSAGE_BYTES,
            ),
            256 << 20,
        )?;
        let session_max_objects = positive_or(
            s.get(
                flags.session_max_objects,
                "session-max-objects",
                ENV_SESSION_MAX_OBJECTS,
            ),
            250_000,
        )?;
        let max_held_objects = positive_or(
            s.get(
                flags.max_held_objects,
                "max-held-objects",
                ENV_MAX_HELD_OBJECTS,
            ),
            DEFAULT_MAX_HELD_OBJECTS,
        )?;
        let session_idle_timeout = positive_duration_or(
            s.get(
                flags.session_idle_timeout,
                "session-idle-timeout",
                ENV_SESSION_IDLE_TIMEOUT,
            ),
            Duration::from_secs(600),
        )?;
        let drain_delay = config::duration_or(
            s.get(flags.drain_delay, "drain-delay", ENV_DRAIN_DELAY),
            Duration::from_secs(5),
        )?;
        let (auth, tls) = Auth::load(flags.auth, &s)?;

        let actuator_endpoint = match s.get(
            flags.actuator_endpoint,
            "actuator-endpoint",
            ENV_ACTUATOR_ENDPOINT,
        ) {
            None => None,
            Some(i) => {
                let v = &i.value;
                if !(v.starts_with("http://") || v.starts_with("https://"))
                    || v.parse::<http::Uri>().is_err()
                {
                    return Err(i.invalid("expected http://HOST:PORT or https://HOST:PORT"));
                }
                Some(i.value)
            }
        };
        let actuator_token = s
            .get(flags.actuator_token, "actuator-token", ENV_ACTUATOR_TOKEN)
            .map(|i| i.value);
        let catalog_from_actuator =
            s.switch(flags.catalog_from_actuator, ENV_CATALOG_FROM_ACTUATOR)?;
        if catalog_from_actuator && actuator_endpoint.is_none() {
            return Err(Input {
                key: "--catalog-from-actuator".into(),
                value: "true".into(),
            }
            .invalid(
                "needs --actuator-endpoint (DOVETAIL_ACTUATOR_ENDPOINT): the catalog comes from the actuator",
            ));
        }
        let catalog_poll_interval = positive_duration_or(
            s.get(
                flags.catalog_poll_interval,
                "catalog-poll-interval",
                ENV_CATALOG_POLL_INTERVAL,
            ),
            Duration::from_secs(30),
        )?;
        let instance = s
            .get(flags.instance, "instance", ENV_INSTANCE)
            .map(|i| i.value)
            .or_else(|| s.env("HOSTNAME"))
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
            max_held_objects,
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
    use service_shell::auth::ENV_AUTH_TOKEN;
    use service_shell::config::vars as env;

    use super::*;

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
    fn durations_are_go_durations_with_a_unit() {
        let c = Config::load(
            flags(&["--insecure-no-auth", "--session-idle-timeout", "1h30m"]),
            &env(&[(ENV_DRAIN_DELAY, "0")]),
        )
        .expect("valid");
        assert_eq!(c.session_idle_timeout, Duration::from_secs(5400));
        assert_eq!(c.drain_delay, Duration::ZERO);
        let e = Config::load(
            flags(&["--insecure-no-auth"]),
            &env(&[(ENV_REQUEST_TIMEOUT, "15")]),
        )
        .expect_err("no unit");
        assert_eq!(
            e.to_string(),
            "DOVETAIL_REQUEST_TIMEOUT: \"15\" is invalid: a duration needs a unit, e.g. 15s, 500ms or 1h30m"
        );
        let e = Config::load(
            flags(&["--insecure-no-auth", "--request-timeout", "5 parsecs"]),
            &env(&[]),
        )
        .expect_err("not a duration");
        assert!(
            e.to_string()
                .starts_with("--request-timeout: \"5 parsecs\""),
            "{e}"
        );
    }
}
