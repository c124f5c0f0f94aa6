//! The `dovetail-actuator` server: the Actuator service behind its auth check, in the service
//! shell's scaffold (`service_shell::server`: health, reflection, TLS, `/metrics` on its own
//! port, graceful shutdown).
//!
//! [`start`] binds both ports and serves with health NOT_SERVING; the caller flips it to
//! SERVING once the ledger's migrations ran ([`Running::set_serving`]) and later calls
//! [`Running::shutdown`]: NOT_SERVING first, a drain delay so that load balancers notice, then
//! in-flight submissions finish (each is one ledger transaction: recorded whole or not at all).

use std::sync::Arc;
use std::time::Duration;

use service_shell::server::{self, Running, Spec};
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;

use crate::api::ActuatorService;
use crate::config::Config;
use crate::metrics::Metrics;

/// The gRPC name of the actuator service, as health reports it.
pub const ACTUATOR_SERVICE: &str = "dovetail.v1.Actuator";

/// Longest a Submit may take (one ledger transaction).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Binds the ports and starts serving `service` as `config` says, health NOT_SERVING.
///
/// # Errors
/// A port cannot be bound, TLS material is invalid, or reflection cannot be built.
pub async fn start(
    config: &Config,
    service: ActuatorService,
    metrics: Metrics,
) -> server::Result<Running> {
    let spec = Spec::new(
        ACTUATOR_SERVICE,
        config.listen,
        config.metrics_listen,
        config.tls.clone(),
    )
    .with_request_timeout(REQUEST_TIMEOUT);
    let bound = server::bind(spec, Arc::new(metrics)).await?;
    let actuator = InterceptedService::new(service.into_server(), config.auth.require());
    bound.serve(Some(Routes::new(actuator))).await
}
