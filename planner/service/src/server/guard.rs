//! The request guard: a load-shedding concurrency limit and a timeout, as one tower layer.
//!
//! It wraps the Planner service only, so that health probes and reflection are never shed. A request over the limit is answered at once with RESOURCE_EXHAUSTED (never queued), and
//! one that runs past the timeout with DEADLINE_EXCEEDED. For a streaming call the timeout covers
//! opening the stream, not its whole life; each plan a Session computes takes one of the same
//! permits ([`GuardLayer::permits`], handed to the service), waiting for it, so that Session
//! plans and unary Plans together never exceed the limit.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;
use tower::{Layer, Service};

use crate::metrics::Metrics;

/// Builds [`Guard`]s that share one limit across all connections.
#[derive(Clone)]
pub struct GuardLayer {
    permits: Arc<Semaphore>,
    limit: usize,
    timeout: Duration,
    metrics: Metrics,
}

// === impl GuardLayer ===

impl GuardLayer {
    /// The permits of the limit, shared with the service's Session plans.
    pub fn permits(&self) -> Arc<Semaphore> {
        self.permits.clone()
    }

    /// At most `limit` guarded requests at once, each given `timeout`.
    pub fn new(limit: usize, timeout: Duration, metrics: Metrics) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            timeout,
            metrics,
        }
    }
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            layer: self.clone(),
        }
    }
}

/// See the module documentation.
#[derive(Clone)]
pub struct Guard<S> {
    inner: S,
    layer: GuardLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S: NamedService> NamedService for Guard<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for Guard<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let Ok(permit) = self.layer.permits.clone().try_acquire_owned() else {
            self.layer.metrics.shed();
            let status = Status::resource_exhausted(format!(
                "the planner is serving its limit of {} concurrent requests; retry later or on \
                 another replica",
                self.layer.limit
            ));
            return Box::pin(async move { Ok(status.into_http()) });
        };
        let timeout = self.layer.timeout;
        let fut = self.inner.call(req);
        Box::pin(async move {
            let r = tokio::time::timeout(timeout, fut).await;
            drop(permit);
            match r {
                Ok(r) => r,
                Err(_) => Ok(Status::deadline_exceeded(format!(
                    "the planner did not answer within {timeout:?}"
                ))
                .into_http()),
            }
        })
    }
}
