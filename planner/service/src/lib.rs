//! `planner-service`: the planner as a gRPC service (`dovetail.v1.Planner`), the library behind
//! the `dovetail-planner` binary.
//!
//! [`api`] holds the service (the tonic implementation, the per-stream session state, the one
//! Error → Status mapping and the actuator forwarder; the wire conversions come from
//! `planner-wire`, re-exported as [`api::convert`]); [`server`] serves it with its auth check and
//! limits in the service shell's scaffold (`service-shell`: health, reflection, TLS, graceful
//! shutdown, `/metrics`); [`config`] reads the planner's settings once, through the shell;
//! [`metrics`] are the planner's Prometheus metrics; [`cli`] is the `dovetail-planner` program
//! itself (flags to shutdown). The engine (`planner`) does the planning.

pub mod api;
pub mod cli;
pub mod config;
pub mod metrics;
pub mod server;
