//! A simulated Kubernetes cluster and cloud: test and demo infrastructure, never production.
//!
//! [`Simulation::start`] brings up, on 127.0.0.1:
//! - a Kubernetes API server ([`api`]) that the `kube` crate, `kubectl --server` and the
//!   official Python client use unchanged: discovery, list/watch with `resourceVersion`
//!   semantics (bookmarks, 410 Gone), CRUD, patches, finalizers, status subresources, the
//!   `eviction` (PodDisruptionBudget-aware) and `binding` subresources, and the Karpenter CRDs;
//!   OpenAPI v2/v3 documents with server-side field validation and Table output, so `kubectl
//!   apply` validates and `kubectl get` prints the columns a real API server prints; writes
//!   judged as a cluster judges them (CRD schemas and CEL rules, core Pod rules:
//!   [`api::validation`]), with a simulator-only way to skip that for version-skew tests;
//! - a simulated EC2 ([`cloud::SimCloud`]) behind the `cloud::CloudProvider` interface, and
//!   the same cloud as AWS's EC2, SSM and SQS APIs on a loopback endpoint ([`aws`],
//!   [`Simulation::aws_endpoint`]) for the real AWS SDK;
//! - a simulated kubelet, a simulated kube-scheduler (its own filter-and-score, independent of
//!   the planner) and the
//!   controllers a demo needs ([`controllers`]);
//! - fault injection ([`Faults`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cloud::CloudProvider;
//!
//! let sim = simulator::Simulation::start(simulator::Config::default()).await?;
//! let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(sim.kube_client()?);
//! let request = cloud::LaunchRequest {
//!     client_token: "claim-1".into(),
//!     offerings: vec![cloud::OfferingKey {
//!         instance_type: "m5.large".into(),
//!         zone: "us-east-1a".into(),
//!         capacity_type: cloud::CapacityType::Spot,
//!     }],
//!     tags: Default::default(),
//!     node_class: None,
//!     image_id: None,
//!     node: None,
//! };
//! let instance = sim.cloud().create(&request).await?;
//! // A few seconds later the simulated kubelet registers the Node.
//! # let _ = (nodes, instance);
//! sim.faults().drop_watches(); // resilience tests
//! # Ok(())
//! # }
//! ```

pub mod api;
pub mod aws;
pub mod clock;
pub mod cloud;
pub mod controllers;
pub mod faults;
pub mod instance_types;
pub mod labels;
pub mod resources;
pub mod simulation;

pub use clock::Clock;
pub use faults::Faults;
pub use simulation::{Config, Simulation};
