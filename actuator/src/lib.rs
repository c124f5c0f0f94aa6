//! The dovetail actuator: executes planners' commands exactly once. It never plans.
//!
//! - [`ledger`]: every claim's state machine and history in Postgres or SQLite, written before
//!   each step acts.
//! - [`api`]: `dovetail.v1.Actuator/Submit`, idempotent per command key, refusing stale plans.
//! - [`worker`]: leases unfinished claims and drives them through the launch
//!   (requested → launching → launched), resuming after crashes; states past `launched` are
//!   driven by the [`lifecycle`] controller; the worker's [`worker::Lifecycle`] hook creates each
//!   claim's NodeClaim before its launch.
//! - [`lifecycle`]: the NodeClaim lifecycle in Kubernetes (NodeClaim objects, registration,
//!   initialization, liveness, termination with the drain through the eviction API); [`gc`]:
//!   leaked and vanished instances.
//! - [`disruption`]: the planner's disruption decisions, executed once a later plan confirms
//!   them (budgets re-checked, candidates tainted, replacements launched and initialized, then
//!   the candidates' NodeClaims deleted).
//! - [`interruption`]: the interruption queue's loop: spot warnings, scheduled changes and
//!   stop/terminate state changes cordon and taint the Node and delete the NodeClaim;
//!   rebalance recommendations become Events.
//! - [`node_class_status`]: each EC2NodeClass resolved against the cloud (subnets, security
//!   groups, AMIs, instance profile) and written to its `status` with Karpenter's conditions.
//! - [`repair`]: node repair (feature gate `NodeRepair`): Nodes whose conditions match the
//!   provider's repair policies past their toleration have their NodeClaim deleted, forcefully,
//!   with Karpenter's 20% circuit breaker.
//! - [`launch`]: the launch spec a claim carries and the cloud request made from it.
//! - [`catalog`]: the live catalog served to planners, and the offerings marked unavailable
//!   after insufficient-capacity errors (3 minutes), which launches and the catalog leave out.
//! - [`standin`]: a local cloud stand-in (in memory or in a file) for the demo and tests.
//! - [`config`], [`server`], [`metrics`]: the actuator's settings, its gRPC server and its
//!   metrics, in the service shell (`service-shell`: configuration source, Go durations, auth,
//!   TLS, server scaffold, shutdown, the clock, the Kubernetes client); [`cli`]: the
//!   `dovetail-actuator` program itself (flags to shutdown).

pub mod api;
pub mod catalog;
pub mod class_gate;
pub mod cli;
pub mod config;
pub mod disruption;
pub mod interruption;
pub mod launch;
pub mod ledger;
pub mod lifecycle;
pub mod metrics;
pub mod node_class;
pub mod node_class_status;
pub mod repair;
pub mod server;
pub mod standin;
pub mod worker;
pub mod zonal_shift;
