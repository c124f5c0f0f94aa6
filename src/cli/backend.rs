//! Where a plan is computed. Today the planner library runs in-process ([`Local`]); a remote
//! planner (`--server HOST:PORT`, the gRPC `Plan` call) implements the same trait, so the
//! command does not change when the planner moves out of process.

use planner::catalog::Catalog;
use planner::model::{ClusterSnapshot, PlanOptions};
use planner::plan::Plan;

use super::CliError;

/// Which instance-type catalog to plan against.
#[derive(Clone, Debug)]
pub(crate) enum CatalogChoice {
    /// The built-in AWS catalog of a region.
    Builtin {
        /// Region, e.g. `us-east-1`.
        region: String,
    },
    /// A catalog file (`--instance-types`), already read.
    File {
        /// The path as given, for messages.
        path: String,
        /// Its content.
        text: String,
    },
}

/// Everything a plan is computed from.
#[derive(Clone, Debug)]
pub(crate) struct PlanRequest {
    pub(crate) snapshot: ClusterSnapshot,
    pub(crate) catalog: CatalogChoice,
    pub(crate) options: PlanOptions,
}

/// A computed plan and the catalog's notes (e.g. how spot was priced).
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    pub(crate) plan: Plan,
    pub(crate) catalog_notes: Vec<String>,
}

/// Computes plans.
pub(crate) trait PlanBackend {
    /// Computes the plan for a request.
    fn plan(&self, request: &PlanRequest) -> Result<Planned, CliError>;
}

/// The planner library, in this process.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Local;

impl PlanBackend for Local {
    fn plan(&self, request: &PlanRequest) -> Result<Planned, CliError> {
        let catalog = load_catalog(&request.catalog)?;
        let plan = planner::plan(&request.snapshot, &catalog, &request.options);
        Ok(Planned {
            plan,
            catalog_notes: catalog.notes,
        })
    }
}

/// Loads the chosen catalog.
fn load_catalog(choice: &CatalogChoice) -> Result<Catalog, CliError> {
    match choice {
        CatalogChoice::Builtin { region } => planner::catalog::aws::builtin(region)
            .map_err(|e| CliError::Input(format!("--region {region}: {e}"))),
        CatalogChoice::File { path, text } => {
            planner::catalog::file::parse(text, path).map_err(|e| CliError::Input(e.to_string()))
        }
    }
}
