//! User data per AMI family, merged with a node class's own `userData`, checked byte for byte
//! against `tests/golden/*`. `UPDATE_GOLDEN=1 cargo nextest run -p cloud-aws user_data`
//! rewrites the files; review the diff before committing it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cloud::node_class::KubeletConfig;
use cloud::{Taint, TaintEffect};
use cloud_aws::Cluster;
use cloud_aws::user_data::{AmiFamily, Bootstrap, render};

fn cluster() -> Cluster {
    Cluster {
        name: "test-cluster".into(),
        endpoint: "https://test-cluster.example".into(),
        ca_bundle: Some("Y2EtYnVuZGxl".into()),
        service_cidr: Some("10.100.0.0/16".into()),
        kubernetes_version: "1.33".into(),
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "karpenter.sh/capacity-type".to_string(),
            "on-demand".to_string(),
        ),
        ("karpenter.sh/nodepool".to_string(), "default".to_string()),
        ("team".to_string(), "platform".to_string()),
    ])
}

fn taints() -> Vec<Taint> {
    vec![
        Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: TaintEffect::NoSchedule,
        },
        Taint {
            key: "karpenter.sh/unregistered".into(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
        },
    ]
}

fn kubelet() -> KubeletConfig {
    KubeletConfig {
        max_pods: Some(58),
        cluster_dns: vec!["10.100.0.10".into()],
        system_reserved: BTreeMap::from([("cpu".to_string(), "100m".to_string())]),
        eviction_hard: BTreeMap::from([("memory.available".to_string(), "5%".to_string())]),
        ..KubeletConfig::default()
    }
}

/// Renders and compares with (or, under `UPDATE_GOLDEN=1`, writes) `tests/golden/<name>`.
fn check(name: &str, family: AmiFamily, custom: Option<&str>, with_kubelet: bool) {
    check_max_pods(name, family, custom, with_kubelet, None);
}

/// [`check`] for a launch template whose types have `max_pods`.
fn check_max_pods(
    name: &str,
    family: AmiFamily,
    custom: Option<&str>,
    with_kubelet: bool,
    max_pods: Option<i64>,
) {
    let cluster = cluster();
    let labels = labels();
    let taints = taints();
    let kubelet = kubelet();
    let text = render(
        family,
        &Bootstrap {
            cluster: &cluster,
            labels: &labels,
            taints: &taints,
            kubelet: with_kubelet.then_some(&kubelet),
            max_pods,
            custom,
        },
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    assert_eq!(text, want, "{name} differs from {}", path.display());
}

#[test]
fn al2023_alone() {
    check("al2023.txt", AmiFamily::Al2023, None, true);
}

#[test]
fn al2023_with_a_shell_script() {
    check(
        "al2023-shell.txt",
        AmiFamily::Al2023,
        Some("#!/bin/bash\necho 'custom' > /etc/motd\n"),
        false,
    );
}

#[test]
fn al2023_with_a_node_config() {
    check(
        "al2023-nodeconfig.txt",
        AmiFamily::Al2023,
        Some(
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n",
        ),
        true,
    );
}

#[test]
fn al2023_with_a_mime_archive() {
    check(
        "al2023-mime.txt",
        AmiFamily::Al2023,
        Some(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho one\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n\n--BOUNDARY--\n",
        ),
        false,
    );
}

#[test]
fn al2_with_a_shell_script() {
    check(
        "al2-shell.txt",
        AmiFamily::Al2,
        Some("#!/bin/bash\necho 'custom'\n"),
        true,
    );
}

#[test]
fn al2_alone_defaults_max_pods() {
    check("al2.txt", AmiFamily::Al2, None, false);
}

/// One launch template per max-pods value: the kubelet gets the ENI-limited count the planner
/// gave the template's types (m5.large: 3 ENIs × 9 + 2 = 29), as Karpenter's launch templates
/// pass `--max-pods` (AL2), `maxPods` (AL2023) and `max-pods` (Bottlerocket).
#[test]
fn each_family_passes_the_templates_max_pods() {
    check_max_pods("al2-max-pods.txt", AmiFamily::Al2, None, false, Some(29));
    check_max_pods(
        "al2023-max-pods.txt",
        AmiFamily::Al2023,
        None,
        false,
        Some(29),
    );
    check_max_pods(
        "bottlerocket-max-pods.toml",
        AmiFamily::Bottlerocket,
        None,
        false,
        Some(29),
    );
}

#[test]
fn bottlerocket_merges_settings() {
    check(
        "bottlerocket.toml",
        AmiFamily::Bottlerocket,
        Some(
            "[settings.kubernetes]\ncluster-name = 'overridden'\nimage-gc-high-threshold-percent = '85'\n\n[settings.kubernetes.node-labels]\n'custom/label' = 'kept'\n\n[settings.autoscaling]\nshould-wait = true\n\n[settings.host-containers.admin]\nenabled = true\n",
        ),
        true,
    );
}

#[test]
fn custom_is_passed_through() {
    check(
        "custom.txt",
        AmiFamily::Custom,
        Some("#!/bin/bash\n/opt/my-bootstrap.sh\n"),
        true,
    );
}

#[test]
fn bad_custom_user_data_is_an_error_naming_it() {
    let cluster = cluster();
    let labels = labels();
    let b = Bootstrap {
        cluster: &cluster,
        labels: &labels,
        taints: &[],
        kubelet: None,
        max_pods: None,
        custom: Some("[settings\nbroken"),
    };
    let e = render(AmiFamily::Bottlerocket, &b).unwrap_err();
    assert!(e.to_string().contains("Bottlerocket userData"), "{e}");
    let mime = Bootstrap {
        custom: Some("MIME-Version: 1.0\nContent-Type: text/plain\n\nhello"),
        ..b
    };
    let e = render(AmiFamily::Al2023, &mime).unwrap_err();
    assert!(e.to_string().contains("boundary"), "{e}");
}
