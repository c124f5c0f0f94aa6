//! `dovetail demo` as a user runs it: the one binary, the service processes it starts from
//! itself, the simulated cluster. The story runs to its end at `--speed 4` and the summary it
//! prints is checked against the cluster it leaves running (`--keep-running`), read through the
//! Kubernetes API with the kubeconfig the demo wrote; the web page (`--serve`) is loaded in a
//! real headless Chromium (Debian's `chromium`, installed by `scripts/chromium.sh`) and its
//! screenshot checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

// The runtime's monotonic clock (clippy.toml keeps std's for clock modules).
use tokio::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// A running `dovetail demo`, its stdout lines forwarded to a channel (and echoed, so a failing
/// test shows what the demo printed).
struct Demo {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-demo-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

impl Demo {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail"))
            .arg("demo")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("dovetail demo starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = r.next_line().await {
                println!("demo| {l}");
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stdout line containing `needle`; returns it.
    async fn line(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.lines.recv()).await {
                Ok(Some(l)) => self.seen.push(l),
                Ok(None) => panic!(
                    "the demo exited ({:?}) before printing {needle:?}",
                    self.child.try_wait()
                ),
                Err(_) => panic!("the demo printed no {needle:?} within {limit:?}"),
            }
        }
    }

    /// Takes every line printed so far (waiting `settle` for more).
    async fn drain(&mut self, settle: Duration) -> &[String] {
        while let Ok(Some(l)) = tokio::time::timeout(settle, self.lines.recv()).await {
            self.seen.push(l);
        }
        &self.seen
    }

    /// SIGTERM, then the exit status (a demo stops its services and exits 0).
    async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running").to_string();
        let _ = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("kill runs");
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the demo stops within 60s of SIGTERM")
            .expect("wait")
    }
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("the demo's kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .expect("kubeconfig loads");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_plays_its_story_and_its_summary_matches_the_cluster() {
    let dir = scratch("story");
    let kubeconfig = dir.join("kubeconfig");
    let summary_path = dir.join("summary.json");
    let mut demo = Demo::start(&[
        "--speed",
        "4",
        "--keep-running",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--summary-json",
        summary_path.to_str().unwrap(),
    ]);
    let printed = demo.line("kubeconfig:", Duration::from_secs(60)).await;
    assert!(
        printed.contains(kubeconfig.to_str().unwrap()),
        "the kubeconfig path is printed at start: {printed}"
    );
    demo.line("== summary", Duration::from_secs(300)).await;
    demo.line("keeping the cluster", Duration::from_secs(30))
        .await;
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary_path).expect("summary written"))
            .expect("summary is JSON");

    // The cluster, read through the API with the kubeconfig the demo printed. The system keeps
    // working after the summary (consolidation, drift in steps), so the nodes it showed are
    // compared with the cluster's through the node actions printed since: a node registered
    // after the summary's look is not in it, one removed since was.
    let client = client(&kubeconfig).await;
    let frame_t: f64 = summary["frameT"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("frameT");
    let summary_nodes: BTreeSet<String> = summary["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["name"].as_str().unwrap_or("").to_string())
        .collect();
    let mut attempt = 0;
    let (pods, node_names) = loop {
        attempt += 1;
        let pods = Api::<Pod>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("pods");
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("nodes");
        let node_names: BTreeSet<String> = nodes
            .items
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let mut then = node_names.clone();
        // Every line printed so far, undone from the newest back: a node added and then removed
        // since the frame (the cluster may still be consolidating) ends up absent, as it was.
        for line in demo.drain(Duration::from_secs(2)).await.iter().rev() {
            let mut words = line.split_whitespace();
            let t = words
                .next()
                .and_then(|t| t.strip_suffix('s')?.parse::<f64>().ok());
            let (Some(t), Some(sign), Some("node"), Some(name)) =
                (t, words.next(), words.next(), words.next())
            else {
                continue;
            };
            if t <= frame_t {
                continue;
            }
            match sign {
                "+" => then.remove(name),
                "-" => then.insert(name.to_string()),
                _ => false,
            };
        }
        // Pods drained by a replacement still going on are pending for a moment: wait for them.
        let all_bound = pods.items.iter().all(|p| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            ) || p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| node_names.contains(n))
        });
        if (then == summary_nodes && all_bound) || attempt == 15 {
            assert_eq!(
                then, summary_nodes,
                "the summary's nodes, from the cluster now and the changes printed since"
            );
            break (pods, node_names);
        }
    };
    assert!(!node_names.is_empty(), "nodes were launched");
    let live: Vec<&Pod> = pods
        .items
        .iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect();
    assert!(live.len() >= 100, "a burst of pods: {}", live.len());
    for p in &live {
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        let node = node.unwrap_or_else(|| panic!("pod {:?} is not bound", p.metadata.name));
        assert!(
            node_names.contains(&node),
            "pod {:?} is bound to {node}, which is not a node",
            p.metadata.name
        );
    }

    // The summary says what the cluster shows.
    assert_eq!(summary["pods"]["total"], live.len(), "{summary:#}");
    assert_eq!(
        summary["pods"]["bound"].as_u64().unwrap_or(0)
            + summary["pods"]["pending"].as_u64().unwrap_or(0),
        live.len() as u64,
        "{summary:#}"
    );
    let phases = summary["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 5, "{summary:#}");
    assert_eq!(phases[0]["name"], "burst");
    assert_eq!(phases[0]["outcome"], "done", "{summary:#}");
    assert_eq!(phases[4]["name"], "failover");
    assert_eq!(phases[4]["outcome"], "done", "{summary:#}");
    for p in phases {
        println!(
            "phase {} {} {:.1}s: {}",
            p["name"], p["outcome"], p["seconds"], p["detail"]
        );
    }
    let cost = summary["costPerHour"].as_f64().expect("cost");
    assert!(cost > 0.0, "{summary:#}");
    if let Some(bound) = summary["lowerBoundPerHour"].as_f64() {
        assert!(
            bound <= cost + 1e-9,
            "the lower bound {bound} is below the cost {cost}"
        );
    }

    let status = demo.stop().await;
    assert!(status.success(), "the demo exits 0 on SIGTERM: {status}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pid the demo printed for `service` on its `services:` line (`actuator ADDR (pid N)`,
/// `planner-0 ADDR (pid N)`, `watcher (pid N)`).
fn pid_of(services: &str, service: &str) -> u32 {
    let at = services
        .find(&format!("{service} "))
        .unwrap_or_else(|| panic!("{service} on {services:?}"));
    services[at..]
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the pid of {service} on {services:?}"))
}

fn sigkill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -KILL {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_service_is_reported_and_restarted_and_the_system_serves_again() {
    let dir = scratch("supervise");
    let kubeconfig = dir.join("kubeconfig");
    let mut demo = Demo::start(&[
        "--speed",
        "4",
        "--keep-running",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    let services = demo.line("services:", Duration::from_secs(120)).await;
    let actuator = pid_of(&services, "actuator");
    // Mid-burst (the first NodeClaims are out): SIGKILL the actuator from outside, as a node
    // failure or the OOM killer would.
    demo.line("+ NodeClaim", Duration::from_secs(120)).await;
    sigkill(actuator);
    let reported = demo
        .line(
            &format!("! actuator (pid {actuator}) exited"),
            Duration::from_secs(15),
        )
        .await;
    assert!(
        reported.contains("signal: 9") && reported.contains("restarting it in"),
        "the line names the exit status and the restart: {reported}"
    );
    let restarted = demo
        .line("actuator restarted (pid", Duration::from_secs(90))
        .await;
    assert!(
        !restarted.contains(&format!("(pid {actuator})")),
        "{restarted}"
    );

    // The restarted actuator serves: NodeClaims planned after it came back get their nodes.
    let seen = demo.seen.len();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if demo.seen[seen..].iter().any(|l| l.contains("+ node ")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no node registered after the actuator's restart"
        );
        if let Ok(Some(l)) = tokio::time::timeout(Duration::from_secs(5), demo.lines.recv()).await {
            demo.seen.push(l);
        }
    }

    // A service killed during the story fails the demo at its end (exit 1), after the story
    // played on.
    demo.line("== summary", Duration::from_secs(300)).await;
    let status = tokio::time::timeout(Duration::from_secs(60), demo.child.wait())
        .await
        .expect("the demo ends after its summary")
        .expect("wait");
    assert_eq!(status.code(), Some(1), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_scenario_directory_is_refused_naming_it() {
    let missing = std::env::temp_dir().join("dovetail-demo-no-such-scenario");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["demo", "--scenario", missing.to_str().unwrap()])
        .output()
        .expect("dovetail runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("--scenario {}", missing.display())),
        "{err}"
    );

    let dir = scratch("bad-scenario");
    std::fs::write(
        dir.join("app.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers: [{name: a, resources: {requests: {cpu: lots}}}]\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["demo", "--scenario", dir.to_str().unwrap()])
        .output()
        .expect("dovetail runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("app.yaml"), "{err}");
    assert!(err.contains("lots"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_speed_or_serve_address_is_refused_naming_the_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["demo", "--speed", "0"])
        .output()
        .expect("dovetail runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--speed"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["demo", "--serve", "not-an-address"])
        .output()
        .expect("dovetail runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--serve not-an-address"), "{err}");
}

/// Chromium: `DOVETAIL_CHROMIUM` (scripts/test.sh sets it from scripts/chromium.sh), else
/// `chromium` on the PATH.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("DOVETAIL_CHROMIUM") {
        return PathBuf::from(p);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "headless Chromium is needed for the web page test: run `bash scripts/chromium.sh` \
         (apt-get install chromium) or set DOVETAIL_CHROMIUM"
    );
}

fn chromium_args(profile: &Path) -> Vec<String> {
    vec![
        "--headless".into(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--hide-scrollbars".into(),
        "--no-first-run".into(),
        format!("--user-data-dir={}", profile.display()),
        "--window-size=1280,1000".into(),
        "--virtual-time-budget=5000".into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_shows_nodes_filled_by_pods_in_headless_chromium() {
    let chromium = chromium();
    let dir = scratch("web");
    let mut demo = Demo::start(&["--speed", "4", "--keep-running", "--serve", "127.0.0.1:0"]);
    let line = demo
        .line("web page: http://", Duration::from_secs(60))
        .await;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the page's URL")
        .to_string();
    // Wait until the burst is placed: nodes exist and no pod is pending.
    let deadline = Instant::now() + Duration::from_secs(240);
    let state_url = format!("{url}api/state");
    let nodes = loop {
        let body = http_get(&state_url).await.unwrap_or_default();
        let state: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let f = &state["frame"];
        let n = f["nodes"].as_array().map_or(0, Vec::len);
        if n > 0 && f["pods_pending"] == 0 && f["pods_bound"].as_u64().unwrap_or(0) > 0 {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "no nodes with every pod bound within 240s: {f}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    // The DOM as Chromium renders it.
    let profile = dir.join("profile");
    let dom = Command::new(&chromium)
        .args(chromium_args(&profile))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .await
        .expect("chromium runs");
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        html.contains("data-loaded=\"true\""),
        "the page rendered a state: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let boxes = html.matches("class=\"node\"").count();
    assert!(
        boxes >= nodes.min(1) && boxes > 0,
        "node boxes in the DOM: {boxes} (nodes: {nodes})"
    );
    let pods = html.matches("class=\"pod\"").count();
    assert!(pods > 0, "pods drawn in the node boxes");
    assert!(html.contains("class=\"cost\""), "the cost line is drawn");

    // The screenshot: the right size, not blank, with node and pod colours.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo-web.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(&chromium)
        .args(chromium_args(&profile))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .await
        .expect("chromium runs");
    assert!(
        shot.exists(),
        "chromium wrote no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("screenshot: {}", shot.display());
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("screenshot"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG frame");
    assert_eq!((info.width, info.height), (1280, 1000));
    let channels = info.color_type.samples();
    let pixels: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let distinct: BTreeSet<[u8; 3]> = pixels.iter().copied().collect();
    assert!(distinct.len() > 20, "not blank: {} colours", distinct.len());
    let near = |c: [u8; 3], t: [u8; 3]| c.iter().zip(t).all(|(a, b)| a.abs_diff(b) <= 12);
    let count = |t: [u8; 3]| pixels.iter().filter(|c| near(**c, t)).count();
    let pod_green = count([0x3a, 0xa8, 0x70]);
    let boxes_px = count([0xe8, 0x87, 0x1e]) + count([0x2f, 0x6f, 0xdf]);
    assert!(pod_green > 100, "pod squares visible: {pod_green} px");
    assert!(boxes_px > 500, "node box borders visible: {boxes_px} px");

    let status = demo.stop().await;
    assert!(status.success(), "the demo exits 0 on SIGTERM: {status}");
    let _ = std::fs::remove_dir_all(&dir);
}

async fn http_get(url: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = tokio::net::TcpStream::connect(host).await?;
    s.write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    Ok(body
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}
