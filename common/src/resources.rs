//! Resource amounts as scheduling counts them: [`Resources`] in fixed integer units.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Well-known resource names.
pub mod names {
    /// CPU, counted in millicores.
    pub const CPU: &str = "cpu";
    /// Memory, counted in bytes.
    pub const MEMORY: &str = "memory";
    /// Pod slots, counted in pods.
    pub const PODS: &str = "pods";
    /// Ephemeral storage, counted in bytes.
    pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
}

/// A bundle of resource amounts: requests of a pod, allocatable of a node, limits of a NodePool.
///
/// Units: `cpu` in millicores, `memory` and `ephemeral_storage` in bytes, `pods` in pods, and
/// every extended resource (`nvidia.com/gpu`, `vpc.amazonaws.com/efa`, ...) in milli-units, so
/// that "1" is 1000. A resource that is absent is zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources {
    /// Millicores.
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    /// Pod slots.
    pub pods: i64,
    /// Extended resources in milli-units, by name. Zero entries are not stored.
    pub extended: BTreeMap<String, i64>,
}

// === impl Resources ===

impl Resources {
    /// Resources with only cpu (millicores) and memory (bytes).
    pub fn cpu_memory(cpu_milli: i64, memory_bytes: i64) -> Self {
        Self {
            cpu: cpu_milli,
            memory: memory_bytes,
            ..Self::default()
        }
    }

    /// The amount of a resource by its Kubernetes name, in the units above.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            names::CPU => self.cpu,
            names::MEMORY => self.memory,
            names::PODS => self.pods,
            names::EPHEMERAL_STORAGE => self.ephemeral_storage,
            other => self.extended.get(other).copied().unwrap_or(0),
        }
    }

    /// Sets a resource by its Kubernetes name, in the units above.
    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            names::CPU => self.cpu = value,
            names::MEMORY => self.memory = value,
            names::PODS => self.pods = value,
            names::EPHEMERAL_STORAGE => self.ephemeral_storage = value,
            other => {
                if value == 0 {
                    self.extended.remove(other);
                } else {
                    self.extended.insert(other.to_string(), value);
                }
            }
        }
    }

    /// Adds `other` to `self`, resource by resource. Sums saturate at the largest amount
    /// rather than wrap: a node holding pods whose requests add up past it is full, never
    /// empty.
    pub fn add(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        self.pods = self.pods.saturating_add(other.pods);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
            if *e == 0 {
                self.extended.remove(k);
            }
        }
    }

    /// Subtracts `other` from `self`, resource by resource (results may go negative; they
    /// saturate rather than wrap).
    pub fn sub(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_sub(other.cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        self.pods = self.pods.saturating_sub(other.pods);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_sub(*v);
            if *e == 0 {
                self.extended.remove(k);
            }
        }
    }

    /// Resource-wise maximum of `self` and `other`.
    pub fn max(&self, other: &Resources) -> Resources {
        let mut out = Resources {
            cpu: self.cpu.max(other.cpu),
            memory: self.memory.max(other.memory),
            ephemeral_storage: self.ephemeral_storage.max(other.ephemeral_storage),
            pods: self.pods.max(other.pods),
            extended: self.extended.clone(),
        };
        for (k, v) in &other.extended {
            let e = out.extended.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
        out
    }

    /// True when every resource in `self` is at most the same resource in `capacity`.
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.cpu <= capacity.cpu
            && self.memory <= capacity.memory
            && self.ephemeral_storage <= capacity.ephemeral_storage
            && self.pods <= capacity.pods
            && self
                .extended
                .iter()
                .all(|(k, v)| *v <= 0 || *v <= capacity.extended.get(k).copied().unwrap_or(0))
    }

    /// The names of the resources in `self` that exceed `capacity`, in a stable order.
    pub fn exceeding(&self, capacity: &Resources) -> Vec<String> {
        let mut out = Vec::new();
        for name in [
            names::CPU,
            names::MEMORY,
            names::EPHEMERAL_STORAGE,
            names::PODS,
        ] {
            if self.get(name) > capacity.get(name) {
                out.push(name.to_string());
            }
        }
        for (k, v) in &self.extended {
            if *v > 0 && *v > capacity.extended.get(k).copied().unwrap_or(0) {
                out.push(k.clone());
            }
        }
        out
    }

    /// True when every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.extended.values().all(|v| *v == 0)
    }
}

impl fmt::Display for Resources {
    /// Formats as Kubernetes quantities, e.g. `cpu=1500m memory=2Gi pods=3`, skipping zeros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.cpu != 0 {
            parts.push(format!("cpu={}", format_cpu(self.cpu)));
        }
        if self.memory != 0 {
            parts.push(format!("memory={}", format_bytes(self.memory)));
        }
        if self.ephemeral_storage != 0 {
            parts.push(format!(
                "ephemeral-storage={}",
                format_bytes(self.ephemeral_storage)
            ));
        }
        if self.pods != 0 {
            parts.push(format!("pods={}", self.pods));
        }
        for (k, v) in &self.extended {
            parts.push(format!("{k}={}", format_cpu(*v)));
        }
        write!(f, "{}", parts.join(" "))
    }
}

/// Formats a milli-unit amount as a Kubernetes quantity: `2`, `1500m`.
pub fn format_cpu(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

/// Formats bytes as the largest exact binary unit: `2Gi`, `512Mi`, `1000`.
pub fn format_bytes(bytes: i64) -> String {
    const UNITS: [(&str, i64); 4] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (suffix, size) in UNITS {
        if bytes != 0 && bytes % size == 0 {
            return format!("{}{suffix}", bytes / size);
        }
    }
    format!("{bytes}")
}
