//! The watcher's own ports: Prometheus metrics on `/metrics`, and `grpc.health.v1`, SERVING
//! once every informer has synced (the watcher serves no other gRPC service).

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::metrics::Metrics;

/// The name health reports the watcher under.
pub const WATCHER_SERVICE: &str = "dovetail.v1.Watcher";

/// A port that could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} ({what})")]
pub struct Error {
    /// The address.
    pub addr: SocketAddr,
    /// `metrics` or `health`.
    pub what: &'static str,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Binds an address.
///
/// # Errors
/// [`Error`] naming the address.
pub async fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error { addr, what, source })
}

/// Serves `/metrics` until `stop` turns true.
pub async fn metrics(listener: TcpListener, metrics: Metrics, mut stop: watch::Receiver<bool>) {
    let app = Router::new().route(
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
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = crate::when(&mut stop, true).await;
    });
    if let Err(e) = serve.await {
        tracing::error!(error = %e, "Metrics server failed");
    }
}

/// Serves `grpc.health.v1` until `stop` turns true; returns the reporter to flip.
pub fn health(
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
) -> (HealthReporter, tokio::task::JoinHandle<()>) {
    let (reporter, service) = tonic_health::server::health_reporter();
    let task = tokio::spawn(async move {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let r = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = crate::when(&mut stop, true).await;
            })
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "Health server failed");
        }
    });
    (reporter, task)
}

/// Sets the overall and the watcher's status.
pub async fn set(reporter: &HealthReporter, serving: bool) {
    let status = if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    reporter.set_service_status("", status).await;
    reporter.set_service_status(WATCHER_SERVICE, status).await;
}
