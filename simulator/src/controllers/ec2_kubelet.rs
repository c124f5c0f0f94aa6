//! A kubelet (plus the node-lifecycle part of the cloud controller manager) for instances of an
//! EXTERNAL EC2 endpoint, e.g. moto_server in the end-to-end tests: it polls
//! `DescribeInstances` over HTTP (the raw EC2 Query API, so the simulator needs no AWS SDK and
//! no cloud provider code) and keeps one Node per running instance in the simulated API.
//!
//! What it registers is what a kubelet started by Karpenter's user data registers on EKS: the
//! Node is named after the instance's private DNS name, `spec.providerID` is
//! `aws:///<zone>/<instance-id>`, the labels are the well-known ones (instance type, zone,
//! region, arch, os, hostname, capacity type, and the instance-type labels of the simulator's own
//! catalog), capacity and allocatable come from that catalog (allocatable from the simulator's EKS
//! formulas), and it carries the `karpenter.sh/unregistered:NoExecute` taint Karpenter's user data
//! adds, plus `node.kubernetes.io/not-ready:NoSchedule` until Ready. The NodeClaim's labels and
//! taints are NOT copied here: syncing them is the registration controller's job (the actuator's).
//!
//! Timeline per instance: seen `running` → Node created after `register_after` → Ready after
//! `ready_after`. A Node whose instance is shutting down, terminated or gone is deleted. Pods
//! bound to these Nodes are started by the simulation's own kubelet (`Config::controllers`),
//! which runs pods on every Ready Node of the store.
//!
//! Requests carry a SigV4-shaped `Authorization` header naming the region (moto reads the region
//! from it and checks no signature); a real EC2 endpoint would refuse them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cloud::Catalog;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::kubelet::{NOT_READY_TAINT, UNREGISTERED_TAINT, node_ready, quantities};
use super::{kind, name_of};
use crate::api::Store;
use crate::api::Subresource;
use crate::api::server::set_condition;
use crate::instance_types::allocatable;
use crate::labels;
use crate::resources::Resources;

/// Errors of the external EC2 kubelet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint is not `http://HOST:PORT[/]`.
    #[error("EC2 endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint given.
        endpoint: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The HTTP exchange failed.
    #[error("DescribeInstances on {endpoint}")]
    Http {
        /// The endpoint.
        endpoint: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// EC2 answered with an error status.
    #[error("DescribeInstances on {endpoint}: HTTP {status}: {body}")]
    Status {
        /// The endpoint.
        endpoint: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The response is not the XML expected.
    #[error("DescribeInstances on {endpoint}: bad response: {reason}")]
    Response {
        /// The endpoint.
        endpoint: String,
        /// What is wrong.
        reason: String,
    },
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to follow an external EC2 endpoint.
#[derive(Clone, Debug)]
pub struct Ec2KubeletConfig {
    /// `http://HOST:PORT` of the EC2 Query API.
    pub endpoint: String,
    /// The region (sent in the credential scope; written in the region label).
    pub region: String,
    /// How often `DescribeInstances` is called.
    pub poll_interval: Duration,
    /// From an instance seen running to its Node existing.
    pub register_after: Duration,
    /// From registration to Ready.
    pub ready_after: Duration,
    /// Capacity and labels of the instance types (default: the simulator's built-in catalog).
    pub catalog: Catalog,
}

impl Ec2KubeletConfig {
    /// Defaults: poll every 200 ms, register after 1 s, Ready 1 s later, built-in catalog.
    pub fn new(endpoint: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            region: region.into(),
            poll_interval: Duration::from_millis(200),
            register_after: Duration::from_secs(1),
            ready_after: Duration::from_secs(1),
            catalog: crate::instance_types::default_catalog(),
        }
    }
}

/// A running external-EC2 kubelet; stops when dropped.
#[derive(Debug)]
pub struct Ec2Kubelet {
    task: JoinHandle<()>,
}

// === impl Ec2Kubelet ===

impl Ec2Kubelet {
    /// Starts following `config.endpoint`, writing Nodes into `store` (e.g. `sim.store()`).
    ///
    /// # Errors
    /// [`Error::Endpoint`] when the endpoint is not `http://HOST:PORT`.
    pub fn spawn(store: Arc<Store>, config: Ec2KubeletConfig) -> Result<Self> {
        let host = parse_endpoint(&config.endpoint)?;
        let mut state = State {
            store,
            host,
            config,
            running_since: HashMap::new(),
            registered_at: HashMap::new(),
        };
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(state.config.poll_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match describe_instances(&state.host, &state.config).await {
                    Ok(instances) => state.reconcile(&instances),
                    Err(e) => tracing::warn!(error = %e, "External EC2 not reachable; Nodes kept"),
                }
            }
        });
        Ok(Self { task })
    }
}

impl Drop for Ec2Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One instance as `DescribeInstances` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ec2Instance {
    /// `i-...`.
    pub id: String,
    /// `m5.large`.
    pub instance_type: String,
    /// `us-east-1a`.
    pub zone: String,
    /// `pending`, `running`, `shutting-down`, `terminated`, `stopping`, `stopped`.
    pub state: String,
    /// `ip-10-0-0-4.ec2.internal`.
    pub private_dns_name: String,
    /// `10.0.0.4`.
    pub private_ip: String,
    /// `x86_64` or `arm64`.
    pub architecture: String,
    /// True for spot instances (`instanceLifecycle` = `spot`).
    pub spot: bool,
    /// The instance's tags.
    pub tags: BTreeMap<String, String>,
}

// === impl Ec2Instance ===

impl Ec2Instance {
    /// `aws:///<zone>/<id>`, the providerID a kubelet on EKS reports.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }

    /// The Node name: the private DNS name, else the instance ID.
    pub fn node_name(&self) -> &str {
        if self.private_dns_name.is_empty() {
            &self.id
        } else {
            &self.private_dns_name
        }
    }
}

struct State {
    store: Arc<Store>,
    host: String,
    config: Ec2KubeletConfig,
    running_since: HashMap<String, Instant>,
    registered_at: HashMap<String, Instant>,
}

// === impl State ===

impl State {
    fn reconcile(&mut self, instances: &[Ec2Instance]) {
        let Some(nodes_kind) = kind(&self.store, "", "nodes") else {
            return;
        };
        let now = Instant::now();
        let nodes = self.store.all(&nodes_kind.key());
        let by_provider: HashMap<&str, &Value> = nodes
            .iter()
            .filter_map(|n| n["spec"]["providerID"].as_str().map(|p| (p, n)))
            .collect();
        let mut alive: HashSet<String> = HashSet::new();
        for inst in instances {
            if matches!(inst.state.as_str(), "shutting-down" | "terminated") {
                continue;
            }
            alive.insert(inst.id.clone());
            if inst.state != "running" {
                continue;
            }
            let since = *self.running_since.entry(inst.id.clone()).or_insert(now);
            match by_provider.get(inst.provider_id().as_str()) {
                None => {
                    if since + self.config.register_after <= now {
                        let node = self.node_object(inst);
                        match self.store.create(&nodes_kind, "", node) {
                            Ok(_) => {
                                self.registered_at.insert(inst.id.clone(), now);
                            }
                            Err(e) => {
                                tracing::warn!(instance = %inst.id, error = %e, "Node not registered")
                            }
                        }
                    }
                }
                Some(n) if !node_ready(n) && n["metadata"]["deletionTimestamp"].is_null() => {
                    let registered = *self.registered_at.entry(inst.id.clone()).or_insert(now);
                    if registered + self.config.ready_after <= now {
                        let stamp = self.store.clock().rfc3339();
                        let _ = self.store.mutate(
                            &nodes_kind,
                            "",
                            name_of(n),
                            Subresource::Both,
                            |n| {
                                set_condition(
                                    n,
                                    "Ready",
                                    "True",
                                    Some("KubeletReady"),
                                    Some("kubelet is posting ready status"),
                                    &stamp,
                                );
                                if let Some(ts) = n["spec"]["taints"].as_array_mut() {
                                    ts.retain(|t| t["key"] != NOT_READY_TAINT);
                                }
                                Ok(true)
                            },
                        );
                    }
                }
                Some(_) => {}
            }
        }
        // The cloud node-lifecycle controller: Nodes of instances that are gone are deleted.
        for n in &nodes {
            let Some(id) = n["spec"]["providerID"]
                .as_str()
                .and_then(|p| p.strip_prefix("aws:///"))
                .and_then(|p| p.rsplit('/').next())
            else {
                continue;
            };
            if alive.contains(id) {
                continue;
            }
            self.running_since.remove(id);
            self.registered_at.remove(id);
            if n["metadata"]["deletionTimestamp"].is_null() {
                let _ = self.store.delete(&nodes_kind, "", name_of(n), None);
            }
        }
        self.running_since.retain(|id, _| alive.contains(id));
    }

    fn node_object(&self, inst: &Ec2Instance) -> Value {
        let mut labels_map: Map<String, Value> = Map::new();
        let mut capacity = Resources::default();
        let mut arch = match inst.architecture.as_str() {
            "arm64" => "arm64",
            _ => "amd64",
        }
        .to_string();
        if let Some(t) = self.config.catalog.get(&inst.instance_type) {
            for (k, v) in &t.labels {
                labels_map.insert(k.clone(), json!(v));
            }
            capacity = Resources {
                cpu: t.capacity.cpu,
                memory: t.capacity.memory,
                ephemeral_storage: t.capacity.ephemeral_storage,
                pods: t.capacity.pods,
                extended: t.capacity.extended.clone(),
            };
            if let Some(a) = t.labels.get(labels::ARCH) {
                arch = a.clone();
            }
        } else {
            tracing::warn!(instance_type = %inst.instance_type, "Instance type not in the catalog; Node without capacity");
        }
        let node_allocatable = allocatable(&capacity);
        let capacity_type = if inst.spot {
            labels::CAPACITY_SPOT
        } else {
            labels::CAPACITY_ON_DEMAND
        };
        let mut set = |k: &str, v: &str| {
            labels_map.insert(k.to_string(), json!(v));
        };
        set(labels::INSTANCE_TYPE, &inst.instance_type);
        set("beta.kubernetes.io/instance-type", &inst.instance_type);
        set(labels::ZONE, &inst.zone);
        set("failure-domain.beta.kubernetes.io/zone", &inst.zone);
        set(labels::REGION, &self.config.region);
        set(labels::CAPACITY_TYPE, capacity_type);
        set(labels::ARCH, &arch);
        set("beta.kubernetes.io/arch", &arch);
        set(labels::OS, "linux");
        set("beta.kubernetes.io/os", "linux");
        set(labels::HOSTNAME, inst.node_name());
        let taints = vec![
            json!({"key": NOT_READY_TAINT, "effect": "NoSchedule"}),
            json!({"key": UNREGISTERED_TAINT, "effect": "NoExecute"}),
        ];
        let stamp = self.store.clock().rfc3339();
        let mut node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": inst.node_name(), "labels": labels_map},
            "spec": {"providerID": inst.provider_id(), "taints": taints},
            "status": {
                "capacity": quantities(&capacity),
                "allocatable": quantities(&node_allocatable),
                "addresses": [
                    {"type": "InternalIP", "address": inst.private_ip},
                    {"type": "Hostname", "address": inst.node_name()},
                    {"type": "InternalDNS", "address": inst.node_name()},
                ],
                "nodeInfo": {
                    "architecture": arch,
                    "operatingSystem": "linux",
                    "kubeletVersion": "v1.33.0-dovetail-simulator",
                    "kubeProxyVersion": "v1.33.0-dovetail-simulator",
                    "containerRuntimeVersion": "containerd://1.7.0",
                    "osImage": "Amazon Linux 2023 (simulated)",
                    "kernelVersion": "6.1.0",
                    "machineID": inst.id,
                    "systemUUID": inst.id,
                    "bootID": inst.id,
                },
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            },
        });
        set_condition(
            &mut node,
            "Ready",
            "False",
            Some("KubeletNotReady"),
            Some("container runtime network not ready"),
            &stamp,
        );
        node
    }
}

/// `HOST:PORT` of `http://HOST:PORT[/]`.
fn parse_endpoint(endpoint: &str) -> Result<String> {
    let bad = |reason| Error::Endpoint {
        endpoint: endpoint.to_string(),
        reason,
    };
    let rest = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| bad("only http:// endpoints are supported"))?;
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        return Err(bad("expected http://HOST:PORT"));
    }
    if !host
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
    {
        return Err(bad("expected http://HOST:PORT with a port"));
    }
    Ok(host.to_string())
}

/// Every instance of the endpoint, following `nextToken`.
///
/// # Errors
/// When the endpoint cannot be reached or answers with something else than instances.
pub async fn describe(config: &Ec2KubeletConfig) -> Result<Vec<Ec2Instance>> {
    let host = parse_endpoint(&config.endpoint)?;
    describe_instances(&host, config).await
}

async fn describe_instances(host: &str, config: &Ec2KubeletConfig) -> Result<Vec<Ec2Instance>> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut body = "Action=DescribeInstances&Version=2016-11-15".to_string();
        if let Some(t) = &token {
            body.push_str("&NextToken=");
            body.push_str(&form_escape(t));
        }
        let xml = post(host, &config.endpoint, &config.region, &body).await?;
        let root = xml::parse(&xml).map_err(|reason| Error::Response {
            endpoint: config.endpoint.clone(),
            reason,
        })?;
        if root.name != "DescribeInstancesResponse" {
            return Err(Error::Response {
                endpoint: config.endpoint.clone(),
                reason: format!("root element {:?}", root.name),
            });
        }
        for reservation in root.children_at(&["reservationSet", "item"]) {
            for i in reservation.children_at(&["instancesSet", "item"]) {
                out.push(instance(i));
            }
        }
        token = root.text_at(&["nextToken"]).map(str::to_string);
        if token.as_deref().is_none_or(str::is_empty) {
            return Ok(out);
        }
    }
}

fn instance(i: &xml::Element) -> Ec2Instance {
    let text = |path: &[&str]| i.text_at(path).unwrap_or_default().to_string();
    Ec2Instance {
        id: text(&["instanceId"]),
        instance_type: text(&["instanceType"]),
        zone: text(&["placement", "availabilityZone"]),
        state: text(&["instanceState", "name"]),
        private_dns_name: text(&["privateDnsName"]),
        private_ip: text(&["privateIpAddress"]),
        architecture: text(&["architecture"]),
        spot: i.text_at(&["instanceLifecycle"]) == Some("spot"),
        tags: i
            .children_at(&["tagSet", "item"])
            .map(|t| {
                (
                    t.text_at(&["key"]).unwrap_or_default().to_string(),
                    t.text_at(&["value"]).unwrap_or_default().to_string(),
                )
            })
            .collect(),
    }
}

fn form_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One HTTP/1.0 POST (so the answer is never chunked), returning the body of a 200.
async fn post(host: &str, endpoint: &str, region: &str, body: &str) -> Result<String> {
    let io = |source| Error::Http {
        endpoint: endpoint.to_string(),
        source,
    };
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(host).await?;
        let request = format!(
            "POST / HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded; charset=utf-8\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/{region}/ec2/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .map_err(|_| io(std::io::ErrorKind::TimedOut.into()))?
        .map_err(io)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| Error::Response {
        endpoint: endpoint.to_string(),
        reason: "no end of headers".into(),
    })?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::Response {
            endpoint: endpoint.to_string(),
            reason: format!("bad status line {:?}", head.lines().next()),
        })?;
    if status != 200 {
        return Err(Error::Status {
            endpoint: endpoint.to_string(),
            status,
            body: body.chars().take(300).collect(),
        });
    }
    Ok(body.to_string())
}

/// A minimal XML tree over `xmlparser` (elements and text; attributes ignored), enough for EC2
/// Query API responses.
mod xml {
    use xmlparser::{ElementEnd, Token, Tokenizer};

    /// An element with its children and its text.
    #[derive(Debug, Default)]
    pub(super) struct Element {
        pub(super) name: String,
        pub(super) text: String,
        pub(super) children: Vec<Element>,
    }

    impl Element {
        /// The first descendant along `path` (child names).
        pub(super) fn at(&self, path: &[&str]) -> Option<&Element> {
            let mut e = self;
            for p in path {
                e = e.children.iter().find(|c| c.name == *p)?;
            }
            Some(e)
        }

        /// The trimmed text of the element at `path`.
        pub(super) fn text_at(&self, path: &[&str]) -> Option<&str> {
            self.at(path).map(|e| e.text.trim())
        }

        /// Every child named like the last step of `path`, under the element at the steps before.
        pub(super) fn children_at<'a>(
            &'a self,
            path: &'a [&'a str],
        ) -> impl Iterator<Item = &'a Element> + 'a {
            let (last, parent) = path.split_last().map_or(("", &[][..]), |(l, p)| (*l, p));
            self.at(parent)
                .into_iter()
                .flat_map(|p| p.children.iter())
                .filter(move |c| c.name == last)
        }
    }

    /// Parses a document into its root element.
    pub(super) fn parse(text: &str) -> Result<Element, String> {
        let mut stack: Vec<Element> = Vec::new();
        let mut root = None;
        for token in Tokenizer::from(text) {
            match token.map_err(|e| e.to_string())? {
                Token::ElementStart { local, .. } => stack.push(Element {
                    name: local.as_str().to_string(),
                    ..Element::default()
                }),
                Token::ElementEnd { end, .. } => match end {
                    ElementEnd::Open => {}
                    ElementEnd::Close(..) | ElementEnd::Empty => {
                        let e = stack.pop().ok_or("unbalanced end tag")?;
                        match stack.last_mut() {
                            Some(parent) => parent.children.push(e),
                            None => root = Some(e),
                        }
                    }
                },
                Token::Text { text } | Token::Cdata { text, .. } => {
                    if let Some(e) = stack.last_mut() {
                        e.text.push_str(&unescape(text.as_str()));
                    }
                }
                _ => {}
            }
        }
        root.ok_or_else(|| "no root element".to_string())
    }

    fn unescape(s: &str) -> String {
        if !s.contains('&') {
            return s.to_string();
        }
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find('&') {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            let Some(end) = rest.find(';') else { break };
            let entity = &rest[1..end];
            let c = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => entity
                    .strip_prefix("#x")
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            match c {
                Some(c) => {
                    out.push(c);
                    rest = &rest[end + 1..];
                }
                None => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn nested_items_text_and_entities() {
            let doc = r#"<?xml version="1.0" encoding="UTF-8"?>
<R xmlns="http://ec2"><set><item><k>a &amp; b</k></item><item><k/></item></set><n>x</n></R>"#;
            let r = parse(doc).expect("parses");
            assert_eq!(r.name, "R");
            let items: Vec<_> = r.children_at(&["set", "item"]).collect();
            assert_eq!(items.len(), 2);
            assert_eq!(items[0].text_at(&["k"]), Some("a & b"));
            assert_eq!(items[1].text_at(&["k"]), Some(""));
            assert_eq!(r.text_at(&["n"]), Some("x"));
            assert!(parse("<a><b></a>").is_err());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_other_than_http_host_port_are_refused_naming_the_endpoint() {
        assert_eq!(
            parse_endpoint("http://127.0.0.1:5000/").unwrap(),
            "127.0.0.1:5000"
        );
        for bad in [
            "https://ec2.amazonaws.com",
            "http://127.0.0.1",
            "http://127.0.0.1:5000/path",
            "127.0.0.1:5000",
        ] {
            let e = parse_endpoint(bad).expect_err(bad).to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_describe_instances_answer_becomes_instances() {
        let doc = r#"<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r</requestId>
  <reservationSet><item><reservationId>r-1</reservationId><instancesSet>
    <item><instanceId>i-1</instanceId><instanceType>m5.large</instanceType>
      <placement><availabilityZone>us-east-1b</availabilityZone></placement>
      <instanceState><code>16</code><name>running</name></instanceState>
      <privateDnsName>ip-10-0-1-4.ec2.internal</privateDnsName><privateIpAddress>10.0.1.4</privateIpAddress>
      <architecture>x86_64</architecture><instanceLifecycle>spot</instanceLifecycle>
      <tagSet><item><key>karpenter.sh/nodepool</key><value>default</value></item></tagSet>
    </item></instancesSet></item></reservationSet>
</DescribeInstancesResponse>"#;
        let root = xml::parse(doc).expect("xml");
        let i: Vec<Ec2Instance> = root
            .children_at(&["reservationSet", "item"])
            .flat_map(|r| r.children_at(&["instancesSet", "item"]).map(instance))
            .collect();
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].provider_id(), "aws:///us-east-1b/i-1");
        assert_eq!(i[0].node_name(), "ip-10-0-1-4.ec2.internal");
        assert_eq!(i[0].state, "running");
        assert!(i[0].spot);
        assert_eq!(i[0].tags["karpenter.sh/nodepool"], "default");
    }
}
