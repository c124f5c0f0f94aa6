//! Reflectors: one kube-runtime `watcher` per kind, with the default backoff, feeding the
//! compact [`Mirror`].
//!
//! Each informer is the state machine of kube's `reflector`, storing compact forms instead of
//! whole objects: `Init` starts a (re)list, `InitApply` objects are upserted as they arrive and
//! their keys collected, `InitDone` removes whatever the list did not return (objects deleted
//! while the watch was down or after a 410 Gone) and, the first time, marks the kind synced.
//! `Apply` and `Delete` are applied as they come. Errors are logged and counted; the watcher
//! re-watches from its last version or relists on its own after a backoff.
//!
//! Memory: pods are watched without finished ones (a field selector on `status.phase`),
//! namespaces metadata-only, and every object is dropped as soon as its compact form is
//! taken.

mod buffers;
mod kinds;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::watcher;
use proto::v1::upsert::Object;
use tokio::sync::mpsc;

pub use kinds::{DRA, NAMES, NODE_OVERLAYS, Options, karpenter_resource, names, spawn_all};

use crate::metrics::Metrics;
use crate::mirror::{Applied, Kind, Mirror};

/// Why an object was not mirrored: it can never be planned as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace (empty for cluster-scoped kinds).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Why, naming the field.
    pub reason: String,
}

/// What a converter made of one object.
#[derive(Debug)]
pub enum Converted {
    /// Mirror this compact form.
    Keep(Box<Object>),
    /// Not for the planner (e.g. a pod nobody will provision for); removed if it was mirrored.
    Skip,
    /// Cannot be planned; removed if it was mirrored and reported once.
    Invalid(crate::convert::Error),
}

pub use crate::readiness::Readiness;

/// What every informer writes to.
#[derive(Clone, Debug)]
pub struct Sinks {
    /// The mirror.
    pub mirror: Mirror,
    /// Sync tracking.
    pub readiness: Arc<Readiness>,
    /// Metrics.
    pub metrics: Metrics,
    /// Objects that cannot be planned, for Events and status.
    pub invalid: mpsc::UnboundedSender<Invalid>,
}

/// The key of an object by its metadata, as [`crate::mirror::key`] computes it from the
/// compact form.
pub fn meta_key<K: Resource>(o: &K) -> String {
    let m = o.meta();
    common::key::object(
        m.uid.as_deref().unwrap_or_default(),
        m.namespace.as_deref(),
        m.name.as_deref().unwrap_or_default(),
    )
}

/// Runs one informer until its stream ends: applies every event to the mirror.
pub async fn reflect<K, S, C>(
    name: &'static str,
    kind: Kind,
    stream: S,
    sinks: Sinks,
    mut convert: C,
) where
    K: Resource + Debug,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    C: FnMut(&K) -> Converted,
{
    let mut stream = std::pin::pin!(stream);
    let mut listed: Option<BTreeSet<String>> = None;
    let mut apply = |o: &K, listed: &mut Option<BTreeSet<String>>| {
        let key = meta_key(o);
        match convert(o) {
            Converted::Keep(obj) => {
                let applied = sinks.mirror.update(|s| s.upsert(*obj));
                if applied == Applied::NewPending {
                    tracing::debug!(%key, "Pod pending");
                }
                if let Some(l) = listed {
                    l.insert(key);
                }
            }
            Converted::Skip => {
                sinks.mirror.update(|s| s.delete(kind, &key));
            }
            Converted::Invalid(e) => {
                sinks.mirror.update(|s| s.delete(kind, &key));
                let m = o.meta();
                let _ = sinks.invalid.send(Invalid {
                    kind,
                    namespace: m.namespace.clone().unwrap_or_default(),
                    name: m.name.clone().unwrap_or_default(),
                    uid: m.uid.clone().unwrap_or_default(),
                    reason: e.to_string(),
                });
            }
        }
    };
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listed = Some(BTreeSet::new()),
            Ok(watcher::Event::InitApply(o)) => apply(&o, &mut listed),
            Ok(watcher::Event::InitDone) => {
                let seen = listed.take().unwrap_or_default();
                let gone = sinks.mirror.update(|s| s.retain(kind, &seen));
                sinks
                    .metrics
                    .relists
                    .get_or_create(&Metrics::kind(name))
                    .inc();
                tracing::debug!(informer = name, objects = seen.len(), gone, "Listed");
                sinks.readiness.mark(name);
            }
            Ok(watcher::Event::Apply(o)) => apply(&o, &mut None),
            Ok(watcher::Event::Delete(o)) => {
                let key = meta_key(&o);
                sinks.mirror.update(|s| s.delete(kind, &key));
            }
            Err(e) => {
                sinks
                    .metrics
                    .watch_errors
                    .get_or_create(&Metrics::kind(name))
                    .inc();
                tracing::warn!(informer = name, error = %e, "Watch failed; retrying after a backoff");
            }
        }
    }
}
