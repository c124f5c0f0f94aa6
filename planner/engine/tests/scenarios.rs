//! Data-driven planner scenarios: every folder under `tests/scenarios/` is one scenario.
//!
//! A scenario folder holds:
//! - `input.yaml`, or an `input/` folder: the manifests, read as `dovetail plan -f` reads them;
//! - `catalog.yaml` (optional): an `--instance-types` file; without it the built-in us-east-1
//!   catalog is used;
//! - `options.yaml` (optional): `{now: RFC3339, preferencePolicy: Respect|Ignore,
//!   minValuesPolicy: Strict|BestEffort, spotToSpotConsolidation: bool, noDisruption: bool}`;
//!   `now` defaults to 2026-01-01T00:00:00Z so that scenarios never read the clock;
//! - at least one expectation:
//!   - `expect.json`: the whole plan, byte for byte as `dovetail plan --output json` prints it.
//!     `DOVETAIL_UPDATE_EXPECT=1 cargo test -p planner --test scenarios` rewrites every existing
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
//! a folder; `cargo test -p planner --test scenarios` runs them all and lists every failure.

use std::path::{Path, PathBuf};

use planner::catalog::Catalog;
use planner::manifests::{self, Loaded};
use planner::model::{MinValuesPolicy, PlanOptions, PreferencePolicy};
use serde::Deserialize;
use serde_json::Value;

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

/// `options.yaml`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    now: Option<String>,
    preference_policy: Option<PreferencePolicy>,
    min_values_policy: Option<MinValuesPolicy>,
    #[serde(default)]
    spot_to_spot_consolidation: bool,
    #[serde(default)]
    no_disruption: bool,
}

const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

fn read_yaml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
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

fn load_input(dir: &Path) -> Result<Loaded, manifests::Error> {
    let folder = dir.join("input");
    let input = if folder.is_dir() {
        folder
    } else {
        dir.join("input.yaml")
    };
    manifests::load_paths(&[input.display().to_string()])
}

fn load_catalog(dir: &Path) -> Result<Catalog, String> {
    let path = dir.join("catalog.yaml");
    if path.exists() {
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        // A relative name: catalog notes end up in the plan, and expect.json must not depend
        // on where the repository is checked out.
        planner::catalog::file::parse(&text, "catalog.yaml").map_err(|e| e.to_string())
    } else {
        planner::catalog::aws::builtin("us-east-1").map_err(|e| e.to_string())
    }
}

fn plan_options(dir: &Path) -> Result<PlanOptions, String> {
    let o: Options = read_yaml(&dir.join("options.yaml"))?.unwrap_or_default();
    let now = o.now.as_deref().unwrap_or(DEFAULT_NOW);
    Ok(PlanOptions {
        now: manifests::time::parse_rfc3339(now)?,
        preference_policy: o.preference_policy.unwrap_or_default(),
        min_values_policy: o.min_values_policy.unwrap_or_default(),
        spot_to_spot_consolidation: o.spot_to_spot_consolidation,
        no_disruption: o.no_disruption,
    })
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
    let catalog = load_catalog(fixture)?;
    let options = plan_options(fixture)?;
    let plan = planner::plan(&loaded.snapshot, &catalog, &options);
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
