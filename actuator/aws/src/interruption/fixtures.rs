//! The EventBridge example bodies of `tests/fixtures/interruption/` (see its README), embedded
//! at compile time, with their `#` comment lines (which name the documentation page) removed.

/// Every fixture, by file name.
pub const ALL: &[(&str, &str)] = &[
    (
        "spot_interruption.json",
        include_str!("../../tests/fixtures/interruption/spot_interruption.json"),
    ),
    (
        "rebalance_recommendation.json",
        include_str!("../../tests/fixtures/interruption/rebalance_recommendation.json"),
    ),
    (
        "scheduled_change.json",
        include_str!("../../tests/fixtures/interruption/scheduled_change.json"),
    ),
    (
        "state_change_stopping.json",
        include_str!("../../tests/fixtures/interruption/state_change_stopping.json"),
    ),
    (
        "state_change_terminated.json",
        include_str!("../../tests/fixtures/interruption/state_change_terminated.json"),
    ),
    (
        "state_change_running.json",
        include_str!("../../tests/fixtures/interruption/state_change_running.json"),
    ),
    (
        "health_issue_rds.json",
        include_str!("../../tests/fixtures/interruption/health_issue_rds.json"),
    ),
];

/// The body of fixture `name`, without its comment lines.
///
/// # Panics
/// When there is no such fixture.
pub fn body(name: &str) -> String {
    let (_, text) = ALL
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no interruption fixture {name}"));
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The body of fixture `name` about instance `instance_id` instead of its documented one(s)
/// (every instance ID of the example is replaced).
pub fn body_for(name: &str, instance_id: &str) -> String {
    let mut b = body(name);
    for documented in ["i-1234567890abcdef0", "i-0fedcba0987654321", "i-abcd1111"] {
        b = b.replace(documented, instance_id);
    }
    b
}
