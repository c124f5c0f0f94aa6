//! Which informers have listed everything once: the watcher serves and plans only after
//! every informer has synced (health, the Session's first snapshot, the scrape-time metrics).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

/// Which informers have listed everything once.
#[derive(Debug)]
pub struct Readiness {
    synced: watch::Sender<BTreeSet<&'static str>>,
    expected: BTreeSet<&'static str>,
}

// === impl Readiness ===

impl Readiness {
    /// Readiness over the informers named.
    pub fn new(expected: impl IntoIterator<Item = &'static str>) -> Arc<Self> {
        Arc::new(Self {
            synced: watch::channel(BTreeSet::new()).0,
            expected: expected.into_iter().collect(),
        })
    }

    /// Marks one informer synced.
    pub fn mark(&self, name: &'static str) {
        self.synced.send_if_modified(|s| s.insert(name));
    }

    /// True when every informer has synced.
    pub fn is_ready(&self) -> bool {
        self.expected.is_subset(&self.synced.borrow())
    }

    /// True when the informer named has synced.
    pub fn is_synced(&self, name: &str) -> bool {
        self.synced.borrow().contains(name)
    }

    /// Resolves once every informer has listed everything once.
    pub async fn wait_until_ready(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| self.expected.is_subset(s)).await;
    }

    /// Resolves once the informer named has synced.
    pub async fn wait_for(&self, name: &'static str) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| s.contains(name)).await;
    }
}
