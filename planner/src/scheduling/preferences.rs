//! Preference relaxation (Karpenter's `preferences.go`).
//!
//! PLACEHOLDER written by the engine helper against the interface agreed in
//! SCHEDULER-INTERFACES.md; the topology helper replaces this file. Until then nothing is
//! relaxed.

use crate::model::Pod;

/// Relaxes a pod's preferences one step at a time.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Preferences;

// === impl Preferences ===

impl Preferences {
    /// One relaxation step; false when nothing is left to relax.
    pub(crate) fn relax(&self, pod: &mut Pod) -> bool {
        let _ = pod;
        false
    }
}
