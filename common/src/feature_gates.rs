//! Karpenter's feature gates (`--feature-gates` / `FEATURE_GATES`, kubernetes-sigs/karpenter
//! `pkg/operator/options/options.go`): `Name=bool` pairs separated by commas, with Karpenter
//! v1.14's defaults for the gates not named.

use std::fmt;

/// The gates and their values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// `NodeRepair` (default false): replace nodes whose conditions stay unhealthy.
    pub node_repair: bool,
    /// `ReservedCapacity` (default true): capacity reservations as a capacity type.
    pub reserved_capacity: bool,
    /// `SpotToSpotConsolidation` (default false): replace a spot node by a cheaper spot node.
    pub spot_to_spot_consolidation: bool,
    /// `NodeOverlay` (default false).
    pub node_overlay: bool,
    /// `StaticCapacity` (default false): NodePools with `spec.replicas`.
    pub static_capacity: bool,
    /// `CapacityBuffer` (default false).
    pub capacity_buffer: bool,
}

/// Karpenter v1.14's default `--feature-gates`.
pub const DEFAULT: &str = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false";

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            node_repair: false,
            reserved_capacity: true,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
        }
    }
}

impl FeatureGates {
    /// Parses `Name=bool[,Name=bool...]` over the defaults (an empty text is the defaults).
    ///
    /// # Errors
    /// An unknown gate or a value that is not `true`/`false`, naming the pair.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut g = Self::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not Name=true|false"))?;
            let value = match value.trim() {
                "true" => true,
                "false" => false,
                other => {
                    return Err(format!("{name}: {other:?} is not true or false"));
                }
            };
            let slot = match name.trim() {
                "NodeRepair" => &mut g.node_repair,
                "ReservedCapacity" => &mut g.reserved_capacity,
                "SpotToSpotConsolidation" => &mut g.spot_to_spot_consolidation,
                "NodeOverlay" => &mut g.node_overlay,
                "StaticCapacity" => &mut g.static_capacity,
                "CapacityBuffer" => &mut g.capacity_buffer,
                other => {
                    return Err(format!(
                        "unknown feature gate {other:?} (known: NodeRepair, ReservedCapacity, SpotToSpotConsolidation, NodeOverlay, StaticCapacity, CapacityBuffer)"
                    ));
                }
            };
            *slot = value;
        }
        Ok(g)
    }
}

impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NodeRepair={},ReservedCapacity={},SpotToSpotConsolidation={},NodeOverlay={},StaticCapacity={},CapacityBuffer={}",
            self.node_repair,
            self.reserved_capacity,
            self.spot_to_spot_consolidation,
            self.node_overlay,
            self.static_capacity,
            self.capacity_buffer
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_over_karpenters_defaults() {
        assert_eq!(FeatureGates::parse("").unwrap(), FeatureGates::default());
        assert_eq!(
            FeatureGates::parse(DEFAULT).unwrap(),
            FeatureGates::default()
        );
        assert_eq!(FeatureGates::default().to_string(), DEFAULT);
        let g = FeatureGates::parse("StaticCapacity=true, NodeRepair=true").unwrap();
        assert!(g.static_capacity && g.node_repair && g.reserved_capacity);
        assert!(!g.spot_to_spot_consolidation);
        assert_eq!(
            FeatureGates::parse("Repair=true").unwrap_err(),
            "unknown feature gate \"Repair\" (known: NodeRepair, ReservedCapacity, SpotToSpotConsolidation, NodeOverlay, StaticCapacity, CapacityBuffer)"
        );
        assert_eq!(
            FeatureGates::parse("NodeRepair=yes").unwrap_err(),
            "NodeRepair: \"yes\" is not true or false"
        );
        assert!(FeatureGates::parse("NodeRepair").is_err());
    }
}
