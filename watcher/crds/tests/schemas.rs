//! The generated CRDs against real validators: Karpenter's documented example manifests
//! (`tests/manifests/`) and the project's `examples/` are accepted, invalid ones are rejected
//! naming the field.
//!
//! - OpenAPI constraints (types, enums, patterns, ranges, required and unknown fields) are
//!   checked by the Python `jsonschema` package (`tests/python/validate.py` converts each
//!   `openAPIV3Schema` to JSON Schema). It runs in the venv of `scripts/python-env.sh`
//!   (`DOVETAIL_PYTHON`, set by `scripts/test.sh`); without it the test fails (unless
//!   `DOVETAIL_ALLOW_MISSING` names `jsonschema`: then it prints a notice and skips).
//! - CEL rules (`x-kubernetes-validations`), which `jsonschema` cannot evaluate, are evaluated by
//!   kube-rs's `kube-cel` validator, with the schema's defaults applied first as the API server
//!   does. Transition rules (`oldSelf`) are checked on updates.
//! - Every example reads into the typed structs and writes back unchanged.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::{Value, json};

// === Inputs ===

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `apiVersion/kind` → the CRD's `openAPIV3Schema`.
fn schemas() -> BTreeMap<String, Value> {
    crds::crds()
        .into_iter()
        .map(|crd| {
            let version = &crd.spec.versions[0];
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("derived CRDs have a schema");
            (
                format!(
                    "{}/{}/{}",
                    crd.spec.group, version.name, crd.spec.names.kind
                ),
                serde_json::to_value(schema).expect("schema serializes"),
            )
        })
        .collect()
}

fn key_of(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["apiVersion"].as_str().unwrap_or(""),
        obj["kind"].as_str().unwrap_or("")
    )
}

fn read_documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(doc)
            .with_context(|| format!("{}: YAML", path.display()))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.is_dir() {
            yaml_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

/// Every NodePool, NodeClaim and EC2NodeClass of `tests/manifests/` and `examples/`, named
/// `<file>#<document>`.
fn examples() -> anyhow::Result<Vec<(String, Value)>> {
    let keys = schemas();
    let mut files = Vec::new();
    yaml_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests"),
        &mut files,
    )?;
    yaml_files(&repo().join("examples"), &mut files)?;
    let mut out = Vec::new();
    for file in files {
        let name = file
            .strip_prefix(repo())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (i, doc) in read_documents(&file)?.into_iter().enumerate() {
            if keys.contains_key(&key_of(&doc)) {
                out.push((format!("{name}#{}", i + 1), doc));
            }
        }
    }
    Ok(out)
}

fn example(id_prefix: &str, kind: &str) -> Value {
    examples()
        .expect("examples read")
        .into_iter()
        .find(|(id, doc)| id.contains(id_prefix) && doc["kind"] == kind)
        .map(|(_, doc)| doc)
        .unwrap_or_else(|| panic!("no {kind} in {id_prefix}"))
}

// === Validators ===

fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DOVETAIL_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("DOVETAIL_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("dovetail")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/dovetail")))?;
    let p = cache.join("venv-py/bin/python");
    p.exists().then_some(p)
}

/// Errors as `(field path, message)`.
type FieldErrors = Vec<(String, String)>;

/// The OpenAPI errors of each document as `(path, message)`, from the `jsonschema` package;
/// `None` when the validator is not installed and allowed to be missing.
fn jsonschema_errors(
    docs: &[(String, Value)],
) -> anyhow::Result<Option<BTreeMap<String, FieldErrors>>> {
    let Some(py) = python() else {
        test_support::missing_tool("jsonschema", "run scripts/python-env.sh");
        return Ok(None);
    };
    let request = json!({
        "schemas": schemas(),
        "documents": docs.iter().map(|(id, obj)| json!({"id": id, "object": obj})).collect::<Vec<_>>(),
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/validate.py");
    let mut child = Command::new(&py)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", py.display()))?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(serde_json::to_string(&request)?.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "validate.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let results: Vec<Value> = serde_json::from_slice(&out.stdout)?;
    let mut map = BTreeMap::new();
    for r in results {
        let errors = r["errors"]
            .as_array()
            .context("errors")?
            .iter()
            .map(|e| {
                (
                    e["path"].as_str().unwrap_or("").to_owned(),
                    e["message"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        map.insert(r["id"].as_str().unwrap_or("").to_owned(), errors);
    }
    Ok(Some(map))
}

/// The CEL errors of a document as `(field path, message)`, from kube-cel; `old` for updates.
fn cel_errors(obj: &Value, old: Option<&Value>) -> FieldErrors {
    let schemas = schemas();
    let schema = schemas.get(&key_of(obj)).expect("a schema for the kind");
    match kube_cel::Validator::new().validate(schema, obj, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| (e.field_path.clone(), e.message.clone()))
            .collect(),
    }
}

// === Mutations ===

/// `base` with the value at a JSON pointer replaced (`Some`) or removed (`None`); missing
/// parent objects are created, and an index one past the end of an array appends.
fn with(base: &Value, pointer: &str, value: Option<Value>) -> Value {
    let mut doc = base.clone();
    let (parent, last) = pointer.rsplit_once('/').expect("a pointer");
    let mut cursor = &mut doc;
    for part in parent.split('/').skip(1) {
        cursor = match cursor {
            Value::Array(items) => &mut items[part.parse::<usize>().expect("index")],
            Value::Object(map) => map.entry(part.to_owned()).or_insert_with(|| json!({})),
            _ => panic!("{pointer}: not a container"),
        };
    }
    match (cursor, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(last.to_owned(), v);
        }
        (Value::Object(map), None) => {
            map.remove(last);
        }
        (Value::Array(items), Some(v)) => {
            let index = last.parse::<usize>().expect("index");
            if index == items.len() {
                items.push(v);
            } else {
                items[index] = v;
            }
        }
        (Value::Array(items), None) => {
            items.remove(last.parse::<usize>().expect("index"));
        }
        _ => panic!("{pointer}: not a container"),
    }
    doc
}

fn nodepool() -> Value {
    example("getting-started", "NodePool")
}

fn nodeclass() -> Value {
    example("getting-started", "EC2NodeClass")
}

// === Tests ===

#[test]
fn examples_include_karpenter_docs_and_the_project_examples() -> anyhow::Result<()> {
    let ids: Vec<String> = examples()?.into_iter().map(|(id, _)| id).collect();
    for want in [
        "getting-started.yaml",
        "gpu.yaml",
        "spot-budgets.yaml",
        "nodeclaim.yaml",
        "examples/minimal/cluster.yaml",
        "examples/realistic/10-karpenter.yaml",
    ] {
        assert!(
            ids.iter().any(|id| id.contains(want)),
            "{want} not among {ids:?}"
        );
    }
    Ok(())
}

#[test]
fn examples_are_accepted_by_the_openapi_schemas() -> anyhow::Result<()> {
    let docs = examples()?;
    let Some(errors) = jsonschema_errors(&docs)? else {
        return Ok(());
    };
    assert_eq!(errors.len(), docs.len());
    let rejected: Vec<_> = errors.iter().filter(|(_, e)| !e.is_empty()).collect();
    assert!(rejected.is_empty(), "rejected: {rejected:#?}");
    Ok(())
}

#[test]
fn examples_pass_the_cel_rules() -> anyhow::Result<()> {
    for (id, doc) in examples()? {
        let errors = cel_errors(&doc, None);
        assert!(errors.is_empty(), "{id}: {errors:?}");
        // An unchanged object passes the transition rules too.
        let errors = cel_errors(&doc, Some(&doc));
        assert!(errors.is_empty(), "{id} (update): {errors:?}");
    }
    Ok(())
}

/// Invalid manifests and the field the OpenAPI schema must name.
fn openapi_cases() -> Vec<(&'static str, Value, &'static str)> {
    let np = nodepool();
    let nc = nodeclass();
    let req0 = "/spec/template/spec/requirements/0";
    vec![
        (
            "weight 0",
            with(&np, "/spec/weight", Some(json!(0))),
            "spec.weight",
        ),
        (
            "weight 101",
            with(&np, "/spec/weight", Some(json!(101))),
            "spec.weight",
        ),
        (
            "unknown operator",
            with(&np, &format!("{req0}/operator"), Some(json!("Equals"))),
            "spec.template.spec.requirements[0].operator",
        ),
        (
            "minValues 51",
            with(&np, &format!("{req0}/minValues"), Some(json!(51))),
            "spec.template.spec.requirements[0].minValues",
        ),
        (
            "minValues 0",
            with(&np, &format!("{req0}/minValues"), Some(json!(0))),
            "spec.template.spec.requirements[0].minValues",
        ),
        (
            "v1beta1 spec.disruption.expireAfter",
            with(&np, "/spec/disruption/expireAfter", Some(json!("720h"))),
            "spec.disruption.expireAfter",
        ),
        (
            "v1beta1 spec.template.spec.kubelet",
            with(
                &np,
                "/spec/template/spec/kubelet",
                Some(json!({"maxPods": 110})),
            ),
            "spec.template.spec.kubelet",
        ),
        (
            "v1beta1 consolidationPolicy WhenUnderutilized",
            with(
                &np,
                "/spec/disruption/consolidationPolicy",
                Some(json!("WhenUnderutilized")),
            ),
            "spec.disruption.consolidationPolicy",
        ),
        (
            "duration with words",
            with(
                &np,
                "/spec/disruption/consolidateAfter",
                Some(json!("30 minutes")),
            ),
            "spec.disruption.consolidateAfter",
        ),
        (
            "expireAfter in days",
            with(&np, "/spec/template/spec/expireAfter", Some(json!("30d"))),
            "spec.template.spec.expireAfter",
        ),
        (
            "budget of 150%",
            with(
                &np,
                "/spec/disruption/budgets",
                Some(json!([{"nodes": "150%"}])),
            ),
            "spec.disruption.budgets[0].nodes",
        ),
        (
            "unknown budget reason",
            with(
                &np,
                "/spec/disruption/budgets",
                Some(json!([{"nodes": "1", "reasons": ["Expired"]}])),
            ),
            "spec.disruption.budgets[0].reasons[0]",
        ),
        (
            "taint effect",
            with(
                &np,
                "/spec/template/spec/taints",
                Some(json!([{"key": "a", "effect": "NoWay"}])),
            ),
            "spec.template.spec.taints[0].effect",
        ),
        (
            "no nodeClassRef",
            with(&np, "/spec/template/spec/nodeClassRef", None),
            "spec.template.spec.nodeClassRef",
        ),
        (
            "label value too long",
            with(
                &np,
                "/spec/template/metadata/labels",
                Some(json!({"team": "x".repeat(64)})),
            ),
            "spec.template.metadata.labels.team",
        ),
        (
            "limits not a quantity",
            with(&np, "/spec/limits/cpu", Some(json!("lots"))),
            "spec.limits.cpu",
        ),
        (
            "both role and instanceProfile",
            with(
                &nc,
                "/spec/instanceProfile",
                Some(json!("KarpenterNodeInstanceProfile")),
            ),
            "spec.instanceProfile",
        ),
        (
            "neither role nor instanceProfile",
            with(&nc, "/spec/role", None),
            "spec.role",
        ),
        (
            "v1beta1 EC2NodeClass without amiSelectorTerms",
            with(
                &with(&nc, "/spec/amiSelectorTerms", None),
                "/spec/amiFamily",
                Some(json!("AL2023")),
            ),
            "spec.amiSelectorTerms",
        ),
        (
            "unknown amiFamily",
            with(&nc, "/spec/amiFamily", Some(json!("Ubuntu"))),
            "spec.amiFamily",
        ),
        (
            "empty subnetSelectorTerms",
            with(&nc, "/spec/subnetSelectorTerms", Some(json!([]))),
            "spec.subnetSelectorTerms",
        ),
        (
            "volume type",
            with(
                &nc,
                "/spec/blockDeviceMappings",
                Some(json!([{"ebs": {"volumeSize": "20Gi", "volumeType": "gp9"}}])),
            ),
            "spec.blockDeviceMappings[0].ebs.volumeType",
        ),
        (
            "hop limit 65",
            with(
                &nc,
                "/spec/metadataOptions",
                Some(json!({"httpPutResponseHopLimit": 65})),
            ),
            "spec.metadataOptions.httpPutResponseHopLimit",
        ),
        (
            "kubelet typo",
            with(&nc, "/spec/kubelet", Some(json!({"maxPod": 110}))),
            "spec.kubelet.maxPod",
        ),
    ]
}

#[test]
fn invalid_manifests_are_rejected_by_the_openapi_schemas_naming_the_field() -> anyhow::Result<()> {
    let cases = openapi_cases();
    let docs: Vec<(String, Value)> = cases
        .iter()
        .map(|(name, doc, _)| ((*name).to_owned(), doc.clone()))
        .collect();
    let Some(errors) = jsonschema_errors(&docs)? else {
        return Ok(());
    };
    for (name, _, field) in &cases {
        let found = &errors[*name];
        assert!(
            found.iter().any(|(path, _)| path == field),
            "{name}: expected an error at {field}, got {found:?}"
        );
    }
    Ok(())
}

/// Manifests valid for the OpenAPI schema that a CEL rule rejects, and the rule's message.
fn cel_cases() -> Vec<(&'static str, Value, &'static str)> {
    let np = nodepool();
    let nc = nodeclass();
    let reqs = "/spec/template/spec/requirements";
    vec![
        (
            "restricted label domain in a requirement",
            with(
                &np,
                &format!("{reqs}/0/key"),
                Some(json!("karpenter.sh/team")),
            ),
            r#"label domain "karpenter.sh" is restricted"#,
        ),
        (
            "karpenter.sh/nodepool in a NodePool requirement",
            with(
                &np,
                &format!("{reqs}/0/key"),
                Some(json!("karpenter.sh/nodepool")),
            ),
            r#"label "karpenter.sh/nodepool" is restricted"#,
        ),
        (
            "hostname in a requirement",
            with(
                &np,
                &format!("{reqs}/0/key"),
                Some(json!("kubernetes.io/hostname")),
            ),
            r#"label "kubernetes.io/hostname" is restricted"#,
        ),
        (
            "restricted label domain in template labels",
            with(
                &np,
                "/spec/template/metadata/labels",
                Some(json!({"sub.karpenter.sh/x": "y"})),
            ),
            r#"label domain "karpenter.sh" is restricted"#,
        ),
        (
            "hostname in template labels",
            with(
                &np,
                "/spec/template/metadata/labels",
                Some(json!({"kubernetes.io/hostname": "a"})),
            ),
            r#"label "kubernetes.io/hostname" is restricted"#,
        ),
        (
            "In without values",
            with(&np, &format!("{reqs}/0/values"), Some(json!([]))),
            "requirements with operator 'In' must have a value defined",
        ),
        (
            "Gt with two values",
            with(&np, &format!("{reqs}/4/values"), Some(json!(["2", "3"]))),
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        ),
        (
            "Gt with a negative value",
            with(&np, &format!("{reqs}/4/values"), Some(json!(["-1"]))),
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        ),
        (
            "minValues above the number of values",
            with(&np, &format!("{reqs}/3/minValues"), Some(json!(4))),
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
        ),
        (
            "schedule without duration",
            with(
                &np,
                "/spec/disruption/budgets",
                Some(json!([{"nodes": "0", "schedule": "@daily"}])),
            ),
            "'schedule' must be set with 'duration'",
        ),
        (
            "weight on a static NodePool",
            with(
                &with(&np, "/spec/replicas", Some(json!(3))),
                "/spec/weight",
                Some(json!(10)),
            ),
            "'weight' is not supported on static NodePools",
        ),
        (
            "cpu limit on a static NodePool",
            with(&np, "/spec/replicas", Some(json!(3))),
            "only 'limits.nodes' is supported on static NodePools",
        ),
        (
            "both role and instanceProfile",
            with(
                &nc,
                "/spec/instanceProfile",
                Some(json!("KarpenterNodeInstanceProfile")),
            ),
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
        (
            "empty role",
            with(&nc, "/spec/role", Some(json!(""))),
            "role cannot be empty",
        ),
        (
            "amiFamily contradicting the alias",
            with(&nc, "/spec/amiFamily", Some(json!("AL2"))),
            "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
        ),
        (
            "no alias and no amiFamily",
            with(
                &nc,
                "/spec/amiSelectorTerms",
                Some(json!([{"id": "ami-0123"}])),
            ),
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
        ),
        (
            "alias with other terms",
            with(
                &nc,
                "/spec/amiSelectorTerms/1",
                Some(json!({"id": "ami-0123"})),
            ),
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        ),
        (
            "unsupported alias family",
            with(
                &nc,
                "/spec/amiSelectorTerms/0/alias",
                Some(json!("ubuntu@latest")),
            ),
            "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
        ),
        (
            "restricted tag",
            with(
                &nc,
                "/spec/tags",
                Some(json!({"kubernetes.io/cluster/prod": "owned"})),
            ),
            "tag contains a restricted tag matching kubernetes.io/cluster/",
        ),
        (
            "subnet term with id and tags",
            with(
                &nc,
                "/spec/subnetSelectorTerms/0/id",
                Some(json!("subnet-0123")),
            ),
            "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
        ),
        (
            "image GC thresholds inverted",
            with(
                &nc,
                "/spec/kubelet",
                Some(json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60})),
            ),
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        ),
        (
            "two root volumes",
            with(
                &nc,
                "/spec/blockDeviceMappings",
                Some(json!([
                    {"rootVolume": true, "ebs": {"volumeSize": "20Gi"}},
                    {"rootVolume": true, "ebs": {"volumeSize": "30Gi"}}
                ])),
            ),
            "must have only one blockDeviceMappings with rootVolume",
        ),
    ]
}

#[test]
fn invalid_manifests_are_rejected_by_the_cel_rules() {
    for (name, doc, message) in cel_cases() {
        let errors = cel_errors(&doc, None);
        assert!(
            errors.iter().any(|(_, m)| m == message),
            "{name}: expected {message:?}, got {errors:?}"
        );
    }
}

#[test]
fn transition_rules_reject_changing_what_is_immutable() {
    let np = nodepool();
    let changed = with(
        &np,
        "/spec/template/spec/nodeClassRef/kind",
        Some(json!("OtherNodeClass")),
    );
    let errors = cel_errors(&changed, Some(&np));
    assert!(
        errors
            .iter()
            .any(|(_, m)| m == "nodeClassRef.kind is immutable"),
        "{errors:?}"
    );
    let static_pool = with(&np, "/spec/replicas", Some(json!(3)));
    let static_pool = with(&static_pool, "/spec/limits", None);
    assert!(cel_errors(&static_pool, None).is_empty());
    let errors = cel_errors(&static_pool, Some(&np));
    assert!(
        errors
            .iter()
            .any(|(_, m)| m.starts_with("Cannot transition NodePool")),
        "{errors:?}"
    );
    let claim = example("nodeclaim", "NodeClaim");
    let changed = with(&claim, "/spec/expireAfter", Some(json!("24h")));
    let errors = cel_errors(&changed, Some(&claim));
    assert!(
        errors.iter().any(|(_, m)| m == "spec is immutable"),
        "{errors:?}"
    );
}

fn round_trip<K>(id: &str, doc: &Value) -> anyhow::Result<()>
where
    K: serde::de::DeserializeOwned + serde::Serialize,
{
    let typed: K = serde_json::from_value(doc.clone()).with_context(|| format!("{id}: reading"))?;
    let back = serde_json::to_value(&typed)?;
    assert_eq!(&back, doc, "{id}: lost or changed a field");
    Ok(())
}

#[test]
fn examples_round_trip_through_the_typed_structs_unchanged() -> anyhow::Result<()> {
    let mut seen = BTreeMap::<String, usize>::new();
    for (id, doc) in examples()? {
        let kind = doc["kind"].as_str().unwrap_or("").to_owned();
        match kind.as_str() {
            "NodePool" => round_trip::<crds::NodePool>(&id, &doc)?,
            "NodeClaim" => round_trip::<crds::NodeClaim>(&id, &doc)?,
            "EC2NodeClass" => round_trip::<crds::EC2NodeClass>(&id, &doc)?,
            other => bail!("{id}: unexpected kind {other}"),
        }
        *seen.entry(kind).or_default() += 1;
    }
    assert_eq!(seen.len(), 3, "every kind is exercised: {seen:?}");
    Ok(())
}
