//! The CapacityBuffer informer (only while Karpenter's `CapacityBuffer` feature gate is on, as
//! Karpenter registers its buffer controller only then): each buffer is mirrored with the pod
//! template its reference resolves to, fetched as Karpenter's `pkg/utils/apps/resolve.go` does
//! (a PodTemplate in the buffer's namespace, or an `apps` Deployment, StatefulSet or
//! ReplicaSet). A buffer is resolved again when it changes and every [`RESOLVE_EVERY`], so a
//! changed template or workload size is seen within that (Karpenter's controller requeues every
//! 30 s).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{PodTemplate, PodTemplateSpec};
use k8s_reader::buffer::{Reference, Referent};
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use proto::v1::upsert::Object;
use serde_json::Value;

use super::{Invalid, Sinks, meta_key};
use crate::convert::PriorityClasses;
use crate::metrics::Metrics;
use crate::mirror::Kind;

/// The informer's name (metrics, readiness).
pub(super) const NAME: &str = "capacitybuffers";

/// How often every buffer's reference is fetched again.
pub(super) const RESOLVE_EVERY: Duration = Duration::from_secs(5);

/// What fetching a reference gave.
enum Fetched {
    PodTemplate(Box<PodTemplate>),
    Workload(Box<PodTemplateSpec>, Option<i32>),
    Unresolved(String),
}

async fn fetch(
    client: &kube::Client,
    namespace: &str,
    r: &Reference,
) -> Result<Fetched, kube::Error> {
    let unresolved = |e: kube::Error| match e {
        kube::Error::Api(s) => Ok(Fetched::Unresolved(s.message)),
        other => Err(other),
    };
    let c = client.clone();
    match r {
        Reference::PodTemplate(name) => {
            match Api::<PodTemplate>::namespaced(c, namespace).get(name).await {
                Ok(pt) => Ok(Fetched::PodTemplate(Box::new(pt))),
                Err(e) => unresolved(e),
            }
        }
        Reference::Workload { kind, name } => {
            let got = match kind.as_str() {
                "Deployment" => Api::<Deployment>::namespaced(c, namespace)
                    .get(name)
                    .await
                    .map(|d| d.spec.map(|s| (s.template, s.replicas))),
                "StatefulSet" => Api::<StatefulSet>::namespaced(c, namespace)
                    .get(name)
                    .await
                    .map(|d| d.spec.map(|s| (s.template, s.replicas))),
                _ => Api::<ReplicaSet>::namespaced(c, namespace)
                    .get(name)
                    .await
                    .map(|d| d.spec.map(|s| (s.template.unwrap_or_default(), s.replicas))),
            };
            match got {
                Ok(Some((t, replicas))) => Ok(Fetched::Workload(Box::new(t), replicas)),
                Ok(None) => Ok(Fetched::Unresolved(format!("{kind} {name:?} has no spec"))),
                Err(e) => unresolved(e),
            }
        }
        Reference::Unsupported(why) => Ok(Fetched::Unresolved(why.clone())),
    }
}

/// Fetches a buffer's referent and mirrors the buffer (or reports why it cannot be planned).
/// A transport error leaves the mirror as it is: the next round retries.
async fn resolve(
    client: &kube::Client,
    sinks: &Sinks,
    classes: &Arc<RwLock<PriorityClasses>>,
    key: &str,
    v: &Value,
) {
    let namespace = v
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fetched = match fetch(client, namespace, &k8s_reader::buffer::reference(v)).await {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(buffer = %key, error = %e, "Cannot fetch the CapacityBuffer's reference; retrying");
            return;
        }
    };
    let referent = match &fetched {
        Fetched::PodTemplate(pt) => Referent::PodTemplate(pt),
        Fetched::Workload(t, replicas) => Referent::Workload {
            template: t,
            replicas: *replicas,
        },
        Fetched::Unresolved(m) => Referent::Unresolved(m),
    };
    let converted = {
        let c = classes.read().unwrap_or_else(|p| p.into_inner());
        k8s_reader::buffer::capacity_buffer(v, referent, &c)
    };
    match converted {
        Ok(b) => {
            sinks.mirror.update(|s| s.upsert(Object::CapacityBuffer(b)));
        }
        Err(e) => {
            sinks.mirror.update(|s| s.delete(Kind::CapacityBuffer, key));
            let _ = sinks.invalid.send(Invalid {
                kind: Kind::CapacityBuffer,
                namespace: namespace.to_string(),
                name: v
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                uid: v
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                reason: e.to_string(),
            });
        }
    }
}

/// Runs the informer until its watch ends.
pub(super) async fn run(
    client: kube::Client,
    cfg: watcher::Config,
    sinks: Sinks,
    classes: Arc<RwLock<PriorityClasses>>,
) {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &crate::feedback::buffer_resource());
    let stream = watcher(api, cfg).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut buffers: BTreeMap<String, Value> = BTreeMap::new();
    let mut listed: Option<BTreeSet<String>> = None;
    let mut tick = tokio::time::interval(RESOLVE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = stream.next() => {
                let Some(event) = event else { return };
                match event {
                    Ok(watcher::Event::Init) => listed = Some(BTreeSet::new()),
                    Ok(watcher::Event::InitApply(o) | watcher::Event::Apply(o)) => {
                        let key = meta_key(&o);
                        let v = serde_json::to_value(&o).unwrap_or_default();
                        resolve(&client, &sinks, &classes, &key, &v).await;
                        if let Some(l) = listed.as_mut() {
                            l.insert(key.clone());
                        }
                        buffers.insert(key, v);
                    }
                    Ok(watcher::Event::InitDone) => {
                        let seen = listed.take().unwrap_or_default();
                        buffers.retain(|k, _| seen.contains(k));
                        sinks.mirror.update(|s| s.retain(Kind::CapacityBuffer, &seen));
                        sinks.metrics.relists.get_or_create(&Metrics::kind(NAME)).inc();
                        sinks.readiness.mark(NAME);
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        let key = meta_key(&o);
                        buffers.remove(&key);
                        sinks.mirror.update(|s| s.delete(Kind::CapacityBuffer, &key));
                    }
                    Err(e) => {
                        sinks.metrics.watch_errors.get_or_create(&Metrics::kind(NAME)).inc();
                        tracing::warn!(informer = NAME, error = %e, "Watch failed; retrying after a backoff");
                    }
                }
            }
            _ = tick.tick() => {
                for (key, v) in &buffers {
                    resolve(&client, &sinks, &classes, key, v).await;
                }
            }
        }
    }
}
