//! Scheduling simulation: which pending pods go where.
//!
//! This file is owned by the engine helper; the topology branch declares only the modules it
//! adds (topology, preferences, volume topology) so that they build and test standalone.

// Until the engine's scheduler calls them (on its branch), only tests use these modules.
#[allow(dead_code)]
pub(crate) mod preferences;
#[allow(dead_code)]
pub(crate) mod topology;
#[allow(dead_code)]
pub(crate) mod volumes;

#[cfg(test)]
pub(crate) mod test_util;
