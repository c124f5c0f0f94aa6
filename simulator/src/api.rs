//! The simulated Kubernetes API server: an object store with `resourceVersion` semantics and an
//! HTTP front that `kube`, `kubectl --server` and the official Python client use unchanged.

pub mod error;
pub mod events;
pub mod eviction;
pub mod graceful;
pub mod kinds;
pub mod limit_range;
pub mod openapi;
pub mod patch;
pub mod selectors;
pub(crate) mod server;
pub mod store;
pub mod table;
pub mod validation;

pub use error::ApiError;
pub use kinds::{KindInfo, Kinds, ResKey};
pub use store::{Change, EventType, Store, Subresource};
