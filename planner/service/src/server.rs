//! The `dovetail-planner` server: the Planner service behind auth and the request [`guard`]
//! (limits), in the service shell's scaffold (`service_shell::server`: health,
//! reflection, TLS, `/metrics` on its own port, graceful shutdown).
//!
//! [`start`] binds both ports, starts serving with health NOT_SERVING, and hands back a
//! [`Running`] server; the caller flips it to SERVING once it can plan ([`Running::set_serving`])
//! and later calls [`Running::shutdown`]: NOT_SERVING first, a drain delay so that load
//! balancers notice, then open Sessions end with UNAVAILABLE (their clients reconnect to another
//! replica) and `serve_with_shutdown` finishes in-flight requests. Streams still open after the
//! request timeout plus 5 s (e.g. health watches) are cut.

mod guard;

use std::sync::Arc;
use std::time::Duration;

use service_shell::server::{self, Spec};
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tower::Layer;

pub use guard::{Guard, GuardLayer};
/// The started server [`start`] returns (the shell's).
pub use service_shell::server::Running;

use crate::api::PlannerService;
use crate::config::Config;
use crate::metrics::Metrics;

/// The gRPC name of the planner service, as health reports it.
pub const PLANNER_SERVICE: &str = "dovetail.v1.Planner";

/// Binds the ports and starts serving `service` as `config` says, health NOT_SERVING.
///
/// # Errors
/// A port cannot be bound, TLS material is invalid, or reflection cannot be built.
pub async fn start(
    config: &Config,
    service: PlannerService,
    metrics: Metrics,
) -> server::Result<Running> {
    // The guard times out Planner calls; a server-wide deadline would end Sessions.
    let spec = Spec::new(
        PLANNER_SERVICE,
        config.listen,
        config.metrics_listen,
        config.tls.clone(),
    )
    .with_grace(config.request_timeout + Duration::from_secs(5));
    let bound = server::bind(spec, Arc::new(metrics.clone())).await?;
    let guard = GuardLayer::new(
        config.max_concurrent_requests,
        config.request_timeout,
        metrics,
    );
    // Session plans take the guard's permits too: one limit for every plan.
    let service = service
        .with_draining(bound.draining())
        .with_permits(guard.permits());
    // The bearer check first: a request without the token takes no permit.
    let planner = InterceptedService::new(
        guard.layer(service.into_server(config.max_message_bytes)),
        config.auth.require(),
    );
    bound.serve(Some(Routes::new(planner))).await
}
