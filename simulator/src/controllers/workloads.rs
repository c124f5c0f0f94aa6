//! Workload controllers enough for a demo: Deployments (through ReplicaSets, as on a real
//! cluster, with the Recreate strategy on template changes) scale pods to their replica count,
//! DaemonSets run one pod on every Ready node whose labels match the pod's `nodeSelector` and
//! whose taints it tolerates, and PodDisruptionBudgets get their status (`disruptionsAllowed`,
//! ...) kept current.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::{Value, json};

use super::{Ctx, kind, name_of, namespace_of};
use crate::api::Subresource;
use crate::api::eviction::{self, pod_is_healthy, pod_is_terminal};
use crate::api::server::set_condition;

/// Converges every Deployment, ReplicaSet and PodDisruptionBudget.
pub(crate) fn reconcile(ctx: &Ctx) {
    deployments(ctx);
    replica_sets(ctx);
    daemon_sets(ctx);
    pdbs(ctx);
}

fn owned_by<'a>(objs: &'a [Value], owner: &Value) -> impl Iterator<Item = &'a Value> {
    let uid = owner["metadata"]["uid"].clone();
    let ns = owner["metadata"]["namespace"].clone();
    objs.iter().filter(move |o| {
        o["metadata"]["namespace"] == ns
            && o["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|r| r["uid"] == uid))
    })
}

fn owner_ref(owner: &Value, api_version: &str, kind: &str) -> Value {
    json!([{
        "apiVersion": api_version,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    }])
}

fn template_hash(template: &Value) -> String {
    let mut h = DefaultHasher::new();
    template.to_string().hash(&mut h);
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = h.finish();
    (0..10)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn deployments(ctx: &Ctx) {
    let store = &ctx.store;
    let (Some(dk), Some(rk)) = (
        kind(store, "apps", "deployments"),
        kind(store, "apps", "replicasets"),
    ) else {
        return;
    };
    let rss = store.all(&rk.key());
    for d in store.all(&dk.key()) {
        if !d["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let ns = namespace_of(&d).to_string();
        let hash = template_hash(&d["spec"]["template"]);
        let rs_name = format!("{}-{hash}", name_of(&d));
        let replicas = d["spec"]["replicas"].as_i64().unwrap_or(1);
        let mut current = None;
        for rs in owned_by(&rss, &d) {
            if name_of(rs) == rs_name {
                current = Some(rs.clone());
            } else {
                let _ = store.delete(&rk, &ns, name_of(rs), None);
            }
        }
        let mut template = d["spec"]["template"].clone();
        template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
        let mut selector = d["spec"]["selector"].clone();
        if selector["matchLabels"].is_object() {
            selector["matchLabels"]["pod-template-hash"] = json!(hash);
        }
        let desired_rs = json!({
            "metadata": {
                "name": rs_name,
                "namespace": ns,
                "labels": template["metadata"]["labels"],
                "ownerReferences": owner_ref(&d, "apps/v1", "Deployment"),
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template},
        });
        let rs = match current {
            None => store.create(&rk, &ns, desired_rs).ok(),
            Some(_) => store
                .mutate(&rk, &ns, &rs_name, Subresource::Main, |o| {
                    let changed = o["spec"]["replicas"] != json!(replicas);
                    o["spec"]["replicas"] = json!(replicas);
                    Ok(changed)
                })
                .ok(),
        };
        let status = rs.map(|rs| rs["status"].clone()).unwrap_or_default();
        let generation = d["metadata"]["generation"].clone();
        let _ = store.mutate(&dk, &ns, name_of(&d), Subresource::Status, |o| {
            let before = o["status"].clone();
            for f in ["replicas", "readyReplicas", "availableReplicas"] {
                o["status"][f] = status.get(f).cloned().unwrap_or(json!(0));
            }
            o["status"]["updatedReplicas"] = o["status"]["replicas"].clone();
            o["status"]["observedGeneration"] = generation.clone();
            Ok(o["status"] != before)
        });
    }
}

fn replica_sets(ctx: &Ctx) {
    let store = &ctx.store;
    let (Some(rk), Some(pk)) = (kind(store, "apps", "replicasets"), kind(store, "", "pods")) else {
        return;
    };
    let pods = store.all(&pk.key());
    for rs in store.all(&rk.key()) {
        if !rs["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let ns = namespace_of(&rs).to_string();
        let replicas = rs["spec"]["replicas"].as_i64().unwrap_or(1).max(0) as usize;
        let mut mine: Vec<&Value> = owned_by(&pods, &rs)
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && !pod_is_terminal(p))
            .collect();
        if mine.len() < replicas {
            let template = &rs["spec"]["template"];
            for _ in mine.len()..replicas {
                let mut meta = template["metadata"].clone();
                if !meta.is_object() {
                    meta = json!({});
                }
                meta["generateName"] = json!(format!("{}-", name_of(&rs)));
                meta["namespace"] = json!(ns);
                meta["ownerReferences"] = owner_ref(&rs, "apps/v1", "ReplicaSet");
                let pod = json!({"metadata": meta, "spec": template["spec"]});
                if let Err(e) = store.create(&pk, &ns, pod) {
                    tracing::warn!(replicaset = name_of(&rs), error = %e, "Creating a pod failed");
                    break;
                }
            }
        } else if mine.len() > replicas {
            // Delete the least useful pods first: unscheduled, then pending, then newest.
            mine.sort_by_key(|p| {
                (
                    !p["spec"]["nodeName"].as_str().is_none_or(str::is_empty),
                    p["status"]["phase"] != "Pending",
                    std::cmp::Reverse(
                        p["metadata"]["creationTimestamp"]
                            .as_str()
                            .unwrap_or("")
                            .to_string(),
                    ),
                )
            });
            for p in &mine[..mine.len() - replicas] {
                let _ = store.delete(&pk, &ns, name_of(p), None);
            }
        }
        let pods_now = store.all(&pk.key());
        let live: Vec<&Value> = owned_by(&pods_now, &rs)
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && !pod_is_terminal(p))
            .collect();
        let ready = live.iter().filter(|p| pod_is_healthy(p)).count();
        let (n, generation) = (live.len(), rs["metadata"]["generation"].clone());
        let _ = store.mutate(&rk, &ns, name_of(&rs), Subresource::Status, |o| {
            let next = json!({
                "replicas": n, "readyReplicas": ready, "availableReplicas": ready,
                "fullyLabeledReplicas": n, "observedGeneration": generation,
            });
            let changed = o["status"] != next;
            o["status"] = next;
            Ok(changed)
        });
    }
}

/// Whether a pod with `tolerations` tolerates `taint` (Kubernetes toleration semantics).
pub(crate) fn tolerates(tolerations: &Value, taint: &Value) -> bool {
    tolerations.as_array().is_some_and(|ts| {
        ts.iter().any(|t| {
            let key = t["key"].as_str().unwrap_or("");
            let exists = t["operator"] == "Exists";
            let key_ok = (key.is_empty() && exists) || key == taint["key"].as_str().unwrap_or("");
            let value_ok = exists
                || t["value"].as_str().unwrap_or("") == taint["value"].as_str().unwrap_or("");
            let effect = t["effect"].as_str().unwrap_or("");
            key_ok
                && value_ok
                && (effect.is_empty() || effect == taint["effect"].as_str().unwrap_or(""))
        })
    })
}

/// Whether a DaemonSet pod template belongs on `node`.
fn daemon_fits(template: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let selector_ok = template["spec"]["nodeSelector"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let tolerations = &template["spec"]["tolerations"];
    let taints_ok = node["spec"]["taints"].as_array().is_none_or(|ts| {
        ts.iter()
            .filter(|t| t["effect"] == "NoSchedule" || t["effect"] == "NoExecute")
            // DaemonSet pods tolerate these automatically.
            .filter(|t| {
                !t["key"].as_str().is_some_and(|k| {
                    k.starts_with("node.kubernetes.io/") && k != "node.kubernetes.io/out-of-service"
                })
            })
            .all(|t| tolerates(tolerations, t))
    });
    selector_ok && taints_ok
}

fn daemon_sets(ctx: &Ctx) {
    let store = &ctx.store;
    let (Some(dk), Some(pk), Some(nk)) = (
        kind(store, "apps", "daemonsets"),
        kind(store, "", "pods"),
        kind(store, "", "nodes"),
    ) else {
        return;
    };
    let pods = store.all(&pk.key());
    let nodes: Vec<Value> = store
        .all(&nk.key())
        .into_iter()
        .filter(|n| super::kubelet::node_ready(n) && n["metadata"]["deletionTimestamp"].is_null())
        .collect();
    for ds in store.all(&dk.key()) {
        if !ds["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let ns = namespace_of(&ds).to_string();
        let template = &ds["spec"]["template"];
        let mine: Vec<&Value> = owned_by(&pods, &ds)
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        let mut desired = 0;
        for node in &nodes {
            let node_name = name_of(node);
            let here: Vec<&&Value> = mine
                .iter()
                .filter(|p| p["spec"]["nodeName"] == node_name)
                .collect();
            if !daemon_fits(template, node) {
                for p in here {
                    let _ = store.delete(&pk, &ns, name_of(p), None);
                }
                continue;
            }
            desired += 1;
            if here.is_empty() {
                let mut meta = template["metadata"].clone();
                if !meta.is_object() {
                    meta = json!({});
                }
                meta["generateName"] = json!(format!("{}-", name_of(&ds)));
                meta["namespace"] = json!(ns);
                meta["ownerReferences"] = owner_ref(&ds, "apps/v1", "DaemonSet");
                let mut spec = template["spec"].clone();
                spec["nodeName"] = json!(node_name);
                if let Err(e) = store.create(&pk, &ns, json!({"metadata": meta, "spec": spec})) {
                    tracing::warn!(daemonset = name_of(&ds), error = %e, "Creating a pod failed");
                }
            }
        }
        let pods_now = store.all(&pk.key());
        let live: Vec<&Value> = owned_by(&pods_now, &ds)
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        let ready = live.iter().filter(|p| pod_is_healthy(p)).count();
        let (n, generation) = (live.len(), ds["metadata"]["generation"].clone());
        let _ = store.mutate(&dk, &ns, name_of(&ds), Subresource::Status, |o| {
            let next = json!({
                "currentNumberScheduled": n, "desiredNumberScheduled": desired, "numberMisscheduled": 0,
                "numberReady": ready, "numberAvailable": ready, "updatedNumberScheduled": n,
                "observedGeneration": generation,
            });
            let changed = o["status"] != next;
            o["status"] = next;
            Ok(changed)
        });
    }
}

fn pdbs(ctx: &Ctx) {
    let store = &ctx.store;
    let (Some(bk), Some(pk)) = (
        kind(store, "policy", "poddisruptionbudgets"),
        kind(store, "", "pods"),
    ) else {
        return;
    };
    let pods = store.all(&pk.key());
    let stamp = store.clock().rfc3339();
    for pdb in store.all(&bk.key()) {
        let b = eviction::budget(&pdb, &pods);
        let generation = pdb["metadata"]["generation"].clone();
        let _ = store.mutate(
            &bk,
            namespace_of(&pdb),
            name_of(&pdb),
            Subresource::Status,
            |o| {
                let before = o["status"].clone();
                let s = &mut o["status"];
                s["currentHealthy"] = json!(b.healthy);
                s["desiredHealthy"] = json!(b.desired);
                s["disruptionsAllowed"] = json!(b.allowed);
                s["expectedPods"] = json!(b.expected);
                s["observedGeneration"] = generation.clone();
                let (status, reason) = if b.allowed > 0 {
                    ("True", "SufficientPods")
                } else {
                    ("False", "InsufficientPods")
                };
                set_condition(
                    o,
                    "DisruptionAllowed",
                    status,
                    Some(reason),
                    Some(""),
                    &stamp,
                );
                Ok(o["status"] != before)
            },
        );
    }
}
