//! [`SqsQueue`]: `cloud::InterruptionQueue` over SQS.
//!
//! ReceiveMessage long-polls ([`WAIT`], up to [`MAX_MESSAGES`] a call), so an idle queue costs
//! three calls a minute; each body is parsed by [`super::messages::parse`]. Delivery is at least
//! once: a message comes back after its visibility timeout until DeleteMessage removes it, and
//! deleting a handle twice succeeds (SQS answers a stale handle of a deleted message without
//! error; moto too). Errors become `cloud::Error`s through [`crate::error::from_sdk`].

use std::time::Duration;

use async_trait::async_trait;
use cloud::{Error, InterruptionEvent, InterruptionQueue, Message, Result};

use crate::config::Config;
use crate::error::from_sdk;

/// How long one ReceiveMessage waits for a message (SQS's maximum).
pub const WAIT: Duration = Duration::from_secs(20);
/// How many messages one ReceiveMessage returns at most (SQS's maximum).
pub const MAX_MESSAGES: usize = 10;

/// The interruption queue.
#[derive(Clone, Debug)]
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
    wait: Duration,
}

/// True when `queue` is a queue URL rather than a name.
pub fn is_url(queue: &str) -> bool {
    queue.starts_with("https://") || queue.starts_with("http://")
}

// === impl SqsQueue ===

impl SqsQueue {
    /// The queue `queue` (a name, resolved with GetQueueUrl, or a URL used as given) in the
    /// region and through the endpoint of `config`.
    ///
    /// # Errors
    /// `NotFound` when no queue has that name; `InvalidRequest` for an empty name; what
    /// GetQueueUrl fails with otherwise (`Unavailable`, `Throttled`).
    pub async fn new(config: &Config, queue: &str) -> Result<Self> {
        let sdk = config.sdk_config().await;
        Self::from_client(aws_sdk_sqs::Client::new(&sdk), queue).await
    }

    /// The queue `queue` (name or URL) through `client`.
    ///
    /// # Errors
    /// As [`SqsQueue::new`].
    pub async fn from_client(client: aws_sdk_sqs::Client, queue: &str) -> Result<Self> {
        let queue = queue.trim();
        if queue.is_empty() {
            return Err(Error::InvalidRequest {
                reason: "interruption queue: empty name".into(),
            });
        }
        let url = if is_url(queue) {
            queue.to_string()
        } else {
            let what = format!("GetQueueUrl {queue}");
            match client.get_queue_url().queue_name(queue).send().await {
                Ok(out) => {
                    out.queue_url()
                        .map(str::to_string)
                        .ok_or_else(|| Error::Unavailable {
                            message: format!("{what}: no URL in the answer"),
                        })?
                }
                Err(e) => {
                    let code = aws_sdk_sqs::error::ProvideErrorMetadata::code(&e);
                    if matches!(
                        code,
                        Some(
                            "AWS.SimpleQueueService.NonExistentQueue"
                                | "QueueDoesNotExist"
                                | "QueueDoesNotExistException"
                        )
                    ) || e
                        .as_service_error()
                        .is_some_and(|s| s.is_queue_does_not_exist())
                    {
                        return Err(Error::NotFound {
                            provider_id: format!("SQS queue {queue}"),
                        });
                    }
                    return Err(from_sdk(&what, &e, &[]));
                }
            }
        };
        Ok(Self {
            client,
            url,
            wait: WAIT,
        })
    }

    /// Sets how long a receive waits for messages (tests shorten it; SQS allows 0–20 s).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait.min(WAIT);
        self
    }

    /// The queue URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The SQS client (tests send messages with it).
    pub fn client(&self) -> &aws_sdk_sqs::Client {
        &self.client
    }
}

#[async_trait]
impl InterruptionQueue for SqsQueue {
    /// SQS messages name an instance, not its zone, so they cannot become
    /// [`InterruptionEvent`]s (whose provider ID has a zone): read
    /// [`InterruptionQueue::receive_messages`] instead.
    async fn receive(&self, _max: usize) -> Result<Vec<InterruptionEvent>> {
        Err(Error::InvalidRequest {
            reason: format!(
                "SQS queue {}: messages name instances without their zone; use receive_messages",
                self.url
            ),
        })
    }

    async fn delete(&self, receipt_handle: &str) -> Result<()> {
        let what = format!("DeleteMessage {}", self.url);
        match self
            .client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                // A handle that is no longer valid (the message is gone, or received again
                // since) leaves nothing to delete by us: the next delivery is handled again,
                // harmlessly.
                let code = aws_sdk_sqs::error::ProvideErrorMetadata::code(&e);
                if matches!(
                    code,
                    Some("ReceiptHandleIsInvalid" | "InvalidParameterValue")
                ) {
                    tracing::debug!(error = ?code, "Receipt handle no longer valid");
                    return Ok(());
                }
                Err(from_sdk(&what, &e, &[]))
            }
        }
    }

    async fn receive_messages(&self, max: usize) -> Result<Vec<Message>> {
        let what = format!("ReceiveMessage {}", self.url);
        let max = max.clamp(1, MAX_MESSAGES);
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(i32::try_from(max).unwrap_or(10))
            .wait_time_seconds(i32::try_from(self.wait.as_secs()).unwrap_or(20))
            .send()
            .await
            .map_err(|e| from_sdk(&what, &e, &[]))?;
        Ok(out
            .messages()
            .iter()
            .filter_map(|m| {
                // Without a handle a message cannot be deleted; SQS always sends one.
                let receipt_handle = m.receipt_handle()?.to_string();
                Some(Message {
                    id: m.message_id().unwrap_or_default().to_string(),
                    receipt_handle,
                    content: super::messages::parse(m.body().unwrap_or_default()),
                })
            })
            .collect())
    }
}
