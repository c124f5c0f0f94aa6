//! The simulated kubelet (plus the node-lifecycle part of the cloud controller manager): a Node
//! for every running cloud instance, registered after a delay and Ready after another, removed
//! when the instance terminates; pods bound to a Ready node start Running and Ready at once.

use std::collections::HashMap;
use std::time::Duration;

use cloud::{Instance, InstanceState, TAG_NODECLAIM, TAG_NODECLASS, TAG_NODEPOOL};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{Ctx, kind, name_of, namespace_of};
use crate::api::Subresource;
use crate::api::server::set_condition;
use crate::instance_types::allocatable;
use crate::labels;
use crate::resources::Resources;

/// The taint a Node carries until it is Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Kubelet timings.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// From the instance running to the Node object existing.
    pub register_after: Duration,
    /// From registration to the Node being Ready.
    pub ready_after: Duration,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            register_after: Duration::from_secs(3),
            ready_after: Duration::from_secs(2),
        }
    }
}

/// The kubelet's memory of when it saw instances run and nodes register.
#[derive(Debug, Default)]
pub(crate) struct Kubelet {
    config: KubeletConfig,
    running_since: HashMap<String, Instant>,
    registered_at: HashMap<String, Instant>,
}

// === impl Kubelet ===

impl Kubelet {
    pub(crate) fn new(config: KubeletConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// Converges Nodes and pod phases; returns when it next needs to run (a pending delay).
    pub(crate) fn reconcile(&mut self, ctx: &Ctx) -> Option<Instant> {
        let store = &ctx.store;
        let (Some(nodes_kind), Some(pods_kind)) =
            (kind(store, "", "nodes"), kind(store, "", "pods"))
        else {
            return None;
        };
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        let mut wake_at = |t: Instant| wake = Some(wake.map_or(t, |w: Instant| w.min(t)));
        let nodes = store.all(&nodes_kind.key());
        let by_provider: HashMap<&str, &Value> = nodes
            .iter()
            .filter_map(|n| n["spec"]["providerID"].as_str().map(|p| (p, n)))
            .collect();
        let instances = ctx.cloud.instances();
        for inst in &instances {
            let pid = inst.provider_id.to_string();
            let node = by_provider.get(pid.as_str()).copied();
            match inst.state {
                InstanceState::Pending => {}
                InstanceState::Running => {
                    let since = *self.running_since.entry(inst.id.clone()).or_insert(now);
                    match node {
                        None => {
                            let at = since + self.config.register_after;
                            if at <= now {
                                let obj = self.node_object(ctx, inst);
                                if store.create(&nodes_kind, "", obj).is_ok() {
                                    self.registered_at
                                        .insert(inst.private_dns_name.clone(), now);
                                    wake_at(now + self.config.ready_after);
                                }
                            } else {
                                wake_at(at);
                            }
                        }
                        Some(n)
                            if !node_ready(n) && n["metadata"]["deletionTimestamp"].is_null() =>
                        {
                            let registered = *self
                                .registered_at
                                .entry(name_of(n).to_string())
                                .or_insert(now);
                            let at = registered + self.config.ready_after;
                            if at <= now {
                                let stamp = store.clock().rfc3339();
                                let _ = store.mutate(
                                    &nodes_kind,
                                    "",
                                    name_of(n),
                                    Subresource::Both,
                                    |n| {
                                        set_condition(
                                            n,
                                            "Ready",
                                            "True",
                                            Some("KubeletReady"),
                                            Some("kubelet is posting ready status"),
                                            &stamp,
                                        );
                                        if let Some(ts) = n["spec"]["taints"].as_array_mut() {
                                            ts.retain(|t| t["key"] != NOT_READY_TAINT);
                                        }
                                        Ok(true)
                                    },
                                );
                            } else {
                                wake_at(at);
                            }
                        }
                        Some(_) => {}
                    }
                }
                InstanceState::ShuttingDown | InstanceState::Terminated => {
                    self.running_since.remove(&inst.id);
                    if let Some(n) = node {
                        self.registered_at.remove(name_of(n));
                        if n["metadata"]["deletionTimestamp"].is_null() {
                            let _ = store.delete(&nodes_kind, "", name_of(n), None);
                        }
                    }
                }
            }
        }
        // Pods bound to a Ready node start at once; pods bound to a missing node are collected
        // (the pod garbage collector's job on a real cluster).
        let ready: HashMap<&str, &Value> = nodes
            .iter()
            .filter(|n| node_ready(n))
            .map(|n| (name_of(n), n))
            .collect();
        let exists: std::collections::HashSet<&str> = nodes.iter().map(name_of).collect();
        for pod in store.all(&pods_kind.key()) {
            let Some(node_name) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
                continue;
            };
            if !exists.contains(node_name) {
                let _ = store.delete(&pods_kind, namespace_of(&pod), name_of(&pod), None);
                continue;
            }
            let Some(node) = ready.get(node_name) else {
                continue;
            };
            if pod["status"]["phase"] == "Pending" && pod["metadata"]["deletionTimestamp"].is_null()
            {
                let stamp = store.clock().rfc3339();
                let host_ip = node["status"]["addresses"][0]["address"].clone();
                let _ = store.mutate(
                    &pods_kind,
                    namespace_of(&pod),
                    name_of(&pod),
                    Subresource::Status,
                    |p| {
                        p["status"]["phase"] = json!("Running");
                        p["status"]["startTime"] = json!(stamp);
                        p["status"]["hostIP"] = host_ip.clone();
                        p["status"]["podIP"] = host_ip.clone();
                        for c in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
                            set_condition(p, c, "True", None, None, &stamp);
                        }
                        Ok(true)
                    },
                );
            }
        }
        wake
    }

    /// The Node a kubelet on `inst` registers: labels from the instance type, offering, tags
    /// and the NodeClaim the instance was launched for; taints and startup taints from that
    /// claim; capacity and allocatable from the catalog.
    fn node_object(&self, ctx: &Ctx, inst: &Instance) -> Value {
        let mut labels_map: Map<String, Value> = Map::new();
        let mut capacity = Resources::default();
        let mut node_allocatable = Resources::default();
        let mut arch = "amd64".to_string();
        if let Some(t) = ctx.cloud.instance_type(&inst.instance_type) {
            for (k, v) in &t.labels {
                labels_map.insert(k.clone(), json!(v));
            }
            // Capacity as the catalog sells it; allocatable from the simulator's own EKS
            // formulas, not from the catalog's overhead.
            capacity = Resources {
                cpu: t.capacity.cpu,
                memory: t.capacity.memory,
                ephemeral_storage: t.capacity.ephemeral_storage,
                pods: t.capacity.pods,
                extended: t.capacity.extended.clone(),
            };
            node_allocatable = allocatable(&capacity);
            if let Some(a) = t.labels.get(labels::ARCH) {
                arch = a.clone();
            }
        }
        let mut set = |k: &str, v: &str| {
            labels_map.insert(k.to_string(), json!(v));
        };
        set(labels::INSTANCE_TYPE, &inst.instance_type);
        set("beta.kubernetes.io/instance-type", &inst.instance_type);
        set(labels::ZONE, &inst.zone);
        set("failure-domain.beta.kubernetes.io/zone", &inst.zone);
        set(labels::REGION, ctx.cloud.region());
        set(labels::CAPACITY_TYPE, inst.capacity_type.as_str());
        set(labels::ARCH, &arch);
        set("beta.kubernetes.io/arch", &arch);
        set(labels::OS, "linux");
        set("beta.kubernetes.io/os", "linux");
        set(labels::HOSTNAME, &inst.private_dns_name);
        if let Some(np) = inst.tags.get(TAG_NODEPOOL) {
            set(labels::NODEPOOL, np);
        }
        if let Some(nc) = inst.tags.get(TAG_NODECLASS) {
            set(labels::EC2_NODE_CLASS, nc);
        }
        let mut taints = vec![json!({"key": NOT_READY_TAINT, "effect": "NoSchedule"})];
        let mut annotations = Map::new();
        if let Some(claim) = inst.tags.get(TAG_NODECLAIM).and_then(|c| {
            let k = ctx.store.kinds().find("karpenter.sh", "v1", "nodeclaims")?;
            ctx.store.get(&k, "", c).ok()
        }) {
            if let Some(m) = claim["metadata"]["labels"].as_object() {
                for (k, v) in m {
                    labels_map.insert(k.clone(), v.clone());
                }
            }
            for r in claim["spec"]["requirements"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if r["operator"] == "In"
                    && let (Some(k), Some([v])) =
                        (r["key"].as_str(), r["values"].as_array().map(Vec::as_slice))
                {
                    labels_map.entry(k.to_string()).or_insert(v.clone());
                }
            }
            if let Some(m) = claim["metadata"]["annotations"].as_object() {
                for (k, v) in m {
                    if k == labels::NODEPOOL_HASH
                        || k == labels::NODECLASS_HASH
                        || k.ends_with("-hash-version")
                    {
                        annotations.insert(k.clone(), v.clone());
                    }
                }
            }
            for t in ["taints", "startupTaints"] {
                taints.extend(claim["spec"][t].as_array().into_iter().flatten().cloned());
            }
        }
        let stamp = ctx.store.clock().rfc3339();
        let mut node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": inst.private_dns_name, "labels": labels_map, "annotations": annotations},
            "spec": {"providerID": inst.provider_id.to_string(), "taints": taints},
            "status": {
                "capacity": quantities(&capacity),
                "allocatable": quantities(&node_allocatable),
                "addresses": [
                    {"type": "InternalIP", "address": inst.private_ip},
                    {"type": "Hostname", "address": inst.private_dns_name},
                    {"type": "InternalDNS", "address": inst.private_dns_name},
                ],
                "nodeInfo": {
                    "architecture": arch,
                    "operatingSystem": "linux",
                    "kubeletVersion": "v1.33.0-dovetail-simulator",
                    "kubeProxyVersion": "v1.33.0-dovetail-simulator",
                    "containerRuntimeVersion": "containerd://1.7.0",
                    "osImage": "Amazon Linux 2023 (simulated)",
                    "kernelVersion": "6.1.0",
                    "machineID": inst.id,
                    "systemUUID": inst.id,
                    "bootID": inst.id,
                },
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            },
        });
        set_condition(
            &mut node,
            "Ready",
            "False",
            Some("KubeletNotReady"),
            Some("container runtime network not ready"),
            &stamp,
        );
        node
    }
}

/// True when the Node's Ready condition is True.
pub(crate) fn node_ready(n: &Value) -> bool {
    n["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Resources as a Kubernetes resource list (`{"cpu": "2", "memory": "8Gi", "pods": "29"}`).
pub fn quantities(r: &Resources) -> Value {
    r.to_list()
}
