//! Leader election through a `coordination.k8s.io/v1` Lease, for more than one watcher
//! replica: only the leader streams to the planners and writes feedback; the others keep
//! their informers synced so that a take-over starts from a warm mirror.
//!
//! The Lease is taken when it is absent, held by this replica, or not renewed for its
//! duration; every write carries the resourceVersion read, so two replicas racing for an
//! expired Lease cannot both win (the loser gets 409 Conflict).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;

use service_shell::clock::Clock;

/// Why one attempt to take or renew the Lease failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API refused or failed the request.
    #[error("lease {name}: {source}")]
    Kube {
        /// The Lease, `namespace/name`.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Settings of the election.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica.
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews (and others retry).
    pub retry_every: Duration,
}

impl Settings {
    /// The defaults: Lease `dovetail-watcher`, 15 s, renewed every 2 s.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: "dovetail-watcher".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            retry_every: Duration::from_secs(2),
        }
    }
}

fn micro(secs: i64) -> MicroTime {
    MicroTime(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// One attempt: true when this replica holds the Lease afterwards.
///
/// # Errors
/// [`Error::Kube`] when the Lease cannot be read or written for a reason other than losing a
/// race.
pub async fn try_acquire(api: &Api<Lease>, s: &Settings, clock: Clock) -> Result<bool, Error> {
    let err = |source| Error::Kube {
        name: common::key::namespaced(&s.namespace, &s.name),
        source,
    };
    let now = clock.now_secs();
    let secs = i32::try_from(s.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let current = api.get_opt(&s.name).await.map_err(err)?;
    let Some(mut lease) = current else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(s.name.clone()),
                namespace: Some(s.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(s.identity.clone()),
                lease_duration_seconds: Some(secs),
                acquire_time: Some(micro(now)),
                renew_time: Some(micro(now)),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(err(e)),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let renewed = spec.renew_time.as_ref().map_or(0, |t| t.0.as_second());
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(secs));
    let mine = holder == s.identity;
    let expired = holder.is_empty() || renewed + duration < now;
    if !mine && !expired {
        return Ok(false);
    }
    if !mine {
        spec.holder_identity = Some(s.identity.clone());
        spec.acquire_time = Some(micro(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.lease_duration_seconds = Some(secs);
    spec.renew_time = Some(micro(now));
    // `replace` sends the resourceVersion read above: a concurrent writer makes this a 409.
    match api.replace(&s.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(err(e)),
    }
}

/// Runs the election until `stop` turns true, publishing whether this replica leads. A
/// leader that cannot renew for the Lease duration steps down.
pub async fn run(
    client: kube::Client,
    s: Settings,
    clock: Clock,
    leading: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &s.namespace);
    let mut last_ok = tokio::time::Instant::now();
    loop {
        match try_acquire(&api, &s, clock.clone()).await {
            Ok(held) => {
                last_ok = tokio::time::Instant::now();
                if leading.send_if_modified(|l| std::mem::replace(l, held) != held) {
                    tracing::info!(identity = %s.identity, leading = held, "Leadership changed");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "Lease update failed");
                if last_ok.elapsed() >= s.lease_duration
                    && leading.send_if_modified(|l| std::mem::replace(l, false))
                {
                    tracing::warn!(identity = %s.identity, "Stepped down: the Lease could not be renewed");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(s.retry_every) => {}
            _ = crate::when(&mut stop, true) => break,
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        match release(&api, &s).await {
            Ok(()) => tracing::info!(identity = %s.identity, "Lease released"),
            Err(e) => tracing::warn!(error = %e, "Cannot release the Lease; it expires on its own"),
        }
    }
}

/// Gives the Lease up (empty holder) so that another replica takes over without waiting for
/// it to expire.
///
/// # Errors
/// [`Error::Kube`] when the Lease cannot be read or written (a conflict means someone else
/// holds it already, which is fine).
pub async fn release(api: &Api<Lease>, s: &Settings) -> Result<(), Error> {
    let err = |source| Error::Kube {
        name: common::key::namespaced(&s.namespace, &s.name),
        source,
    };
    let Some(mut lease) = api.get_opt(&s.name).await.map_err(err)? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(s.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    match api.replace(&s.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(err(e)),
    }
}
