//! Where a service's settings come from: a flag wins over its `DOVETAIL_*` environment variable,
//! which wins over the default. Each service declares its flags (clap) and variables (consts in
//! its own `config.rs`) and reads them once at start-up through [`Settings`]; the environment
//! comes through a [`Source`], so tests never touch the process environment. An empty variable
//! counts as unset. Every error names the input it blames: the flag (`--lease`) when the flag was
//! given, else the variable (`DOVETAIL_LEASE`), and the value.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

/// Where environment variables come from.
pub trait Source {
    /// The value of `key`, if set.
    fn get(&self, key: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
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

/// An environment of `pairs`, for tests.
pub fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
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
        flag: String,
        /// The variable.
        env: String,
        /// What it takes.
        what: String,
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

/// One setting's value and the input it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// The flag (`--lease`) or the variable (`DOVETAIL_LEASE`) it came from.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// Reads settings: flags first, then the environment.
#[derive(Clone, Copy)]
pub struct Settings<'a> {
    env: &'a dyn Source,
}

// === impl Settings ===

impl<'a> Settings<'a> {
    /// Settings over `env`.
    pub fn new(env: &'a dyn Source) -> Self {
        Self { env }
    }

    /// The variable `key`, when set and not empty.
    pub fn env(&self, key: &str) -> Option<String> {
        self.env.get(key).filter(|v| !v.is_empty())
    }

    /// The flag's value (given as `--{flag_name}`), else the variable's.
    pub fn get(&self, flag: Option<String>, flag_name: &str, env: &str) -> Option<Input> {
        match flag {
            Some(value) => Some(Input {
                key: format!("--{flag_name}"),
                value,
            }),
            None => self.env(env).map(|value| Input {
                key: env.to_string(),
                value,
            }),
        }
    }

    /// A switch: the flag given, or the variable `true`/`1` (`false`, `0` or unset: off).
    ///
    /// # Errors
    /// The variable is set to anything else.
    pub fn switch(&self, flag: bool, env: &str) -> Result<bool> {
        if flag {
            return Ok(true);
        }
        match self.env(env) {
            None => Ok(false),
            Some(v) => Input {
                key: env.to_string(),
                value: v,
            }
            .bool(),
        }
    }
}

// === impl Input ===

impl Input {
    /// An [`Error::Invalid`] blaming this input.
    pub fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::Invalid {
            key: self.key.clone(),
            value: self.value.clone(),
            reason: reason.into(),
        }
    }

    /// A Go duration ([`crate::duration`]), zero allowed.
    ///
    /// # Errors
    /// Not a duration, negative, or a number without a unit.
    pub fn duration(&self) -> Result<Duration> {
        crate::duration::parse(&self.value).map_err(|e| self.invalid(e.to_string()))
    }

    /// A Go duration longer than zero.
    ///
    /// # Errors
    /// As [`Input::duration`], or zero.
    pub fn positive_duration(&self) -> Result<Duration> {
        match self.duration()? {
            d if d.is_zero() => Err(self.invalid("must be longer than 0s")),
            d => Ok(d),
        }
    }

    /// An `IP:PORT` address.
    ///
    /// # Errors
    /// Anything else (a host name included).
    pub fn addr(&self) -> Result<SocketAddr> {
        self.value
            .trim()
            .parse()
            .map_err(|e| self.invalid(format!("expected IP:PORT ({e})")))
    }

    /// A positive integer.
    ///
    /// # Errors
    /// Anything else, zero included.
    pub fn positive(&self) -> Result<usize> {
        match self.value.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(self.invalid("expected a positive integer")),
        }
    }

    /// `true`/`1` or `false`/`0`.
    ///
    /// # Errors
    /// Anything else.
    pub fn bool(&self) -> Result<bool> {
        match self.value.trim() {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            _ => Err(self.invalid("expected true or false")),
        }
    }

    /// The file this input names, read whole.
    ///
    /// # Errors
    /// [`Error::Read`] naming the input and the file.
    pub fn read(&self) -> Result<Vec<u8>> {
        std::fs::read(&self.value).map_err(|source| Error::Read {
            key: self.key.clone(),
            path: PathBuf::from(&self.value),
            source,
        })
    }
}

/// `input` as a duration ([`Input::duration`]), or `default` when unset.
///
/// # Errors
/// As [`Input::duration`].
pub fn duration_or(input: Option<Input>, default: Duration) -> Result<Duration> {
    input.map_or(Ok(default), |i| i.duration())
}

/// `input` as a duration longer than zero ([`Input::positive_duration`]), or `default`.
///
/// # Errors
/// As [`Input::positive_duration`].
pub fn positive_duration_or(input: Option<Input>, default: Duration) -> Result<Duration> {
    input.map_or(Ok(default), |i| i.positive_duration())
}

/// `input` as an address ([`Input::addr`]), or `default`.
///
/// # Errors
/// As [`Input::addr`].
pub fn addr_or(input: Option<Input>, default: SocketAddr) -> Result<SocketAddr> {
    input.map_or(Ok(default), |i| i.addr())
}

/// `input` as an address, `None` for `off`, or `default`: a metrics port that can be turned
/// off.
///
/// # Errors
/// As [`Input::addr`].
pub fn addr_or_off(input: Option<Input>, default: SocketAddr) -> Result<Option<SocketAddr>> {
    match input {
        Some(i) if i.value.trim() == "off" => Ok(None),
        other => addr_or(other, default).map(Some),
    }
}

/// `input` as a positive integer ([`Input::positive`]), or `default`.
///
/// # Errors
/// As [`Input::positive`].
pub fn positive_or(input: Option<Input>, default: usize) -> Result<usize> {
    input.map_or(Ok(default), |i| i.positive())
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::vars as env;

    #[test]
    fn a_flag_wins_over_its_variable_which_wins_over_the_default() {
        let e = env(&[("DOVETAIL_LEASE", "20s"), ("DOVETAIL_EMPTY", "")]);
        let s = Settings::new(&e);
        let flag = s.get(Some("5s".into()), "lease", "DOVETAIL_LEASE").unwrap();
        assert_eq!(flag.key, "--lease");
        assert_eq!(flag.duration().unwrap(), Duration::from_secs(5));
        let var = s.get(None, "lease", "DOVETAIL_LEASE").unwrap();
        assert_eq!(var.key, "DOVETAIL_LEASE");
        assert_eq!(var.duration().unwrap(), Duration::from_secs(20));
        let unset = s.get(None, "other", "DOVETAIL_OTHER");
        assert_eq!(
            duration_or(unset, Duration::from_secs(7)).unwrap(),
            Duration::from_secs(7)
        );
        // An empty variable is unset.
        assert_eq!(s.get(None, "empty", "DOVETAIL_EMPTY"), None);
    }

    #[test]
    fn errors_name_the_input_and_the_value() {
        let e = env(&[("DOVETAIL_LEASE", "30"), ("DOVETAIL_LISTEN", "localhost")]);
        let s = Settings::new(&e);
        let err = s
            .get(None, "lease", "DOVETAIL_LEASE")
            .unwrap()
            .duration()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "DOVETAIL_LEASE: \"30\" is invalid: a duration needs a unit, e.g. 30s, 500ms or 1h30m"
        );
        let err = s
            .get(Some("0s".into()), "lease", "DOVETAIL_LEASE")
            .unwrap()
            .positive_duration()
            .unwrap_err();
        assert!(
            err.to_string().starts_with("--lease: \"0s\" is invalid"),
            "{err}"
        );
        let err = addr_or(
            s.get(None, "listen", "DOVETAIL_LISTEN"),
            SocketAddr::from(([0, 0, 0, 0], 1)),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("DOVETAIL_LISTEN: \"localhost\""),
            "{err}"
        );
        let err = Input {
            key: "--tls-cert".into(),
            value: "/nonexistent/cert.pem".into(),
        }
        .read()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--tls-cert: cannot read /nonexistent/cert.pem"
        );
    }

    #[test]
    fn switches_and_metrics_ports_that_turn_off() {
        let e = env(&[("DOVETAIL_ON", "true"), ("DOVETAIL_BAD", "yes")]);
        let s = Settings::new(&e);
        assert!(s.switch(true, "DOVETAIL_UNSET").unwrap());
        assert!(s.switch(false, "DOVETAIL_ON").unwrap());
        assert!(!s.switch(false, "DOVETAIL_UNSET").unwrap());
        let err = s.switch(false, "DOVETAIL_BAD").unwrap_err();
        assert!(
            err.to_string().starts_with("DOVETAIL_BAD: \"yes\""),
            "{err}"
        );
        let default = SocketAddr::from(([0, 0, 0, 0], 9090));
        assert_eq!(addr_or_off(None, default).unwrap(), Some(default));
        let off = s.get(
            Some("off".into()),
            "metrics-listen",
            "DOVETAIL_METRICS_LISTEN",
        );
        assert_eq!(addr_or_off(off, default).unwrap(), None);
        assert_eq!(
            positive_or(s.get(Some("0".into()), "n", "N"), 1)
                .unwrap_err()
                .to_string(),
            "--n: \"0\" is invalid: expected a positive integer"
        );
    }
}
