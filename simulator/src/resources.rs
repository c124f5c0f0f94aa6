//! Resource arithmetic the simulator owns: Kubernetes quantities (`500m`, `1.5Gi`, `1e3`),
//! resource lists, and a pod's effective requests as the Kubernetes docs define them.
//!
//! Written for the simulator from the Kubernetes documentation, not shared with the planner, so
//! that the simulated cluster is an independent witness of what fits:
//! - quantities: "Resource units in Kubernetes" (suffixes `m`, `k`..`E`, `Ki`..`Ei`, exponents);
//! - effective requests: "Pod Overhead", "Init Containers § Resource sharing within containers"
//!   and "Sidecar Containers § Resource sharing within containers".

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// CPU a container without a CPU request counts for in scoring (kube-scheduler's
/// `DefaultMilliCPURequest`); filtering counts it as zero.
pub const DEFAULT_SCORE_CPU_MILLI: i64 = 100;
/// Memory a container without a memory request counts for in scoring (kube-scheduler's
/// `DefaultMemoryRequest`, 200 MiB); filtering counts it as zero.
pub const DEFAULT_SCORE_MEMORY: i64 = 200 << 20;

/// Amounts of resources: CPU in millicores, memory and ephemeral storage in bytes, pods as a
/// count, other (extended) resources in milli-units by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Millicores.
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    /// Pod slots.
    pub pods: i64,
    /// Extended resources (`nvidia.com/gpu`, hugepages, ...) in milli-units; zeros not stored.
    pub extended: BTreeMap<String, i64>,
}

// === impl Resources ===

impl Resources {
    /// A resource list (`{"cpu": "2", "memory": "8Gi"}`) read into amounts. Entries that do not
    /// parse as quantities are skipped.
    pub fn from_list(list: &Value) -> Self {
        let mut r = Self::default();
        for (name, q) in list.as_object().into_iter().flatten() {
            let Some(milli) = q.as_str().and_then(parse_milli) else {
                continue;
            };
            r.set(name, milli);
        }
        r
    }

    /// Sets a resource by its Kubernetes name from an amount in milli-units.
    pub fn set(&mut self, name: &str, milli: i128) {
        let whole = div_ceil(milli, 1000);
        match name {
            "cpu" => self.cpu = clamp(milli),
            "memory" => self.memory = clamp(whole),
            "ephemeral-storage" => self.ephemeral_storage = clamp(whole),
            "pods" => self.pods = clamp(whole),
            _ if milli == 0 => {
                self.extended.remove(name);
            }
            _ => {
                self.extended.insert(name.to_string(), clamp(milli));
            }
        }
    }

    /// `self += other`, with checked arithmetic: a sum past `i64` stays at `i64::MAX` (or
    /// `i64::MIN`), more than any node has, so four containers of 4Ei memory never fit
    /// anywhere instead of wrapping round to a small request.
    pub fn add(&mut self, other: &Self) {
        self.zip(other, i64::saturating_add);
    }

    /// `self = max(self, other)` per resource.
    pub fn max(&mut self, other: &Self) {
        self.zip(other, i64::max);
    }

    fn zip(&mut self, other: &Self, f: impl Fn(i64, i64) -> i64) {
        self.cpu = f(self.cpu, other.cpu);
        self.memory = f(self.memory, other.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        self.pods = f(self.pods, other.pods);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = f(*e, *v);
        }
    }

    /// The resources (by Kubernetes name) of which `self` asks more than `free` has, in the
    /// order kube-scheduler reports them (pods first, then cpu, memory, storage, extended).
    pub fn insufficient(&self, free: &Self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, want, have) in [
            ("pods", self.pods, free.pods),
            ("cpu", self.cpu, free.cpu),
            ("memory", self.memory, free.memory),
            (
                "ephemeral-storage",
                self.ephemeral_storage,
                free.ephemeral_storage,
            ),
        ] {
            if want > 0 && want > have {
                out.push(name.to_string());
            }
        }
        for (name, want) in &self.extended {
            if *want > 0 && *want > free.extended.get(name).copied().unwrap_or(0) {
                out.push(name.clone());
            }
        }
        out
    }

    /// As a Kubernetes resource list (`{"cpu": "1930m", "memory": "7Gi", "pods": "29"}`).
    pub fn to_list(&self) -> Value {
        let mut m = Map::new();
        m.insert("cpu".into(), json!(format_milli(self.cpu)));
        m.insert("memory".into(), json!(format_bytes(self.memory)));
        m.insert("pods".into(), json!(self.pods.to_string()));
        if self.ephemeral_storage != 0 {
            m.insert(
                "ephemeral-storage".into(),
                json!(format_bytes(self.ephemeral_storage)),
            );
        }
        for (k, v) in &self.extended {
            m.insert(k.clone(), json!(format_milli(*v)));
        }
        Value::Object(m)
    }
}

fn clamp(v: i128) -> i64 {
    v.clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 { q + 1 } else { q }
}

/// A Kubernetes quantity in milli-units, rounded up (`"1"` → 1000, `"100m"` → 100,
/// `"1Ki"` → 1,024,000, `"1.5"` → 1500, `"1e3"` → 1,000,000). `None` when it does not parse.
pub fn parse_milli(text: &str) -> Option<i128> {
    let s = text.trim();
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    if number.is_empty() || number == "." {
        return None;
    }
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if frac.contains('.') || frac.len() > 30 || int.len() > 30 {
        return None;
    }
    // The number as a fraction digits / 10^scale.
    let digits: i128 = format!("{int}{frac}").parse().ok()?;
    let mut scale = frac.len() as i32;
    let (mut mul, mut div): (i128, i128) = (1, 1);
    match suffix {
        "" => {}
        "m" => div = 1000,
        "k" => mul = 1_000,
        "M" => mul = 1_000_000,
        "G" => mul = 1_000_000_000,
        "T" => mul = 1_000_000_000_000,
        "P" => mul = 1_000_000_000_000_000,
        "E" => mul = 1_000_000_000_000_000_000,
        "Ki" => mul = 1 << 10,
        "Mi" => mul = 1 << 20,
        "Gi" => mul = 1 << 30,
        "Ti" => mul = 1 << 40,
        "Pi" => mul = 1 << 50,
        "Ei" => mul = 1 << 60,
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().ok()?;
            if !(-30..=30).contains(&exp) {
                return None;
            }
            scale -= exp;
        }
        _ => return None,
    }
    // milli = digits * mul * 1000 / (div * 10^scale), rounded up.
    let mut num = digits.checked_mul(mul)?.checked_mul(1000)?;
    let mut den = div;
    if scale >= 0 {
        den = den.checked_mul(10i128.checked_pow(scale as u32)?)?;
    } else {
        num = num.checked_mul(10i128.checked_pow((-scale) as u32)?)?;
    }
    let v = div_ceil(num, den);
    Some(if negative { -v } else { v })
}

/// Milli-units as a quantity: whole units when exact (`"2"`), else millis (`"1930m"`).
pub fn format_milli(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// Bytes as a quantity with the largest exact binary suffix (`"8Gi"`, `"7934Mi"`, `"1000"`).
pub fn format_bytes(bytes: i64) -> String {
    for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if bytes != 0 && bytes % (1i64 << shift) == 0 {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A container's requests: `resources.requests`, with any resource that has only a limit
/// requesting its limit (the API server's defaulting, "Resource Management for Pods and
/// Containers": "If you specify a limit for a resource, but do not specify any request ...
/// Kubernetes copies the limit you specified and uses it as the requested value").
pub fn container_requests(container: &Value) -> Resources {
    let mut r = Resources::from_list(&container["resources"]["limits"]);
    let requests = Resources::from_list(&container["resources"]["requests"]);
    let explicit = |name: &str| container["resources"]["requests"].get(name).is_some();
    for (name, v) in [
        ("cpu", requests.cpu),
        ("memory", requests.memory),
        ("ephemeral-storage", requests.ephemeral_storage),
    ] {
        if explicit(name) {
            match name {
                "cpu" => r.cpu = v,
                "memory" => r.memory = v,
                _ => r.ephemeral_storage = v,
            }
        }
    }
    for (k, v) in requests.extended {
        r.extended.insert(k, v);
    }
    r.pods = 0;
    r
}

/// A pod's effective requests for scheduling, as the Kubernetes docs define them:
/// - app containers and sidecars (init containers with `restartPolicy: Always`) run together,
///   so their requests add up;
/// - each regular init container runs alone, next to the sidecars started before it, and the
///   largest such request counts if larger ("the highest of any particular resource request
///   ... defined on all init containers is the effective init request");
/// - the effective request is the larger of the two, per resource, plus `spec.overhead`;
/// - the pod takes one pod slot.
///
/// With `non_zero`, containers with no CPU or memory request count for
/// [`DEFAULT_SCORE_CPU_MILLI`] / [`DEFAULT_SCORE_MEMORY`], as kube-scheduler's scoring does.
pub fn pod_requests(pod: &Value, non_zero: bool) -> Resources {
    let spec = &pod["spec"];
    let req = |c: &Value| {
        let mut r = container_requests(c);
        if non_zero {
            if c["resources"]["requests"].get("cpu").is_none() && r.cpu == 0 {
                r.cpu = DEFAULT_SCORE_CPU_MILLI;
            }
            if c["resources"]["requests"].get("memory").is_none() && r.memory == 0 {
                r.memory = DEFAULT_SCORE_MEMORY;
            }
        }
        r
    };
    let mut running = Resources::default();
    for c in spec["containers"].as_array().into_iter().flatten() {
        running.add(&req(c));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let r = req(c);
        if c["restartPolicy"] == "Always" {
            sidecars.add(&r);
            running.add(&r);
            // A sidecar starts next to the sidecars before it.
            init_peak.max(&sidecars);
        } else {
            let mut alone = sidecars.clone();
            alone.add(&r);
            init_peak.max(&alone);
        }
    }
    running.max(&init_peak);
    running.add(&Resources::from_list(&spec["overhead"]));
    running.pods = 1;
    running
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_as_the_docs_define_them() {
        // "Resource units in Kubernetes": 0.1 CPU is 100m; 128974848, 129e6, 129M, 128974848000m
        // and 123Mi are about the same memory.
        assert_eq!(parse_milli("0.1"), Some(100));
        assert_eq!(parse_milli("100m"), Some(100));
        assert_eq!(parse_milli("1"), Some(1000));
        assert_eq!(parse_milli("129e6"), Some(129_000_000_000));
        assert_eq!(parse_milli("129M"), Some(129_000_000_000));
        assert_eq!(parse_milli("123Mi"), Some(123 * (1 << 20) * 1000));
        assert_eq!(parse_milli("128974848000m"), Some(128_974_848_000));
        assert_eq!(parse_milli("1.5Gi"), Some(3 * (1i128 << 29) * 1000));
        assert_eq!(parse_milli("0.5m"), Some(1), "rounded up");
        assert_eq!(parse_milli("abc"), None);
        assert_eq!(parse_milli("1Q"), None);
        assert_eq!(parse_milli(""), None);
    }

    #[test]
    fn quantities_format_back() {
        assert_eq!(format_milli(1930), "1930m");
        assert_eq!(format_milli(2000), "2");
        assert_eq!(format_bytes(8 << 30), "8Gi");
        assert_eq!(format_bytes(7934 << 20), "7934Mi");
        assert_eq!(format_bytes(1000), "1000");
    }

    #[test]
    fn limits_only_request_the_limit() {
        let c = json!({"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "500m"}}});
        let r = container_requests(&c);
        assert_eq!((r.cpu, r.memory), (500, 1 << 30));
    }

    #[test]
    fn effective_requests_follow_init_sidecar_and_overhead_rules() {
        // Init Containers docs: the effective request is the larger of the highest init
        // container request and the sum of the app containers.
        let pod = json!({"spec": {
            "initContainers": [
                {"resources": {"requests": {"cpu": "3"}}},
                {"resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
            ],
            "containers": [
                {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
            ],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        }});
        let r = pod_requests(&pod, false);
        assert_eq!(
            r.cpu,
            3000 + 250,
            "init peak 3 > app sum 1.5, plus overhead"
        );
        assert_eq!(r.memory, (2 << 30) + (120 << 20));
        assert_eq!(r.pods, 1);

        // Sidecar docs: sidecars run with the app containers and with later init containers.
        let pod = json!({"spec": {
            "initContainers": [
                {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "2"}}},
            ],
            "containers": [{"resources": {"requests": {"cpu": "500m"}}}],
        }});
        assert_eq!(pod_requests(&pod, false).cpu, 3000, "sidecar 1 + init 2");
        let pod = json!({"spec": {
            "initContainers": [
                {"resources": {"requests": {"cpu": "1"}}},
                {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            ],
            "containers": [{"resources": {"requests": {"cpu": "2"}}}],
        }});
        assert_eq!(pod_requests(&pod, false).cpu, 3000, "sidecar 1 + app 2");
    }

    #[test]
    fn scoring_counts_missing_requests_as_defaults() {
        let pod = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(pod_requests(&pod, false).cpu, 0);
        let r = pod_requests(&pod, true);
        assert_eq!((r.cpu, r.memory), (100, 200 << 20));
    }

    #[test]
    fn insufficient_names_each_short_resource() {
        let want =
            Resources::from_list(&json!({"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}));
        let free = Resources::from_list(&json!({"cpu": "1", "memory": "4Gi", "pods": "3"}));
        assert_eq!(want.insufficient(&free), vec!["cpu", "nvidia.com/gpu"]);
    }
}
