//! The one scenario harness shared by the Karpenter conformance suite (`tests/karpenter.rs`) and
//! the manifest scenarios (`tests/scenarios.rs`): `options.yaml`, YAML reading, input and catalog
//! loading, plan options. A scenario is a folder holding `input.yaml` (or an `input/` folder),
//! optional `options.yaml` and optional `catalog.yaml` (else the nearest one in a parent folder
//! up to the suite's root, else the built-in catalog of `options.region`, default us-east-1).
#![allow(dead_code, unreachable_pub)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use planner::catalog::Catalog;
use planner::model::{MinValuesPolicy, PlanOptions, PreferencePolicy, VmMemoryOverhead};
use planner_manifests::{self as manifests, Loaded};
use serde::Deserialize;

/// `options.yaml` of a scenario.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Options {
    /// The plan's clock (RFC 3339); the suite's default when absent, never the wall clock.
    pub now: Option<String>,
    /// `Respect` (default) or `Ignore`.
    pub preference_policy: Option<PreferencePolicy>,
    /// `Strict` (default) or `BestEffort`.
    pub min_values_policy: Option<MinValuesPolicy>,
    /// Allow spot→spot consolidation.
    #[serde(default)]
    pub spot_to_spot_consolidation: bool,
    /// Plan no disruption.
    #[serde(default)]
    pub no_disruption: bool,
    /// The StaticCapacity feature gate (static NodePools).
    #[serde(default)]
    pub static_capacity: bool,
    /// The NodeOverlay feature gate (NodeOverlays apply).
    #[serde(default)]
    pub node_overlay: bool,
    /// The CapacityBuffer feature gate (CapacityBuffers).
    #[serde(default)]
    pub capacity_buffer: bool,
    /// Karpenter's `ignoreDRARequests` (default true).
    #[serde(rename = "ignoreDRARequests")]
    pub ignore_dra_requests: Option<bool>,
    /// Zones under an ARC zonal shift (the snapshot's `shifted_zones`).
    #[serde(default)]
    pub shifted_zones: Vec<String>,
    /// Karpenter's `reservedENIs`.
    #[serde(default, rename = "reservedENIs")]
    pub reserved_enis: u32,
    /// Karpenter's `vmMemoryOverheadPercent` (default 0.075).
    pub vm_memory_overhead_percent: Option<f64>,
    /// `builtin` uses the built-in AWS catalog of `region` even when a `catalog.yaml` exists.
    pub catalog: Option<String>,
    /// Region of the built-in catalog (default us-east-1).
    pub region: Option<String>,
}

/// Reads a YAML file; `Ok(None)` when it does not exist. Errors name the file.
pub fn read_yaml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// A scenario's `options.yaml`, default when absent.
pub fn options(dir: &Path) -> Result<Options, String> {
    Ok(read_yaml(&dir.join("options.yaml"))?.unwrap_or_default())
}

/// Loads a scenario's manifests as `dovetail plan -f` does: the `input/` folder if present,
/// else `input.yaml`.
pub fn load_input(dir: &Path) -> Result<Loaded, manifests::Error> {
    let folder = dir.join("input");
    let input = if folder.is_dir() {
        folder
    } else {
        dir.join("input.yaml")
    };
    manifests::load_paths(&[input.display().to_string()])
}

/// The scenario's catalog: `options.catalog: builtin`, else the nearest `catalog.yaml` from
/// `dir` up to `root`, else the built-in one. A file catalog is named by its path relative to
/// `dir` (catalog notes end up in the plan, which must not depend on the checkout's location).
pub fn load_catalog(dir: &Path, root: &Path, options: &Options) -> Result<Catalog, String> {
    let region = options.region.as_deref().unwrap_or("us-east-1");
    let builtin =
        || planner::catalog::aws::builtin(region).map_err(|e| format!("builtin catalog: {e}"));
    if options.catalog.as_deref() == Some("builtin") {
        return builtin();
    }
    if let Some(o) = &options.catalog {
        return Err(format!(
            "options.yaml: catalog: unknown {o:?} (only `builtin`)"
        ));
    }
    let mut d = dir.to_path_buf();
    let mut name = PathBuf::new();
    loop {
        let f = d.join("catalog.yaml");
        if f.is_file() {
            let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            let name = name.join("catalog.yaml");
            return planner::catalog::file::parse(&text, &name.display().to_string())
                .map_err(|e| format!("{}: {e}", f.display()));
        }
        if d == root || !d.pop() {
            return builtin();
        }
        name.push("..");
    }
}

/// The plan options of `options`, `default_now` when it sets no `now`.
pub fn plan_options(options: &Options, default_now: &str) -> Result<PlanOptions, String> {
    let now = options.now.as_deref().unwrap_or(default_now);
    Ok(PlanOptions {
        now: manifests::time::parse_rfc3339(now).map_err(|e| format!("options.yaml: now: {e}"))?,
        preference_policy: options.preference_policy.unwrap_or_default(),
        min_values_policy: options.min_values_policy.unwrap_or_default(),
        spot_to_spot_consolidation: options.spot_to_spot_consolidation,
        no_disruption: options.no_disruption,
        static_capacity: options.static_capacity,
        node_overlay: options.node_overlay,
        capacity_buffer: options.capacity_buffer,
        reserved_enis: options.reserved_enis,
        vm_memory_overhead_percent: options
            .vm_memory_overhead_percent
            .map(VmMemoryOverhead)
            .unwrap_or_default(),
        ignore_dra_requests: options
            .ignore_dra_requests
            .unwrap_or_else(planner::dra::ignore_default),
    })
}

/// Every folder under `root` (at any depth) that holds a file named `marker`, sorted.
pub fn scenario_dirs(root: &Path, marker: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.join(marker).is_file() {
                    out.push(p.clone());
                }
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}
