//! The shell the dovetail services share: `dovetail-planner`, `dovetail-watcher` and
//! `dovetail-actuator` each keep their own domain settings and services, and take everything
//! around them from here.
//!
//! - [`config`]: where settings come from (a flag wins over its `DOVETAIL_*` variable, which wins
//!   over the default), read through a [`config::Source`] tests replace, errors naming the flag
//!   or variable and the value.
//! - [`duration`]: the one duration syntax of flags and variables, Go's (`1h30m`, `500ms`).
//! - [`auth`] and [`tls`]: bearer tokens (the server's check and the client's interceptor), the
//!   server's TLS or mTLS and the client's TLS.
//! - [`server`]: the gRPC server scaffold: health (NOT_SERVING until the service says so),
//!   reflection v1 and v1alpha, Prometheus `/metrics` ([`metrics`]) on its own port, graceful
//!   shutdown after a drain delay; [`signal`]: SIGTERM and Ctrl-C.
//! - [`backoff`]: the one retry pacing of loops around fallible calls (exponential, jittered,
//!   capped, reset on success).
//! - [`clock`]: the one wall clock, on tokio time so that tests can pause it.
//! - [`cli`]: a program's start (flags, configuration, exit 64, logging).
//! - `kube` (feature `kube`): the Kubernetes client and the one meaning of `--kubeconfig`.
//!
//! [`server`], [`metrics`] and [`cli`] come with the feature `server` (the services); without
//! it (a client such as `planner-client`) the crate links no server stack.

pub mod auth;
pub mod backoff;
#[cfg(feature = "server")]
pub mod cli;
pub mod clock;
pub mod config;
pub mod duration;
#[cfg(feature = "kube")]
pub mod kube;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub mod server;
pub mod signal;
pub mod tls;
