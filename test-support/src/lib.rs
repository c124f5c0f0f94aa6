//! Test support shared by every dovetail crate's tests.
//!
//! A test that needs an outside tool (moto_server, kubectl, the Python client, a validator,
//! Chromium, Postgres) and cannot find it FAILS: the README's test command installs every tool,
//! so a missing one is a broken set-up, never a pass. Someone who knowingly runs the tests
//! without a tool opts out by naming it in `DOVETAIL_ALLOW_MISSING` (a comma-separated list of
//! the tools' names as the failures print them, or `all`); the test then prints a notice and
//! skips.
//!
//! [`eventually`] is the one poll-until loop of the tests ([`when_notified`] its twin for
//! conditions that come with a change signal); [`process`] finds free ports for
//! programs a test runs; `postgres` (feature `postgres`) gives each test its own database on
//! the shared server, or a private server it may stop and start.
//!
//! # Where shared test code lives
//! - Used by the tests of two or more crates: here, in a module named for what it supports
//!   (behind a feature when it pulls in a heavy dependency, as `postgres` does with sqlx).
//! - Used by several test files of one crate: that crate's `tests/support/mod.rs` (with
//!   submodules under `tests/support/`), declared with `mod support;` in each test file (a
//!   bench takes it with `#[path = "../tests/support/mod.rs"]`). A folder under `tests/` is not
//!   a test target of its own, unlike a `tests/support.rs`; the name is not `common`, which
//!   would hide the workspace's `common` crate.
//! - Fixture builders for a crate's own types: its `test_util` module (feature `test-util`),
//!   so unit tests, integration tests and benches share them.

mod eventually;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod process;

use std::sync::atomic::{AtomicU64, Ordering};

pub use eventually::{Outcome, TimedOut, eventually, try_eventually, when_notified};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// `<prefix>_<pid>_<n>`: a name (of a database, a directory) that no other test of any running
/// test binary uses.
#[must_use]
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The opt-out variable: tools whose absence skips a test instead of failing it.
pub const ALLOW_MISSING_ENV: &str = "DOVETAIL_ALLOW_MISSING";

/// Whether `tool` may be missing (it is named in [`ALLOW_MISSING_ENV`], or that says `all`).
#[must_use]
pub fn may_be_missing(tool: &str) -> bool {
    std::env::var(ALLOW_MISSING_ENV).is_ok_and(|list| allows(&list, tool))
}

fn allows(list: &str, tool: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|t| t == "all" || t.eq_ignore_ascii_case(tool))
}

/// Says that `tool` is missing and how to get it. Returns (the caller then skips its test,
/// after this printed a notice) only when [`ALLOW_MISSING_ENV`] allows it.
///
/// # Panics
/// When `tool` is missing and not allowed to be: the test fails, naming the tool and `how`.
pub fn missing_tool(tool: &str, how: &str) {
    assert!(
        may_be_missing(tool),
        "{tool} is missing: {how} (scripts/test.sh installs it; set {ALLOW_MISSING_ENV}={tool} \
         to skip the tests that need it)"
    );
    println!("NOTICE: skipping a test that needs {tool} ({ALLOW_MISSING_ENV}): {how}");
}

#[cfg(test)]
mod tests {
    use super::allows;

    #[test]
    fn the_opt_out_names_tools_or_all() {
        assert!(allows("moto_server", "moto_server"));
        assert!(allows("kubectl, moto_server", "moto_server"));
        assert!(allows("all", "chromium"));
        assert!(!allows("", "moto_server"));
        assert!(!allows("kubectl", "moto_server"));
        assert!(!allows("moto", "moto_server"));
    }
}
