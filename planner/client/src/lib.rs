//! `planner-client`: the client of several planner replicas, for the watcher and
//! `dovetail plan --server`. It needs only the wire types (`proto`), never the engine.
//!
//! Calls are balanced, and a failed `Plan` is retried on another replica.
//!
//! Endpoints are `HOST:PORT` (or `http(s)://HOST:PORT`); a host name that resolves to several
//! addresses (a headless Service) gives one replica per address. Calls go round-robin over the
//! replicas, like gRPC's `round_robin` policy. When a call fails in a way another replica can
//! fix (UNAVAILABLE, a broken connection, RESOURCE_EXHAUSTED from load shedding), that replica is
//! set aside for a moment and the same request goes to the next one, until every replica has
//! been tried once. `Plan` is stateless and executes nothing, so retrying it is always safe.
//!
//! TLS ([`ClientTls`]) and the bearer token ([`AddBearer`]) are the service shell's client side
//! (`service-shell`, without its `kube` feature).
//!
//! Round-robin with explicit failover is used rather than tower's p2c balancer (which
//! `Channel::balance_list` wraps) because the client has to know which replica failed in order
//! to retry elsewhere; p2c hides that and may pick the dead replica again.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proto::v1 as pb;
use thiserror::Error;
use tokio::time::Instant;
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use service_shell::auth::{AddBearer, InvalidToken};
use service_shell::tls::ClientTls;

/// How long a replica that failed is passed over.
const EJECT_FOR: Duration = Duration::from_secs(5);

/// Settings of a [`PlannerClient`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `HOST:PORT` or `http(s)://HOST:PORT`, one or more.
    pub endpoints: Vec<String>,
    /// Bearer token to send.
    pub token: Option<String>,
    /// TLS; `None` is plaintext.
    pub tls: Option<ClientTls>,
    /// Deadline of one attempt.
    pub timeout: Duration,
    /// Largest message sent or received.
    pub max_message_bytes: usize,
}

impl ClientConfig {
    /// Plaintext, no token, 60 s per attempt, 256 MiB messages.
    pub fn new(endpoints: Vec<String>) -> Self {
        Self {
            endpoints,
            token: None,
            tls: None,
            timeout: Duration::from_secs(60),
            max_message_bytes: 256 << 20,
        }
    }
}

/// Why a client could not be built or a call failed on every replica.
#[derive(Debug, Error)]
pub enum Error {
    /// No endpoint was given.
    #[error("no planner endpoint given")]
    NoEndpoints,
    /// An endpoint is not `HOST:PORT` or `http(s)://HOST:PORT`.
    #[error("invalid planner endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint.
        endpoint: String,
        /// What is wrong.
        reason: String,
    },
    /// A host name did not resolve.
    #[error("cannot resolve planner endpoint {endpoint:?}")]
    Resolve {
        /// The endpoint.
        endpoint: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// The token cannot be sent.
    #[error(transparent)]
    Token(#[from] InvalidToken),
    /// TLS settings were rejected.
    #[error("invalid client TLS settings")]
    Tls(#[source] tonic::transport::Error),
    /// The request was refused for a reason no other replica would change (bad input,
    /// authentication), or every replica failed; `status` is the last answer.
    #[error("planner {replica} answered {code:?}: {message}", code = status.code(), message = status.message())]
    Rpc {
        /// The replica that answered last.
        replica: String,
        /// Its status.
        status: tonic::Status,
    },
}

/// Result of a client call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The generated client over one replica's channel, with the bearer token added.
type GrpcClient = pb::planner_client::PlannerClient<InterceptedService<Channel, AddBearer>>;

struct Replica {
    name: String,
    client: GrpcClient,
    ejected_until: Mutex<Option<Instant>>,
}

/// A balanced, retrying client of several planner replicas. Cheap to clone.
#[derive(Clone)]
pub struct PlannerClient {
    replicas: Arc<Vec<Replica>>,
    next: Arc<AtomicUsize>,
    timeout: Duration,
}

fn split_endpoint(endpoint: &str) -> Result<(bool, String, u16)> {
    let bad = |reason: &str| Error::InvalidEndpoint {
        endpoint: endpoint.to_string(),
        reason: reason.to_string(),
    };
    let (tls, rest) = if let Some(r) = endpoint.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = endpoint.strip_prefix("http://") {
        (false, r)
    } else {
        (false, endpoint)
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| bad("expected HOST:PORT"))?;
    let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("the host is empty"));
    }
    Ok((tls, host.to_string(), port))
}

// === impl PlannerClient ===

impl PlannerClient {
    /// Resolves the endpoints and prepares one lazy connection per replica (nothing is dialled
    /// until the first call).
    ///
    /// # Errors
    /// An endpoint that is malformed or does not resolve, a bad token or bad TLS settings.
    pub async fn connect(config: ClientConfig) -> Result<Self> {
        if config.endpoints.is_empty() {
            return Err(Error::NoEndpoints);
        }
        let auth = AddBearer::new(config.token.as_deref())?;
        let mut replicas = Vec::new();
        for endpoint in &config.endpoints {
            let (https, host, port) = split_endpoint(endpoint)?;
            let https = https || config.tls.is_some();
            let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|source| Error::Resolve {
                    endpoint: endpoint.clone(),
                    source,
                })?
                .collect();
            let mut addrs = addrs;
            addrs.sort();
            addrs.dedup();
            for addr in addrs {
                let scheme = if https { "https" } else { "http" };
                let uri = format!("{scheme}://{addr}");
                let mut ep = Endpoint::from_shared(uri.clone())
                    .map_err(|e| Error::InvalidEndpoint {
                        endpoint: endpoint.clone(),
                        reason: e.to_string(),
                    })?
                    .connect_timeout(Duration::from_secs(3))
                    .tcp_nodelay(true);
                if let Some(tls) = &config.tls {
                    ep = ep.tls_config(tls.config(&host)).map_err(Error::Tls)?;
                }
                let channel = ep.connect_lazy();
                let client =
                    pb::planner_client::PlannerClient::with_interceptor(channel, auth.clone())
                        .max_decoding_message_size(config.max_message_bytes)
                        .max_encoding_message_size(config.max_message_bytes);
                replicas.push(Replica {
                    name: format!("{addr}"),
                    client,
                    ejected_until: Mutex::new(None),
                });
            }
        }
        if replicas.is_empty() {
            return Err(Error::NoEndpoints);
        }
        Ok(Self {
            replicas: Arc::new(replicas),
            next: Arc::default(),
            timeout: config.timeout,
        })
    }

    /// The replicas, as `IP:PORT`.
    pub fn replicas(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.name.clone()).collect()
    }

    /// Sends a ready `PlanRequest`, with failover: the same answer as `planner::plan` with the
    /// same inputs (build the request with `planner_wire::to_wire::plan_request`).
    ///
    /// # Errors
    /// [`Error::Rpc`] with the status of the replica that refused the request, or of the last
    /// replica tried when all failed.
    pub async fn plan_request(&self, req: pb::PlanRequest) -> Result<pb::PlanResponse> {
        let timeout = self.timeout;
        self.with_failover(|mut client| {
            let mut request = tonic::Request::new(req.clone());
            request.set_timeout(timeout);
            async move { client.plan(request).await }
        })
        .await
    }
}

// === impl PlannerClient (sessions) ===

impl PlannerClient {
    /// Opens a `Session` stream on the next replica that accepts it (round-robin, failing over
    /// like [`PlannerClient::plan_request`]). `make` builds the stream of updates for one
    /// attempt, starting with a snapshot; it is called again for each replica tried. When an
    /// open session later ends with UNAVAILABLE or FAILED_PRECONDITION, call this again.
    ///
    /// # Errors
    /// [`Error::Rpc`] when no replica accepts the stream.
    pub async fn session<F, S>(&self, mut make: F) -> Result<tonic::Streaming<pb::PlanResponse>>
    where
        F: FnMut() -> S,
        S: tokio_stream::Stream<Item = pb::ClusterUpdate> + Send + 'static,
    {
        self.with_failover(|mut client| {
            let updates = make();
            async move { client.session(updates).await }
        })
        .await
    }

    /// Calls replicas in round-robin order, healthy ones first, until one answers or refuses
    /// with a status another replica would not change. A replica that fails with a retryable
    /// status is set aside for [`EJECT_FOR`].
    async fn with_failover<T, F, Fut>(&self, mut call: F) -> Result<T>
    where
        F: FnMut(GrpcClient) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let n = self.replicas.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut order: Vec<usize> = (0..n).map(|i| (start + i) % n).collect();
        order.sort_by_key(|&i| self.replicas[i].is_ejected(now));
        let mut last = None;
        for i in order {
            let replica = &self.replicas[i];
            match call(replica.client.clone()).await {
                Ok(resp) => {
                    replica.restore();
                    return Ok(resp.into_inner());
                }
                Err(status) if is_retryable(&status) => {
                    tracing::debug!(replica = %replica.name, code = ?status.code(), "Call failed; trying another replica");
                    replica.eject(Instant::now() + EJECT_FOR);
                    last = Some((replica.name.clone(), status));
                }
                Err(status) => {
                    return Err(Error::Rpc {
                        replica: replica.name.clone(),
                        status,
                    });
                }
            }
        }
        let (replica, status) = last.unwrap_or_else(|| {
            (
                String::new(),
                tonic::Status::unavailable("no planner replica"),
            )
        });
        Err(Error::Rpc { replica, status })
    }
}

/// Failures another replica may not have: it is down, the connection broke, or it sheds load.
fn is_retryable(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::ResourceExhausted | Code::Unknown | Code::Cancelled
    )
}

// === impl Replica ===

impl Replica {
    fn is_ejected(&self, now: Instant) -> bool {
        self.ejected_until
            .lock()
            .map(|g| g.is_some_and(|t| t > now))
            .unwrap_or(false)
    }

    fn eject(&self, until: Instant) {
        if let Ok(mut g) = self.ejected_until.lock() {
            *g = Some(until);
        }
    }

    fn restore(&self) {
        if let Ok(mut g) = self.ejected_until.lock() {
            *g = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_or_without_scheme() {
        assert_eq!(
            split_endpoint("127.0.0.1:50051").expect("ok"),
            (false, "127.0.0.1".to_string(), 50051)
        );
        assert_eq!(
            split_endpoint("https://planner.dovetail:443").expect("ok"),
            (true, "planner.dovetail".to_string(), 443)
        );
        assert_eq!(
            split_endpoint("[::1]:7").expect("ok"),
            (false, "::1".to_string(), 7)
        );
        let e = split_endpoint("planner").expect_err("no port");
        assert!(e.to_string().contains("\"planner\""), "{e}");
        assert!(split_endpoint("planner:http").is_err());
    }
}
