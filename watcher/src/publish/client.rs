//! [`Planners`] over `planner_client::PlannerClient`: round-robin over the replicas (a DNS name
//! with several addresses gives one replica per address), bearer token or mTLS, and failover to
//! the next replica when one refuses or cannot be reached.

use futures::StreamExt;

use super::{Error, Planners, Plans, Result, Updates};

#[async_trait::async_trait]
impl Planners for planner_client::PlannerClient {
    async fn open(&self, make: &mut (dyn FnMut() -> Updates + Send)) -> Result<Plans> {
        match self.session(make).await {
            Ok(plans) => Ok(plans.boxed()),
            Err(planner_client::Error::Rpc { replica, status }) => {
                tracing::debug!(%replica, code = ?status.code(), "No replica accepted the session");
                Err(Error::Unavailable(status))
            }
            Err(e) => Err(Error::Client(e)),
        }
    }
}
