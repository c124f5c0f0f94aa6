//! The gRPC server scaffold every service runs: its `dovetail.v1` service (or none, for the
//! watcher) beside `grpc.health.v1` and reflection v1 + v1alpha, TLS when configured, and
//! Prometheus `/metrics` on a port of its own.
//!
//! [`bind`] binds both ports and starts the metrics port; the caller then builds its services
//! (the [`Bound::draining`] signal in hand) and [`Bound::serve`]s them, health NOT_SERVING. It
//! flips health to SERVING once its dependencies are ready ([`Running::set_serving`]) and at the
//! end calls [`Running::shutdown`]: NOT_SERVING first, a drain delay so that load balancers
//! notice, then the draining signal (long streams end), then `serve_with_shutdown` lets
//! in-flight requests finish; what is still open after the grace period is cut.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::HealthReporter;

use crate::metrics::Render;
use crate::tls::ServerTls;

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

/// What to serve, where.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The gRPC address (health and reflection included).
    pub listen: SocketAddr,
    /// The metrics address; `None` is off.
    pub metrics_listen: Option<SocketAddr>,
    /// TLS of the gRPC port.
    pub tls: Option<ServerTls>,
    /// The name health reports the service under (`dovetail.v1.Planner`), besides `""`.
    pub service: &'static str,
    /// A deadline on every request of the port, when set.
    pub request_timeout: Option<Duration>,
    /// How long requests may go on after the server stops accepting before they are cut.
    pub grace: Duration,
}

// === impl Spec ===

impl Spec {
    /// `service` on `listen`, metrics on `metrics_listen`, with `tls`; no server-wide request
    /// deadline, and 5 s for requests to finish after the server stops accepting.
    pub fn new(
        service: &'static str,
        listen: SocketAddr,
        metrics_listen: Option<SocketAddr>,
        tls: Option<ServerTls>,
    ) -> Self {
        Self {
            listen,
            metrics_listen,
            tls,
            service,
            request_timeout: None,
            grace: Duration::from_secs(5),
        }
    }

    /// A deadline on every request of the port; in-flight requests then get it plus 5 s to
    /// finish at shutdown.
    pub fn with_request_timeout(self, timeout: Duration) -> Self {
        Self {
            request_timeout: Some(timeout),
            grace: timeout + Duration::from_secs(5),
            ..self
        }
    }

    /// How long requests may go on after the server stops accepting.
    pub fn with_grace(self, grace: Duration) -> Self {
        Self { grace, ..self }
    }
}

/// Both ports bound, metrics served; nothing on the gRPC port yet.
pub struct Bound {
    spec: Spec,
    listener: TcpListener,
    grpc_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    metrics_task: Option<JoinHandle<()>>,
    stop_metrics: watch::Sender<bool>,
    draining: watch::Sender<bool>,
}

/// Binds the gRPC port and the metrics port of `spec`, and serves `metrics` on the latter.
///
/// # Errors
/// A port cannot be bound.
pub async fn bind(spec: Spec, metrics: Arc<dyn Render>) -> Result<Bound> {
    let bind_err = |addr| move |source| Error::Bind { addr, source };
    let listener = TcpListener::bind(spec.listen)
        .await
        .map_err(bind_err(spec.listen))?;
    let grpc_addr = listener.local_addr().map_err(bind_err(spec.listen))?;
    let (stop_metrics, stopped) = watch::channel(false);
    let (metrics_addr, metrics_task) = match spec.metrics_listen {
        None => (None, None),
        Some(addr) => {
            let l = TcpListener::bind(addr).await.map_err(bind_err(addr))?;
            let bound = l.local_addr().map_err(bind_err(addr))?;
            let task = tokio::spawn(crate::metrics::serve(l, metrics, stopped));
            (Some(bound), Some(task))
        }
    };
    Ok(Bound {
        spec,
        listener,
        grpc_addr,
        metrics_addr,
        metrics_task,
        stop_metrics,
        draining: watch::channel(false).0,
    })
}

// === impl Bound ===

impl Bound {
    /// The bound gRPC address (useful with port 0).
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The bound metrics address, when metrics are on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Turns true when [`Running::shutdown`] has waited its drain delay: long-lived streams
    /// should end then, so that their clients reconnect elsewhere.
    pub fn draining(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Serves `routes` (the service's own, `None` for health alone) with health NOT_SERVING
    /// and reflection.
    ///
    /// # Errors
    /// The TLS material is invalid, or reflection cannot be built.
    pub async fn serve(self, routes: Option<Routes>) -> Result<Running> {
        let (health, health_service) = health(self.spec.service).await;
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

        let mut builder = Server::builder();
        if let Some(tls) = &self.spec.tls {
            builder = builder.tls_config(tls.config()).map_err(Error::Tls)?;
        }
        if let Some(t) = self.spec.request_timeout {
            builder = builder.timeout(t);
        }
        let mut builder = builder
            .tcp_nodelay(true)
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .trace_fn(|req| tracing::info_span!("grpc", method = %req.uri().path()));
        let router = builder
            .add_routes(routes.unwrap_or_default())
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha);

        let (stop, stopped) = oneshot::channel::<()>();
        let listener = self.listener;
        let task = tokio::spawn(async move {
            router
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stopped.await;
                })
                .await
                .map_err(Error::Serve)
        });
        Ok(Running {
            grpc_addr: self.grpc_addr,
            metrics_addr: self.metrics_addr,
            service: self.spec.service,
            grace: self.spec.grace,
            health,
            draining: self.draining,
            stop,
            task,
            stop_metrics: self.stop_metrics,
            metrics_task: self.metrics_task,
        })
    }
}

async fn health(service: &'static str) -> (HealthReporter, HealthServer<impl Health>) {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("", ServingStatus::NotServing)
        .await;
    health
        .set_service_status(service, ServingStatus::NotServing)
        .await;
    (health, health_service)
}

/// A started server.
pub struct Running {
    /// The bound gRPC address (useful with port 0).
    pub grpc_addr: SocketAddr,
    /// The bound metrics address, when metrics are on.
    pub metrics_addr: Option<SocketAddr>,
    service: &'static str,
    grace: Duration,
    health: HealthReporter,
    draining: watch::Sender<bool>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<()>>,
    stop_metrics: watch::Sender<bool>,
    metrics_task: Option<JoinHandle<()>>,
}

// === impl Running ===

impl Running {
    /// Reports SERVING for the service and the server as a whole.
    pub async fn set_serving(&self) {
        self.set(ServingStatus::Serving).await;
    }

    /// Reports NOT_SERVING for the service and the server as a whole.
    pub async fn set_not_serving(&self) {
        self.set(ServingStatus::NotServing).await;
    }

    async fn set(&self, status: ServingStatus) {
        self.health.set_service_status("", status).await;
        self.health.set_service_status(self.service, status).await;
    }

    /// The metrics address as the start-up line prints it: `IP:PORT` or `off`.
    pub fn metrics_addr_text(&self) -> String {
        self.metrics_addr
            .map_or_else(|| "off".to_string(), |a| a.to_string())
    }

    /// Graceful shutdown: NOT_SERVING, wait `drain_delay` (load balancers and clients see the
    /// status and move away), signal draining, stop accepting and let in-flight requests
    /// finish; what is still open after the grace period (e.g. health watches) is cut. The
    /// metrics port closes last.
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
        let _ = self.stop_metrics.send(true);
        if let Some(m) = self.metrics_task {
            // A scraper's keep-alive connection must not hold the process up.
            m.abort();
        }
        r
    }
}
