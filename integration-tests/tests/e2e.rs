//! End-to-end: `dovetail-watcher`, two `dovetail-planner` replicas and `dovetail-actuator
//! --cloud aws` as separate processes, the ledger on Postgres, EC2/SSM on moto_server and the
//! simulated cluster whose kubelet registers a Node for each instance moto runs
//! (`integration_tests::system`). Every scenario ends by checking that the cluster, the ledger
//! and EC2 agree (one instance, one ledger claim, one NodeClaim and one Node per claim; nothing
//! in flight, nothing leaked).
//!
//! What these tests cannot show, because of moto: capacity errors and fallback to the next
//! override (moto launches the first override and never runs out), and the EC2 client token
//! (moto ignores it: exactly-once across a crash is the actuator's adopt-by-tag). Boot time is
//! the simulated kubelet's `register_after` + `ready_after`.
//!
//! Fails when moto_server is not installed, unless `DOVETAIL_ALLOW_MISSING` names it (then skipped, saying so).

use std::time::Duration;

use actuator::ledger::ClaimState;
use integration_tests::burst::{Sampler, wall_ms};
use integration_tests::system::{self, Options, System, WAIT};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use test_support::try_eventually;

/// Pods of 500m / 512Mi: a few fill a node.
const CPU: &str = "500m";
const MEMORY: &str = "512Mi";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_pending_pods_is_launched_registered_and_bound() -> anyhow::Result<()> {
    let Some(sys) = System::start(Options::new("burst")).await? else {
        return Ok(());
    };
    sys.deploy("web", 40, CPU, MEMORY).await?;
    sys.wait_running("web", 40).await?;
    let a = sys.wait_agreement().await?;
    assert!(a.instances >= 1, "{a:?}");
    assert_eq!(a.instances, a.claims, "{a:?}");
    assert_eq!(a.instances, a.node_claims, "{a:?}");
    assert_eq!(a.instances, a.nodes, "{a:?}");
    // 40 × 500m do not fit one node of the NodePool's largest sensible size only by luck: the
    // planner packed them; every claim went the whole way through the lifecycle.
    let claims = sys.claims().await?;
    assert!(
        claims
            .iter()
            .all(|c| matches!(c.state, ClaimState::Registered | ClaimState::Initialized)),
        "{:?}",
        system::states(&claims)
    );
    // The instances are what the planner asked for: on-demand c/m/r amd64 in the seeded zones.
    for i in sys.instances().await? {
        assert!(!i.spot, "{i:?}");
        assert!(
            ["c", "m", "r"]
                .iter()
                .any(|p| i.instance_type.starts_with(p)),
            "{i:?}"
        );
        assert!(
            cloud_aws::testing::TEST_ZONES.contains(&i.zone.as_str()),
            "{i:?}"
        );
    }
    sys.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_actuator_killed_mid_launch_leaves_exactly_one_instance_per_claim() -> anyhow::Result<()>
{
    let mut opts = Options::new("actuator-kill");
    // The first actuator's worker stops for good right after its first CreateFleet returned,
    // before `launched` is written: the instance exists, the ledger does not know it.
    opts.actuator_pause_at = Some("created");
    let Some(mut sys) = System::start(opts).await? else {
        return Ok(());
    };
    sys.deploy("web", 20, CPU, MEMORY).await?;
    let paused = sys
        .actuator
        .as_mut()
        .expect("actuator")
        .wait_line("DOVETAIL_PAUSED", WAIT)
        .await?;
    let claim = paused
        .split_whitespace()
        .find_map(|w| w.strip_prefix("claim="))
        .expect("claim= in the paused line")
        .to_string();
    sys.kill_actuator().await?;

    let record = sys
        .ledger
        .claim(&claim)
        .await?
        .expect("the claim is in the ledger");
    assert_eq!(record.state, ClaimState::Launching, "{record:?}");
    assert!(record.instance.is_none(), "{record:?}");
    let before = sys.instances_per_claim().await?;
    let created = before.get(&claim).cloned().unwrap_or_default();
    assert_eq!(
        created.len(),
        1,
        "the killed actuator created one: {before:?}"
    );

    sys.start_actuator(None).await?;
    sys.wait_running("web", 20).await?;
    let a = sys.wait_agreement().await?;
    let after = sys.instances_per_claim().await?;
    assert!(after.values().all(|ids| ids.len() == 1), "{after:?}");
    assert_eq!(
        after[&claim], created,
        "the instance was adopted, not launched again"
    );
    assert_eq!(a.instances, after.len(), "{a:?} {after:?}");
    let record = sys.ledger.claim(&claim).await?.expect("claim");
    assert_eq!(
        record.instance.map(|i| i.instance_id),
        created.first().cloned(),
        "the ledger records the adopted instance"
    );
    sys.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_planner_replica_is_failed_over_and_new_pods_still_get_capacity()
-> anyhow::Result<()> {
    let Some(mut sys) = System::start(Options::new("planner-kill")).await? else {
        return Ok(());
    };
    sys.deploy("first", 10, CPU, MEMORY).await?;
    sys.wait_running("first", 10).await?;
    let holder = sys
        .session_holder()
        .await?
        .expect("a replica holds the watcher's session");
    sys.kill_planner(holder).await?;

    sys.deploy("second", 10, "1", "1Gi").await?;
    sys.wait_running("second", 10).await?;
    let a = sys.wait_agreement().await?;
    assert!(a.instances >= 2, "{a:?}");
    let survivor = sys.session_holder().await?;
    assert!(
        survivor.is_some_and(|s| s != holder),
        "the other replica holds the session now: {survivor:?}"
    );
    let reconnects = sys
        .watcher_metric("dovetail_watcher_reconnects_total")
        .await?
        .unwrap_or(0.0);
    assert!(reconnects >= 1.0, "the watcher reconnected: {reconnects}");
    sys.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_restart_loses_nothing() -> anyhow::Result<()> {
    let mut opts = Options::new("pg-restart");
    opts.private_postgres = true;
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    sys.deploy("first", 10, CPU, MEMORY).await?;
    sys.wait_running("first", 10).await?;
    sys.wait_agreement().await?;
    let before = sys.claims().await?;
    let mut events_before = Vec::new();
    for c in &before {
        events_before.push(sys.ledger.events(&c.name).await?);
    }

    let pg = sys.pg.as_ref().expect("private postgres");
    pg.down()?;
    // Pods arrive while the ledger is down: plans are refused (UNAVAILABLE) and planned again.
    sys.deploy("second", 10, "1", "1Gi").await?;
    let s = &sys;
    try_eventually(
        "the second pods to be pending",
        WAIT,
        system::POLL,
        move || async move {
            match s.pods("second").await {
                Ok((10, 0)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    pg.up()?;

    sys.wait_running("second", 10).await?;
    sys.wait_running("first", 10).await?;
    sys.wait_agreement().await?;
    let after = sys.claims().await?;
    for (c, events) in before.iter().zip(&events_before) {
        let now = after
            .iter()
            .find(|a| a.name == c.name)
            .unwrap_or_else(|| panic!("claim {} lost", c.name));
        assert_eq!(now.instance, c.instance, "{}", c.name);
        let now_events = sys.ledger.events(&c.name).await?;
        assert_eq!(
            &now_events[..events.len()],
            &events[..],
            "{}: history kept",
            c.name
        );
    }
    assert!(after.len() > before.len(), "new claims after the restart");
    let per_claim = sys.instances_per_claim().await?;
    assert!(
        per_claim.values().all(|ids| ids.len() == 1),
        "{per_claim:?}"
    );
    sys.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scale_in_is_consolidated() -> anyhow::Result<()> {
    let mut opts = Options::new("consolidation");
    opts.disruption = Some(serde_json::json!({
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "100%"}]
    }));
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    sys.deploy("web", 40, CPU, MEMORY).await?;
    sys.wait_running("web", 40).await?;
    let big = sys.wait_agreement().await?;
    sys.scale("web", 4).await?;
    // Consolidation removes (or replaces) nodes until the four pods sit on fewer of them.
    let s = &sys;
    let big = &big;
    let small = try_eventually(
        "fewer instances after the scale-in",
        WAIT,
        system::POLL,
        move || async move {
            match s.agreement().await {
                Ok(a) if a.instances < big.instances => Ok(a),
                Ok(a) => Err(format!("still {a:?}")),
                Err(e) => Err(e),
            }
        },
    )
    .await?;
    sys.wait_running("web", 4).await?;
    let settled = sys.wait_agreement().await?;
    assert!(settled.instances <= small.instances, "{settled:?}");
    let terminated = sys
        .claims()
        .await?
        .iter()
        .filter(|c| c.state == ClaimState::Terminated)
        .count();
    assert!(terminated >= 1, "consolidated claims end terminated");
    sys.finish().await
}

/// A spot warning leads to the pods running elsewhere before the instance is gone.
/// The actuator reads moto's SQS queue (`--interruption-queue`, the queue's URL); the test sends
/// the EventBridge body AWS delivers two minutes before reclaiming a spot instance. The
/// actuator cordons and taints the Node, deletes its NodeClaim (termination drains it and
/// terminates the instance); the planners see the pods as needing room and launch a
/// replacement. Every pod must run on another node within the warning's two minutes, and the
/// cluster, ledger and EC2 agree at the end with the victim's claim terminated.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_spot_interruption_on_sqs_drains_and_replaces_the_node() -> anyhow::Result<()> {
    let mut opts = Options::new("interruption");
    let queue_name = format!("dovetail-e2e-{}", std::process::id());
    opts.requirements = serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
    ]);
    let Some(mut sys) = System::start(opts).await? else {
        return Ok(());
    };
    let queue = system::sqs_create_queue(sys.moto_url(), &queue_name).await?;
    // Restart the actuator reading the queue (by URL).
    sys.kill_actuator().await?;
    sys.set_actuator_args(vec!["--interruption-queue".into(), queue.clone()]);
    sys.start_actuator(None).await?;

    sys.deploy("web", 6, CPU, MEMORY).await?;
    sys.wait_running("web", 6).await?;
    let before = sys.wait_agreement().await?;
    let per_claim = sys.instances_per_claim().await?;
    let (victim_claim, victim) = per_claim
        .iter()
        .next()
        .map(|(c, ids)| (c.clone(), ids[0].clone()))
        .expect("an instance");
    let victim_pid = sys
        .instances()
        .await?
        .into_iter()
        .find(|i| i.id == victim)
        .expect("the victim instance")
        .provider_id();
    let victim_node = Api::<Node>::all(sys.kube.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(&victim_pid))
        .and_then(|n| n.metadata.name)
        .expect("the victim's Node");
    let on_victim = pods_on(&sys, "web", &victim_node).await?;
    assert!(on_victim >= 1, "pods run on the victim {victim_node}");
    // The EventBridge message AWS sends two minutes before reclaiming a spot instance.
    let message = serde_json::json!({
        "version": "0", "id": "e2e-1", "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-12-01T00:00:00Z",
        "region": system::REGION, "resources": [format!("arn:aws:ec2:us-east-1b:instance/{victim}")],
        "detail": {"instance-id": victim, "instance-action": "terminate"}
    });
    let warned = wall_ms();
    system::sqs_send(sys.moto_url(), &queue, &message.to_string()).await?;

    // Within the warning's two minutes: every pod runs on another node.
    let (s, victim_node_name) = (&sys, victim_node.as_str());
    try_eventually(
        "the pods to run elsewhere",
        Duration::from_secs(120),
        system::POLL,
        move || async move {
            let (total, running) = s.pods("web").await.map_err(|e| format!("{e:#}"))?;
            let left = pods_on(s, "web", victim_node_name)
                .await
                .map_err(|e| format!("{e:#}"))?;
            if total == 6 && running == 6 && left == 0 {
                Ok(())
            } else {
                Err(format!(
                    "{running} of {total} running, {left} on {victim_node_name}"
                ))
            }
        },
    )
    .await?;
    let elsewhere = wall_ms() - warned;
    let victim_id = victim.as_str();
    try_eventually(
        "the interrupted instance to be terminated",
        WAIT,
        system::POLL,
        move || async move {
            let per = s
                .instances_per_claim()
                .await
                .map_err(|e| format!("{e:#}"))?;
            if per.values().flatten().any(|i| i == victim_id) {
                return Err(format!("{victim_id} still live: {per:?}"));
            }
            Ok(())
        },
    )
    .await?;
    let gone = wall_ms() - warned;
    eprintln!(
        "spot warning -> 6 pods running elsewhere: {:.1} s; -> instance terminated: {:.1} s",
        elsewhere as f64 / 1000.0,
        gone as f64 / 1000.0
    );
    sys.wait_running("web", 6).await?;
    let after = sys.wait_agreement().await?;
    assert!(after.instances >= 1, "{before:?} -> {after:?}");
    let victim_record = sys.ledger.claim(&victim_claim).await?.expect("claim");
    assert_eq!(
        victim_record.state,
        ClaimState::Terminated,
        "{victim_record:?}"
    );
    let notes: Vec<String> = sys
        .ledger
        .events(&victim_claim)
        .await?
        .into_iter()
        .map(|e| e.detail)
        .filter(|d| d.starts_with("interrupted: spot interruption warning"))
        .collect();
    assert_eq!(notes.len(), 1, "the ledger records the interruption once");
    assert!(
        Api::<Node>::all(sys.kube.clone())
            .get_opt(&victim_node)
            .await?
            .is_none(),
        "the victim's Node is gone"
    );
    // Counted as Karpenter's interruption controller counts it (its message kind as reason).
    let text = integration_tests::process::scrape(sys.actuator_metrics.expect("metrics")).await?;
    assert!(
        text.lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_disrupted_total{")
                && l.contains(r#"reason="spot_interrupted""#)
                && l.ends_with(" 1")),
        "{text}"
    );
    sys.finish().await
}

/// Pods of `app` bound to Node `node`.
async fn pods_on(sys: &System, app: &str, node: &str) -> anyhow::Result<usize> {
    Ok(Api::<Pod>::namespaced(sys.kube.clone(), "default")
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .count())
}

/// Launch latency figures: from a burst of 1,000 pending pods to the CreateFleet calls sent, and
/// to all pods bound. Printed, never asserted (run by `scripts/bench-e2e.sh`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "benchmark: scripts/bench-e2e.sh runs it and prints the figures"]
async fn burst_of_1000_pods_figures() -> anyhow::Result<()> {
    burst_figures(1_000).await
}

/// The same at 10,000 pods (`scripts/bench-e2e.sh 10000`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "benchmark: scripts/bench-e2e.sh 10000 runs it and prints the figures"]
async fn burst_of_10000_pods_figures() -> anyhow::Result<()> {
    burst_figures(10_000).await
}

/// A burst of `pods` pending pods (250m / 256Mi) through the whole system (debug or release,
/// whatever the binaries are), with simulated boot time excluded: the simulated kubelet's
/// `register_after` and `ready_after` are zero, so an instance's Node appears at the kubelet's
/// next DescribeInstances poll (every 100 ms) and is Ready at the one after.
///
/// A [`Sampler`] polls, every 20 ms, the watcher's batch count, the actuator's create-call
/// count and the Node count, so the times of batch closes, CreateFleet calls and Node
/// registrations are known to within one sample (≈ 20 ms plus the scrape). The ledger's claim events add the
/// `launching` (just before the NodeClaim and the create call) and `launched` (the call
/// returned) stamps.
async fn burst_figures(pods: usize) -> anyhow::Result<()> {
    let mut opts = Options::new(&format!("bench-{pods}"));
    opts.register_after = Duration::ZERO;
    opts.ready_after = Duration::ZERO;
    opts.kubelet_poll = Duration::from_millis(100);
    opts.planners = 2;
    // `DOVETAIL_BENCH_LOG=info` keeps the services' info logs (with timestamps) to see where
    // a launch waits; they cost a little time.
    opts.rust_log = match std::env::var("DOVETAIL_BENCH_LOG").as_deref() {
        Ok("info") => "info",
        Ok("debug") => "info,actuator=debug",
        _ => "warn",
    };
    let Some(sys) = System::start(opts).await? else {
        return Ok(());
    };
    let t0_wall = wall_ms();
    let t0 = tokio::time::Instant::now();
    let sampler = Sampler::start(&sys, t0)?;
    sys.deploy("burst", pods as i32, "250m", "256Mi").await?;
    let mut t_first_claim = None;
    let mut t_bound = None;
    let deadline = t0 + Duration::from_secs(1200);
    while tokio::time::Instant::now() < deadline {
        if t_first_claim.is_none() && !sys.claims().await?.is_empty() {
            t_first_claim = Some(t0.elapsed());
        }
        let (_, running) = sys.pods("burst").await?;
        if running == pods {
            t_bound = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let samples = sampler.finish().await?;
    let t_bound = t_bound.expect("all pods bound within 20 minutes");
    let agreement = sys.wait_agreement().await?;
    let claims = sys.claims().await?;
    let mut launching = Vec::new();
    let mut launched = Vec::new();
    for c in &claims {
        for e in sys.ledger.events(&c.name).await? {
            match e.to {
                ClaimState::Launching => launching.push(e.at - t0_wall),
                ClaimState::Launched => launched.push(e.at - t0_wall),
                _ => {}
            }
        }
    }
    let mut types = std::collections::BTreeMap::<String, usize>::new();
    for i in sys.instances().await? {
        *types.entry(i.instance_type).or_default() += 1;
    }
    let ms = |d: Duration| d.as_millis() as i64;
    let opt = |d: Option<Duration>| d.map_or(-1, ms);
    println!(
        "== e2e burst: {pods} pods (250m / 256Mi) → {} NodeClaims, {} instances {types:?}",
        claims.len(),
        agreement.instances
    );
    println!(
        "   batch windows closed at (ms):                    {:?}",
        samples.batches.iter().map(|d| ms(*d)).collect::<Vec<_>>()
    );
    println!(
        "   first claim in the ledger (plan submitted):      {:>7} ms",
        opt(t_first_claim)
    );
    println!(
        "   first / last `launching` written:                {:>7} / {} ms",
        launching.iter().min().copied().unwrap_or(-1),
        launching.iter().max().copied().unwrap_or(-1)
    );
    println!(
        "   first / last CreateFleet sent ({} calls):        {:>7} / {} ms",
        samples.creates.len(),
        opt(samples.creates.first().copied()),
        opt(samples.creates.last().copied())
    );
    println!(
        "   last CreateFleet returned (last `launched`):     {:>7} ms",
        launched.iter().max().copied().unwrap_or(-1)
    );
    println!(
        "   first / last Node registered ({} Nodes):         {:>7} / {} ms",
        samples.last_node.map_or(0, |(_, n)| n),
        opt(samples.first_node),
        opt(samples.last_node.map(|(d, _)| d))
    );
    println!(
        "   all {pods} pods bound and Running:                {:>7} ms",
        ms(t_bound)
    );
    // The issue's figures: from the close of the batch window that planned the burst (the
    // last close before the first create call) to the creates, and from the last Node to bound.
    let first_create = samples.creates.first().copied();
    let window = first_create.and_then(|c| samples.batches.iter().rfind(|b| **b <= c).copied());
    if let (Some(w), Some(first), Some(last)) = (window, first_create, samples.creates.last()) {
        println!(
            "   after the batch window closed ({} ms): first CreateFleet +{} ms, last CreateFleet +{} ms",
            ms(w),
            ms(first - w),
            ms(*last - w)
        );
    }
    if let Some((node, _)) = samples.last_node {
        println!(
            "   after the last Node registered: all pods bound +{} ms",
            ms(t_bound.saturating_sub(node))
        );
    }
    println!(
        "   (times sampled every 20 ms; simulated boot excluded: register_after = ready_after = 0, the kubelet polls every 100 ms)"
    );
    if std::env::var_os("DOVETAIL_BENCH_LOG").is_some() {
        let kept = std::env::temp_dir().join(format!("dovetail-bench-{pods}-logs"));
        let _ = std::fs::remove_dir_all(&kept);
        std::fs::create_dir_all(&kept)?;
        for e in std::fs::read_dir(&sys.dir)?.flatten() {
            if e.path().extension().is_some_and(|x| x == "log") {
                std::fs::copy(e.path(), kept.join(e.file_name()))?;
            }
        }
        eprintln!("logs kept in {}", kept.display());
    }
    sys.finish().await
}
