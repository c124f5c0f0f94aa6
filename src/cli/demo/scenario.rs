//! The manifests a demo applies: the built-in story (`examples/demo/`, embedded in the binary so
//! that the demo needs nothing but the executable) or the user's own (`--scenario DIR`).
//!
//! A scenario is read twice: once by `dovetail plan`'s reader (`planner_manifests`),
//! so that a bad manifest is refused before anything starts, with the message `dovetail plan`
//! gives (file, document, object, field); and once as plain JSON objects, which the demo applies
//! to the simulated cluster with server-side apply, as `kubectl apply --server-side` would.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::CliError;

/// The built-in story's files, in the order they are applied.
const BUILTIN: [(&str, &str); 4] = [
    (
        "examples/demo/00-namespace.yaml",
        include_str!("../../../examples/demo/00-namespace.yaml"),
    ),
    (
        "examples/demo/10-karpenter.yaml",
        include_str!("../../../examples/demo/10-karpenter.yaml"),
    ),
    (
        "examples/demo/20-workloads.yaml",
        include_str!("../../../examples/demo/20-workloads.yaml"),
    ),
    (
        "examples/demo/30-gpu-job.yaml",
        include_str!("../../../examples/demo/30-gpu-job.yaml"),
    ),
];

/// One object of a scenario.
#[derive(Clone, Debug)]
pub(crate) struct Object {
    /// Where it came from (`file: document N`), for messages.
    pub(crate) source: String,
    /// The object.
    pub(crate) value: Value,
}

impl Object {
    pub(crate) fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }
    pub(crate) fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }
    pub(crate) fn namespace(&self) -> &str {
        self.value["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
    }
}

/// A scenario, read and checked.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    /// What it is, for people: `built-in (examples/demo)` or the directory.
    pub(crate) origin: String,
    /// Its objects, in apply order (namespaces, then node classes and pools, then the rest).
    pub(crate) objects: Vec<Object>,
}

impl Scenario {
    /// The built-in story.
    pub(crate) fn builtin() -> Result<Self, CliError> {
        let files: Vec<(String, String)> = BUILTIN
            .iter()
            .map(|(n, t)| ((*n).to_string(), (*t).to_string()))
            .collect();
        Self::from_texts("built-in (examples/demo)".into(), &files)
    }

    /// The manifests of a directory (`*.yaml`, `*.yml`, `*.json`, recursively, in sorted order).
    ///
    /// # Errors
    /// [`CliError::Input`] naming `--scenario DIR` when it is not a readable directory, holds
    /// no manifests, or lacks a NodePool or pods; [`CliError::Manifests`] (file, document,
    /// object, field) for a manifest the planner refuses.
    pub(crate) fn from_dir(dir: &Path) -> Result<Self, CliError> {
        let shown = dir.display();
        let meta = std::fs::metadata(dir)
            .map_err(|e| CliError::Input(format!("--scenario {shown}: {e}")))?;
        if !meta.is_dir() {
            return Err(CliError::Input(format!(
                "--scenario {shown}: not a directory (give a folder of Kubernetes manifests)"
            )));
        }
        let mut paths = Vec::new();
        collect(dir, &mut paths)
            .map_err(|e| CliError::Input(format!("--scenario {shown}: {e}")))?;
        paths.sort();
        if paths.is_empty() {
            return Err(CliError::Input(format!(
                "--scenario {shown}: no manifests (*.yaml, *.yml, *.json) in this directory"
            )));
        }
        let mut files = Vec::new();
        for p in paths {
            let text = std::fs::read_to_string(&p).map_err(|e| {
                CliError::Input(format!("--scenario {shown}: {}: {e}", p.display()))
            })?;
            files.push((p.display().to_string(), text));
        }
        Self::from_texts(shown.to_string(), &files)
    }

    fn from_texts(origin: String, files: &[(String, String)]) -> Result<Self, CliError> {
        // The planner's reader first: the same refusals, with the same messages, as `dovetail
        // plan` and every other door.
        let mut reader = planner_manifests::Reader::new();
        for (name, text) in files {
            reader.add_document_text(text, name)?;
        }
        let loaded = reader.finish()?;
        if loaded.snapshot.node_pools.is_empty() {
            return Err(CliError::Input(format!(
                "--scenario {origin}: no NodePool (karpenter.sh/v1): the demo needs at least one \
                 to launch nodes from"
            )));
        }
        if loaded.snapshot.pods.is_empty() {
            return Err(CliError::Input(format!(
                "--scenario {origin}: no pods: add Deployments or Pods for the demo to schedule"
            )));
        }
        let mut objects = Vec::new();
        for (name, text) in files {
            for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
                let value = <serde_yaml::Value as serde::Deserialize>::deserialize(doc)
                    .map_err(|e| CliError::Input(format!("{name}: document {}: {e}", i + 1)))?;
                let value: Value = serde_json::to_value(value)
                    .map_err(|e| CliError::Input(format!("{name}: document {}: {e}", i + 1)))?;
                if value.is_null() {
                    continue;
                }
                let items = match value["kind"].as_str() {
                    Some(k) if k.ends_with("List") => {
                        value["items"].as_array().cloned().unwrap_or_default()
                    }
                    _ => vec![value],
                };
                for item in items {
                    objects.push(Object {
                        source: format!("{name}: document {}", i + 1),
                        value: item,
                    });
                }
            }
        }
        objects.sort_by_key(|o| apply_rank(o.kind()));
        Ok(Self { origin, objects })
    }

    /// The objects of one kind.
    pub(crate) fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Object> + 'a {
        self.objects.iter().filter(move |o| o.kind() == kind)
    }
}

/// Namespaces, CRD-backed classes and pools, priority classes first; workloads last.
fn apply_rank(kind: &str) -> u8 {
    match kind {
        "Namespace" => 0,
        "PriorityClass" | "StorageClass" => 1,
        "EC2NodeClass" => 2,
        "NodePool" => 3,
        "Pod" | "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" | "DaemonSet" => 5,
        _ => 4,
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(&path, out)?;
        } else if kind.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_story_reads_and_orders_namespaces_first() {
        let s = Scenario::builtin().unwrap();
        assert_eq!(s.objects[0].kind(), "Namespace");
        assert_eq!(s.of_kind("NodePool").count(), 2);
        assert_eq!(s.of_kind("EC2NodeClass").count(), 1);
        assert!(s.of_kind("Deployment").count() >= 3);
        let last_pool = s.objects.iter().rposition(|o| o.kind() == "NodePool");
        let first_deploy = s.objects.iter().position(|o| o.kind() == "Deployment");
        assert!(last_pool < first_deploy);
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dovetail-demo-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_missing_directory_is_refused_naming_it() {
        let err = Scenario::from_dir(Path::new("/nonexistent/demo-scenario")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("--scenario /nonexistent/demo-scenario"),
            "{msg}"
        );
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn a_scenario_without_nodepool_is_refused() {
        let d = temp_dir("nopool");
        std::fs::write(
            d.join("pods.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n",
        )
        .unwrap();
        let msg = Scenario::from_dir(&d).unwrap_err().to_string();
        assert!(msg.contains("no NodePool"), "{msg}");
        assert!(msg.contains(&d.display().to_string()), "{msg}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_bad_manifest_is_refused_naming_file_and_field() {
        let d = temp_dir("badqty");
        std::fs::write(
            d.join("pods.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: x\n    resources: {requests: {cpu: lots}}\n",
        )
        .unwrap();
        let msg = Scenario::from_dir(&d).unwrap_err().to_string();
        assert!(msg.contains("pods.yaml"), "{msg}");
        assert!(msg.contains("lots"), "{msg}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
