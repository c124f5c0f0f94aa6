//! The real `dovetail-actuator --cloud aws` process against the simulator's AWS endpoint whose
//! SQS interruption queue and EC2 DescribeInstanceTypes fail persistently (fault injection,
//! `simulator::aws::Aws::fail_operation`): the interruption loop and the live catalog loop back
//! off (the simulator counts their calls over a window), say why in their metrics, and recover
//! once the endpoint works again.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use simulator::aws::{AwsError, DEFAULT_INTERRUPTION_QUEUE};
use support::TestDb;
use support::process::get_metrics;
use test_support::eventually;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
// The runtime's monotonic clock (clippy.toml keeps std's for clock modules).

/// The catalog read interval: its failures retry from 2 s doubling up to this.
const REFRESH: &str = "16s";

async fn start(sim: &simulator::Simulation, ledger: &str, kubeconfig: &Path) -> (Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dovetail-actuator"));
    cmd.args([
        "--ledger",
        ledger,
        "--cloud",
        "aws",
        "--aws-endpoint",
        &sim.aws_endpoint(),
        "--aws-region",
        "us-east-1",
        "--cluster-name",
        "demo",
        "--cluster-endpoint",
        sim.api_url(),
        "--kubernetes-version",
        "1.33",
        "--interruption-queue",
        DEFAULT_INTERRUPTION_QUEUE,
        "--catalog-refresh",
        REFRESH,
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--insecure-no-auth",
        "--drain-delay",
        "0s",
    ])
    .arg("--kubeconfig")
    .arg(kubeconfig)
    .env("AWS_ACCESS_KEY_ID", "testing")
    .env("AWS_SECRET_ACCESS_KEY", "testing")
    .env("AWS_EC2_METADATA_DISABLED", "true")
    .env_remove("AWS_SESSION_TOKEN")
    .env_remove("AWS_PROFILE")
    .env("RUST_LOG", "warn")
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .kill_on_drop(true);
    for (key, _) in std::env::vars() {
        if key.starts_with("DOVETAIL_") {
            cmd.env_remove(&key);
        }
    }
    let mut child = cmd.spawn().expect("spawn dovetail-actuator");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("actuator started in time")
        .expect("stdout")
        .expect("a listening line");
    let metrics = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("metrics="))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, metrics)
}

/// The value of the sample `name` (with its labels, as printed) in a scrape.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// How often a wait of this test looks again.
const POLL: Duration = Duration::from_millis(250);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_queue_and_catalog_reads_back_off_and_recover() {
    let sim = simulator::Simulation::start(simulator::Config::default())
        .await
        .expect("simulator");
    let aws = sim.aws().clone();
    // The interruption queue is gone (SQS answers every receive so) and EC2 refuses the
    // catalog's reads (credentials without ec2:DescribeInstanceTypes): both persist until
    // healed.
    aws.fail_operation(
        "ReceiveMessage",
        AwsError::client("QueueDoesNotExist", "The specified queue does not exist."),
    );
    aws.fail_operation(
        "DescribeInstanceTypes",
        AwsError {
            status: 403,
            code: "UnauthorizedOperation".into(),
            message: "You are not authorized to perform this operation.".into(),
        },
    );
    let dir = std::env::temp_dir().join(test_support::unique("dovetail-loop-backoff"));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).expect("kubeconfig");
    let db = TestDb::sqlite();
    let (mut child, metrics) = start(&sim, db.url(), &kubeconfig).await;

    // The first failures happen at once; then a window of 30 s is counted.
    eventually(
        "the first failed receive",
        Duration::from_secs(30),
        POLL,
        || async { aws.calls("ReceiveMessage") >= 1 && aws.calls("DescribeInstanceTypes") >= 1 },
    )
    .await;
    let window = Duration::from_secs(30);
    let (receives, reads) = (
        aws.calls("ReceiveMessage"),
        aws.calls("DescribeInstanceTypes"),
    );
    tokio::time::sleep(window).await;
    let receives = aws.calls("ReceiveMessage") - receives;
    let reads = aws.calls("DescribeInstanceTypes") - reads;
    println!(
        "in {window:?} of failures: {receives} ReceiveMessage, {reads} DescribeInstanceTypes calls"
    );
    // Receives back off 1, 2, 4, 8, 16 s (+ up to a quarter): at most 5 in the window (an
    // unpaced loop makes thousands). Catalog reads back off 2, 4, 8, 16 s (the lifecycle reads
    // the instance types once more at start, then backs off from 1 s): at most 6 (a fixed
    // retry every tenth of the interval made 19).
    assert!((1..=5).contains(&receives), "{receives} receives");
    assert!((1..=6).contains(&reads), "{reads} catalog reads");

    let text = get_metrics(&metrics).await;
    for (name, at_least) in [
        (
            r#"dovetail_actuator_loop_failures_total{loop="interruption",reason="invalid_request"}"#,
            3.0,
        ),
        (
            r#"dovetail_actuator_loop_failures_total{loop="catalog",reason="invalid_request"}"#,
            3.0,
        ),
        (
            r#"dovetail_actuator_loop_backoff_seconds{loop="interruption"}"#,
            4.0,
        ),
        (
            r#"dovetail_actuator_loop_backoff_seconds{loop="catalog"}"#,
            4.0,
        ),
    ] {
        let v = sample(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"));
        assert!(v >= at_least, "{name} {v}\n{text}");
    }

    // Healed, and a message waits on the queue (a receive long-polls up to 20 s when the queue
    // is empty): both loops work again within their current backoff (at most 16 s × 1.25) and
    // the message is handled.
    aws.heal();
    aws.queues()
        .send(DEFAULT_INTERRUPTION_QUEUE, "not json".into(), 0);
    eventually("the loops recover", Duration::from_secs(40), POLL, || async {
        let text = get_metrics(&metrics).await;
        sample(
            &text,
            r#"dovetail_actuator_loop_backoff_seconds{loop="interruption"}"#,
        ) == Some(0.0)
            && sample(
                &text,
                r#"dovetail_actuator_loop_backoff_seconds{loop="catalog"}"#,
            ) == Some(0.0)
            && sample(
                &text,
                r#"dovetail_actuator_catalog_refreshes_total{outcome="ok"}"#,
            )
            .is_some_and(|n| n >= 1.0)
            && sample(
                &text,
                r#"dovetail_actuator_interruption_messages_total{kind="garbled",outcome="dropped"}"#,
            ) == Some(1.0)
    })
    .await;

    let _ = child.kill().await;
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
