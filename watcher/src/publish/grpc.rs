//! [`Planners`] over the planner replicas' gRPC endpoints: round-robin, failing over to the
//! next replica when one refuses or cannot be reached.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use proto::v1 as pb;
use tonic::Code;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

use super::{Error, Planners, Plans, Result, Updates};

/// Settings of [`Endpoints`].
#[derive(Debug, Clone)]
pub struct EndpointsConfig {
    /// `HOST:PORT` or `http://HOST:PORT`, one per replica.
    pub endpoints: Vec<String>,
    /// Bearer token sent with each session.
    pub token: Option<String>,
    /// Largest message sent or received.
    pub max_message_bytes: usize,
}

/// The planner replicas.
#[derive(Debug)]
pub struct Endpoints {
    replicas: Vec<(String, pb::planner_client::PlannerClient<Channel>)>,
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
    next: AtomicUsize,
}

// === impl Endpoints ===

impl Endpoints {
    /// Prepares one lazy connection per endpoint (nothing is dialled yet).
    ///
    /// # Errors
    /// [`Error::Endpoint`] naming a malformed endpoint or an unusable token.
    pub fn new(config: EndpointsConfig) -> Result<Self> {
        let mut replicas = Vec::new();
        for e in &config.endpoints {
            let uri = if e.contains("://") {
                e.clone()
            } else {
                format!("http://{e}")
            };
            let ep = Endpoint::from_shared(uri).map_err(|err| Error::Endpoint {
                endpoint: e.clone(),
                reason: err.to_string(),
            })?;
            let channel = ep
                .connect_timeout(Duration::from_secs(3))
                .tcp_nodelay(true)
                .connect_lazy();
            let client = pb::planner_client::PlannerClient::new(channel)
                .max_decoding_message_size(config.max_message_bytes)
                .max_encoding_message_size(config.max_message_bytes);
            replicas.push((e.clone(), client));
        }
        if replicas.is_empty() {
            return Err(Error::Endpoint {
                endpoint: String::new(),
                reason: "no planner endpoint given".into(),
            });
        }
        let token = match &config.token {
            Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| Error::Endpoint {
                endpoint: config.endpoints.join(","),
                reason: "the token is not a valid header value".into(),
            })?),
            None => None,
        };
        Ok(Self {
            replicas,
            token,
            next: AtomicUsize::new(0),
        })
    }
}

#[async_trait::async_trait]
impl Planners for Endpoints {
    async fn open(&self, make: &mut (dyn FnMut() -> Updates + Send)) -> Result<Plans> {
        let n = self.replicas.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last = tonic::Status::unavailable("no planner replica");
        for i in 0..n {
            let (name, client) = &self.replicas[(start + i) % n];
            let mut request = tonic::Request::new(make());
            if let Some(t) = &self.token {
                request.metadata_mut().insert("authorization", t.clone());
            }
            match client.clone().session(request).await {
                Ok(resp) => {
                    tracing::info!(replica = %name, "Session opened");
                    return Ok(resp.into_inner().boxed());
                }
                Err(status)
                    if matches!(
                        status.code(),
                        Code::Unavailable
                            | Code::ResourceExhausted
                            | Code::Unknown
                            | Code::Cancelled
                    ) =>
                {
                    tracing::debug!(replica = %name, code = ?status.code(), "Replica refused; trying the next");
                    last = status;
                }
                Err(status) => return Err(Error::Unavailable(status)),
            }
        }
        Err(Error::Unavailable(last))
    }
}
