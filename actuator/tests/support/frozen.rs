//! A ledger wrapper for tests under paused tokio time: tokio's clock is held still while each
//! call runs. SQLite works on its own thread and Postgres on sockets, and paused time would
//! otherwise jump to the next timer meanwhile (firing sqlx's pool timeout). A running
//! `spawn_blocking` task keeps tokio from auto-advancing.

use std::collections::BTreeMap;
use std::sync::Arc;

use actuator::ledger::{
    self, ClaimRecord, ClaimState, DisruptionEvent, DisruptionRecord, DisruptionStep, Event,
    Ledger, Outcome, ProposalOutcome, Proposals, Submission, Transition,
};
use async_trait::async_trait;
use service_shell::clock::Millis;

/// The ledger with tokio's clock held still while each call runs: SQLite works on its own
/// thread, and paused time would otherwise jump to the next timer meanwhile (firing sqlx's pool
/// timeout). A running `spawn_blocking` task keeps tokio from auto-advancing.
pub struct Frozen(pub Arc<dyn Ledger>);

pub async fn hold<F: std::future::Future>(f: F) -> F::Output {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let guard = tokio::task::spawn_blocking(move || {
        let _ = rx.recv();
    });
    let out = f.await;
    drop(tx);
    let _ = guard.await;
    out
}

#[async_trait]
impl Ledger for Frozen {
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
    async fn migrate(&self) -> ledger::Result<()> {
        hold(self.0.migrate()).await
    }
    async fn submit(&self, s: &Submission, now: Millis) -> ledger::Result<Vec<(String, Outcome)>> {
        hold(self.0.submit(s, now)).await
    }
    async fn acquire(
        &self,
        owner: &str,
        states: &[ClaimState],
        now: Millis,
        lease_ms: Millis,
        limit: u32,
    ) -> ledger::Result<Vec<ClaimRecord>> {
        hold(self.0.acquire(owner, states, now, lease_ms, limit)).await
    }
    async fn acquire_claim(
        &self,
        owner: &str,
        name: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> ledger::Result<Option<ClaimRecord>> {
        hold(self.0.acquire_claim(owner, name, now, lease_ms)).await
    }
    async fn renew(
        &self,
        name: &str,
        owner: &str,
        now: Millis,
        until: Millis,
    ) -> ledger::Result<()> {
        hold(self.0.renew(name, owner, now, until)).await
    }
    async fn transition(&self, t: &Transition, now: Millis) -> ledger::Result<()> {
        hold(self.0.transition(t, now)).await
    }
    async fn release_all(&self, owner: &str) -> ledger::Result<u64> {
        hold(self.0.release_all(owner)).await
    }
    async fn claim(&self, name: &str) -> ledger::Result<Option<ClaimRecord>> {
        hold(self.0.claim(name)).await
    }
    async fn claims(&self) -> ledger::Result<Vec<ClaimRecord>> {
        hold(self.0.claims()).await
    }
    async fn events(&self, name: &str) -> ledger::Result<Vec<Event>> {
        hold(self.0.events(name)).await
    }
    async fn counts(&self) -> ledger::Result<BTreeMap<ClaimState, i64>> {
        hold(self.0.counts()).await
    }
    async fn propose(
        &self,
        p: &Proposals,
        confirm_after_ms: Millis,
        now: Millis,
    ) -> ledger::Result<Vec<(String, ProposalOutcome)>> {
        hold(self.0.propose(p, confirm_after_ms, now)).await
    }
    async fn disruptions(&self, active_only: bool) -> ledger::Result<Vec<DisruptionRecord>> {
        hold(self.0.disruptions(active_only)).await
    }
    async fn disruption(&self, key: &str) -> ledger::Result<Option<DisruptionRecord>> {
        hold(self.0.disruption(key)).await
    }
    async fn acquire_disruption(
        &self,
        owner: &str,
        key: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> ledger::Result<Option<DisruptionRecord>> {
        hold(self.0.acquire_disruption(owner, key, now, lease_ms)).await
    }
    async fn advance_disruption(&self, step: &DisruptionStep, now: Millis) -> ledger::Result<()> {
        hold(self.0.advance_disruption(step, now)).await
    }
    async fn disruption_events(&self, key: &str) -> ledger::Result<Vec<DisruptionEvent>> {
        hold(self.0.disruption_events(key)).await
    }
    fn writes(&self) -> u64 {
        self.0.writes()
    }
    async fn close(&self) {
        hold(self.0.close()).await
    }
}
