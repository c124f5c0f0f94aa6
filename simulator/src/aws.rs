//! The simulated cloud's AWS face: EC2 and IAM (Query protocol), SSM and SQS (JSON protocols)
//! on one loopback HTTP endpoint, backed by the simulated EC2 ([`crate::cloud::SimCloud`]), so that
//! the production adapter (`cloud-aws`, the real AWS SDK with an endpoint override) runs against
//! the simulator unchanged: instances it launches become Nodes through the simulated kubelet,
//! and the simulator's capacity errors, throttling and interruptions come back through the SDK.
//!
//! One endpoint serves all of them, as moto_server does: a `GET /managedresources/…`,
//! `POST /zonalshifts` or `DELETE /zonalshifts/…` is ARC zonal shift ([`arc`], REST-JSON); a request with an
//! `X-Amz-Target: AmazonSSM.<Operation>` or `AmazonSQS.<Operation>` header is SSM or SQS (JSON
//! bodies), anything else is an EC2 Query request (`Action=…&Version=2016-11-15`, a form body;
//! XML answers in EC2's namespace, errors as `<Response><Errors><Error><Code>…`).
//!
//! - [`ec2`]: CreateFleet (instant), DescribeInstances, TerminateInstances, CreateTags,
//!   CreateLaunchTemplate, DescribeLaunchTemplates, DescribeSubnets, DescribeSecurityGroups,
//!   DescribeImages, DescribeInstanceTypes, DescribeInstanceTypeOfferings,
//!   DescribeSpotPriceHistory, DescribeAvailabilityZones.
//! - [`network`]: the fixed account the simulator sells from: one VPC, a private subnet per
//!   zone and a node security group, tagged `karpenter.sh/discovery=<cluster>` (and `Name`),
//!   and EKS-optimized-like images per family and architecture.
//! - [`ssm`]: GetParameter / GetParameters / PutParameter; the EKS AMI alias parameters under
//!   `/aws/service/` resolve to the network's images.
//! - [`iam`]: the instance profiles of EC2NodeClass roles (a form body with
//!   `Version=2010-05-08` is IAM, any other form body EC2).
//! - [`pricing`]: the Price List Query API's GetProducts (`X-Amz-Target:
//!   AWSPriceListService.GetProducts`): the simulated catalog's on-demand prices.
//! - [`arc`]: ARC zonal shift's GetManagedResource, StartZonalShift and CancelZonalShift for
//!   the simulated EKS cluster (moto serves no ARC).
//! - [`sqs`]: queues (GetQueueUrl, CreateQueue, SendMessage, ReceiveMessage with long polling,
//!   DeleteMessage, …); every event of the simulated cloud is also delivered to the
//!   interruption queue as an EventBridge-shaped body ([`events`]).
//!
//! Fault injection: [`Aws::fail_operation`] makes every call of one operation answer an error
//! until [`Aws::heal`], and [`Aws::calls`] counts the calls of each operation, so tests can see
//! how often a client retries against a failing endpoint.
//!
//! Signatures are not checked (any credentials work, as with moto): this is a test and demo
//! double, never an AWS endpoint.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;
use tokio::sync::watch;

use crate::cloud::SimCloud;

pub mod arc;
pub mod catalog;
pub mod ec2;
mod ec2_network;
pub mod events;
pub mod iam;
pub mod network;
pub mod pricing;
mod query;
pub mod sqs;
pub mod ssm;
mod xml;

pub use network::Network;

/// The simulated account's ID.
pub const ACCOUNT_ID: &str = "123456789012";

/// How the AWS endpoint is set up.
#[derive(Clone, Debug)]
pub struct AwsConfig {
    /// Port on 127.0.0.1 (0 picks a free one).
    pub port: u16,
    /// The cluster name the network is tagged for: subnets and security groups carry
    /// `karpenter.sh/discovery=<cluster>`, as in Karpenter's getting-started guide.
    pub cluster: String,
    /// The SQS queue the cloud's events are delivered to (created at start), as Karpenter's
    /// interruption queue; `None` delivers nowhere.
    pub interruption_queue: Option<String>,
}

impl Default for AwsConfig {
    fn default() -> Self {
        Self {
            port: 0,
            cluster: "demo".into(),
            interruption_queue: Some(DEFAULT_INTERRUPTION_QUEUE.into()),
        }
    }
}

/// The default interruption queue name.
pub const DEFAULT_INTERRUPTION_QUEUE: &str = "dovetail-interruptions";

/// An AWS error as the protocols report it: an HTTP status, a code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsError {
    /// HTTP status.
    pub status: u16,
    /// Error code, e.g. `InvalidParameterValue`.
    pub code: String,
    /// Message.
    pub message: String,
}

// === impl AwsError ===

impl AwsError {
    /// A 400 error with `code`.
    pub fn client(code: &str, message: impl Into<String>) -> Self {
        Self {
            status: 400,
            code: code.into(),
            message: message.into(),
        }
    }

    /// `InvalidParameterValue`.
    pub fn invalid_value(message: impl Into<String>) -> Self {
        Self::client("InvalidParameterValue", message)
    }

    /// A simulated cloud error as EC2 reports it.
    pub fn from_cloud(e: &cloud::Error) -> Self {
        match e {
            cloud::Error::Throttled { .. } => Self {
                status: 503,
                code: "RequestLimitExceeded".into(),
                message: "Request limit exceeded.".into(),
            },
            cloud::Error::Unavailable { message } => Self {
                status: 503,
                code: "Unavailable".into(),
                message: message.clone(),
            },
            cloud::Error::NotFound { provider_id } => Self::client(
                "InvalidInstanceID.NotFound",
                format!("The instance ID '{provider_id}' does not exist"),
            ),
            cloud::Error::InsufficientCapacity { offerings } => Self::client(
                "InsufficientInstanceCapacity",
                format!(
                    "We currently do not have sufficient capacity for {}",
                    offerings
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            cloud::Error::InvalidRequest { reason } => Self::invalid_value(reason.clone()),
            other => Self::invalid_value(other.to_string()),
        }
    }
}

impl std::fmt::Display for AwsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for AwsError {}

/// The AWS face of a simulation (cheap to clone). Tests reach it through
/// `Simulation::aws()`.
#[derive(Clone, Debug)]
pub struct Aws {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cloud: SimCloud,
    config: AwsConfig,
    endpoint: Mutex<String>,
    network: Mutex<Network>,
    parameters: Mutex<ssm::Parameters>,
    iam: Mutex<iam::Profiles>,
    arc: Mutex<arc::Shifts>,
    queues: sqs::Queues,
    requests: AtomicU64,
    /// Operations that fail (fault injection), with the error each answers.
    failing: Mutex<std::collections::BTreeMap<String, AwsError>>,
    /// Calls served so far, by operation.
    calls: Mutex<std::collections::BTreeMap<String, u64>>,
}

// === impl Aws ===

impl Aws {
    /// The AWS face of `cloud`; delivers the cloud's events to the interruption queue.
    pub fn new(cloud: SimCloud, config: AwsConfig) -> Self {
        let network = Network::new(&cloud, &config.cluster);
        let queues = sqs::Queues::default();
        let aws = Self {
            inner: Arc::new(Inner {
                config,
                endpoint: Mutex::new(String::new()),
                network: Mutex::new(network),
                parameters: Mutex::default(),
                iam: Mutex::default(),
                arc: Mutex::default(),
                queues,
                requests: AtomicU64::new(0),
                failing: Mutex::default(),
                calls: Mutex::default(),
                cloud,
            }),
        };
        if let Some(name) = aws.inner.config.interruption_queue.clone() {
            aws.inner.queues.create(&name, aws.clock().now());
            let queues = aws.inner.queues.clone();
            let region = aws.region().to_string();
            let clock = aws.clock().clone();
            aws.inner.cloud.on_event(move |event| {
                let body = events::eventbridge_body(event, &region);
                queues.send(&name, body, clock.now());
            });
        }
        aws
    }

    /// Serves the endpoint on 127.0.0.1:`config.port` until `stop` turns true; returns the
    /// bound address.
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn serve(
        &self,
        mut stop: watch::Receiver<bool>,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.inner.config.port));
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        *lock(&self.inner.endpoint) = format!("http://{addr}");
        let app = Router::new().fallback(handle).with_state(self.clone());
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "Simulated AWS endpoint failed");
            }
        });
        tracing::info!(%addr, "Simulated AWS endpoint (EC2, SSM, SQS, IAM, Pricing, ARC zonal shift) started");
        Ok((addr, task))
    }

    /// The endpoint URL (`http://127.0.0.1:<port>`) once served, else empty.
    pub fn endpoint(&self) -> String {
        lock(&self.inner.endpoint).clone()
    }

    /// The region (the simulated cloud's).
    pub fn region(&self) -> &str {
        self.inner.cloud.region()
    }

    /// The simulated EC2 behind it.
    pub fn cloud(&self) -> &SimCloud {
        &self.inner.cloud
    }

    /// The configuration.
    pub fn config(&self) -> &AwsConfig {
        &self.inner.config
    }

    /// The network, launch templates and per-instance launch details (read or change them in
    /// tests).
    pub fn network(&self) -> MutexGuard<'_, Network> {
        lock(&self.inner.network)
    }

    /// Sets an SSM parameter (a String), as PutParameter with overwrite does.
    pub fn put_parameter(&self, name: &str, value: &str) {
        let now = self.clock().now();
        lock(&self.inner.parameters).put(name, value, now);
    }

    /// The IAM instance profiles (read or change them in tests).
    pub fn iam(&self) -> MutexGuard<'_, iam::Profiles> {
        lock(&self.inner.iam)
    }

    /// The ARC zonal shifts started on the simulated cluster.
    pub fn zonal_shifts(&self) -> Vec<arc::Shift> {
        lock(&self.inner.arc).all().to_vec()
    }

    /// The simulated EKS cluster's ARN (ARC's identifier of its managed resource).
    pub fn cluster_arn(&self) -> String {
        arc::cluster_arn(self)
    }

    /// The SQS queues.
    pub fn queues(&self) -> &sqs::Queues {
        &self.inner.queues
    }

    /// Every call of `operation` (`ReceiveMessage`, `DescribeInstanceTypes`, `GetParameter`,
    /// ...) answers `error` until [`Aws::heal`] (fault injection: a queue deleted, credentials
    /// revoked, a service down).
    pub fn fail_operation(&self, operation: &str, error: AwsError) {
        lock(&self.inner.failing).insert(operation.to_string(), error);
    }

    /// Ends every fault set by [`Aws::fail_operation`].
    pub fn heal(&self) {
        lock(&self.inner.failing).clear();
    }

    /// Calls of `operation` received so far (answered or failed).
    pub fn calls(&self, operation: &str) -> u64 {
        lock(&self.inner.calls).get(operation).copied().unwrap_or(0)
    }

    /// Counts a call of `operation`; the injected error it answers, if any.
    fn call(&self, operation: &str) -> Option<AwsError> {
        *lock(&self.inner.calls)
            .entry(operation.to_string())
            .or_insert(0) += 1;
        lock(&self.inner.failing).get(operation).cloned()
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
    }

    fn clock(&self) -> &crate::Clock {
        self.inner.cloud.clock()
    }

    fn request_id(&self) -> String {
        let n = self.inner.requests.fetch_add(1, Ordering::Relaxed) + 1;
        format!("5ea1d0e7-0000-4000-8000-{n:012x}")
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn handle(
    State(aws): State<Aws>,
    method: http::Method,
    uri: http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request_id = aws.request_id();
    if let Some(op) = arc::operation(&method, uri.path()) {
        if let Some(e) = aws.call(op) {
            return arc::error(&request_id, &e);
        }
        return arc::handle(&aws, op, uri.path(), &body, &request_id);
    }
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let json_op = target
        .strip_prefix("AmazonSSM.")
        .or_else(|| target.strip_prefix("AmazonSQS."))
        .or_else(|| target.strip_prefix("AWSPriceListService."));
    if let Some(op) = json_op
        && let Some(e) = aws.call(op)
    {
        return json_error(&request_id, &e);
    }
    if let Some(op) = target.strip_prefix("AmazonSSM.") {
        ssm::handle(&aws, op, &body, &request_id)
    } else if let Some(op) = target.strip_prefix("AmazonSQS.") {
        sqs::handle(&aws, op, &body, &request_id).await
    } else if target == "AWSPriceListService.GetProducts" {
        match pricing::get_products(&aws, &body) {
            Ok(out) => json_response(&request_id, "application/x-amz-json-1.1", &out),
            Err(e) => json_error(&request_id, &e),
        }
    } else if !target.is_empty() {
        json_error(
            &request_id,
            &AwsError::client(
                "UnknownOperationException",
                format!(
                    "X-Amz-Target {target}: the simulator serves AmazonSSM.*, AmazonSQS.* and \
                     AWSPriceListService.GetProducts only"
                ),
            ),
        )
    } else {
        let p = query::Params::parse(&body);
        if let Some(e) = aws.call(p.get("Action").unwrap_or_default()) {
            return ec2::error_response(&request_id, &e);
        }
        if p.get("Version") == Some(iam::VERSION) {
            return iam::handle(&aws, &p, &request_id);
        }
        ec2::handle(&aws, &body, &request_id).await
    }
}

/// A JSON-protocol answer (SSM, SQS).
pub(crate) fn json_response(
    request_id: &str,
    content_type: &str,
    body: &serde_json::Value,
) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", content_type)
        .header("x-amzn-requestid", request_id)
        .body(body.to_string().into())
        .unwrap_or_default()
}

/// A JSON-protocol error: `{"__type": code, "message": …}` with the status.
pub(crate) fn json_error(request_id: &str, e: &AwsError) -> Response {
    Response::builder()
        .status(e.status)
        .header("content-type", "application/x-amz-json-1.1")
        .header("x-amzn-requestid", request_id)
        .header("x-amzn-errortype", e.code.as_str())
        .body(
            serde_json::json!({"__type": e.code, "message": e.message})
                .to_string()
                .into(),
        )
        .unwrap_or_default()
}
