//! The tonic implementation of `dovetail.v1.Planner`.
//!
//! `Plan` converts, plans and answers on a blocking thread (a 50k-pod snapshot is CPU work, not
//! IO) and never executes anything. `Session` is in [`super::session`];
//! both plan through [`super::planning`].

use std::pin::Pin;

use futures::Stream;
use proto::v1 as pb;
use tokio::time::Instant;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use super::planning::{PlannerService, blocking};
use super::session;
use planner::cancel::{CancelOnDrop, CancelToken};

impl PlannerService {
    /// The tonic server wrapper of this service, with message limits for large snapshots.
    pub fn into_server(self, max_message_bytes: usize) -> pb::planner_server::PlannerServer<Self> {
        pb::planner_server::PlannerServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

type SessionStream =
    Pin<Box<dyn Stream<Item = std::result::Result<pb::PlanResponse, Status>> + Send>>;

#[tonic::async_trait]
impl pb::planner_server::Planner for PlannerService {
    async fn plan(
        &self,
        request: Request<pb::PlanRequest>,
    ) -> std::result::Result<Response<pb::PlanResponse>, Status> {
        let start = Instant::now();
        let this = self.clone();
        let req = request.into_inner();
        // Dropping this future (deadline, cancelled call, closed connection) drops the guard,
        // which stops the planning run within one pod placement.
        let cancel = CancelToken::new();
        let guard = CancelOnDrop(cancel.clone());
        let result = blocking(move || this.plan_blocking(req, &cancel))
            .instrument(tracing::debug_span!("plan"))
            .await
            .map_err(Status::from);
        drop(guard);
        let code = result
            .as_ref()
            .map_or_else(|s| s.code(), |_| tonic::Code::Ok);
        if let Err(s) = &result {
            tracing::info!(code = ?s.code(), message = s.message(), "Plan refused");
        }
        self.metrics
            .request("Plan", code, start.elapsed().as_secs_f64());
        result.map(Response::new)
    }

    type SessionStream = SessionStream;

    async fn session(
        &self,
        request: Request<Streaming<pb::ClusterUpdate>>,
    ) -> std::result::Result<Response<Self::SessionStream>, Status> {
        let rx = session::start(self.clone(), request.into_inner());
        Ok(Response::new(Box::pin(rx)))
    }
}
