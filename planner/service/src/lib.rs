//! `planner-service`: the planner as a gRPC service (`dovetail.v1.Planner`), the library behind
//! the `dovetail-planner` binary.
//!
//! [`api`] holds the service (the tonic implementation, the per-stream session state, the one
//! Error → Status mapping and the actuator forwarder; the wire conversions come from
//! `planner-wire`, re-exported as [`api::convert`]); [`server`] serves it with health,
//! reflection, limits and graceful shutdown; [`config`] reads the settings once; [`auth`] checks
//! bearer tokens; [`metrics`] serves Prometheus. The engine (`planner`) does the planning.

pub mod api;
pub mod auth;
pub mod config;
pub mod metrics;
pub mod server;

// The binary's own `main.rs`, compiled into the library as well, so that the `dovetail` binary
// can run this service as a process of its own (`dovetail demo` re-executes itself as
// `dovetail-planner`): one executable, the same code path as the standalone binary.
extern crate self as planner_service;
#[doc(hidden)]
#[path = "main.rs"]
pub mod bin_main;
