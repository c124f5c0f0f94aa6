//! The external-EC2 kubelet against a real moto_server: an instance run through the EC2 Query
//! API gets a Node (name, providerID, labels, capacity, taints of a kubelet started by
//! Karpenter's user data), the Node turns Ready, and it is deleted once the instance terminates.
//!
//! moto is found through `DOVETAIL_MOTO_SERVER` or `moto_server` on `PATH`; without it the test
//! fails, unless `DOVETAIL_ALLOW_MISSING` names `moto_server` (then it skips, saying so).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use simulator::controllers::ec2_kubelet::{Ec2Kubelet, Ec2KubeletConfig};
use simulator::{Config, Simulation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto() -> Option<Moto> {
    let bin = std::env::var_os("DOVETAIL_MOTO_SERVER")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join("moto_server"))
                    .find(|p| p.is_file())
            })
        });
    let Some(bin) = bin else {
        test_support::missing_tool("moto_server", "set DOVETAIL_MOTO_SERVER");
        return None;
    };
    let mut child = Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moto_server starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.split("Running on ").nth(1)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("moto reports its address");
    Some(Moto { child, url })
}

/// One EC2 Query API call; the body of the answer.
async fn ec2(url: &str, body: &str) -> String {
    let host = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(host).await.expect("connect");
    let req = format!(
        "POST / HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    assert!(
        out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200"),
        "{out}"
    );
    out
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let i = text.find(start).expect(start) + start.len();
    let j = text[i..].find(end).expect(end) + i;
    &text[i..j]
}

/// How long the simulated kubelet may take to follow an instance, and how often a test looks.
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_ec2_instance_gets_a_node_that_goes_with_it() {
    let Some(moto) = moto() else { return };
    let sim = Simulation::start(Config {
        scheduler: false,
        ..Config::default()
    })
    .await
    .expect("simulation");
    let mut config = Ec2KubeletConfig::new(&moto.url, "us-east-1");
    config.poll_interval = Duration::from_millis(100);
    config.register_after = Duration::from_millis(100);
    config.ready_after = Duration::from_millis(100);
    let _kubelet = Ec2Kubelet::spawn(sim.store().clone(), config).expect("kubelet");

    let run = ec2(
        &moto.url,
        "Action=RunInstances&Version=2016-11-15&ImageId=ami-1e749f67&MinCount=1&MaxCount=1&InstanceType=m5.large&Placement.AvailabilityZone=us-east-1b&TagSpecification.1.ResourceType=instance&TagSpecification.1.Tag.1.Key=karpenter.sh%2Fnodeclaim&TagSpecification.1.Tag.1.Value=default-abc",
    )
    .await;
    let id = between(&run, "<instanceId>", "</instanceId>").to_string();
    let dns = between(&run, "<privateDnsName>", "</privateDnsName>").to_string();

    let nodes: Api<Node> = Api::all(sim.kube_client().expect("client"));
    let node = test_support::eventually("the Node to be Ready", WAIT, POLL, || async {
        let n = nodes.get_opt(&dns).await.ok()??;
        let ready = n
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(n)
    })
    .await;
    let spec = node.spec.clone().expect("spec");
    assert_eq!(
        spec.provider_id.as_deref(),
        Some(format!("aws:///us-east-1b/{id}").as_str())
    );
    let labels = node.metadata.labels.clone().expect("labels");
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("topology.kubernetes.io/zone", "us-east-1b"),
        ("topology.kubernetes.io/region", "us-east-1"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/hostname", dns.as_str()),
    ] {
        assert_eq!(
            labels.get(k).map(String::as_str),
            Some(v),
            "{k}: {labels:?}"
        );
    }
    let taints: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    assert_eq!(
        taints,
        ["karpenter.sh/unregistered:NoExecute"],
        "not-ready is gone once Ready"
    );
    let status = node.status.expect("status");
    let cap = status.capacity.expect("capacity");
    assert_eq!(cap["cpu"].0, "2");
    assert_eq!(cap["pods"].0, "29", "the EKS max-pods of m5.large");
    let alloc = status.allocatable.expect("allocatable");
    assert_ne!(
        alloc["memory"], cap["memory"],
        "allocatable leaves the kubelet's reserve"
    );

    ec2(
        &moto.url,
        &format!("Action=TerminateInstances&Version=2016-11-15&InstanceId.1={id}"),
    )
    .await;
    test_support::eventually("the Node to be deleted", WAIT, POLL, || async {
        nodes.get_opt(&dns).await.ok()?.is_none().then_some(())
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test]
async fn an_endpoint_that_is_not_http_host_port_is_refused_naming_it() {
    let sim = Simulation::start(Config {
        scheduler: false,
        controllers: false,
        ..Config::default()
    })
    .await
    .expect("simulation");
    let e = Ec2Kubelet::spawn(
        sim.store().clone(),
        Ec2KubeletConfig::new("https://ec2.us-east-1.amazonaws.com", "us-east-1"),
    )
    .expect_err("https is refused");
    assert!(
        e.to_string()
            .contains("https://ec2.us-east-1.amazonaws.com"),
        "{e}"
    );
}
