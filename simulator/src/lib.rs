//! A simulated Kubernetes cluster and cloud: test and demo infrastructure, never production.
//!
//! [`Simulation::start`] brings up, on 127.0.0.1:
//! - a Kubernetes API server ([`api`]) that the `kube` crate, `kubectl --server` and the
//!   official Python client use unchanged: discovery, list/watch with `resourceVersion`
//!   semantics (bookmarks, 410 Gone), CRUD, patches, finalizers, status subresources, the
//!   `eviction` (PodDisruptionBudget-aware) and `binding` subresources, and the Karpenter CRDs;
//! - a simulated EC2 ([`cloud::SimCloud`]) behind the `cloud::CloudProvider` interface;
//! - a simulated kubelet, a minimal kube-scheduler (the planner's scheduling library) and the
//!   controllers a demo needs ([`controllers`]);
//! - fault injection ([`Faults`]).

pub mod api;
pub mod clock;
pub mod cloud;
pub mod controllers;
pub mod faults;
pub mod simulation;

pub use clock::Clock;
pub use faults::Faults;
pub use simulation::{Config, Simulation};
