//! Karpenter's NodeOverlays (feature gate `NodeOverlay`), applied for one plan.
//!
//! As kubernetes-sigs/karpenter `pkg/controllers/nodeoverlay/controller.go` and `store.go` do:
//!
//! - overlays are taken in `OrderByWeight` order (weight descending, absent = 0; equal weights
//!   by name, later in the alphabet first);
//! - an overlay selects, per NodePool, the instance types whose requirements (the pool's name
//!   and template labels, the type's labels, the zones and capacity types of its offerings)
//!   are compatible with its own (`getOverlaidOfferings`), and of those the offerings whose
//!   zone and capacity type it allows;
//! - `price` / `priceAdjustment` change those offerings' prices, `capacity` adds (or replaces)
//!   extended resources of those types; a value an overlay of higher weight set is kept;
//! - an overlay that would set the same offering's price, or the same resource, as an overlay
//!   of the same weight already did conflicts: it is applied nowhere (no partial application)
//!   and its status says `ValidationSucceeded=False`, reason `Conflict`;
//! - an overlay whose requirements break Karpenter's rules (restricted label keys, `NotIn`
//!   without values) is applied nowhere, reason `RuntimeValidation`.
//!
//! Preview instance types (aws/karpenter-provider-aws
//! `pkg/providers/instancetype/offering/offering.go` `GetOverlayPrice`, `base_resolver.go`): an
//! offering no price source knows ([`crate::catalog::Offering::unpriced`]) takes the `price` of
//! a valid overlay whose one requirement is `node.kubernetes.io/instance-type In [...]` and
//! becomes available; without one it stays unavailable, so it is never chosen.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::{Catalog, ForNodeClass, InstanceType};
use crate::labels;
use crate::model::{ClusterSnapshot, NodeOverlay, NodePool, Operator, PlanOptions, PriceChange};
use crate::requirements::{Requirement, Requirements, Undefined};

/// `ValidationSucceeded=False` reason of an overlay whose requirements break Karpenter's rules.
pub const RUNTIME_VALIDATION: &str = "RuntimeValidation";
/// `ValidationSucceeded=False` reason of an overlay that conflicts with another of its weight.
pub const CONFLICT: &str = "Conflict";

/// What a plan says about one NodeOverlay: its `ValidationSucceeded` condition.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlayStatus {
    /// The overlay's name.
    pub name: String,
    /// `ValidationSucceeded` (and so `Ready`) is True.
    pub validation_succeeded: bool,
    /// Empty when valid; `RuntimeValidation` or `Conflict` otherwise.
    pub reason: String,
    /// Karpenter's message (`conflict with another overlay`, or what the rule says).
    pub message: String,
}

/// An offering of a type, by zone and capacity type.
type OfferingKey = (String, String);

/// One offering's price change and the weight of the last overlay that matched it.
#[derive(Clone, Debug)]
struct PriceUpdate {
    change: PriceChange,
    lowest_weight: i32,
}

/// The capacity an instance type gets, and what the lowest-weight overlay so far set.
#[derive(Clone, Debug, Default)]
struct CapacityUpdate {
    update: BTreeMap<String, i64>,
    lowest_resources: Vec<String>,
    lowest_weight: i32,
}

#[derive(Clone, Debug, Default)]
struct TypeUpdate {
    /// By (zone, capacity type).
    price: BTreeMap<(String, String), PriceUpdate>,
    capacity: Option<CapacityUpdate>,
}

/// The overlays of one plan, evaluated: what each NodePool's instance types get, each overlay's
/// status, and the prices of preview types.
#[derive(Clone, Debug, Default)]
pub struct Evaluation {
    /// NodePool → instance type → update.
    updates: BTreeMap<String, BTreeMap<String, TypeUpdate>>,
    /// Every overlay's status, by name.
    pub statuses: Vec<NodeOverlayStatus>,
    /// Preview prices by instance type.
    preview: BTreeMap<String, f64>,
}

// === impl Evaluation ===

impl Evaluation {
    /// Evaluates the snapshot's overlays against its NodePools, each seeing `catalog` as its
    /// EC2NodeClass does. Nothing when the `NodeOverlay` gate is off or there is no overlay.
    pub fn of(snapshot: &ClusterSnapshot, catalog: &Catalog, options: &PlanOptions) -> Self {
        if !options.node_overlay || snapshot.node_overlays.is_empty() {
            return Self::default();
        }
        let mut class_catalogs: BTreeMap<&str, Catalog> = BTreeMap::new();
        for np in &snapshot.node_pools {
            if let Some(name) = np.node_class.as_deref()
                && let Some(class) = snapshot.node_classes.iter().find(|c| c.name == name)
            {
                class_catalogs
                    .entry(name)
                    .or_insert_with(|| catalog.for_node_class(Some(class)));
            }
        }
        let pools: Vec<(&NodePool, &Catalog)> = snapshot
            .node_pools
            .iter()
            .filter_map(|np| match np.node_class.as_deref() {
                None => Some((np, catalog)),
                Some(name) => class_catalogs.get(name).map(|c| (np, c)),
            })
            .collect();
        Self::evaluate(&snapshot.node_overlays, &pools)
    }

    /// [`Evaluation::of`] with the NodePools and their catalogs given (NodePools whose
    /// EC2NodeClass is missing are not evaluated, as Karpenter skips a NodePool whose
    /// instance types cannot be listed).
    pub fn evaluate(overlays: &[NodeOverlay], pools: &[(&NodePool, &Catalog)]) -> Self {
        let mut out = Self::default();
        let mut ordered: Vec<&NodeOverlay> = overlays.iter().collect();
        ordered.sort_by(|a, b| weight(b).cmp(&weight(a)).then_with(|| b.name.cmp(&a.name)));
        let mut failed: BTreeMap<&str, (&str, String)> = BTreeMap::new();
        for o in ordered {
            let reqs = match runtime_validate(o) {
                Ok(r) => r,
                Err(message) => {
                    failed.insert(&o.name, (RUNTIME_VALIDATION, message));
                    continue;
                }
            };
            // Validate against every NodePool first, then store: no partial application.
            let mut matches: Vec<(&str, &str, Vec<OfferingKey>)> = Vec::new();
            for (np, catalog) in pools {
                for it in &catalog.instance_types {
                    if let Some(offs) = overlaid_offerings(np, it, &reqs) {
                        matches.push((np.name.as_str(), it.name.as_str(), offs));
                    }
                }
            }
            let conflict = matches
                .iter()
                .any(|(pool, it, offs)| out.conflicts(pool, it, offs, o));
            if conflict {
                failed.insert(
                    &o.name,
                    (CONFLICT, "conflict with another overlay".to_string()),
                );
                continue;
            }
            for (pool, it, offs) in matches {
                out.store(pool, it, &offs, o);
            }
        }
        let mut names: Vec<&NodeOverlay> = overlays.iter().collect();
        names.sort_by(|a, b| a.name.cmp(&b.name));
        for o in names {
            let status = match failed.get(o.name.as_str()) {
                Some((reason, message)) => NodeOverlayStatus {
                    name: o.name.clone(),
                    validation_succeeded: false,
                    reason: (*reason).to_string(),
                    message: message.clone(),
                },
                None => NodeOverlayStatus {
                    name: o.name.clone(),
                    validation_succeeded: true,
                    ..NodeOverlayStatus::default()
                },
            };
            // GetOverlayPrice: valid overlays with a price and one requirement,
            // `node.kubernetes.io/instance-type In [...]`; later names win.
            if status.validation_succeeded
                && let Some(price) = o.price.and_then(PriceChange::absolute)
                && let [r] = o.requirements.as_slice()
                && r.key == labels::INSTANCE_TYPE
                && r.operator == Operator::In
            {
                for v in &r.values {
                    out.preview.insert(v.clone(), price);
                }
            }
            out.statuses.push(status);
        }
        out
    }

    fn conflicts(&self, pool: &str, it: &str, offs: &[(String, String)], o: &NodeOverlay) -> bool {
        let Some(update) = self.updates.get(pool).and_then(|p| p.get(it)) else {
            return false;
        };
        let w = weight(o);
        let price = o.price.is_some()
            && offs
                .iter()
                .any(|k| update.price.get(k).is_some_and(|p| p.lowest_weight == w));
        let capacity = !o.capacity.extended.is_empty()
            && update.capacity.as_ref().is_some_and(|c| {
                c.lowest_weight == w
                    && o.capacity
                        .extended
                        .keys()
                        .any(|k| c.lowest_resources.contains(k))
            });
        price || capacity
    }

    fn store(&mut self, pool: &str, it: &str, offs: &[(String, String)], o: &NodeOverlay) {
        let w = weight(o);
        let update = self
            .updates
            .entry(pool.to_string())
            .or_default()
            .entry(it.to_string())
            .or_default();
        if let Some(change) = o.price {
            for k in offs {
                update
                    .price
                    .entry(k.clone())
                    .and_modify(|p| p.lowest_weight = w)
                    .or_insert(PriceUpdate {
                        change,
                        lowest_weight: w,
                    });
            }
        }
        if !o.capacity.extended.is_empty() {
            let c = update.capacity.get_or_insert_with(CapacityUpdate::default);
            for (k, v) in &o.capacity.extended {
                c.update.entry(k.clone()).or_insert(*v);
            }
            c.lowest_resources = o.capacity.extended.keys().cloned().collect();
            c.lowest_weight = w;
        }
    }

    /// True when no overlay changes anything.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty() && self.preview.is_empty()
    }

    /// `catalog` with the preview prices: each unpriced offering of a type a valid overlay
    /// prices becomes available at that price (borrowed when there is none).
    pub fn price_previews<'a>(&self, catalog: Cow<'a, Catalog>) -> Cow<'a, Catalog> {
        let touches = catalog.instance_types.iter().any(|it| {
            self.preview.contains_key(&it.name) && it.offerings.iter().any(|o| o.unpriced)
        });
        if !touches {
            return catalog;
        }
        let mut out = catalog.into_owned();
        for it in &mut out.instance_types {
            let Some(&price) = self.preview.get(&it.name) else {
                continue;
            };
            for o in it.offerings.iter_mut().filter(|o| o.unpriced) {
                o.price = price;
                o.available = true;
                o.unpriced = false;
            }
        }
        Cow::Owned(out)
    }

    /// The catalog as NodePool `pool` sees it with the overlays applied (borrowed when no
    /// overlay selects any of its types).
    pub fn for_pool<'a>(&self, pool: &str, catalog: &'a Catalog) -> Cow<'a, Catalog> {
        let Some(types) = self.updates.get(pool) else {
            return Cow::Borrowed(catalog);
        };
        let mut out = catalog.clone();
        for it in &mut out.instance_types {
            let Some(update) = types.get(&it.name) else {
                continue;
            };
            for o in &mut it.offerings {
                if let Some(p) = update.price.get(&(o.zone.clone(), o.capacity_type.clone())) {
                    o.price = p.change.apply(o.price);
                }
            }
            if let Some(c) = &update.capacity {
                for (k, v) in &c.update {
                    it.capacity.extended.insert(k.clone(), *v);
                }
            }
        }
        Cow::Owned(out)
    }
}

/// An overlay's weight, absent counting as 0 (`lo.FromPtr`).
fn weight(o: &NodeOverlay) -> i32 {
    o.weight.unwrap_or(0)
}

/// Karpenter's `RuntimeValidate` of the requirements (`v1.ValidateRequirement`): restricted
/// label keys (well-known ones such as `karpenter.sh/nodepool` are allowed), qualified names
/// and label values, `NotIn` with values; the requirements as a set.
fn runtime_validate(o: &NodeOverlay) -> Result<Requirements, String> {
    for r in &o.requirements {
        if r.key != labels::NODEPOOL && crate::validation::is_restricted_requirement_key(&r.key) {
            return Err(format!(
                "invalid value: label {:?} is restricted in requirements, restricted",
                r.key
            ));
        }
        if let Err(why) = qualified_name(&r.key) {
            return Err(format!(
                "invalid value: key {} is not a qualified name, {why} in requirements, restricted",
                r.key
            ));
        }
        if let Some(v) = r.values.iter().find(|v| !label_value(v)) {
            return Err(format!(
                "invalid value: invalid value {v} for key {} in requirements, restricted",
                r.key
            ));
        }
        if r.operator == Operator::NotIn && r.values.is_empty() {
            return Err(format!(
                "key {} with operator NotIn must have a value defined",
                r.key
            ));
        }
    }
    Requirements::from_input(&o.requirements)
        .map_err(|e| format!("invalid value: {e} in requirements, restricted"))
}

/// Kubernetes' `IsQualifiedName`: an optional DNS-subdomain prefix (at most 253 characters)
/// and `/`, then a name of at most 63 alphanumerics, `-`, `_` or `.`, starting and ending
/// alphanumeric.
fn qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if p.is_empty() || p.len() > 253 || !p.split('.').all(label_ok) {
            return Err("the prefix must be a DNS subdomain".to_string());
        }
    }
    if name.is_empty() || name.len() > 63 {
        return Err("the name part must be 1-63 characters".to_string());
    }
    if !label_value(name) {
        return Err(
            "the name part must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
                .to_string(),
        );
    }
    Ok(())
}

/// Kubernetes' `IsValidLabelValue`: empty, or at most 63 alphanumerics, `-`, `_` or `.`,
/// starting and ending alphanumeric.
fn label_value(v: &str) -> bool {
    let b = v.as_bytes();
    v.is_empty()
        || (v.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// The offerings (zone, capacity type) of `it` that `reqs` selects in NodePool `np`, `None`
/// when the overlay does not select the type (`getOverlaidOfferings`).
fn overlaid_offerings(
    np: &NodePool,
    it: &InstanceType,
    reqs: &Requirements,
) -> Option<Vec<(String, String)>> {
    let mut type_labels = np.labels.clone();
    type_labels.extend(it.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    type_labels.insert(labels::INSTANCE_TYPE.to_string(), it.name.clone());
    type_labels.insert(labels::NODEPOOL.to_string(), np.name.clone());
    let mut type_reqs = Requirements::from_labels(&type_labels);
    let os: Vec<String> = if it.os.is_empty() {
        vec!["linux".to_string()]
    } else {
        it.os.clone()
    };
    type_reqs.add(Requirement::is_in(labels::OS, os));
    type_reqs.add(Requirement::is_in(
        labels::ZONE,
        it.offerings.iter().map(|o| o.zone.clone()),
    ));
    type_reqs.add(Requirement::is_in(
        labels::CAPACITY_TYPE,
        it.offerings.iter().map(|o| o.capacity_type.clone()),
    ));
    type_reqs.compatible(reqs, Undefined::Deny).ok()?;
    let zone = reqs.get(labels::ZONE);
    let ct = reqs.get(labels::CAPACITY_TYPE);
    let offs: Vec<(String, String)> = it
        .offerings
        .iter()
        .filter(|o| zone.is_none_or(|z| z.has(&o.zone)))
        .filter(|o| ct.is_none_or(|c| c.has(&o.capacity_type)))
        .map(|o| (o.zone.clone(), o.capacity_type.clone()))
        .collect();
    (!offs.is_empty()).then_some(offs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Offering;
    use crate::model::Requirement as InputRequirement;

    fn it(name: &str, price: f64) -> InstanceType {
        let mut t = crate::test_util::instance_type(name, 2, 8, 110, price);
        t.offerings.retain(|o| o.capacity_type == "on-demand");
        t
    }

    fn req(key: &str, op: Operator, values: &[&str]) -> InputRequirement {
        InputRequirement {
            key: key.to_string(),
            operator: op,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    fn overlay(name: &str, types: &[&str], weight: Option<i32>, price: PriceChange) -> NodeOverlay {
        NodeOverlay {
            name: name.to_string(),
            requirements: vec![req(labels::INSTANCE_TYPE, Operator::In, types)],
            price: Some(price),
            weight,
            ..NodeOverlay::default()
        }
    }

    fn pool(name: &str) -> NodePool {
        NodePool {
            name: name.to_string(),
            ..NodePool::default()
        }
    }

    fn catalog() -> Catalog {
        Catalog {
            instance_types: vec![
                it("default-instance-type", 1.02),
                it("small-instance-type", 0.5),
            ],
            notes: vec![],
        }
    }

    fn status<'a>(e: &'a Evaluation, name: &str) -> &'a NodeOverlayStatus {
        e.statuses.iter().find(|s| s.name == name).expect(name)
    }

    /// kubernetes-sigs/karpenter `pkg/controllers/nodeoverlay/suite_test.go`: "should fail with
    /// conflicting pricing updates overlays with overlapping requirements" (at equal weights
    /// overlay-b, later in the alphabet, is taken first; overlay-a conflicts).
    #[test]
    fn equal_weights_on_one_offering_conflict_and_the_later_name_wins() {
        let c = catalog();
        let np = pool("default");
        let e = Evaluation::evaluate(
            &[
                overlay(
                    "overlay-a",
                    &["default-instance-type", "small-instance-type"],
                    Some(10),
                    PriceChange::Price(1.03),
                ),
                overlay(
                    "overlay-b",
                    &["default-instance-type", "gpu-vendor-instance-type"],
                    Some(10),
                    PriceChange::Price(23.0),
                ),
            ],
            &[(&np, &c)],
        );
        assert!(!status(&e, "overlay-a").validation_succeeded);
        assert_eq!(status(&e, "overlay-a").reason, CONFLICT);
        assert!(status(&e, "overlay-b").validation_succeeded);
        let out = e.for_pool("default", &c);
        let price = |name: &str| {
            out.instance_types
                .iter()
                .find(|t| t.name == name)
                .unwrap()
                .offerings[0]
                .price
        };
        assert_eq!(price("default-instance-type"), 23.0);
        assert_eq!(
            price("small-instance-type"),
            0.5,
            "overlay-a is applied nowhere"
        );
    }

    /// "should pass with conflicting pricing update overlays with mutually exclusive weights"
    /// and "should apply higher weight overlay when multiple overlays match the same instance type".
    #[test]
    fn the_higher_weight_wins_without_conflict() {
        let c = catalog();
        let np = pool("default");
        let e = Evaluation::evaluate(
            &[
                overlay(
                    "overlay-a",
                    &["default-instance-type"],
                    Some(10),
                    PriceChange::Price(34.0),
                ),
                overlay(
                    "overlay-b",
                    &["default-instance-type"],
                    Some(20),
                    PriceChange::Price(2.0),
                ),
            ],
            &[(&np, &c)],
        );
        assert!(e.statuses.iter().all(|s| s.validation_succeeded), "{e:?}");
        let out = e.for_pool("default", &c);
        assert_eq!(out.instance_types[0].offerings[0].price, 2.0);
    }

    /// "should only apply override for nodepool that defined in the overlay requirements".
    #[test]
    fn a_nodepool_requirement_limits_the_overlay_to_that_pool() {
        let c = catalog();
        let (a, b) = (pool("a"), pool("b"));
        let mut o = overlay("o", &["default-instance-type"], None, PriceChange::Add(1.0));
        o.requirements
            .push(req(labels::NODEPOOL, Operator::In, &["b"]));
        let e = Evaluation::evaluate(&[o], &[(&a, &c), (&b, &c)]);
        assert!(matches!(e.for_pool("a", &c), Cow::Borrowed(_)));
        let out = e.for_pool("b", &c);
        assert!((out.instance_types[0].offerings[0].price - 2.02).abs() < 1e-9);
    }

    /// "should fail validation for invalid requirements values" (a restricted key here).
    #[test]
    fn restricted_keys_fail_runtime_validation() {
        let c = catalog();
        let np = pool("default");
        let mut o = overlay(
            "o",
            &["default-instance-type"],
            None,
            PriceChange::Price(1.0),
        );
        o.requirements
            .push(req("karpenter.sh/unknown", Operator::Exists, &[]));
        let e = Evaluation::evaluate(&[o], &[(&np, &c)]);
        assert_eq!(status(&e, "o").reason, RUNTIME_VALIDATION);
        assert!(matches!(e.for_pool("default", &c), Cow::Borrowed(_)));
    }

    /// "should fail validation for invalid requirements values": a key too long to be a
    /// qualified name.
    #[test]
    fn a_key_that_is_not_a_qualified_name_fails_runtime_validation() {
        let c = catalog();
        let np = pool("default");
        let mut o = overlay(
            "o",
            &["default-instance-type"],
            Some(10),
            PriceChange::Price(1.0),
        );
        o.requirements = vec![req(
            &format!("test.com.test/test-{}", "a".repeat(250)),
            Operator::Exists,
            &[],
        )];
        let e = Evaluation::evaluate(&[o], &[(&np, &c)]);
        assert_eq!(status(&e, "o").reason, RUNTIME_VALIDATION);
    }

    /// "should update capacity for instance types from multiple overlays".
    #[test]
    fn capacity_adds_extended_resources_and_the_higher_weight_keeps_its_value() {
        let c = catalog();
        let np = pool("default");
        let cap = |pairs: &[(&str, i64)]| {
            let mut r = crate::model::Resources::default();
            for (k, v) in pairs {
                r.extended.insert(k.to_string(), *v);
            }
            r
        };
        let high = NodeOverlay {
            name: "high".into(),
            requirements: vec![req(labels::INSTANCE_TYPE, Operator::Exists, &[])],
            capacity: cap(&[("example.com/a", 2000)]),
            weight: Some(20),
            ..NodeOverlay::default()
        };
        let low = NodeOverlay {
            name: "low".into(),
            requirements: vec![req(labels::INSTANCE_TYPE, Operator::Exists, &[])],
            capacity: cap(&[("example.com/a", 5000), ("example.com/b", 1000)]),
            weight: Some(10),
            ..NodeOverlay::default()
        };
        let e = Evaluation::evaluate(&[low, high], &[(&np, &c)]);
        assert!(e.statuses.iter().all(|s| s.validation_succeeded));
        let out = e.for_pool("default", &c);
        let ext = &out.instance_types[0].capacity.extended;
        assert_eq!(ext.get("example.com/a"), Some(&2000));
        assert_eq!(ext.get("example.com/b"), Some(&1000));
    }

    /// aws/karpenter-provider-aws `pkg/providers/instancetype/suite_test.go`, "NodeOverlay
    /// Preview Instance Pricing": an unpriced type gets available offerings from a valid
    /// overlay's price, and none without one.
    #[test]
    fn a_preview_type_is_available_only_when_an_overlay_prices_it() {
        let mut c = catalog();
        c.instance_types.push(InstanceType {
            offerings: vec![Offering {
                zone: "test-zone-1a".into(),
                capacity_type: "on-demand".into(),
                price: 0.0,
                available: false,
                unpriced: true,
            }],
            ..it("p5e.48xlarge", 0.0)
        });
        let np = pool("default");
        let none = Evaluation::evaluate(&[], &[(&np, &c)]);
        let same = none.price_previews(Cow::Borrowed(&c));
        assert!(!same.instance_types[2].offerings[0].available);
        let e = Evaluation::evaluate(
            &[overlay(
                "preview-price",
                &["p5e.48xlarge"],
                None,
                PriceChange::Price(98.32),
            )],
            &[(&np, &c)],
        );
        let priced = e.price_previews(Cow::Borrowed(&c));
        let o = &priced.instance_types[2].offerings[0];
        assert!(o.available && !o.unpriced && o.price == 98.32, "{o:?}");
    }
}
