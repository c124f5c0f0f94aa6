//! `Plan` over gRPC in model terms: [`RemotePlan::plan`] on a `planner_client::PlannerClient`
//! encodes the request, sends it with the client's failover and decodes the plan.

use planner::model::{ClusterSnapshot, PlanOptions};
use planner::plan::Plan;
use planner_client::PlannerClient;

use crate::{CatalogChoice, to_model, to_wire};

/// Plans remotely with model values (an extension of [`PlannerClient`], which knows only wire
/// types).
pub trait RemotePlan {
    /// Plans remotely: the same answer as `planner::plan` with the same inputs.
    ///
    /// # Errors
    /// `planner_client::Error::Rpc` with the status of the replica that refused the request, or
    /// of the last replica tried when all failed.
    fn plan(
        &self,
        snapshot: &ClusterSnapshot,
        catalog: &CatalogChoice,
        options: &PlanOptions,
    ) -> impl Future<Output = Result<Plan, planner_client::Error>> + Send;
}

impl RemotePlan for PlannerClient {
    async fn plan(
        &self,
        snapshot: &ClusterSnapshot,
        catalog: &CatalogChoice,
        options: &PlanOptions,
    ) -> Result<Plan, planner_client::Error> {
        let req = to_wire::plan_request(snapshot, catalog, options);
        self.plan_request(req).await.map(to_model::plan)
    }
}
