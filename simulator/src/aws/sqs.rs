//! SQS's JSON API (`X-Amz-Target: AmazonSQS.<Operation>`, `application/x-amz-json-1.0`, the
//! protocol aws-sdk-sqs speaks): CreateQueue, GetQueueUrl, GetQueueAttributes, SendMessage,
//! ReceiveMessage (long polling up to `WaitTimeSeconds`, visibility timeouts, redelivery),
//! DeleteMessage, PurgeQueue. At-least-once as SQS: a received message comes back after its
//! visibility timeout until it is deleted.
//!
//! Queue URLs are `<endpoint>/<account>/<name>`; a request names its queue by URL and the
//! simulator reads the name from the URL's last segment.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::Response;
use cloud::Timestamp;
use md5::{Digest, Md5};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{ACCOUNT_ID, Aws, AwsError, json_error, json_response, lock};

const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// SQS's default visibility timeout.
pub const DEFAULT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);
/// SQS's longest long poll.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

#[derive(Debug)]
struct Message {
    id: String,
    body: String,
    md5: String,
    sent: Timestamp,
    visible_at: Instant,
    receives: u32,
    receipt: Option<String>,
}

#[derive(Debug)]
struct Queue {
    created: Timestamp,
    visibility_timeout: Duration,
    messages: Vec<Message>,
}

#[derive(Debug, Default)]
struct State {
    queues: BTreeMap<String, Queue>,
    next: u64,
}

/// The simulated SQS queues (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct Queues {
    state: Arc<Mutex<State>>,
    arrived: Arc<Notify>,
}

// === impl Queues ===

impl Queues {
    /// Creates `name` unless it exists.
    pub fn create(&self, name: &str, now: Timestamp) {
        lock(&self.state)
            .queues
            .entry(name.to_string())
            .or_insert_with(|| Queue {
                created: now,
                visibility_timeout: DEFAULT_VISIBILITY_TIMEOUT,
                messages: Vec::new(),
            });
    }

    /// Puts a message on `name` (created if missing); returns its ID.
    pub fn send(&self, name: &str, body: String, now: Timestamp) -> String {
        self.send_delayed(name, body, now, Duration::ZERO)
    }

    fn send_delayed(&self, name: &str, body: String, now: Timestamp, delay: Duration) -> String {
        self.create(name, now);
        let id = {
            let mut s = lock(&self.state);
            s.next += 1;
            let id = format!("5ea1d0e7-5e55-4a9e-8000-{:012x}", s.next);
            let md5 = hex(&Md5::digest(body.as_bytes()));
            if let Some(q) = s.queues.get_mut(name) {
                q.messages.push(Message {
                    id: id.clone(),
                    body,
                    md5,
                    sent: now,
                    visible_at: Instant::now() + delay,
                    receives: 0,
                    receipt: None,
                });
            }
            id
        };
        self.arrived.notify_waiters();
        id
    }

    /// Messages in `name` (visible or in flight), or `None` for an unknown queue.
    pub fn message_count(&self, name: &str) -> Option<usize> {
        lock(&self.state).queues.get(name).map(|q| q.messages.len())
    }

    /// The bodies of the messages in `name`, oldest first (tests).
    pub fn bodies(&self, name: &str) -> Vec<String> {
        lock(&self.state)
            .queues
            .get(name)
            .map(|q| q.messages.iter().map(|m| m.body.clone()).collect())
            .unwrap_or_default()
    }

    fn receive_now(&self, name: &str, max: usize, hide: Option<Duration>) -> Option<Vec<Value>> {
        let mut s = lock(&self.state);
        let seq = s.next;
        let q = s.queues.get_mut(name)?;
        let now = Instant::now();
        let hide = hide.unwrap_or(q.visibility_timeout);
        let mut out = Vec::new();
        for (i, m) in q
            .messages
            .iter_mut()
            .filter(|m| m.visible_at <= now)
            .take(max)
            .enumerate()
        {
            m.visible_at = now + hide;
            m.receives += 1;
            let receipt = format!("rh-{}-{}-{}", m.id, m.receives, seq + i as u64);
            m.receipt = Some(receipt.clone());
            out.push(json!({
                "MessageId": m.id,
                "ReceiptHandle": receipt,
                "MD5OfBody": m.md5,
                "Body": m.body,
                "Attributes": {
                    "SentTimestamp": (m.sent * 1000).to_string(),
                    "ApproximateReceiveCount": m.receives.to_string(),
                },
            }));
        }
        Some(out)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn queue_does_not_exist(what: &str) -> AwsError {
    AwsError::client(
        "QueueDoesNotExist",
        format!("The specified queue does not exist: {what}"),
    )
}

/// The queue name of a `QueueUrl` (its last path segment).
fn queue_name(input: &Value) -> Result<String, AwsError> {
    let url = input["QueueUrl"].as_str().ok_or_else(|| {
        AwsError::client(
            "MissingParameter",
            "The request must contain the parameter QueueUrl.",
        )
    })?;
    url.trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or_else(|| queue_does_not_exist(url))
}

fn seconds(input: &Value, key: &str, max: u64) -> Result<Option<Duration>, AwsError> {
    match &input[key] {
        Value::Null => Ok(None),
        v => match v.as_u64() {
            Some(n) if n <= max => Ok(Some(Duration::from_secs(n))),
            _ => Err(AwsError::client(
                "InvalidParameterValue",
                format!(
                    "Value {v} for parameter {key} is invalid. Reason: must be between 0 and {max}."
                ),
            )),
        },
    }
}

pub(crate) async fn handle(aws: &Aws, op: &str, body: &[u8], rid: &str) -> Response {
    let result = match serde_json::from_slice::<Value>(body) {
        Err(e) => Err(AwsError::client(
            "SerializationException",
            format!("request body is not JSON: {e}"),
        )),
        Ok(input) => operation(aws, op, &input).await,
    };
    match result {
        Ok(v) => json_response(rid, CONTENT_TYPE, &v),
        Err(e) => {
            let mut response = json_error(rid, &e);
            // SQS's JSON protocol also names the error by its older Query code, which is what
            // aws-sdk-sqs matches its typed errors on (`QueueDoesNotExist` ⇐
            // `AWS.SimpleQueueService.NonExistentQueue`).
            let legacy = match e.code.as_str() {
                "QueueDoesNotExist" => "AWS.SimpleQueueService.NonExistentQueue",
                "UnsupportedOperation" => "AWS.SimpleQueueService.UnsupportedOperation",
                other => other,
            };
            let fault = if e.status >= 500 {
                "Receiver"
            } else {
                "Sender"
            };
            if let Ok(v) = http::HeaderValue::from_str(&format!("{legacy};{fault}")) {
                response.headers_mut().insert("x-amzn-query-error", v);
            }
            response
        }
    }
}

async fn operation(aws: &Aws, op: &str, input: &Value) -> Result<Value, AwsError> {
    let queues = aws.queues();
    let url = |name: &str| format!("{}/{ACCOUNT_ID}/{name}", aws.endpoint());
    let now = aws.clock().now();
    match op {
        "CreateQueue" => {
            let name = input["QueueName"].as_str().unwrap_or_default();
            let valid = (1..=80).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !valid {
                return Err(AwsError::client(
                    "InvalidParameterValue",
                    format!("QueueName {name:?}: 1 to 80 of a-z, A-Z, 0-9, - and _"),
                ));
            }
            queues.create(name, now);
            if let Some(v) = input["Attributes"]["VisibilityTimeout"]
                .as_str()
                .and_then(|v| v.parse().ok())
                && let Some(q) = lock(&queues.state).queues.get_mut(name)
            {
                q.visibility_timeout = Duration::from_secs(v);
            }
            Ok(json!({ "QueueUrl": url(name) }))
        }
        "GetQueueUrl" => {
            let name = input["QueueName"].as_str().unwrap_or_default();
            if queues.message_count(name).is_none() {
                return Err(queue_does_not_exist(name));
            }
            Ok(json!({ "QueueUrl": url(name) }))
        }
        "ListQueues" => {
            let prefix = input["QueueNamePrefix"].as_str().unwrap_or_default();
            let urls: Vec<String> = lock(&queues.state)
                .queues
                .keys()
                .filter(|n| n.starts_with(prefix))
                .map(|n| url(n))
                .collect();
            Ok(json!({ "QueueUrls": urls }))
        }
        "GetQueueAttributes" => {
            let name = queue_name(input)?;
            let s = lock(&queues.state);
            let q = s
                .queues
                .get(&name)
                .ok_or_else(|| queue_does_not_exist(&name))?;
            let visible_now = Instant::now();
            let visible = q
                .messages
                .iter()
                .filter(|m| m.visible_at <= visible_now)
                .count();
            Ok(json!({ "Attributes": {
                "QueueArn": format!("arn:aws:sqs:{}:{ACCOUNT_ID}:{name}", aws.region()),
                "ApproximateNumberOfMessages": visible.to_string(),
                "ApproximateNumberOfMessagesNotVisible": (q.messages.len() - visible).to_string(),
                "VisibilityTimeout": q.visibility_timeout.as_secs().to_string(),
                "CreatedTimestamp": q.created.to_string(),
            }}))
        }
        "SendMessage" => {
            let name = queue_name(input)?;
            if queues.message_count(&name).is_none() {
                return Err(queue_does_not_exist(&name));
            }
            let body = input["MessageBody"]
                .as_str()
                .ok_or_else(|| {
                    AwsError::client(
                        "MissingParameter",
                        "The request must contain the parameter MessageBody.",
                    )
                })?
                .to_string();
            let delay = seconds(input, "DelaySeconds", 900)?.unwrap_or_default();
            let md5 = hex(&Md5::digest(body.as_bytes()));
            let id = queues.send_delayed(&name, body, now, delay);
            Ok(json!({ "MessageId": id, "MD5OfMessageBody": md5 }))
        }
        "ReceiveMessage" => {
            let name = queue_name(input)?;
            let max = match &input["MaxNumberOfMessages"] {
                Value::Null => 1,
                v => match v.as_u64() {
                    Some(n @ 1..=10) => n as usize,
                    _ => {
                        return Err(AwsError::client(
                            "InvalidParameterValue",
                            format!(
                                "Value {v} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."
                            ),
                        ));
                    }
                },
            };
            let wait = seconds(input, "WaitTimeSeconds", MAX_WAIT.as_secs())?.unwrap_or_default();
            let hide = seconds(input, "VisibilityTimeout", 43_200)?;
            let deadline = Instant::now() + wait;
            loop {
                let arrived = queues.arrived.notified();
                let got = queues
                    .receive_now(&name, max, hide)
                    .ok_or_else(|| queue_does_not_exist(&name))?;
                let now = Instant::now();
                if !got.is_empty() || now >= deadline {
                    return Ok(json!({ "Messages": got }));
                }
                // Woken by a new message, or every 100 ms for messages becoming visible again.
                let _ = tokio::time::timeout_at(
                    deadline.min(now + Duration::from_millis(100)),
                    arrived,
                )
                .await;
            }
        }
        "DeleteMessage" => {
            let name = queue_name(input)?;
            let handle = input["ReceiptHandle"].as_str().unwrap_or_default();
            if !handle.starts_with("rh-") {
                return Err(AwsError::client(
                    "ReceiptHandleIsInvalid",
                    format!("The input receipt handle \"{handle}\" is not a valid receipt handle."),
                ));
            }
            let mut s = lock(&queues.state);
            let q = s
                .queues
                .get_mut(&name)
                .ok_or_else(|| queue_does_not_exist(&name))?;
            // Deleting an already deleted message succeeds, as on SQS.
            q.messages.retain(|m| m.receipt.as_deref() != Some(handle));
            Ok(json!({}))
        }
        "PurgeQueue" => {
            let name = queue_name(input)?;
            let mut s = lock(&queues.state);
            let q = s
                .queues
                .get_mut(&name)
                .ok_or_else(|| queue_does_not_exist(&name))?;
            q.messages.clear();
            Ok(json!({}))
        }
        other => Err(AwsError::client(
            "UnsupportedOperation",
            format!(
                "AmazonSQS.{other}: the simulator serves CreateQueue, GetQueueUrl, ListQueues, GetQueueAttributes, SendMessage, ReceiveMessage, DeleteMessage and PurgeQueue"
            ),
        )),
    }
}
