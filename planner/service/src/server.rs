//! The `dovetail-planner` server: the Planner service behind health, reflection, auth, limits
//! and metrics, with graceful shutdown.
//!
//! [`start`] binds both ports, starts serving with health NOT_SERVING, and hands back a
//! [`Running`] server; the caller flips it to SERVING once it can plan ([`Running::set_serving`])
//! and later calls [`Running::shutdown`]: NOT_SERVING first, a drain delay so that load
//! balancers notice, then `serve_with_shutdown` finishes in-flight requests.

mod guard;

use std::net::SocketAddr;
use std::time::Duration;

use proto::v1::planner_server::PlannerServer;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

pub use guard::{Guard, GuardLayer};

use crate::api::PlannerService;
use crate::auth::RequireBearer;
use crate::config::{Auth, Config};
use crate::metrics::Metrics;

/// The gRPC name of the planner service, as health reports it.
pub const PLANNER_SERVICE: &str = "dovetail.v1.Planner";

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A port could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS material was rejected.
    #[error("invalid TLS configuration")]
    Tls(#[source] tonic::transport::Error),
    /// Reflection could not be built from the descriptors (a build bug).
    #[error("cannot build gRPC reflection")]
    Reflection(#[source] tonic_reflection::server::Error),
    /// The gRPC server failed.
    #[error("gRPC server failed")]
    Serve(#[source] tonic::transport::Error),
    /// The server task panicked.
    #[error("gRPC server task failed: {0}")]
    Task(String),
}

/// Result of running the server.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A started server.
pub struct Running {
    /// The bound gRPC address (useful with port 0).
    pub grpc_addr: SocketAddr,
    /// The bound metrics address, when metrics are on.
    pub metrics_addr: Option<SocketAddr>,
    health: HealthReporter,
    draining: watch::Sender<bool>,
    grace: Duration,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<()>>,
    metrics_task: Option<JoinHandle<()>>,
}

// === impl Running ===

impl Running {
    /// Reports SERVING for the planner and the server as a whole.
    pub async fn set_serving(&self) {
        self.set(ServingStatus::Serving).await;
    }

    /// Reports NOT_SERVING for the planner and the server as a whole.
    pub async fn set_not_serving(&self) {
        self.set(ServingStatus::NotServing).await;
    }

    async fn set(&self, status: ServingStatus) {
        self.health.set_service_status("", status).await;
        self.health
            .set_service_status(PLANNER_SERVICE, status)
            .await;
    }

    /// Graceful shutdown: NOT_SERVING, wait `drain_delay` (load balancers and clients see
    /// the status and move away), end open Sessions with UNAVAILABLE (their clients reconnect
    /// to another replica), stop accepting and let in-flight requests finish. Streams still
    /// open after the request timeout plus 5 s (e.g. health watches) are cut.
    ///
    /// # Errors
    /// When the server had failed.
    pub async fn shutdown(self, drain_delay: Duration) -> Result<()> {
        self.set_not_serving().await;
        tracing::info!(?drain_delay, "NOT_SERVING; draining");
        tokio::time::sleep(drain_delay).await;
        let _ = self.draining.send(true);
        let _ = self.stop.send(());
        let mut task = self.task;
        let r = match tokio::time::timeout(self.grace, &mut task).await {
            Ok(joined) => joined.map_err(|e| Error::Task(e.to_string()))?,
            Err(_) => {
                tracing::warn!(grace = ?self.grace, "Streams still open after the grace period; closing them");
                task.abort();
                Ok(())
            }
        };
        if let Some(m) = self.metrics_task {
            m.abort();
        }
        r
    }
}

/// Binds the ports and starts serving `service` as `config` says, health NOT_SERVING.
///
/// # Errors
/// A port cannot be bound, TLS material is invalid, or reflection cannot be built.
pub async fn start(config: &Config, service: PlannerService, metrics: Metrics) -> Result<Running> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
    let grpc_addr = listener.local_addr().map_err(|source| Error::Bind {
        addr: config.listen,
        source,
    })?;

    let (metrics_addr, metrics_task) = match config.metrics_listen {
        None => (None, None),
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| Error::Bind { addr, source })?;
            let bound = l
                .local_addr()
                .map_err(|source| Error::Bind { addr, source })?;
            (
                Some(bound),
                Some(tokio::spawn(serve_metrics(l, metrics.clone()))),
            )
        }
    };

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("", ServingStatus::NotServing)
        .await;
    health
        .set_service_status(PLANNER_SERVICE, ServingStatus::NotServing)
        .await;

    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(Error::Reflection)?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(Error::Reflection)?;

    let (draining, draining_rx) = watch::channel(false);
    let service = service.with_draining(draining_rx);
    let token = match &config.auth {
        Auth::Bearer(t) => Some(t.clone()),
        Auth::MutualTls | Auth::Disabled => None,
    };
    let planner: InterceptedService<PlannerServer<PlannerService>, RequireBearer> =
        InterceptedService::new(
            service.into_server(config.max_message_bytes),
            RequireBearer::new(token),
        );

    let mut builder = Server::builder();
    if let Some(tls) = &config.tls {
        let mut t = ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert, &tls.key));
        if let Some(ca) = &tls.client_ca {
            t = t.client_ca_root(Certificate::from_pem(ca));
        }
        builder = builder.tls_config(t).map_err(Error::Tls)?;
    }
    let router = builder
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .trace_fn(|req| tracing::info_span!("grpc", method = %req.uri().path()))
        .layer(GuardLayer::new(
            config.max_concurrent_requests,
            config.request_timeout,
            metrics,
        ))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(planner);

    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        router
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stopped.await;
            })
            .await
            .map_err(Error::Serve)
    });

    Ok(Running {
        grpc_addr,
        metrics_addr,
        health,
        draining,
        grace: config.request_timeout + Duration::from_secs(5),
        stop,
        task,
        metrics_task,
    })
}

async fn serve_metrics(listener: TcpListener, metrics: Metrics) {
    use axum::routing::get;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.render(),
                )
            }
        }),
    );
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "Metrics server failed");
    }
}
