//! The informers, one per kind the planner reads, and the PriorityClass informer that pod
//! conversion resolves priorities with.

use std::sync::{Arc, RwLock};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use proto::v1::upsert::Object;
use tokio::task::JoinHandle;

use super::{Converted, Sinks, reflect};
use crate::convert::{self, PodDisposition, PriorityClasses};
use crate::karpenter_metrics::pods::PodSeen;
use crate::mirror::Kind;

/// Informer names, as metrics label them and readiness tracks them.
pub const NAMES: [&str; 12] = [
    "priorityclasses",
    "pods",
    "nodes",
    "daemonsets",
    "poddisruptionbudgets",
    "namespaces",
    "persistentvolumeclaims",
    "persistentvolumes",
    "storageclasses",
    "nodepools",
    "nodeclaims",
    "ec2nodeclasses",
];

/// The NodeOverlay informer's name: it runs only under the `NodeOverlay` gate (Karpenter
/// watches NodeOverlays only then, and a cluster without the CRD must still sync).
pub const NODE_OVERLAYS: &str = "nodeoverlays";

/// The DRA informers' names: they run only while `ignoreDRARequests` is off (the planner
/// reads DRA objects only then, and a cluster without `resource.k8s.io/v1` must still sync).
pub const DRA: [&str; 3] = ["resourceclaims", "deviceclasses", "resourceslices"];

/// How the informers list and watch.
#[derive(Clone, Debug)]
pub struct Options {
    /// Page size of the initial lists.
    pub page_size: u32,
    /// Watch NodeOverlays (the `NodeOverlay` feature gate).
    pub node_overlays: bool,
    /// Mirror CapacityBuffers (Karpenter's `CapacityBuffer` feature gate).
    pub capacity_buffers: bool,
    /// Mirror ResourceClaims, DeviceClasses and ResourceSlices (`ignoreDRARequests` off).
    pub dra: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            page_size: 500,
            node_overlays: false,
            capacity_buffers: false,
            dra: false,
        }
    }
}

impl Options {
    /// The informers readiness waits for: [`NAMES`], [`NODE_OVERLAYS`] when NodeOverlays are
    /// watched, the CapacityBuffer informer when buffers are mirrored and [`DRA`] when DRA
    /// objects are.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = NAMES.to_vec();
        if self.node_overlays {
            names.push(NODE_OVERLAYS);
        }
        if self.capacity_buffers {
            names.push(super::buffers::NAME);
        }
        if self.dra {
            names.extend(DRA);
        }
        names
    }
}

/// The informers that run with `options` ([`Options::names`]).
pub fn names(options: &Options) -> Vec<&'static str> {
    options.names()
}

/// The API resource of a Karpenter kind (`v1`; NodeOverlay is `karpenter.sh/v1alpha1`).
pub fn karpenter_resource(group: &str, kind: &str) -> ApiResource {
    let version = if kind == "NodeOverlay" {
        "v1alpha1"
    } else {
        "v1"
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    ApiResource::from_gvk(&gvk)
}

fn keep<T>(r: convert::Result<T>, wrap: fn(T) -> Object) -> Converted {
    match r {
        Ok(x) => Converted::Keep(Box::new(wrap(x))),
        Err(e) => Converted::Invalid(e),
    }
}

fn json(o: &DynamicObject) -> serde_json::Value {
    serde_json::to_value(o).unwrap_or_default()
}

/// Starts every informer. Pods start once PriorityClasses have synced, so that their
/// priorities resolve.
pub fn spawn_all(client: kube::Client, options: &Options, sinks: Sinks) -> Vec<JoinHandle<()>> {
    let cfg = || watcher::Config::default().page_size(options.page_size);
    let classes = Arc::new(RwLock::new(PriorityClasses::default()));
    let mut tasks = Vec::new();

    {
        let (sinks, classes) = (sinks.clone(), classes.clone());
        let stream = watcher(Api::<PriorityClass>::all(client.clone()), cfg()).default_backoff();
        tasks.push(tokio::spawn(async move {
            use futures::StreamExt;
            let mut stream = std::pin::pin!(stream);
            let mut listed = Vec::new();
            while let Some(ev) = stream.next().await {
                let mut c = classes.write().unwrap_or_else(|p| p.into_inner());
                match ev {
                    Ok(watcher::Event::Init) => listed.clear(),
                    Ok(watcher::Event::InitApply(p)) => listed.push(convert::priority_class(&p)),
                    Ok(watcher::Event::InitDone) => {
                        *c = PriorityClasses::default();
                        for (n, v, d) in listed.drain(..) {
                            c.insert(n, v, d);
                        }
                        sinks.readiness.mark("priorityclasses");
                    }
                    Ok(watcher::Event::Apply(p)) => {
                        let (n, v, d) = convert::priority_class(&p);
                        c.insert(n, v, d);
                    }
                    Ok(watcher::Event::Delete(p)) => c.remove(&convert::priority_class(&p).0),
                    Err(e) => {
                        sinks.metrics.watch_errors.get_or_create(&crate::metrics::Metrics::kind("priorityclasses")).inc();
                        tracing::warn!(informer = "priorityclasses", error = %e, "Watch failed; retrying after a backoff");
                    }
                }
            }
        }));
    }
    {
        let (sinks, classes, client) = (sinks.clone(), classes.clone(), client.clone());
        // Finished pods hold no capacity and are never pending: the API server filters them.
        let cfg = cfg().fields("status.phase!=Succeeded,status.phase!=Failed");
        tasks.push(tokio::spawn(async move {
            sinks.readiness.wait_for("priorityclasses").await;
            let stream = watcher(Api::<Pod>::all(client), cfg).default_backoff();
            // Karpenter's pod latency metrics follow the pods the mirror keeps.
            let latency = sinks.metrics.karpenter.pods.clone();
            let clock = service_shell::clock::Clock::new();
            reflect("pods", Kind::Pod, stream, sinks, move |p: &Pod| {
                let c = classes.read().unwrap_or_else(|p| p.into_inner());
                let seen = PodSeen::of(p, crate::informers::meta_key(p));
                match convert::pod(p, &c) {
                    PodDisposition::Keep(p) => {
                        latency.observe(seen, clock.since_epoch().as_secs_f64());
                        Converted::Keep(Box::new(Object::Pod(*p)))
                    }
                    PodDisposition::Ignore => {
                        latency.forget(&seen.name);
                        Converted::Skip
                    }
                    PodDisposition::Invalid(e) => {
                        latency.forget(&seen.name);
                        Converted::Invalid(e)
                    }
                }
            })
            .await;
        }));
    }
    macro_rules! typed {
        ($name:literal, $kind:expr, $ty:ty, $conv:expr) => {{
            let stream = watcher(Api::<$ty>::all(client.clone()), cfg()).default_backoff();
            tasks.push(tokio::spawn(reflect(
                $name,
                $kind,
                stream,
                sinks.clone(),
                $conv,
            )));
        }};
    }
    typed!("nodes", Kind::Node, Node, |n: &Node| keep(
        convert::node(n),
        Object::Node
    ));
    {
        let classes = classes.clone();
        typed!(
            "daemonsets",
            Kind::DaemonSet,
            DaemonSet,
            move |d: &DaemonSet| {
                let c = classes.read().unwrap_or_else(|p| p.into_inner());
                keep(convert::daemon_set(d, &c), Object::DaemonSet)
            }
        );
    }
    typed!(
        "poddisruptionbudgets",
        Kind::Pdb,
        PodDisruptionBudget,
        |p: &PodDisruptionBudget| keep(convert::pdb(p), Object::Pdb)
    );
    typed!(
        "persistentvolumeclaims",
        Kind::Pvc,
        PersistentVolumeClaim,
        |c: &PersistentVolumeClaim| { Converted::Keep(Box::new(Object::Pvc(convert::pvc(c)))) }
    );
    typed!(
        "persistentvolumes",
        Kind::Pv,
        PersistentVolume,
        |v: &PersistentVolume| keep(convert::pv(v), Object::Pv)
    );
    typed!(
        "storageclasses",
        Kind::StorageClass,
        StorageClass,
        |c: &StorageClass| keep(convert::storage_class(c), Object::StorageClass)
    );
    {
        // Namespace labels are all the planner reads: a metadata-only watch.
        let stream = watcher(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            cfg(),
        )
        .default_backoff();
        tasks.push(tokio::spawn(reflect(
            "namespaces",
            Kind::Namespace,
            stream,
            sinks.clone(),
            |n| Converted::Keep(Box::new(Object::Namespace(convert::namespace(&n.metadata)))),
        )));
    }
    let dynamic = |group: &str, kind: &str| {
        let ar = karpenter_resource(group, kind);
        Api::<DynamicObject>::all_with(client.clone(), &ar)
    };
    let stream = watcher(dynamic("karpenter.sh", "NodePool"), cfg()).default_backoff();
    tasks.push(tokio::spawn(reflect(
        "nodepools",
        Kind::NodePool,
        stream,
        sinks.clone(),
        |o: &DynamicObject| keep(convert::node_pool(&json(o)), Object::NodePool),
    )));
    let stream = watcher(dynamic("karpenter.sh", "NodeClaim"), cfg()).default_backoff();
    tasks.push(tokio::spawn(reflect(
        "nodeclaims",
        Kind::NodeClaim,
        stream,
        sinks.clone(),
        |o: &DynamicObject| keep(convert::node_claim(&json(o)), Object::NodeClaim),
    )));
    if options.node_overlays {
        let stream = watcher(dynamic("karpenter.sh", "NodeOverlay"), cfg()).default_backoff();
        tasks.push(tokio::spawn(reflect(
            NODE_OVERLAYS,
            Kind::NodeOverlay,
            stream,
            sinks.clone(),
            |o: &DynamicObject| keep(convert::node_overlay(&json(o)), Object::NodeOverlay),
        )));
    }
    if options.capacity_buffers {
        tasks.push(tokio::spawn(super::buffers::run(
            client.clone(),
            cfg(),
            sinks.clone(),
            classes.clone(),
        )));
    }
    if options.dra {
        let dra = |kind: &str| {
            let gvk = GroupVersionKind::gvk(convert::dra::GROUP, convert::dra::VERSION, kind);
            Api::<DynamicObject>::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
        };
        let stream = watcher(dra("ResourceClaim"), cfg()).default_backoff();
        tasks.push(tokio::spawn(reflect(
            DRA[0],
            Kind::ResourceClaim,
            stream,
            sinks.clone(),
            |o: &DynamicObject| {
                keep(
                    convert::dra::resource_claim(&json(o)),
                    Object::ResourceClaim,
                )
            },
        )));
        let stream = watcher(dra("DeviceClass"), cfg()).default_backoff();
        tasks.push(tokio::spawn(reflect(
            DRA[1],
            Kind::DeviceClass,
            stream,
            sinks.clone(),
            |o: &DynamicObject| {
                Converted::Keep(Box::new(Object::DeviceClass(convert::dra::device_class(
                    &json(o),
                ))))
            },
        )));
        let stream = watcher(dra("ResourceSlice"), cfg()).default_backoff();
        tasks.push(tokio::spawn(reflect(
            DRA[2],
            Kind::ResourceSlice,
            stream,
            sinks.clone(),
            |o: &DynamicObject| {
                keep(
                    convert::dra::resource_slice(&json(o)),
                    Object::ResourceSlice,
                )
            },
        )));
    }
    let stream = watcher(dynamic("karpenter.k8s.aws", "EC2NodeClass"), cfg()).default_backoff();
    tasks.push(tokio::spawn(reflect(
        "ec2nodeclasses",
        Kind::NodeClass,
        stream,
        sinks,
        |o: &DynamicObject| keep(convert::node_class(&json(o)), Object::NodeClass),
    )));
    tasks
}
