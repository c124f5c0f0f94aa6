//! `dovetail plan --region`: every region of the built-in zone data plans from its own zones,
//! with a note saying where its on-demand prices come from; an unknown region is refused naming
//! the known ones.

use std::path::Path;
use std::process::Command;

const NOW: &str = "2026-11-30T08:00:00Z";

fn plan(region: &str) -> std::process::Output {
    let minimal = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/minimal");
    Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["plan", "-f"])
        .arg(&minimal)
        .args(["--region", region, "--output", "json", "--now", NOW])
        .output()
        .expect("dovetail runs")
}

#[test]
fn plans_in_three_regions_from_their_own_zones() {
    for region in ["us-east-1", "eu-west-1", "ap-southeast-2"] {
        let out = plan(region);
        assert!(
            out.status.success(),
            "{region}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let claims = plan["nodeClaims"].as_array().expect("nodeClaims");
        assert!(!claims.is_empty(), "{region}: {plan}");
        for claim in claims {
            for zone in claim["zones"].as_array().expect("zones") {
                let zone = zone.as_str().expect("zone");
                assert!(zone.starts_with(region), "{region}: zone {zone}");
            }
            assert!(claim["price"].as_f64().expect("price") > 0.0, "{claim}");
        }
        assert_eq!(plan["summary"]["pendingPods"], 5, "{region}: {plan}");
        assert_eq!(plan["unschedulable"], serde_json::json!([]), "{region}");
        let notes = plan["notes"].to_string();
        if region == "us-east-1" {
            assert!(notes.contains("us-east-1's built-in table"), "{notes}");
        } else {
            assert!(
                notes.contains(&format!("No built-in on-demand price table for {region}")),
                "{region}: {notes}"
            );
        }
    }
}

#[test]
fn an_unknown_region_is_refused_naming_the_known_ones() {
    let out = plan("mars-1");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mars-1") && err.contains("eu-west-1") && err.contains("sa-east-1"),
        "{err}"
    );
}
