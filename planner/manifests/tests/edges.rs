//! `dovetail plan`'s edges, one table per kind of hostile or mistaken input: each refusal names
//! the file, the document, the object and the field (never a path of the internal snapshot),
//! and bounded work ends quickly.

use planner_manifests::{Limits, Reader, load_paths, load_paths_with};

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
";

fn pod(name: &str, containers: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n{containers}"
    )
}

fn deployment(name: &str, replicas: &str, containers: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n  template:\n    spec:\n      containers:\n{containers}"
    )
}

/// Reads `text` as the file `source` within `limits`; the refusal's message.
fn refusal(text: &str, source: &str, limits: Limits) -> String {
    let mut r = Reader::with_limits(limits);
    match r.add_document_text(text, source).and_then(|()| r.finish()) {
        Ok(l) => panic!(
            "{source}: expected a refusal, read {} pods",
            l.snapshot.pods.len()
        ),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_refusal_names_file_document_object_and_field() {
    let big_cpu = "    - {name: a, resources: {requests: {cpu: \"5000000000000000\"}}}\n    - {name: b, resources: {requests: {cpu: \"5000000000000000\"}}}\n";
    let pool = |from: &str, to: &str| {
        assert!(POOL.contains(from), "{from}");
        POOL.replace(from, to)
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "container requests that sum past what a quantity holds",
            pod("big", big_cpu),
            "p.yaml: document 1 (Pod default/big): spec.containers: the requests of cpu sum to 10000000000000000000m",
        ),
        (
            "one request too large to read",
            pod(
                "huge",
                "    - {name: a, resources: {requests: {memory: 4Ei}}}\n",
            ),
            "p.yaml: document 1 (Pod default/huge): spec.containers[0].resources.requests.memory: invalid quantity \"4Ei\"",
        ),
        (
            "a Deployment's requests that overflow name the template",
            deployment("web", "2", &big_cpu.replace("    - ", "      - ")),
            "p.yaml: document 1 (Deployment default/web): spec.template.spec.containers: the requests of cpu sum to",
        ),
        (
            "hostPort out of range, as the gRPC door refuses it",
            pod(
                "p",
                "    - {name: a, ports: [{containerPort: 80, hostPort: 70000}]}\n",
            ),
            "p.yaml: document 1 (Pod default/p): spec.containers[*].ports[*].hostPort: must be between 1 and 65535, got 70000",
        ),
        (
            "hostPort out of range in a Deployment's template",
            deployment(
                "web",
                "1",
                "      - {name: a, ports: [{containerPort: 80, hostPort: 70000}]}\n",
            ),
            "p.yaml: document 1 (Deployment default/web): spec.template.spec.containers[*].ports[*].hostPort: must be between 1 and 65535",
        ),
        (
            "a negative request on a bound pod",
            pod(
                "p",
                "    - {name: a, resources: {requests: {cpu: \"-2\"}}}\n",
            )
            .replace("spec:\n", "spec:\n  nodeName: n1\n"),
            "p.yaml: document 1 (Pod default/p): spec.containers[0].resources.requests.cpu: invalid quantity \"-2\"",
        ),
        (
            "two Deployments default/web",
            format!(
                "{}---\n{}",
                deployment("web", "3", "      - {name: a}\n"),
                deployment("web", "3", "      - {name: a}\n")
            ),
            "p.yaml: document 2 (Deployment default/web): metadata.name: duplicate Deployment default/web: names are unique per kind and namespace",
        ),
        (
            "two pods default/p",
            format!(
                "{}---\n{}",
                pod("p", "    - {name: a}\n"),
                pod("p", "    - {name: a}\n")
            ),
            "p.yaml: document 2 (Pod default/p): metadata.name: duplicate pod default/p",
        ),
        (
            "a NodePool without nodeClassRef, as the CRD refuses it",
            pool(
                "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
                "",
            ),
            "p.yaml: document 1 (NodePool default): spec.template.spec.nodeClassRef.group: Required value",
        ),
        (
            "minValues 51",
            pool(
                "operator: In, values: [amd64]",
                "operator: Exists, minValues: 51",
            ),
            "p.yaml: document 1 (NodePool default): spec.template.spec.requirements[0].minValues: must be 1-50, got 51",
        ),
        (
            "a requirement on karpenter.sh/nodepool",
            pool(
                "kubernetes.io/arch, operator: In, values: [amd64]",
                "karpenter.sh/nodepool, operator: In, values: [x]",
            ),
            "p.yaml: document 1 (NodePool default): spec.template.spec.requirements[0].key:",
        ),
        (
            "a budget schedule that is no cron",
            pool(
                "  template:\n",
                "  disruption:\n    budgets: [{nodes: \"1\", schedule: \"61 * * * *\", duration: 1h}]\n  template:\n",
            ),
            "p.yaml: document 1 (NodePool default): spec.disruption.budgets[0].schedule:",
        ),
        (
            "a budget of 150%",
            pool(
                "  template:\n",
                "  disruption:\n    budgets: [{nodes: \"150%\"}]\n  template:\n",
            ),
            "p.yaml: document 1 (NodePool default): spec.disruption.budgets[0].nodes:",
        ),
        (
            "an expireAfter that would overflow",
            pool(
                "      nodeClassRef",
                "      expireAfter: 2562047h\n      nodeClassRef",
            ),
            "p.yaml: document 1 (NodePool default): spec.template.spec.expireAfter:",
        ),
        (
            "a consolidationPolicy this planner does not know",
            pool(
                "  template:\n",
                "  disruption: {consolidationPolicy: Sometimes}\n  template:\n",
            ),
            "p.yaml: document 1 (NodePool default): spec.disruption.consolidationPolicy: unknown variant `Sometimes`",
        ),
        (
            "a List item",
            format!(
                "apiVersion: v1\nkind: List\nitems:\n- {}\n",
                "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a, ports: [{containerPort: 1, hostPort: 70000}]}]}}"
            ),
            "p.yaml: document 1 (Pod default/p): items[0].spec.containers[*].ports[*].hostPort: must be between 1 and 65535",
        ),
    ];
    let mut wrong = Vec::new();
    for (name, text, want) in &cases {
        let got = refusal(text, "p.yaml", Limits::default());
        if !got.starts_with(want) || got.contains("snapshot.") {
            wrong.push(format!("{name}:\n  want {want}\n  got  {got}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_pod_cap_is_checked_as_documents_are_read_and_before_expanding() {
    let tiny = |max_pods| Limits {
        max_pods,
        ..Limits::default()
    };
    let three_pods = ["p1", "p2", "p3"]
        .map(|n| pod(n, "    - {name: a}\n"))
        .join("---\n");
    let cases: Vec<(&str, String, Limits, &str)> = vec![
        (
            "replicas far over the default cap: refused before any pod is made",
            deployment("web", "2147483647", "      - {name: a}\n"),
            Limits::default(),
            "d.yaml: document 1 (Deployment default/web): spec.replicas: the input expands to at least 2147483647 pods, more than the limit of 1000000 (--max-pods)",
        ),
        (
            "exactly one over",
            deployment("web", "4", "      - {name: a}\n"),
            tiny(3),
            "d.yaml: document 1 (Deployment default/web): spec.replicas: the input expands to at least 4 pods, more than the limit of 3",
        ),
        (
            "pods counted as they are read: the document that crosses the cap",
            three_pods,
            tiny(2),
            "d.yaml: document 3 (Pod default/p3): metadata.name: the input expands to at least 3 pods",
        ),
        (
            "a Job counts its parallelism",
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 9\n  template:\n    spec:\n      containers: [{name: a}]\n".into(),
            tiny(5),
            "d.yaml: document 1 (Job default/j): spec.parallelism: the input expands to at least 9 pods",
        ),
    ];
    for (name, text, limits, want) in cases {
        let got = refusal(&text, "d.yaml", limits);
        assert!(
            got.starts_with(want),
            "{name}:\n  want {want}\n  got  {got}"
        );
    }
    let mut r = Reader::with_limits(tiny(3));
    r.add_document_text(&deployment("web", "3", "      - {name: a}\n"), "d.yaml")
        .expect("at the cap");
    assert_eq!(r.finish().expect("valid").snapshot.pods.len(), 3);
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-edges-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[cfg(unix)]
#[test]
fn symlink_loops_in_a_folder_end_and_each_file_is_read_once() {
    use std::os::unix::fs::symlink;
    let dir = scratch("loops");
    std::fs::create_dir_all(dir.join("sub")).expect("sub");
    std::fs::write(dir.join("sub/pod.yaml"), pod("p", "    - {name: a}\n")).expect("write");
    // Two links to the folder itself, one to its parent, one to the file.
    symlink(&dir, dir.join("self-a")).expect("link");
    symlink(&dir, dir.join("self-b")).expect("link");
    symlink("..", dir.join("sub/up")).expect("link");
    symlink(dir.join("sub/pod.yaml"), dir.join("again.yaml")).expect("link");
    let cases = [
        vec![dir.display().to_string()],
        vec![dir.join("self-a").display().to_string()],
        vec![
            dir.display().to_string(),
            dir.join("sub").display().to_string(),
        ],
    ];
    for paths in cases {
        let l = load_paths(&paths).unwrap_or_else(|e| panic!("{paths:?}: {e}"));
        assert_eq!(l.snapshot.pods.len(), 1, "{paths:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nesting_is_capped_before_the_parser_runs() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "200,000 nested flow sequences, never closed",
            "[".repeat(200_000),
            "deep.yaml: document 1: nesting deeper than 512 levels at line 1",
        ),
        (
            "200,000 nested JSON arrays, closed",
            deep(200_000),
            "deep.yaml: document 1: invalid JSON: recursion limit exceeded",
        ),
        (
            "deep nesting in the second document, on its third line",
            format!(
                "{}---\napiVersion: v1\nkind: Pod\nx: {}\n",
                pod("p", "    - {name: a}\n"),
                deep(600)
            ),
            "deep.yaml: document 2: nesting deeper than 512 levels at line 10",
        ),
        (
            "deep flow mappings",
            format!("a: {}{}\n", "{b: ".repeat(1000), "}".repeat(1000)),
            "deep.yaml: document 1: nesting deeper than 512 levels at line 1",
        ),
    ];
    for (name, text, want) in cases {
        let got = refusal(&text, "deep.yaml", Limits::default());
        assert!(
            got.starts_with(want),
            "{name}:\n  want {want}\n  got  {got}"
        );
    }
    // Brackets inside quoted strings and comments do not count.
    let quoted = format!(
        "{}  # {}\n",
        pod(
            "q",
            &format!("    - {{name: a, command: [\"{}\"]}}\n", "[".repeat(2000))
        ),
        "[".repeat(2000)
    );
    let mut r = Reader::new();
    r.add_document_text(&quoted, "q.yaml")
        .expect("quoted brackets read");
    assert_eq!(r.finish().expect("valid").snapshot.pods.len(), 1);
}

#[test]
fn the_byte_cap_names_the_file() {
    let dir = scratch("bytes");
    let f = dir.join("pods.yaml");
    std::fs::write(&f, pod("p", "    - {name: a}\n")).expect("write");
    let limits = Limits {
        max_input_bytes: 16,
        ..Limits::default()
    };
    let e = load_paths_with(&[f.display().to_string()], &limits)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "{}: input is larger than the limit of 16 bytes",
            f.display()
        )),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
