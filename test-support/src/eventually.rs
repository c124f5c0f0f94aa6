//! Waiting for a condition that other tasks or processes make true: the one poll-until loop of
//! the tests.
//!
//! [`eventually`] checks, and while the check says "not yet" sleeps `every` and checks again,
//! until `timeout` has passed since the start; the check always runs at least once and once
//! more after the deadline is reached, so a slow check never loses its last chance. A check
//! says "not yet" by returning `None`, `false` or an `Err` (whose text the timeout reports as
//! the last observation). Conditions that have a change signal to wait on (a `Notify`, a
//! `watch` channel) wait on it instead of polling.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// What one check observed: a value, or why the condition does not hold yet.
pub trait Outcome {
    /// What the wait returns once the condition holds.
    type Value;

    /// The value, or a description of what the check saw.
    ///
    /// # Errors
    /// When the condition does not hold yet.
    fn into_outcome(self) -> Result<Self::Value, String>;
}

impl<T> Outcome for Option<T> {
    type Value = T;

    fn into_outcome(self) -> Result<T, String> {
        self.ok_or_else(|| String::from("not yet"))
    }
}

impl Outcome for bool {
    type Value = ();

    fn into_outcome(self) -> Result<(), String> {
        if self {
            Ok(())
        } else {
            Err(String::from("false"))
        }
    }
}

impl<T, E: Display> Outcome for Result<T, E> {
    type Value = T;

    fn into_outcome(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// A condition that did not hold within its timeout.
#[derive(Debug)]
pub struct TimedOut {
    what: String,
    timeout: Duration,
    last: String,
}

impl Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timed out after {:?} waiting for {}: last saw {}",
            self.timeout, self.what, self.last
        )
    }
}

impl std::error::Error for TimedOut {}

/// Runs `check` every `every` until it yields a value, for at most `timeout`.
///
/// # Errors
/// [`TimedOut`], naming `what` and the last observation, when `check` still says "not yet"
/// at the deadline.
pub async fn try_eventually<O, F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: F,
) -> Result<O::Value, TimedOut>
where
    O: Outcome,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match check().await.into_outcome() {
            Ok(v) => return Ok(v),
            Err(last) => last,
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(TimedOut {
                what: what.to_owned(),
                timeout,
                last,
            });
        }
        tokio::time::sleep(every).await;
    }
}

/// [`try_eventually`] for tests that fail by panicking.
///
/// # Panics
/// When `check` still says "not yet" at the deadline, naming `what` and the last observation.
pub async fn eventually<O, F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    check: F,
) -> O::Value
where
    O: Outcome,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    try_eventually(what, timeout, every, check)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits until `check` holds, checking again each time `signal` is notified: for a condition
/// whose changes come with a signal to wait on (no clock, no polling). A notification between
/// a check and the wait is not lost.
pub async fn when_notified<O: Outcome>(
    signal: &tokio::sync::Notify,
    mut check: impl FnMut() -> O,
) -> O::Value {
    loop {
        let notified = signal.notified();
        if let Ok(v) = check().into_outcome() {
            return v;
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_until_the_check_holds() {
        let mut n = 0;
        let v = eventually(
            "n to reach 3",
            Duration::from_secs(1),
            Duration::from_millis(10),
            || {
                n += 1;
                let seen = n;
                async move { (seen >= 3).then_some(seen) }
            },
        )
        .await;
        assert_eq!(v, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_names_what_and_the_last_observation() {
        let e = try_eventually(
            "the moon",
            Duration::from_secs(1),
            Duration::from_millis(100),
            || async { Err::<(), _>("still a cheese") },
        )
        .await
        .expect_err("never holds");
        let text = e.to_string();
        assert!(
            text.contains("the moon") && text.contains("still a cheese"),
            "{text}"
        );
    }
}
