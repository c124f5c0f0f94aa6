//! `planner-service`: the planner as a gRPC service (`dovetail.v1.Planner`), the library behind
//! the `dovetail-planner` binary.
//!
//! [`api`] holds the service (the tonic implementation, the per-stream session state, the one
//! Error → Status mapping and the actuator forwarder; the wire conversions come from
//! `planner-wire`, re-exported as [`api::convert`]); [`server`] serves it with health,
//! reflection, limits and graceful shutdown; [`config`] reads the settings once; [`auth`] checks
//! bearer tokens; [`metrics`] serves Prometheus; [`cli`] is the `dovetail-planner` program
//! itself (flags to shutdown). The engine (`planner`) does the planning.

pub mod api;
pub mod auth;
pub mod cli;
pub mod config;
pub mod metrics;
pub mod server;
