//! Karpenter's NodePool Events about zonal shifts (aws/karpenter-provider-aws v1.14.1
//! `pkg/controllers/arczonalshift/controller.go` and `pkg/cloudprovider/events/events.go`): when
//! a zone becomes shifted, `Warning ZonalShiftActive` "Zonal shift detected: offerings in zone
//! NAME (ID) are unavailable for this NodePool" on every NodePool that can provision into it;
//! when the shift ends, `Normal ZonalShiftCleared` "Zonal shift cleared: offerings in zone NAME
//! (ID) are restored for this NodePool". A NodePool can provision into a zone when its
//! EC2NodeClass resolved a subnet there (`status.subnets`, which bridges ARC's zone IDs and the
//! requirements' zone names) and its requirements on `topology.kubernetes.io/zone` and
//! `topology.k8s.aws/zone-id` allow it (no requirement: any zone). The shifts announced
//! advance only after every Event of a change was published, so a failed pass repeats the same
//! transitions at the next read, as Karpenter's controller does.

use std::collections::BTreeMap;

use crds::{EC2NodeClass, NodePool, NodeSelectorRequirementWithMinValues, Operator};
use kube::api::ListParams;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Resource};
use tokio::sync::Mutex;

/// The zone-ID label of Karpenter's AWS provider.
pub const ZONE_ID_LABEL: &str = "topology.k8s.aws/zone-id";

/// Zone ID → zone name of the zones shifted now.
pub type Shifted = BTreeMap<String, String>;

/// Publishes the Events of changes in the shifted zones.
pub struct Announcer {
    client: kube::Client,
    recorder: Recorder,
    announced: Mutex<Shifted>,
}

impl Announcer {
    /// Publishes as `dovetail-actuator` (`instance`) through `client`. Nothing is shifted yet.
    pub fn new(client: kube::Client, instance: String) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "dovetail-actuator".into(),
                instance: Some(instance),
            },
        );
        Self {
            client,
            recorder,
            announced: Mutex::new(Shifted::new()),
        }
    }

    /// Publishes the Events of the change from the shifts last announced to `now`.
    ///
    /// # Errors
    /// The NodePools or an EC2NodeClass could not be read, or an Event not written; the change
    /// is announced again at the next call.
    pub async fn announce(&self, now: &Shifted) -> Result<(), kube::Error> {
        let mut announced = self.announced.lock().await;
        if *announced == *now {
            return Ok(());
        }
        let started: Vec<(&String, &String)> = now
            .iter()
            .filter(|(id, _)| !announced.contains_key(*id))
            .collect();
        let ended: Vec<(&String, &String)> = announced
            .iter()
            .filter(|(id, _)| !now.contains_key(*id))
            .collect();
        let pools = Api::<NodePool>::all(self.client.clone())
            .list(&ListParams::default())
            .await?;
        let classes = Api::<EC2NodeClass>::all(self.client.clone());
        for pool in &pools.items {
            let class = &pool.spec.template.spec.node_class_ref.name;
            let Some(class) = classes.get_opt(class).await? else {
                continue;
            };
            let zones: Shifted = class
                .status
                .as_ref()
                .and_then(|s| s.subnets.as_ref())
                .map(|subnets| {
                    subnets
                        .iter()
                        .filter_map(|s| Some((s.zone_id.clone()?, s.zone.clone())))
                        .collect()
                })
                .unwrap_or_default();
            let reqs = &pool.spec.template.spec.requirements;
            let r = pool.object_ref(&());
            for (shifted, (type_, reason, message)) in [
                (
                    &started,
                    (
                        EventType::Warning,
                        "ZonalShiftActive",
                        "Zonal shift detected: offerings in zone {name} ({id}) are unavailable for this NodePool",
                    ),
                ),
                (
                    &ended,
                    (
                        EventType::Normal,
                        "ZonalShiftCleared",
                        "Zonal shift cleared: offerings in zone {name} ({id}) are restored for this NodePool",
                    ),
                ),
            ] {
                for (id, _) in shifted.iter() {
                    let Some(name) = zones.get(*id) else {
                        continue;
                    };
                    if !(allows(reqs, common::labels::ZONE, name)
                        && allows(reqs, ZONE_ID_LABEL, id))
                    {
                        continue;
                    }
                    let note = message.replace("{name}", name).replace("{id}", id);
                    self.recorder
                        .publish(
                            &Event {
                                type_,
                                reason: reason.into(),
                                note: Some(note),
                                action: "ZonalShift".into(),
                                secondary: None,
                            },
                            &r,
                        )
                        .await?;
                }
            }
        }
        *announced = now.clone();
        Ok(())
    }
}

/// Whether `reqs` allow `value` for `key` (every requirement on `key` holds; none: any value).
pub fn allows(reqs: &[NodeSelectorRequirementWithMinValues], key: &str, value: &str) -> bool {
    reqs.iter().filter(|r| r.key == key).all(|r| {
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator {
            Operator::In => values.iter().any(|v| v == value),
            Operator::NotIn => values.iter().all(|v| v != value),
            Operator::Exists => true,
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, operator: Operator, values: &[&str]) -> NodeSelectorRequirementWithMinValues {
        NodeSelectorRequirementWithMinValues {
            key: key.into(),
            operator,
            values: Some(values.iter().map(|v| v.to_string()).collect()),
            min_values: None,
        }
    }

    /// As `zoneAffected`'s requirement checks (a NodePool restricted to other zones is not
    /// told; one with no zone requirement is).
    #[test]
    fn requirements_decide_which_pools_a_shift_affects() {
        let zone = common::labels::ZONE;
        assert!(allows(&[], zone, "us-east-1a"));
        let other = [req(zone, Operator::In, &["us-east-1b", "us-east-1c"])];
        assert!(!allows(&other, zone, "us-east-1a"));
        assert!(allows(&other, zone, "us-east-1b"));
        let not = [req(ZONE_ID_LABEL, Operator::NotIn, &["use1-az1"])];
        assert!(!allows(&not, ZONE_ID_LABEL, "use1-az1"));
        assert!(allows(&not, zone, "us-east-1a"));
        let absent = [req(zone, Operator::DoesNotExist, &[])];
        assert!(!allows(&absent, zone, "us-east-1a"));
    }
}
