//! Memory of a real `dovetail-planner` process under many concurrent `Session`s (ignored: a
//! benchmark that prints figures, run on purpose):
//!
//! ```text
//! cargo nextest run --workspace -E 'binary(session_memory)' --run-ignored only --no-capture
//! ```
//!
//! SESSIONS streams (default 100) each send a snapshot of PODS pending pods (default 3,000)
//! and close a batch, all at once, and stay open until every one has its answer: a plan, or
//! RESOURCE_EXHAUSTED when the planner's `--max-held-objects` has no room left (a stream shed
//! because every permit was taken is opened again, as the watcher does). The planner's
//! resident set is sampled all along; its peak (VmHWM), the answers and the time are printed.
//! `DOVETAIL_BENCH_SESSIONS`, `DOVETAIL_BENCH_PODS`, `DOVETAIL_BENCH_SCHEDULABLE=1` (pods the
//! fixture's pools can take: each plan then takes seconds in a debug build) and
//! `DOVETAIL_BENCH_PLANNER_ARGS` (extra flags, e.g. `--max-held-objects 100000000` for no
//! shared limit) change the run; `DOVETAIL_PLANNER_BIN` runs another planner binary.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

// The runtime's monotonic clock (clippy.toml keeps std's for clock modules).
use tokio::time::Instant;

use integration_tests::binary;
use integration_tests::planner_process::PlannerProcess;
use proto::v1 as pb;
use tokio_stream::StreamExt;

fn env_or(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `VmRSS` and `VmHWM` of a process, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// A snapshot of `pods` pending pods. Unless `schedulable`, each selects a label no NodePool
/// has: the pods are held and validated as any, but their plan is quick (every pod is
/// unschedulable at the first pool check), so the run measures what sessions hold rather than
/// the planning, which the server's permits bound (`--max-concurrent-requests`).
fn snapshot(pods: usize, schedulable: bool) -> pb::ClusterUpdate {
    let mut s = planner_wire::fixtures::snapshot(pods);
    if !schedulable {
        for p in &mut s.pods {
            p.node_selector
                .insert("example.com/bench-pool".into(), "none".into());
        }
    }
    pb::ClusterUpdate {
        sequence: 1,
        update: Some(pb::cluster_update::Update::Snapshot(pb::SessionSnapshot {
            snapshot: Some(planner_wire::to_wire::snapshot(&s)),
            catalog_source: None,
            options: None,
        })),
    }
}

/// What one session came to.
#[derive(Debug)]
enum Answer {
    Planned,
    Refused,
    Other(String),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: prints the planner's peak memory under concurrent sessions"]
async fn concurrent_sessions_peak_memory() {
    let sessions = env_or("DOVETAIL_BENCH_SESSIONS", 100);
    let pods = env_or("DOVETAIL_BENCH_PODS", 3_000);
    let extra = std::env::var("DOVETAIL_BENCH_PLANNER_ARGS").unwrap_or_default();
    let mut args = vec!["--insecure-no-auth", "--request-timeout", "30m"];
    args.extend(extra.split_whitespace());
    let bin = binary("planner-service", "dovetail-planner").expect("the planner binary");
    let planner = PlannerProcess::start(&bin, &args)
        .await
        .expect("planner starts");
    let pid = planner.child.id().expect("running");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (idle, _) = memory(pid);

    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let done = done.clone();
        async move {
            let mut most: f64 = 0.0;
            while !done.load(Ordering::Relaxed) {
                most = most.max(memory(pid).0);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            most
        }
    });

    let schedulable = std::env::var("DOVETAIL_BENCH_SCHEDULABLE").is_ok_and(|v| v == "1");
    let update = snapshot(pods, schedulable);
    let start = Instant::now();
    let all_answered = Arc::new(tokio::sync::Barrier::new(sessions + 1));
    let mut tasks = Vec::new();
    for _ in 0..sessions {
        let endpoint = format!("http://{}", planner.endpoint());
        let update = update.clone();
        let all_answered = all_answered.clone();
        tasks.push(tokio::spawn(async move {
            let channel = tonic::transport::Endpoint::from_shared(endpoint)
                .expect("uri")
                .connect()
                .await
                .expect("connects");
            let mut client = pb::planner_client::PlannerClient::new(channel)
                .max_decoding_message_size(usize::MAX)
                .max_encoding_message_size(usize::MAX);
            // A stream opened while the server's permits are all taken is shed at once
            // (RESOURCE_EXHAUSTED naming its concurrent requests): opened again, as the watcher
            // does after a backoff. A refusal for want of room (--max-held-objects) is final.
            let mut shed = 0u32;
            let (answer, tx) = loop {
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                tx.send(update.clone()).await.expect("send");
                tx.send(pb::ClusterUpdate {
                    sequence: 2,
                    update: Some(pb::cluster_update::Update::CloseBatch(pb::CloseBatch {
                        now: 0,
                    })),
                })
                .await
                .expect("send");
                let answer = match client
                    .session(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await
                {
                    Err(s) => Err(s),
                    Ok(r) => match r.into_inner().next().await {
                        Some(Ok(_)) => Ok(Answer::Planned),
                        Some(Err(s)) => Err(s),
                        None => Ok(Answer::Other("the stream ended without an answer".into())),
                    },
                };
                match answer {
                    Ok(a) => break (a, tx),
                    Err(s)
                        if s.code() == tonic::Code::ResourceExhausted
                            && s.message().contains("concurrent requests") =>
                    {
                        shed += 1;
                        tokio::time::sleep(Duration::from_millis(200 * u64::from(shed.min(10))))
                            .await;
                    }
                    Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                        break (Answer::Refused, tx);
                    }
                    Err(s) => {
                        break (
                            Answer::Other(format!("{:?}: {}", s.code(), s.message())),
                            tx,
                        );
                    }
                }
            };
            // Every session stays open (its state held) until all have their answer.
            all_answered.wait().await;
            drop(tx);
            (answer, shed)
        }));
    }
    all_answered.wait().await;
    let took = start.elapsed();
    let (all_open, peak) = memory(pid);
    let mut planned = 0;
    let mut refused = 0;
    let mut other = Vec::new();
    let mut sheds = 0;
    for t in tasks {
        let (answer, shed) = t.await.expect("no panic");
        sheds += shed;
        match answer {
            Answer::Planned => planned += 1,
            Answer::Refused => refused += 1,
            Answer::Other(s) => other.push(s),
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (after, _) = memory(pid);
    done.store(true, Ordering::Relaxed);
    let sampled = sampler.await.expect("sampler");
    println!(
        "{sessions} concurrent sessions x {pods} pending pods ({}), planner flags {args:?} ({})",
        if schedulable {
            "schedulable"
        } else {
            "unschedulable: quick plans"
        },
        bin.display()
    );
    println!("| | MiB |");
    println!("|---|---|");
    println!("| RSS idle | {idle:.1} |");
    println!("| peak RSS (VmHWM) | {peak:.1} |");
    println!("| highest RSS sampled | {sampled:.1} |");
    println!("| RSS with every session answered and open | {all_open:.1} |");
    println!("| RSS 2 s after they closed | {after:.1} |");
    println!(
        "answers in {:.1} s: {planned} planned, {refused} refused for want of room (RESOURCE_EXHAUSTED), {} other {other:?}; {sheds} opens shed while the permits were taken, opened again",
        took.as_secs_f64(),
        other.len()
    );
    assert!(other.is_empty(), "every session planned or was refused");
    assert_eq!(planned + refused, sessions);
}
