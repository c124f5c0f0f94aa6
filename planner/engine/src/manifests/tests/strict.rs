//! Strict reading and bounded work: duplicate keys, non-finite numbers, negative quantities,
//! workloads without a template, the pod cap, the byte cap and non-regular files.

use super::*;

fn deployment(replicas: &str, requests: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {replicas}\n  template:\n    spec:\n      containers:\n      - name: c\n        resources:\n          requests: {requests}\n"
    )
}

#[test]
fn duplicate_keys_are_errors_naming_key_and_line() {
    let e = load_err(&deployment("1", "{cpu: 500m, cpu: 64}"), "d.yaml");
    assert!(e.contains("duplicate key \"cpu\""), "{e}");
    assert!(e.contains("at line 11"), "{e}");
    let e = load_err(
        "apiVersion: v1\nkind: Pod\nkind: Node\nmetadata: {name: p}\n",
        "p.yaml",
    );
    assert!(
        e.contains("duplicate key \"kind\"") && e.contains("line 3"),
        "{e}"
    );
    let e = load_err(
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1", "a": "2"}}}"#,
        "p.json",
    );
    assert!(
        e.contains("duplicate key \"a\"") && e.contains("line 1"),
        "{e}"
    );
    let e = load_err(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: x, a: y}\nspec: {containers: [{name: c}]}\n",
        "p.yaml",
    );
    assert!(e.contains("duplicate key \"a\""), "{e}");
}

#[test]
fn non_finite_and_negative_quantities_are_errors() {
    for q in [".inf", "-.inf", ".nan", ".NaN"] {
        let e = load_err(&deployment("1", &format!("{{cpu: {q}}}")), "d.yaml");
        assert!(e.contains("not a finite number"), "{q}: {e}");
    }
    let e = load_err(&deployment("1", "{cpu: \"-64\"}"), "d.yaml");
    assert!(
        e.contains("requests.cpu") && e.contains("must not be negative"),
        "{e}"
    );
}

#[test]
fn a_workload_without_a_template_is_an_error() {
    let e = load_err(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
        "d.yaml",
    );
    assert!(e.contains("spec.template.spec.containers"), "{e}");
}

#[test]
fn the_pod_cap_is_checked_before_expanding() {
    let mut b = SnapshotBuilder::new();
    b.add_document_text(&deployment("2147483647", "{cpu: 1}"), "d.yaml")
        .expect("reads");
    let e = b.check_pod_count(DEFAULT_MAX_PODS).unwrap_err().to_string();
    assert!(
        e.contains("Deployment default/web: spec.replicas")
            && e.contains("more than the limit of 1000000"),
        "{e}"
    );
    let mut b = SnapshotBuilder::new();
    b.add_document_text(&deployment("3", "{cpu: 1}"), "d.yaml")
        .expect("reads");
    assert!(b.check_pod_count(3).is_ok());
    assert!(b.check_pod_count(2).is_err());
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-strict-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn the_byte_cap_ends_an_endless_input() {
    let limits = Limits {
        max_input_bytes: 1 << 20,
        ..Limits::default()
    };
    let e = load_paths_with(&["/dev/zero".to_string()], &limits)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/dev/zero") && e.contains("not a regular file"),
        "{e}"
    );
    let dir = scratch("big");
    let f = dir.join("big.yaml");
    std::fs::write(&f, "#".repeat(2 << 20)).expect("write");
    let e = load_paths_with(&[f.display().to_string()], &limits)
        .unwrap_err()
        .to_string();
    assert!(e.contains("larger than the limit of 1048576 bytes"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn folders_skip_fifos() {
    let dir = scratch("fifo");
    let fifo = dir.join("x.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::fs::write(
        dir.join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
    )
    .expect("write");
    let l = load_paths(&[dir.display().to_string()]).expect("reads the regular file only");
    assert_eq!(l.snapshot.pods.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_pod_twice_is_refused_by_the_validation() {
    let dir = scratch("twice");
    let f = dir.join("pod.yaml");
    std::fs::write(
        &f,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
    )
    .expect("write");
    let p = f.display().to_string();
    let e = load_paths(&[p.clone(), p]).unwrap_err();
    let Error::Invalid(v) = e else {
        panic!("expected a validation error, got {e}");
    };
    assert_eq!(v.field(), "snapshot.pods[1].name");
    let _ = std::fs::remove_dir_all(&dir);
}
