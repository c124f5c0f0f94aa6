//! The publisher against an in-memory planner, on tokio's paused clock: batch windows, the
//! order of messages, and reconnection with a fresh snapshot.

use std::sync::Mutex;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::*;
use crate::informers::NAMES;
use crate::mirror::Kind;

type Update = pb::cluster_update::Update;

/// A message received by the fake planner: which session, when, what.
#[derive(Debug, Clone)]
struct Received {
    session: usize,
    at: Instant,
    update: pb::ClusterUpdate,
}

/// Records every update of every session; answers each CloseBatch with an empty plan until
/// told to fail the current session.
#[derive(Default)]
struct Fake {
    log: Arc<Mutex<Vec<Received>>>,
    plans: Mutex<Vec<mpsc::UnboundedSender<std::result::Result<pb::PlanResponse, tonic::Status>>>>,
    answer: Arc<std::sync::atomic::AtomicBool>,
    arrived: Arc<tokio::sync::Notify>,
    /// Refuse every session at once with INVALID_ARGUMENT (a planner that cannot use the
    /// snapshot).
    refuse: std::sync::atomic::AtomicBool,
}

impl Fake {
    fn new() -> Arc<Self> {
        let f = Self::default();
        f.answer.store(true, std::sync::atomic::Ordering::SeqCst);
        Arc::new(f)
    }

    fn log(&self) -> Vec<Received> {
        self.log.lock().expect("log").clone()
    }

    /// Ends the newest session with UNAVAILABLE, as a dying replica does.
    fn fail_current(&self) {
        if let Some(tx) = self.plans.lock().expect("plans").last() {
            let _ = tx.send(Err(tonic::Status::unavailable("replica gone")));
        }
    }

    /// Waits until `pred` holds over the log.
    async fn until(&self, pred: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        test_support::when_notified(&self.arrived, || {
            let log = self.log();
            pred(&log).then_some(log)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Planners for Arc<Fake> {
    async fn open(&self, make: &mut (dyn FnMut() -> Updates + Send)) -> Result<Plans> {
        let mut updates = make();
        let (tx, rx) = mpsc::unbounded_channel();
        let session = {
            let mut p = self.plans.lock().expect("plans");
            p.push(tx.clone());
            p.len()
        };
        if self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = tx.send(Err(tonic::Status::invalid_argument(
                "cannot use the snapshot",
            )));
        }
        let (log, answer, arrived) = (self.log.clone(), self.answer.clone(), self.arrived.clone());
        tokio::spawn(async move {
            while let Some(update) = updates.next().await {
                let close = matches!(update.update, Some(Update::CloseBatch(_)));
                log.lock().expect("log").push(Received {
                    session,
                    at: Instant::now(),
                    update,
                });
                arrived.notify_waiters();
                if close && answer.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = tx.send(Ok(pb::PlanResponse::default()));
                }
            }
        });
        Ok(UnboundedReceiverStream::new(rx).boxed())
    }
}

fn pod(uid: &str, node: Option<&str>) -> Object {
    Object::Pod(pb::Pod {
        namespace: "default".into(),
        name: uid.into(),
        uid: uid.into(),
        node_name: node.map(String::from),
        ..Default::default()
    })
}

use proto::v1::upsert::Object;

struct Harness {
    mirror: Mirror,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

fn start(fake: &Arc<Fake>, mirror: &Mirror, ready: bool) -> (Harness, Arc<Readiness>) {
    let readiness = Readiness::new(NAMES);
    if ready {
        for n in NAMES {
            readiness.mark(n);
        }
    }
    let publisher = Publisher::new(
        mirror.clone(),
        readiness.clone(),
        Arc::new(fake.clone()),
        SessionBase::default(),
        Timings {
            consolidate_every: Duration::from_secs(3600),
            ..Timings::default()
        },
        Clock::fixed(std::time::Duration::from_secs(1_767_225_600)),
        Metrics::new(),
    );
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(publisher.run(rx));
    (
        Harness {
            mirror: mirror.clone(),
            stop,
            task,
        },
        readiness,
    )
}

fn kinds(log: &[Received]) -> Vec<&'static str> {
    log.iter()
        .map(|r| match r.update.update {
            Some(Update::Snapshot(_)) => "snapshot",
            Some(Update::Delta(_)) => "delta",
            Some(Update::CloseBatch(_)) => "close",
            None => "empty",
        })
        .collect()
}

fn assert_consecutive(log: &[Received]) {
    for w in log.windows(2) {
        if w[0].session == w[1].session {
            assert_eq!(w[1].update.sequence, w[0].update.sequence + 1, "{log:#?}");
        } else {
            assert!(
                w[1].update.sequence > w[0].update.sequence,
                "sequences grow across sessions"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn nothing_is_sent_before_every_informer_synced() {
    let fake = Fake::new();
    let mirror = Mirror::new();
    mirror.update(|s| s.upsert(pod("a", Some("n1"))));
    let (h, readiness) = start(&fake, &mirror, false);
    for n in NAMES.iter().skip(1) {
        readiness.mark(n);
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        fake.log().is_empty(),
        "sent before the last informer synced"
    );
    mirror.update(|s| s.upsert(pod("b", Some("n1"))));
    readiness.mark(NAMES[0]);
    let log = fake.until(|l| !l.is_empty()).await;
    let Some(Update::Snapshot(s)) = &log[0].update.update else {
        panic!("the first message is a snapshot: {log:?}");
    };
    assert_eq!(s.snapshot.as_ref().map(|s| s.pods.len()), Some(2));
    h.stop.send_replace(true);
    let _ = h.task.await;
}

#[tokio::test(start_paused = true)]
async fn pending_pods_are_batched_with_idle_and_max_windows() {
    let fake = Fake::new();
    let mirror = Mirror::new();
    let (h, _) = start(&fake, &mirror, true);
    fake.until(|l| l.len() == 1).await;

    // Three pods 600 ms apart: one window, closing 1 s after the last.
    let t0 = Instant::now();
    for i in 0..3 {
        h.mirror.update(|s| s.upsert(pod(&format!("p{i}"), None)));
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let log = fake.until(|l| kinds(l).contains(&"close")).await;
    let close = log
        .iter()
        .find(|r| matches!(r.update.update, Some(Update::CloseBatch(_))))
        .expect("close");
    assert_eq!(close.at - t0, Duration::from_millis(1200 + 1000));
    let Some(Update::CloseBatch(c)) = &close.update.update else {
        unreachable!()
    };
    assert_eq!(c.now, 1_767_225_600);
    // Every pod reached the planner before the batch closed.
    let upserts: usize = log
        .iter()
        .take_while(|r| !matches!(r.update.update, Some(Update::CloseBatch(_))))
        .filter_map(|r| match &r.update.update {
            Some(Update::Delta(d)) => Some(d.upserts.len()),
            _ => None,
        })
        .sum();
    assert_eq!(upserts, 3);

    // A pod every 500 ms for 15 s: the window is cut at 10 s.
    let before = fake.log().len();
    let t1 = Instant::now();
    for i in 0..30 {
        h.mirror.update(|s| s.upsert(pod(&format!("q{i}"), None)));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let log = fake.log();
    let closes: Vec<Duration> = log[before..]
        .iter()
        .filter(|r| matches!(r.update.update, Some(Update::CloseBatch(_))))
        .map(|r| r.at - t1)
        .collect();
    assert_eq!(closes, vec![Duration::from_secs(10)]);
    assert_consecutive(&log);
    h.stop.send_replace(true);
    let _ = h.task.await;
}

#[tokio::test(start_paused = true)]
async fn changes_arrive_as_ordered_coalesced_deltas() {
    let fake = Fake::new();
    let mirror = Mirror::new();
    mirror.update(|s| s.upsert(pod("a", Some("n1"))));
    let (h, _) = start(&fake, &mirror, true);
    fake.until(|l| l.len() == 1).await;
    h.mirror.update(|s| {
        s.upsert(pod("b", Some("n1")));
        s.upsert(pod("b", Some("n2")));
        s.delete(Kind::Pod, "a");
    });
    let log = fake.until(|l| l.len() == 2).await;
    let Some(Update::Delta(d)) = &log[1].update.update else {
        panic!("a delta: {log:?}");
    };
    assert_eq!(
        d.upserts,
        vec![pb::Upsert {
            object: Some(pod("b", Some("n2")))
        }]
    );
    assert_eq!(
        d.deletes,
        vec![pb::Delete {
            kind: "Pod".into(),
            uid: "a".into()
        }]
    );
    assert_consecutive(&log);
    h.stop.send_replace(true);
    let _ = h.task.await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_session_reopens_with_a_fresh_snapshot_and_closes_the_lost_batch_again() {
    let fake = Fake::new();
    let mirror = Mirror::new();
    let (h, _) = start(&fake, &mirror, true);
    fake.until(|l| l.len() == 1).await;
    // The planner takes the batch but dies before answering.
    fake.answer
        .store(false, std::sync::atomic::Ordering::SeqCst);
    h.mirror.update(|s| s.upsert(pod("a", None)));
    fake.until(|l| kinds(l).contains(&"close")).await;
    // A change the dead replica never sees.
    h.mirror.update(|s| s.upsert(pod("b", Some("n1"))));
    fake.answer.store(true, std::sync::atomic::Ordering::SeqCst);
    fake.fail_current();
    let log = fake
        .until(|l| {
            l.iter()
                .any(|r| r.session == 2 && matches!(r.update.update, Some(Update::CloseBatch(_))))
        })
        .await;
    let second: Vec<&Received> = log.iter().filter(|r| r.session == 2).collect();
    let Some(Update::Snapshot(s)) = &second[0].update.update else {
        panic!("the new session opens with a snapshot: {second:?}");
    };
    let mut uids: Vec<&str> = s
        .snapshot
        .as_ref()
        .expect("snapshot")
        .pods
        .iter()
        .map(|p| p.uid.as_str())
        .collect();
    uids.sort();
    assert_eq!(uids, ["a", "b"], "nothing lost");
    assert!(
        matches!(second[1].update.update, Some(Update::CloseBatch(_))),
        "the unanswered batch is closed again"
    );
    assert_consecutive(&log);
    // Nothing sent twice: no delta on the new stream repeats what the snapshot holds.
    assert!(
        second
            .iter()
            .skip(1)
            .all(|r| !matches!(r.update.update, Some(Update::Delta(_))))
    );
    h.stop.send_replace(true);
    let _ = h.task.await;
}

#[tokio::test(start_paused = true)]
async fn a_planner_that_refuses_every_session_is_retried_with_a_capped_backoff() {
    let fake = Fake::new();
    fake.refuse.store(true, std::sync::atomic::Ordering::SeqCst);
    let mirror = Mirror::new();
    let metrics = Metrics::new();
    let readiness = Readiness::new(NAMES);
    for n in NAMES {
        readiness.mark(n);
    }
    let publisher = Publisher::new(
        mirror.clone(),
        readiness,
        Arc::new(fake.clone()),
        SessionBase::default(),
        Timings {
            consolidate_every: Duration::from_secs(3600),
            retry_max: Duration::from_secs(5),
            ..Timings::default()
        },
        Clock::fixed(std::time::Duration::from_secs(1_767_225_600)),
        metrics.clone(),
    );
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(publisher.run(rx));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let sessions = fake.plans.lock().expect("plans").len();
    // Without a backoff this is thousands (each refusal reopened at once); with 200 ms doubling
    // (jittered to 50-100%), at most 7 fit in 10 s.
    assert!((3..=8).contains(&sessions), "{sessions} sessions in 10 s");
    // Capped: over the next minute the waits stay at most 5 s.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let later = fake.plans.lock().expect("plans").len();
    assert!(
        later - sessions >= 12,
        "{} more sessions in 60 s",
        later - sessions
    );
    let text = service_shell::metrics::Render::render(&metrics);
    assert!(
        text.contains(r#"dovetail_watcher_session_failures_total{why="InvalidArgument"}"#),
        "{text}"
    );
    assert!(
        text.contains("dovetail_watcher_reconnect_backoff_seconds"),
        "{text}"
    );
    stop.send_replace(true);
    let _ = task.await;
}
