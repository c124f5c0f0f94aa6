//! Data-driven planner scenarios: every folder under `tests/scenarios/` is one scenario.
//!
//! A scenario folder holds:
//! - `input.yaml`, or an `input/` folder: the manifests, read as `dovetail plan -f` reads them;
//! - `catalog.yaml` (optional): an `--instance-types` file; without it the built-in us-east-1
//!   catalog is used;
//! - `options.yaml` (optional): `{now: RFC3339, preferencePolicy: Respect|Ignore,
//!   minValuesPolicy: Strict|BestEffort, spotToSpotConsolidation: bool, noDisruption: bool,
//!   reservedENIs: N, vmMemoryOverheadPercent: FRACTION, shiftedZones: [ZONE, ...],
//!   catalog: builtin, region: <region>}` (the shared harness, `tests/support/mod.rs`);
//!   `now` defaults to 2026-01-01T00:00:00Z so that scenarios never read the clock;
//! - at least one expectation:
//!   - `expect.json`: the whole plan, byte for byte as `dovetail plan --output json` prints it.
//!     `DOVETAIL_UPDATE_EXPECT=1 cargo test -p planner-manifests --test scenarios` rewrites every existing
//!     `expect.json` from the current planner (create an empty one to start a new golden file);
//!   - `expect.yaml`: assertions, any of
//!     - `error: <text>`: loading the input fails with a message containing the text;
//!     - `warnings: [<text>, ...]`: each text appears in some warning;
//!     - `snapshot: <subset>`: the loaded `ClusterSnapshot` (serde JSON, snake_case) contains
//!       the subset;
//!     - `plan: <subset>`: the plan (the contract's JSON, camelCase) contains the subset.
//!
//! A subset matches when every key of an expected object matches the same key of the actual
//! object, every element of an expected list matches the element at the same index of a list
//! of the same length, and scalars are equal (numbers compared as f64). Add a scenario by adding
//! a folder; `cargo test -p planner-manifests --test scenarios` runs them all and lists every failure.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

mod support;

use support::{load_input, read_yaml};

/// `expect.yaml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    snapshot: Option<Value>,
    plan: Option<Value>,
}

const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

/// Where the first difference between `expected` (a subset) and `actual` is, if any.
fn subset_mismatch(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e.iter().find_map(|(k, ev)| match a.get(k) {
            Some(av) => subset_mismatch(ev, av, &format!("{path}.{k}")),
            None => Some(format!("{path}.{k}: missing (expected {ev})")),
        }),
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Some(format!(
                    "{path}: expected {} elements, got {}: {actual}",
                    e.len(),
                    a.len()
                ));
            }
            e.iter()
                .zip(a)
                .enumerate()
                .find_map(|(i, (ev, av))| subset_mismatch(ev, av, &format!("{path}[{i}]")))
        }
        (Value::Number(e), Value::Number(a)) if e.as_f64() == a.as_f64() => None,
        (e, a) if e == a => None,
        (e, a) => Some(format!("{path}: expected {e}, got {a}")),
    }
}

/// Runs one scenario folder against its expectations.
fn check(fixture: &Path, expect: &Expect) -> Result<(), String> {
    let golden = fixture.join("expect.json");
    let loaded = match load_input(fixture) {
        Ok(l) => l,
        Err(e) => {
            let message = e.to_string();
            return match &expect.error {
                Some(want) if message.contains(want.as_str()) => Ok(()),
                Some(want) => Err(format!("error {message:?} does not contain {want:?}")),
                None => Err(format!("input failed to load: {message}")),
            };
        }
    };
    if let Some(want) = &expect.error {
        return Err(format!(
            "expected an error containing {want:?}, but the input loaded"
        ));
    }
    for w in &expect.warnings {
        if !loaded.warnings.iter().any(|got| got.contains(w.as_str())) {
            return Err(format!(
                "no warning contains {w:?}; warnings: {:?}",
                loaded.warnings
            ));
        }
    }
    if let Some(subset) = &expect.snapshot {
        let actual = serde_json::to_value(&loaded.snapshot).map_err(|e| e.to_string())?;
        if let Some(m) = subset_mismatch(subset, &actual, "snapshot") {
            return Err(m);
        }
    }
    if expect.plan.is_none() && !golden.exists() {
        return Ok(());
    }
    let options = support::options(fixture)?;
    let catalog = support::load_catalog(fixture, &scenarios_dir(), &options)?;
    let mut snapshot = loaded.snapshot.clone();
    snapshot.shifted_zones = options.shifted_zones.clone();
    let options = support::plan_options(&options, DEFAULT_NOW)?;
    let plan = planner::plan(&snapshot, &catalog, &options);
    let mut json = serde_json::to_string_pretty(&plan).map_err(|e| e.to_string())?;
    json.push('\n');
    if let Some(subset) = &expect.plan {
        let actual: Value = serde_json::from_str(&json).map_err(|e| e.to_string())?;
        if let Some(m) = subset_mismatch(subset, &actual, "plan") {
            return Err(m);
        }
    }
    if golden.exists() {
        if std::env::var_os("DOVETAIL_UPDATE_EXPECT").is_some() {
            std::fs::write(&golden, &json).map_err(|e| e.to_string())?;
        } else {
            let want = std::fs::read_to_string(&golden).map_err(|e| e.to_string())?;
            if want != json {
                return Err(format!(
                    "plan differs from expect.json (DOVETAIL_UPDATE_EXPECT=1 rewrites it):\n{json}"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn scenarios() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("tests/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no scenarios found");
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let result = read_yaml::<Expect>(&dir.join("expect.yaml")).and_then(|expect| {
            if expect.is_none() && !dir.join("expect.json").exists() {
                return Err("no expect.yaml or expect.json".to_string());
            }
            check(dir, &expect.unwrap_or_default())
        });
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

#[test]
fn subset_matching_is_strict_where_it_must_be() {
    let actual = serde_json::json!({"a": [1, {"b": 2, "c": 3}], "d": "x"});
    assert_eq!(
        subset_mismatch(&serde_json::json!({"a": [1, {"b": 2}]}), &actual, "$"),
        None
    );
    assert!(subset_mismatch(&serde_json::json!({"a": [1]}), &actual, "$").is_some());
    assert!(subset_mismatch(&serde_json::json!({"d": "y"}), &actual, "$").is_some());
    assert!(subset_mismatch(&serde_json::json!({"e": 1}), &actual, "$").is_some());
    assert_eq!(
        subset_mismatch(&serde_json::json!({"a": [1.0, {}]}), &actual, "$"),
        None
    );
}
