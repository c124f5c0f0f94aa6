//! The `kube` crate's watcher and reflector against the simulated API: list, watch, relist
//! after 410 Gone, resume after a dropped stream, bookmarks, selectors.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};

use support::{CACHE_POLL, CACHE_WAIT, pod_json, start_without_scheduler};

/// Counts of what a watcher saw.
#[derive(Default, Debug)]
struct Seen {
    inits: usize,
    applies: Vec<String>,
    deletes: Vec<String>,
}

fn spawn_watcher(api: Api<Pod>) -> (reflector::Store<Pod>, Arc<Mutex<Seen>>) {
    let (reader, writer) = reflector::store();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let seen2 = seen.clone();
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()));
    tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while let Some(ev) = s.next().await {
            let Ok(ev) = ev else { continue };
            let mut seen = seen2.lock().unwrap();
            match ev {
                Event::Init => seen.inits += 1,
                Event::Apply(p) => seen.applies.push(p.metadata.name.unwrap_or_default()),
                Event::Delete(p) => seen.deletes.push(p.metadata.name.unwrap_or_default()),
                Event::InitApply(_) | Event::InitDone => {}
            }
        }
    });
    (reader, seen)
}

fn names(store: &reflector::Store<Pod>) -> Vec<String> {
    let mut v: Vec<String> = store
        .state()
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn reflector_lists_then_follows_changes() {
    let sim = start_without_scheduler().await;
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("before", serde_json::json!({}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    let (store, _seen) = spawn_watcher(pods.clone());
    store.wait_until_ready().await.unwrap();
    assert_eq!(names(&store), vec!["before"]);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("after", serde_json::json!({}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    test_support::eventually(
        "the new pod in the store",
        CACHE_WAIT,
        CACHE_POLL,
        || async { (names(&store) == ["after", "before"]).then_some(()) },
    )
    .await;
    pods.delete("before", &Default::default()).await.unwrap();
    test_support::eventually("the deleted pod gone", CACHE_WAIT, CACHE_POLL, || async {
        (names(&store) == ["after"]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn watcher_relists_after_410_gone() {
    let sim = start_without_scheduler().await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "default");
    let (store, seen) = spawn_watcher(pods.clone());
    store.wait_until_ready().await.unwrap();
    assert_eq!(seen.lock().unwrap().inits, 1);
    // Cut the stream and hold the re-watch back while a pod is created behind the watcher's
    // back and the history is compacted: the re-watch from its old version must get 410.
    sim.faults().slow_requests(
        1,
        Duration::from_millis(300),
        Some("/api/v1/namespaces/default/pods"),
    );
    sim.faults().drop_watches();
    let pods_kind = sim.store().kinds().find("", "v1", "pods").unwrap();
    sim.store()
        .create(
            &pods_kind,
            "default",
            pod_json("p1", serde_json::json!({}), "100m"),
        )
        .unwrap();
    sim.store().compact();
    test_support::eventually("a relist", CACHE_WAIT, CACHE_POLL, || async {
        (seen.lock().unwrap().inits >= 2).then_some(())
    })
    .await;
    test_support::eventually(
        "p1 in the store after the relist",
        CACHE_WAIT,
        CACHE_POLL,
        || async { (names(&store) == ["p1"]).then_some(()) },
    )
    .await;

    // An injected 410 on the next watch also forces a relist.
    sim.faults().expire_next_watches(1);
    sim.faults().drop_watches();
    test_support::eventually("a third relist", CACHE_WAIT, CACHE_POLL, || async {
        (seen.lock().unwrap().inits >= 3).then_some(())
    })
    .await;
    assert!(sim.faults().injected() >= 1);
}

#[tokio::test]
async fn watcher_resumes_after_a_dropped_stream_without_relisting() {
    let sim = start_without_scheduler().await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "default");
    let (store, seen) = spawn_watcher(pods.clone());
    store.wait_until_ready().await.unwrap();
    sim.faults().drop_watches();
    // Created while the watcher reconnects: it must arrive through the resumed watch.
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("during", serde_json::json!({}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    test_support::eventually(
        "the pod created during the reconnect",
        CACHE_WAIT,
        CACHE_POLL,
        || async { (names(&store) == ["during"]).then_some(()) },
    )
    .await;
    let s = seen.lock().unwrap();
    assert_eq!(
        s.inits, 1,
        "resumed from its resourceVersion, no relist: {s:?}"
    );
    assert_eq!(s.applies, vec!["during"]);
}

#[tokio::test]
async fn raw_watch_sends_bookmarks_and_honours_selectors() {
    let sim = start_without_scheduler().await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "default");
    let list = pods.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let wp = WatchParams::default().labels("app=web").timeout(5);
    let mut stream = pods.watch(&wp, &rv).await.unwrap().boxed();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("db", serde_json::json!({"app": "db"}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("web", serde_json::json!({"app": "web"}), "100m"))
            .unwrap(),
    )
    .await
    .unwrap();
    let mut added = Vec::new();
    let mut bookmarks = 0;
    while let Ok(Ok(Some(ev))) =
        tokio::time::timeout(Duration::from_secs(2), stream.try_next()).await
    {
        match ev {
            WatchEvent::Added(p) => added.push(p.metadata.name.unwrap()),
            WatchEvent::Bookmark(_) => {
                bookmarks += 1;
                if bookmarks >= 2 {
                    break;
                }
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(added, vec!["web"], "the selector filters out db");
    assert!(bookmarks >= 2, "bookmarks every 100 ms");

    // Relabelling web out of the selection is a DELETED event for this watch.
    let rv = pods
        .get("web")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = pods
        .watch(&WatchParams::default().labels("app=web").timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    pods.patch(
        "web",
        &Default::default(),
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(2), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(ev, WatchEvent::Deleted(ref p) if p.metadata.name.as_deref() == Some("web")),
        "{ev:?}"
    );
}

#[tokio::test]
async fn field_selectors_on_node_name_and_phase() {
    let sim = start_without_scheduler().await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "default");
    // A node for the bound pod (pods bound to missing nodes are garbage collected).
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(sim.kube_client().unwrap());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "n1"}})).unwrap(),
        )
        .await
        .unwrap();
    let mut bound = pod_json("bound", serde_json::json!({}), "100m");
    bound["spec"]["nodeName"] = serde_json::json!("n1");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(bound).unwrap(),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("free", serde_json::json!({}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    let got = |l: kube::core::ObjectList<Pod>| {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let unbound = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(got(unbound), vec!["free"]);
    let on_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName=n1,status.phase!=Succeeded"))
        .await
        .unwrap();
    assert_eq!(got(on_n1), vec!["bound"]);
    let paged = pods.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(paged.items.len(), 1);
    let token = paged.metadata.continue_.clone().expect("a continue token");
    let rest = pods
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(got(rest), vec!["free"]);
    let e = pods
        .list(&ListParams::default().labels("a in b"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 400 && s.message.contains("a in b")),
        "{e:?}"
    );
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_then_changes() {
    let sim = start_without_scheduler().await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("old", serde_json::json!({}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(pods.clone(), watcher::Config::default().streaming_lists()),
    );
    tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while s.next().await.is_some() {}
    });
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(names(&reader), vec!["old"]);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod_json("new", serde_json::json!({}), "100m")).unwrap(),
    )
    .await
    .unwrap();
    test_support::eventually("the new pod", CACHE_WAIT, CACHE_POLL, || async {
        (names(&reader) == ["new", "old"]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn event_recorder_publishes_and_updates_series() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::Resource;
    use kube::runtime::events::{Event as RecEvent, EventType, Recorder, Reporter};

    let sim = start_without_scheduler().await;
    let client = sim.kube_client().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod_json("evented", serde_json::json!({}), "100m")).unwrap(),
        )
        .await
        .unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "dovetail-test".into(),
            instance: None,
        },
    );
    let ev = RecEvent {
        type_: EventType::Warning,
        reason: "FailedScheduling".into(),
        note: Some("no nodes".into()),
        action: "Scheduling".into(),
        secondary: None,
    };
    recorder.publish(&ev, &pod.object_ref(&())).await.unwrap();
    recorder.publish(&ev, &pod.object_ref(&())).await.unwrap();
    let events: Api<K8sEvent> = Api::namespaced(client, "default");
    let list = events.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1, "the second publish patches the series");
    let e = &list.items[0];
    assert_eq!(e.reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("evented")
    );
}

#[tokio::test]
async fn shutdown_ends_open_watches_promptly() {
    let sim = start_without_scheduler().await;
    let pods: Api<Pod> = Api::namespaced(sim.kube_client().unwrap(), "default");
    let mut stream = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    tokio::time::timeout(Duration::from_secs(3), sim.shutdown())
        .await
        .expect("shutdown does not wait for watches");
    let end = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match stream.next().await {
                None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the watch stream ended");
}
