//! Planning from the actuator's live catalog (`--catalog-from-actuator`).
//!
//! The actuator holds the cloud credentials and serves the catalog (`dovetail.v1.Actuator/
//! Catalog`): raw EC2 facts and offerings with prices, versioned by content hash. This replica
//! asks every poll interval with the version it holds; the actuator sends the catalog only when
//! the version differs, so an unchanged catalog is never downloaded again. A new catalog is
//! converted (`planner-wire`'s `live_catalog`: capacity and allocatable by the same rules as the
//! built-in catalog) and validated before it replaces the current one; a catalog with a bad
//! entry is refused (the error names the entry) and the previous one stays. Until the first
//! fetch, and for a region other than the live catalog's, plans use the region's built-in
//! catalog, and say so. The zones the actuator says are under an ARC zonal shift come with the
//! catalog (and change its version); plans from it treat them as shifted
//! ([`super::planning::Picked::shift`]).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use proto::v1 as pb;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::convert::{self, At};
use crate::metrics::Metrics;
use planner::catalog::Catalog;
use service_shell::auth::AddBearer;

/// A catalog fetched from the actuator, with its version.
#[derive(Clone, Debug)]
pub struct Current {
    /// The region it is of.
    pub region: String,
    /// The actuator's version (content hash).
    pub version: String,
    /// The catalog, converted.
    pub catalog: Arc<Catalog>,
    /// Zones under an ARC zonal shift, as the actuator served them with the catalog.
    pub shifted_zones: Vec<String>,
}

/// What one check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetched {
    /// The actuator's version is the one held: nothing was downloaded.
    Unchanged,
    /// A new catalog replaced the held one.
    Updated {
        /// Its version.
        version: String,
    },
}

/// Why a check did not update the catalog.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The call failed (actuator unreachable, catalog not read yet, no live catalog).
    #[error("actuator Catalog call failed: {0}")]
    Rpc(#[from] tonic::Status),
    /// The actuator named a new version without sending the catalog.
    #[error("the actuator answered version {version} without its catalog")]
    Missing {
        /// The version it named.
        version: String,
    },
    /// The catalog has an entry the planner cannot use; it was refused.
    #[error("live catalog {version} refused: {source}")]
    Invalid {
        /// The refused version.
        version: String,
        /// The entry at fault.
        #[source]
        source: convert::Error,
    },
}

/// The live catalog client and the catalog it holds. Cheap to clone (shared state).
#[derive(Clone)]
pub struct LiveCatalog {
    client: pb::actuator_client::ActuatorClient<InterceptedService<Channel, AddBearer>>,
    current: Arc<RwLock<Option<Current>>>,
    metrics: Metrics,
}

// === impl LiveCatalog ===

impl LiveCatalog {
    /// A client of the actuator at `channel`, authenticating with `auth`. Holds nothing until
    /// the first [`LiveCatalog::fetch`].
    pub fn new(channel: Channel, auth: AddBearer, metrics: Metrics) -> Self {
        Self {
            client: pb::actuator_client::ActuatorClient::with_interceptor(channel, auth)
                .max_decoding_message_size(64 << 20),
            current: Arc::default(),
            metrics,
        }
    }

    /// The catalog held now, `None` before the first successful fetch.
    pub fn current(&self) -> Option<Current> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks the actuator once, with the version held.
    ///
    /// # Errors
    /// [`FetchError`]; the held catalog is kept.
    pub async fn fetch(&self) -> Result<Fetched, FetchError> {
        let known = self.current().map(|c| c.version).unwrap_or_default();
        let result = self.fetch_from(known).await;
        self.metrics.catalog_fetch(match &result {
            Ok(Fetched::Unchanged) => "unchanged",
            Ok(Fetched::Updated { .. }) => "updated",
            Err(FetchError::Invalid { .. } | FetchError::Missing { .. }) => "refused",
            Err(FetchError::Rpc(_)) => "error",
        });
        result
    }

    async fn fetch_from(&self, known: String) -> Result<Fetched, FetchError> {
        let resp = self
            .client
            .clone()
            .catalog(pb::CatalogRequest {
                known_version: known.clone(),
            })
            .await?
            .into_inner();
        if !known.is_empty() && resp.version == known {
            return Ok(Fetched::Unchanged);
        }
        let Some(mut wire) = resp.catalog else {
            return Err(FetchError::Missing {
                version: resp.version,
            });
        };
        let version = resp.version;
        let region = wire.region.clone();
        let shifted_zones = convert::to_model::shifted_zones(
            std::mem::take(&mut wire.shifted_zones),
            At::ROOT.field("catalog").field("shifted_zones"),
        )
        .map_err(|source| FetchError::Invalid {
            version: version.clone(),
            source,
        })?;
        // Converting a thousand types is CPU work, but milliseconds of it.
        let catalog =
            convert::to_model::live_catalog(wire, At::ROOT.field("catalog")).map_err(|source| {
                FetchError::Invalid {
                    version: version.clone(),
                    source,
                }
            })?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(Current {
            region,
            version: version.clone(),
            catalog: Arc::new(catalog),
            shifted_zones,
        });
        Ok(Fetched::Updated { version })
    }

    /// Checks every `every` until `shutdown` turns true. Failures are logged (a warning while
    /// no catalog is held: plans use the built-in one) and retried at the next interval.
    pub async fn run(&self, every: Duration, mut shutdown: watch::Receiver<bool>) {
        loop {
            match self.fetch().await {
                Ok(Fetched::Unchanged) => {}
                Ok(Fetched::Updated { version }) => {
                    let shifted = self.current().map(|c| c.shifted_zones).unwrap_or_default();
                    tracing::info!(%version, ?shifted, "Planning from the actuator's live catalog");
                }
                Err(e) if self.current().is_none() => {
                    tracing::warn!(error = %e, "No live catalog yet; planning from the built-in catalog");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Live catalog not updated; keeping the current one");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
            }
        }
    }
}
