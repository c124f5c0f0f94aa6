//! The remote planner backend: `dovetail plan --server HOST:PORT[,HOST:PORT...]` sends the same
//! input through the gRPC `Plan` call (balanced over the replicas, retried on another one when a
//! replica fails) and prints the same output as the in-process planner.

use std::time::Duration;

use planner_client::{ClientConfig, PlannerClient};
use planner_wire::CatalogChoice as WireCatalog;
use planner_wire::remote::RemotePlan;

use super::CliError;
use super::backend::{CatalogChoice, PlanBackend, PlanRequest, Planned};

/// A planner reached over gRPC.
#[derive(Clone, Debug)]
pub(crate) struct Remote {
    /// `HOST:PORT` endpoints (a host may resolve to several replicas).
    pub(crate) endpoints: Vec<String>,
    /// Bearer token, if the server wants one.
    pub(crate) token: Option<String>,
}

impl PlanBackend for Remote {
    fn plan(&self, request: &PlanRequest) -> Result<Planned, CliError> {
        // A catalog file is read here, so its errors read as they do locally; the built-in
        // catalog travels as a reference and the server loads it (its notes come back in the
        // plan's notes).
        let (catalog, catalog_notes) = match &request.catalog {
            CatalogChoice::Builtin { region } => (
                WireCatalog::Builtin {
                    region: region.clone(),
                },
                Vec::new(),
            ),
            CatalogChoice::File { path, text } => {
                let c = planner::catalog::file::parse(text, path)
                    .map_err(|e| CliError::Input(e.to_string()))?;
                let notes = c.notes.clone();
                (WireCatalog::Inline(c), notes)
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::Remote(format!("cannot start the async runtime: {e}")))?;
        let mut config = ClientConfig::new(self.endpoints.clone());
        config.token = self.token.clone();
        config.timeout = Duration::from_secs(300);
        let plan = runtime.block_on(async {
            let client = PlannerClient::connect(config)
                .await
                .map_err(|e| CliError::Remote(format!("--server: {e}")))?;
            client
                .plan(&request.snapshot, &catalog, &request.options)
                .await
                .map_err(|e| match &e {
                    planner_client::Error::Rpc { status, .. }
                        if status.code() == tonic::Code::InvalidArgument =>
                    {
                        CliError::Input(e.to_string())
                    }
                    _ => CliError::Remote(e.to_string()),
                })
        })?;
        Ok(Planned {
            plan,
            catalog_notes,
        })
    }
}
