//! Prometheus metrics on their own port: each service keeps its own registry and metric
//! names, and implements [`Render`]; [`crate::server`] serves it on `/metrics`.

use std::sync::Arc;

pub mod summary;

pub use summary::Summary;

/// Karpenter's `DurationBuckets()` (kubernetes-sigs/karpenter `pkg/metrics/constants.go`), the
/// buckets of its duration histograms, which the services' Karpenter-named histograms share.
pub const DURATION_BUCKETS: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A service's metrics, as the text exposition.
pub trait Render: Send + Sync + 'static {
    /// The OpenMetrics text exposition of every metric.
    fn render(&self) -> String;
}

/// The OpenMetrics text of `registry`.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// Inserts `extra` (more families, e.g. [`Summary::render`]) before the OpenMetrics `# EOF`
/// line of `text`, or appends it.
pub fn insert_before_eof(mut text: String, extra: &str) -> String {
    match text.rfind("# EOF") {
        Some(i) => text.insert_str(i, extra),
        None => text.push_str(extra),
    }
    text
}

/// Serves `GET /metrics` on `listener` until `stop` turns true.
pub(crate) async fn serve(
    listener: TcpListener,
    metrics: Arc<dyn Render>,
    mut stop: watch::Receiver<bool>,
) {
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
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = stop.wait_for(|s| *s).await;
    });
    if let Err(e) = serve.await {
        tracing::error!(error = %e, "Metrics server failed");
    }
}
