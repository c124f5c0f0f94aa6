//! Types and constants several dovetail services share, with no engine logic and no IO.
//!
//! - [`resources`]: [`Resources`] in fixed integer units, and [`quantity`]: Kubernetes quantity
//!   parsing (`500m`, `2Gi`) into those units.
//! - [`catalog`]: the catalog data ([`Catalog`], [`InstanceType`], [`Offering`], [`Overhead`]).
//!   The built-in AWS catalog (zones, offline spot estimates) stays in the planner engine.
//! - [`ec2`]: EC2 instance-type facts, Karpenter's capacity/overhead/label rules that turn them
//!   into catalog types (the one implementation: the built-in catalog, the live catalog and the
//!   actuator all use it), and the built-in on-demand price table.
//! - [`labels`]: well-known label, annotation and taint keys; [`taint`]: the one [`Taint`].
//! - [`hash`]: the NodePool / EC2NodeClass drift hashes, computed from plain JSON.
//! - [`duration`]: the one Go duration parser.
//! - [`feature_gates`]: Karpenter's `--feature-gates`, parsed with its defaults.
//! - [`dra`]: Karpenter's `ignoreDRARequests` default and the words of a refused DRA pod.
//! - [`cron`]: the one 5-field cron matcher (disruption budget schedules: the planner decides
//!   with it, the actuator re-checks budgets at execution time with it).
//!
//! The planner engine re-exports what it uses from here (`planner::model::Resources`,
//! `planner::catalog::InstanceType`, `planner::labels`), so either path names the same type.

pub mod catalog;
pub mod cron;
pub mod dra;
pub mod duration;
pub mod ec2;
pub mod feature_gates;
pub mod hash;
pub mod key;
pub mod labels;
pub mod pod_requests;
pub mod quantity;
pub mod resources;
pub mod taint;

pub use catalog::{Catalog, InstanceType, Offering, Overhead};
pub use labels::Labels;
pub use resources::Resources;
pub use taint::{Taint, TaintEffect};

/// Seconds since the Unix epoch, UTC. The planner never reads a clock: `now` is an input.
pub type Timestamp = i64;
