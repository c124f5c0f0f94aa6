//! A local cloud stand-in behind [`cloud::CloudProvider`], for `--cloud sim` (the demo) and the
//! tests: instances in memory, optionally persisted to a JSON file after every change so that
//! they outlive a killed actuator process (the crash tests SIGKILL the actuator and count the
//! instances afterwards).
//!
//! It launches the first offering of a request, as moto does. By default it honours
//! `client_token` like EC2; [`Options::ignore_client_token`] makes it ignore the token as moto
//! does, which is how the tests show that the worker's look-up by NodeClaim tag alone keeps
//! launches exactly-once. Faults for tests: failing creates, and creates whose response is lost
//! after the instance was made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use cloud::{
    Catalog, CloudProvider, Error, Instance, InstanceState, LaunchRequest, ListFilter, ProviderId,
    Result,
};
use serde::{Deserialize, Serialize};

use service_shell::clock::Clock;

/// How the stand-in behaves.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Persist instances to this file (created when missing, reloaded when present).
    pub state_file: Option<PathBuf>,
    /// Ignore `client_token` (every create makes a new instance), as moto does.
    pub ignore_client_token: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    instances: BTreeMap<String, Instance>,
    tokens: BTreeMap<String, String>,
    next_id: u64,
    create_calls: u64,
    #[serde(skip)]
    fail_next: u32,
    #[serde(skip)]
    lose_next: u32,
}

/// The stand-in cloud.
#[derive(Debug)]
pub struct StandIn {
    state: Mutex<State>,
    options: Options,
    clock: Clock,
}

// === impl StandIn ===

impl StandIn {
    /// A stand-in as `options` say, reloading the state file when it exists.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the state file exists but cannot be read or parsed.
    pub fn new(options: Options, clock: Clock) -> Result<Self> {
        let state = match &options.state_file {
            Some(p) if p.exists() => read_state(p)?,
            _ => State::default(),
        };
        Ok(Self {
            state: Mutex::new(state),
            options,
            clock,
        })
    }

    /// An in-memory stand-in honouring client tokens.
    pub fn in_memory() -> Self {
        Self {
            state: Mutex::default(),
            options: Options::default(),
            clock: Clock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, s: &State) -> Result<()> {
        let Some(path) = &self.options.state_file else {
            return Ok(());
        };
        let body = serde_json::to_vec_pretty(s).map_err(|e| unavailable(path, e))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, body).map_err(|e| unavailable(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| unavailable(path, e))
    }

    /// Every instance, terminated ones included, by ID.
    pub fn instances(&self) -> Vec<Instance> {
        self.lock().instances.values().cloned().collect()
    }

    /// How many create calls were made.
    pub fn create_calls(&self) -> u64 {
        self.lock().create_calls
    }

    /// The next `n` creates fail with [`Error::Unavailable`] and make nothing.
    pub fn fail_next_creates(&self, n: u32) {
        self.lock().fail_next += n;
    }

    /// The next `n` creates make their instance but answer [`Error::Unavailable`], as a
    /// timed-out call that did succeed.
    pub fn lose_next_responses(&self, n: u32) {
        self.lock().lose_next += n;
    }
}

/// The instances in a stand-in state file (for tests that outlive the actuator process).
///
/// # Errors
/// [`Error::Unavailable`] when it cannot be read or parsed.
pub fn instances_in(path: &Path) -> Result<Vec<Instance>> {
    Ok(read_state(path)?.instances.into_values().collect())
}

fn read_state(path: &Path) -> Result<State> {
    let body = std::fs::read(path).map_err(|e| unavailable(path, e))?;
    serde_json::from_slice(&body).map_err(|e| unavailable(path, e))
}

fn unavailable(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Unavailable {
        message: format!("stand-in state file {}: {e}", path.display()),
    }
}

#[async_trait]
impl CloudProvider for StandIn {
    async fn create(&self, request: &LaunchRequest) -> Result<Instance> {
        let mut s = self.lock();
        s.create_calls += 1;
        if s.fail_next > 0 {
            s.fail_next -= 1;
            self.save(&s)?;
            return Err(Error::Unavailable {
                message: "injected failure".into(),
            });
        }
        if request.client_token.is_empty() {
            return Err(Error::InvalidRequest {
                reason: "client_token: must not be empty".into(),
            });
        }
        let Some(first) = request.offerings.first() else {
            return Err(Error::InvalidRequest {
                reason: "offerings: at least one offering is required".into(),
            });
        };
        if !self.options.ignore_client_token
            && let Some(id) = s.tokens.get(&request.client_token)
            && let Some(i) = s.instances.get(id)
        {
            let i = i.clone();
            self.save(&s)?;
            return Ok(i);
        }
        s.next_id += 1;
        let id = format!("i-{:017x}", s.next_id);
        let ip = format!("10.0.{}.{}", (s.next_id >> 8) & 0xff, s.next_id & 0xff);
        let instance = Instance {
            id: id.clone(),
            provider_id: ProviderId::new(first.zone.clone(), id.clone()),
            instance_type: first.instance_type.clone(),
            zone: first.zone.clone(),
            capacity_type: first.capacity_type,
            state: InstanceState::Running,
            tags: request.tags.clone(),
            private_dns_name: format!("ip-{}.ec2.internal", ip.replace('.', "-")),
            private_ip: ip,
            image_id: request.image_id.clone(),
            subnet_id: None,
            security_group_ids: Vec::new(),
            launch_time: self.clock.now_ms() / 1000,
            price: 0.0,
        };
        s.instances.insert(id.clone(), instance.clone());
        s.tokens.insert(request.client_token.clone(), id);
        let lose = s.lose_next > 0;
        if lose {
            s.lose_next -= 1;
        }
        self.save(&s)?;
        if lose {
            return Err(Error::Unavailable {
                message: "injected lost response".into(),
            });
        }
        Ok(instance)
    }

    async fn get(&self, provider_id: &ProviderId) -> Result<Instance> {
        self.lock()
            .instances
            .get(provider_id.instance_id())
            .cloned()
            .ok_or_else(|| Error::NotFound {
                provider_id: provider_id.to_string(),
            })
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<Instance>> {
        Ok(self
            .lock()
            .instances
            .values()
            .filter(|i| filter.matches(i))
            .cloned()
            .collect())
    }

    async fn delete(&self, provider_id: &ProviderId) -> Result<()> {
        let mut s = self.lock();
        match s.instances.get_mut(provider_id.instance_id()) {
            Some(i) if i.state != InstanceState::Terminated => {
                i.state = InstanceState::Terminated;
                self.save(&s)
            }
            _ => Err(Error::NotFound {
                provider_id: provider_id.to_string(),
            }),
        }
    }

    async fn tag(&self, provider_id: &ProviderId, tags: &cloud::Tags) -> Result<()> {
        let mut s = self.lock();
        match s.instances.get_mut(provider_id.instance_id()) {
            Some(i) => {
                i.tags.extend(tags.clone());
                self.save(&s)
            }
            None => Err(Error::NotFound {
                provider_id: provider_id.to_string(),
            }),
        }
    }

    async fn instance_types(&self) -> Result<Catalog> {
        Ok(Catalog::default())
    }
}

#[cfg(test)]
mod tests {
    use cloud::{CapacityType, OfferingKey, Tags};

    use super::*;

    fn request(token: &str) -> LaunchRequest {
        LaunchRequest {
            client_token: token.into(),
            offerings: vec![OfferingKey {
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::OnDemand,
            }],
            tags: Tags::from([(cloud::TAG_NODECLAIM.to_string(), "c1".to_string())]),
            node_class: None,
            image_id: None,
            node: None,
        }
    }

    #[tokio::test]
    async fn honours_or_ignores_client_tokens_and_persists() {
        let dir = std::env::temp_dir().join(format!("dovetail-standin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("cloud.json");
        let _ = std::fs::remove_file(&file);

        let c = StandIn::new(
            Options {
                state_file: Some(file.clone()),
                ignore_client_token: false,
            },
            Clock::new(),
        )
        .expect("new");
        let a = c.create(&request("t1")).await.expect("create");
        let b = c.create(&request("t1")).await.expect("again");
        assert_eq!(a.id, b.id);
        assert_eq!(instances_in(&file).expect("file").len(), 1);

        let moto = StandIn::new(
            Options {
                state_file: Some(file.clone()),
                ignore_client_token: true,
            },
            Clock::new(),
        )
        .expect("reload");
        let c2 = moto.create(&request("t1")).await.expect("create");
        assert_ne!(c2.id, a.id, "ids stay unique across reloads");
        assert_eq!(instances_in(&file).expect("file").len(), 2);

        moto.lose_next_responses(1);
        assert!(moto.create(&request("t2")).await.is_err());
        assert_eq!(moto.instances().len(), 3, "a lost response still made it");
        moto.delete(&c2.provider_id).await.expect("delete");
        assert!(matches!(
            moto.delete(&c2.provider_id).await,
            Err(Error::NotFound { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
