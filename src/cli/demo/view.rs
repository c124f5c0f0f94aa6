//! What the demo shows, in the terminal and on the web page: one [`Frame`] of the cluster as
//! read from the (simulated) Kubernetes API, the cost and lower bound over time, and the actions
//! as they happen. The observer fills a [`Board`]; the terminal and the web page read it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use common::pod_requests;
use serde::Serialize;
use serde_json::Value;

/// One node, as a box the page fills with its pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct NodeBox {
    pub(crate) name: String,
    pub(crate) instance_type: String,
    pub(crate) zone: String,
    pub(crate) capacity_type: String,
    pub(crate) pool: String,
    pub(crate) ready: bool,
    /// Cordoned or being deleted.
    pub(crate) leaving: bool,
    /// Allocatable CPU, millicores.
    pub(crate) cpu_millis: u64,
    /// CPU requested by its pods, millicores.
    pub(crate) cpu_used_millis: u64,
    /// Its pods (names, `namespace/name`).
    pub(crate) pods: Vec<String>,
    /// On-demand or spot price per hour from the catalog (0 when unknown).
    pub(crate) price: f64,
}

/// One look at the cluster.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Frame {
    /// Seconds since the demo started.
    pub(crate) t: f64,
    pub(crate) pods_total: usize,
    pub(crate) pods_pending: usize,
    pub(crate) pods_bound: usize,
    pub(crate) node_claims: usize,
    /// The NodeClaims' names (for the story; the views show the count).
    #[serde(skip)]
    pub(crate) claim_names: std::collections::BTreeSet<String>,
    pub(crate) nodes: Vec<NodeBox>,
    pub(crate) cost_per_hour: f64,
    /// The planner's proven lower bound for the current pods (None until computed).
    pub(crate) lower_bound_per_hour: Option<f64>,
}

impl Frame {
    /// Nodes counted by instance type, zone and capacity type, e.g. `m5.large: 3`.
    pub(crate) fn counts(&self) -> [BTreeMap<String, usize>; 3] {
        let mut by = [BTreeMap::new(), BTreeMap::new(), BTreeMap::new()];
        for n in &self.nodes {
            *by[0].entry(n.instance_type.clone()).or_default() += 1;
            *by[1].entry(n.zone.clone()).or_default() += 1;
            *by[2].entry(n.capacity_type.clone()).or_default() += 1;
        }
        by
    }
}

/// One thing that happened.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Action {
    pub(crate) t: f64,
    pub(crate) text: String,
}

/// The phase being played.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct PhaseView {
    pub(crate) index: usize,
    pub(crate) count: usize,
    pub(crate) name: String,
    pub(crate) goal: String,
    /// 0 to 1.
    pub(crate) progress: f64,
}

/// A point of the cost chart.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Point {
    pub(crate) t: f64,
    pub(crate) cost: f64,
    pub(crate) bound: Option<f64>,
}

/// Everything the views show; shared by the observer, the story, the terminal and the page.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Board {
    pub(crate) scenario: String,
    pub(crate) kubeconfig: String,
    pub(crate) frame: Frame,
    pub(crate) phase: PhaseView,
    pub(crate) history: Vec<Point>,
    pub(crate) actions: VecDeque<Action>,
    /// Every action, for the plain (non-TTY) output.
    #[serde(skip)]
    pub(crate) unprinted: Vec<Action>,
    pub(crate) finished: bool,
    pub(crate) summary: Option<Value>,
}

/// The shared board.
pub(crate) type SharedBoard = Arc<Mutex<Board>>;

/// Actions kept for the views.
const ACTIONS_KEPT: usize = 40;
/// Points kept for the chart.
const HISTORY_KEPT: usize = 2_000;

impl Board {
    /// Records an action.
    pub(crate) fn act(&mut self, t: f64, text: impl Into<String>) {
        let a = Action {
            t,
            text: text.into(),
        };
        self.unprinted.push(a.clone());
        self.actions.push_back(a);
        while self.actions.len() > ACTIONS_KEPT {
            self.actions.pop_front();
        }
    }

    /// Replaces the frame and extends the chart.
    pub(crate) fn set_frame(&mut self, frame: Frame) {
        self.history.push(Point {
            t: frame.t,
            cost: frame.cost_per_hour,
            bound: frame.lower_bound_per_hour,
        });
        if self.history.len() > HISTORY_KEPT {
            self.history.drain(..self.history.len() - HISTORY_KEPT);
        }
        self.frame = frame;
    }
}

/// Locks the board (a poisoned lock still holds a usable board: views only read it).
pub(crate) fn lock(board: &SharedBoard) -> std::sync::MutexGuard<'_, Board> {
    board
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A quantity (a string or a JSON number) in milli-units by the one parser
/// (`common::quantity`); 0 when absent or unreadable.
pub(crate) fn cpu_millis(q: &Value) -> u64 {
    milli(q).map_or(0, |m| u64::try_from(m).unwrap_or(0))
}

fn milli(q: &Value) -> Option<i64> {
    let text = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    common::quantity::parse_milli(&text).ok()
}

/// The CPU of a `resources` object (`{"requests": ..., "limits": ...}`) after defaulting.
fn cpu_requests(resources: &Value) -> pod_requests::Amounts<i64> {
    let cpu = |list: &str| -> pod_requests::Amounts<i64> {
        milli(&resources[list]["cpu"])
            .map(|m| [("cpu".to_string(), m)].into())
            .unwrap_or_default()
    };
    pod_requests::container(&cpu("limits"), &cpu("requests"))
}

/// A pod's CPU request, by Kubernetes' rule (`common::pod_requests`: sidecars, init
/// containers, pod-level resources and overhead).
pub(crate) fn pod_cpu_millis(pod: &Value) -> u64 {
    let spec = &pod["spec"];
    let list = |key: &str| spec[key].as_array().map(Vec::as_slice).unwrap_or_default();
    let containers: Vec<_> = list("containers")
        .iter()
        .map(|c| cpu_requests(&c["resources"]))
        .collect();
    let init: Vec<_> = list("initContainers")
        .iter()
        .map(|c| pod_requests::InitContainer {
            requests: cpu_requests(&c["resources"]),
            restartable: c["restartPolicy"] == "Always",
        })
        .collect();
    let pod_level = spec
        .get("resources")
        .filter(|r| r.is_object())
        .map(cpu_requests);
    let overhead: pod_requests::Amounts<i64> = milli(&spec["overhead"]["cpu"])
        .map(|m| [("cpu".to_string(), m)].into())
        .unwrap_or_default();
    let r = pod_requests::pod(&containers, &init, pod_level.as_ref(), Some(&overhead), 0);
    r.get("cpu").map_or(0, |m| u64::try_from(*m).unwrap_or(0))
}

/// A bar of `width` cells, `fraction` full.
pub(crate) fn bar(fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0)) * width as f64).round() as usize;
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

fn join_counts(m: &BTreeMap<String, usize>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The status block printed to a terminal (redrawn in place).
pub(crate) fn render_block(b: &Board) -> String {
    let f = &b.frame;
    let mut out = String::new();
    let p = &b.phase;
    let _ = writeln!(
        out,
        "phase {}/{} {:<12} {} {:>3.0}%  {}",
        p.index,
        p.count,
        p.name,
        bar(p.progress, 30),
        p.progress * 100.0,
        p.goal
    );
    let _ = writeln!(
        out,
        "t={:>5.1}s  pods: {} pending, {} bound of {}   node claims: {}",
        f.t, f.pods_pending, f.pods_bound, f.pods_total, f.node_claims
    );
    let bound = f
        .lower_bound_per_hour
        .map_or_else(|| "…".to_string(), |v| format!("${v:.3}/h"));
    let _ = writeln!(
        out,
        "cost: ${:.3}/h   lower bound: {bound}   nodes: {}",
        f.cost_per_hour,
        f.nodes.len()
    );
    let [types, zones, caps] = f.counts();
    let _ = writeln!(out, "  by type:     {}", join_counts(&types));
    let _ = writeln!(out, "  by zone:     {}", join_counts(&zones));
    let _ = writeln!(out, "  by capacity: {}", join_counts(&caps));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pods_cpu_is_kubernetes_effective_request() {
        let pod = json!({"spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "500m"}}},
                {"resources": {"limits": {"cpu": 1}}}
            ],
            "initContainers": [
                {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"resources": {"requests": {"cpu": "2"}}}
            ],
            "overhead": {"cpu": "10m"}
        }});
        // max(500 + 1000 (its limit) + 100, 2000 + 100) + 10.
        assert_eq!(pod_cpu_millis(&pod), 2110);
        assert_eq!(cpu_millis(&json!("1.5")), 1500);
        assert_eq!(cpu_millis(&json!(2)), 2000);
        assert_eq!(cpu_millis(&json!("1e3")), 1_000_000);
        assert_eq!(cpu_millis(&json!("lots")), 0);
    }
}
