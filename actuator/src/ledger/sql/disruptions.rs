//! The disruption tables over sqlx (`disruptions`, `disruption_events`), for both backends with
//! the same plain queries as the claims ([`super::with_pool!`]).

use std::collections::BTreeSet;

use sqlx::{ColumnIndex, Decode, Row, Type};

use super::{Pool, SqlLedger, corrupt};
use crate::launch::{LaunchSpec, client_token};
use crate::ledger::{
    DisruptionEvent, DisruptionRecord, DisruptionState, DisruptionStep, Error, ProposalOutcome,
    Proposals, Result,
};
use service_shell::clock::Millis;

/// Columns of a disruption row, as [`disruption_from_row`] reads them.
macro_rules! disruption_columns {
    () => {
        "idempotency_key, plan_id, reason, nodes, replacements, savings, state, first_seen, \
         confirmed_seen, attempt, candidates, failure_reason, lease_owner, lease_expires_at, \
         created_at, updated_at"
    };
}

/// Appends one `disruption_events` row on `$tx` (a macro: the same code on either backend).
macro_rules! insert_event {
    ($tx:expr, $key:expr, $from:expr, $to:expr, $actor:expr, $detail:expr, $now:expr) => {
        sqlx::query(
            "INSERT INTO disruption_events (idempotency_key, from_state, to_state, actor, detail, at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind($key)
        .bind($from.map(DisruptionState::as_str))
        .bind($to.as_str())
        .bind($actor)
        .bind($detail)
        .bind($now)
        .execute($tx)
        .await
    };
}

fn dstate(key: &str, column: &'static str, s: &str) -> Result<DisruptionState> {
    DisruptionState::parse(s).ok_or_else(|| corrupt(key, column, s))
}

fn json_list<T: serde::de::DeserializeOwned>(
    key: &str,
    column: &'static str,
    s: &str,
) -> Result<Vec<T>> {
    serde_json::from_str(s).map_err(|e| corrupt(key, column, e.to_string()))
}

fn disruption_from_row<'r, R>(row: &'r R) -> Result<DisruptionRecord>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    f64: Decode<'r, R::Database> + Type<R::Database>,
{
    let key: String = row.try_get("idempotency_key")?;
    let state: String = row.try_get("state")?;
    let nodes: String = row.try_get("nodes")?;
    let replacements: String = row.try_get("replacements")?;
    let candidates: String = row.try_get("candidates")?;
    Ok(DisruptionRecord {
        plan_id: row.try_get("plan_id")?,
        reason: row.try_get("reason")?,
        nodes: json_list(&key, "nodes", &nodes)?,
        replacements: json_list::<LaunchSpec>(&key, "replacements", &replacements)?,
        savings: row.try_get("savings")?,
        state: dstate(&key, "state", &state)?,
        first_seen: row.try_get("first_seen")?,
        confirmed_seen: row.try_get("confirmed_seen")?,
        attempt: row.try_get("attempt")?,
        candidates: json_list(&key, "candidates", &candidates)?,
        failure_reason: row.try_get("failure_reason")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        key,
    })
}

fn event_from_row<'r, R>(row: &'r R) -> Result<DisruptionEvent>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let key: String = row.try_get("idempotency_key")?;
    let from: Option<String> = row.try_get("from_state")?;
    let to: String = row.try_get("to_state")?;
    Ok(DisruptionEvent {
        from: from.map(|f| dstate(&key, "from_state", &f)).transpose()?,
        to: dstate(&key, "to_state", &to)?,
        actor: row.try_get("actor")?,
        detail: row.try_get("detail")?,
        at: row.try_get("at")?,
        key,
    })
}

fn to_json<T: serde::Serialize>(key: &str, column: &'static str, v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| corrupt(key, column, e.to_string()))
}

// === impl SqlLedger ===

impl SqlLedger {
    pub(super) async fn propose_impl(
        &self,
        p: &Proposals,
        confirm_after_ms: Millis,
        now: Millis,
    ) -> Result<Vec<(String, ProposalOutcome)>> {
        with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("UPDATE ledger_lock SET submits = submits + 1 WHERE id = 1")
                .execute(&mut *tx)
                .await?;
            let mut writes = 1u64;
            let rows = sqlx::query(
                "SELECT name, idempotency_key FROM claims \
                 WHERE state IN ('requested', 'launching', 'launched') ORDER BY name",
            )
            .fetch_all(&mut *tx)
            .await?;
            let seen: BTreeSet<&str> = p.basis.in_flight.iter().map(String::as_str).collect();
            let own: BTreeSet<&str> = p.launch_keys.iter().map(String::as_str).collect();
            let mut missed = Vec::new();
            for r in &rows {
                let name: String = r.try_get("name")?;
                let key: String = r.try_get("idempotency_key")?;
                if !seen.contains(name.as_str()) && !own.contains(key.as_str()) {
                    missed.push(name);
                }
            }
            let stale = (!missed.is_empty()).then(|| {
                format!(
                    "stale plan: the ledger has {} claim(s) in flight that the plan's basis does not list: {}",
                    missed.len(),
                    missed.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
                )
            });
            let mut out = Vec::with_capacity(p.disruptions.len());
            for d in &p.disruptions {
                let key = d.idempotency_key.as_str();
                let row = sqlx::query(
                    "SELECT state, first_seen, attempt FROM disruptions WHERE idempotency_key = $1",
                )
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
                let current = match &row {
                    None => None,
                    Some(r) => {
                        let s: String = r.try_get("state")?;
                        Some((
                            dstate(key, "state", &s)?,
                            r.try_get::<i64, _>("first_seen")?,
                            r.try_get::<i64, _>("attempt")?,
                        ))
                    }
                };
                let outcome = match (current, &stale) {
                    (Some((state, _, _)), _)
                        if !matches!(
                            state,
                            DisruptionState::Proposed
                                | DisruptionState::Aborted
                                | DisruptionState::Rejected
                        ) =>
                    {
                        ProposalOutcome::Duplicate { state }
                    }
                    (_, Some(reason)) => ProposalOutcome::Rejected { reason: reason.clone() },
                    (None, None) => {
                        let nodes = to_json(key, "nodes", &d.nodes)?;
                        let repl = to_json(key, "replacements", &d.replacements)?;
                        sqlx::query(
                            "INSERT INTO disruptions (idempotency_key, plan_id, reason, nodes, replacements, \
                               savings, payload, state, first_seen, created_at, updated_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, 'proposed', $8, $9, $9)",
                        )
                        .bind(key)
                        .bind(&p.plan_id)
                        .bind(&d.reason)
                        .bind(nodes)
                        .bind(repl)
                        .bind(d.savings)
                        .bind(&d.payload)
                        .bind(p.basis.now)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                        insert_event!(&mut *tx, key, None, DisruptionState::Proposed, "submit",
                            &format!("{} of {} proposed by plan {} (basis.now {})", d.reason, d.nodes.join(", "), p.plan_id, p.basis.now),
                            now)?;
                        writes += 2;
                        ProposalOutcome::Recorded { attempt: 1 }
                    }
                    (Some((DisruptionState::Proposed, first, _)), None) => {
                        let after_ms = p.basis.now.saturating_sub(first).saturating_mul(1000);
                        let after = p.basis.now.saturating_sub(first);
                        if after_ms >= confirm_after_ms {
                            sqlx::query(
                                "UPDATE disruptions SET state = 'confirmed', confirmed_seen = $1, updated_at = $2 \
                                 WHERE idempotency_key = $3 AND state = 'proposed'",
                            )
                            .bind(p.basis.now)
                            .bind(now)
                            .bind(key)
                            .execute(&mut *tx)
                            .await?;
                            insert_event!(&mut *tx, key, Some(DisruptionState::Proposed), DisruptionState::Confirmed, "submit",
                                &format!("proposed again by plan {} {after}s after the first proposal", p.plan_id),
                                now)?;
                            writes += 2;
                            ProposalOutcome::Confirmed { after }
                        } else {
                            ProposalOutcome::Waiting { after }
                        }
                    }
                    (Some((from, _, attempt)), None) => {
                        // Aborted or rejected earlier: a new attempt, confirmed afresh.
                        let nodes = to_json(key, "nodes", &d.nodes)?;
                        let repl = to_json(key, "replacements", &d.replacements)?;
                        sqlx::query(
                            "UPDATE disruptions SET state = 'proposed', plan_id = $1, nodes = $2, replacements = $3, \
                               savings = $4, payload = $5, first_seen = $6, confirmed_seen = NULL, \
                               attempt = attempt + 1, candidates = '[]', failure_reason = NULL, \
                               lease_owner = NULL, lease_expires_at = NULL, updated_at = $7 \
                             WHERE idempotency_key = $8 AND state = $9",
                        )
                        .bind(&p.plan_id)
                        .bind(nodes)
                        .bind(repl)
                        .bind(d.savings)
                        .bind(&d.payload)
                        .bind(p.basis.now)
                        .bind(now)
                        .bind(key)
                        .bind(from.as_str())
                        .execute(&mut *tx)
                        .await?;
                        insert_event!(&mut *tx, key, Some(from), DisruptionState::Proposed, "submit",
                            &format!("proposed again by plan {} after it was {from}: attempt {}", p.plan_id, attempt + 1),
                            now)?;
                        writes += 2;
                        ProposalOutcome::Recorded { attempt: attempt + 1 }
                    }
                };
                out.push((d.idempotency_key.clone(), outcome));
            }
            tx.commit().await?;
            self.wrote(writes);
            Ok(out)
        })
    }

    pub(super) async fn disruptions_impl(
        &self,
        active_only: bool,
    ) -> Result<Vec<DisruptionRecord>> {
        let sql = if active_only {
            concat!(
                "SELECT ",
                disruption_columns!(),
                " FROM disruptions WHERE state IN ('confirmed', 'replacing', 'deleting', 'aborting') \
                 ORDER BY created_at, idempotency_key"
            )
        } else {
            concat!(
                "SELECT ",
                disruption_columns!(),
                " FROM disruptions ORDER BY created_at, idempotency_key"
            )
        };
        with_pool!(self, pool => {
            let rows = sqlx::query(sql).fetch_all(pool).await?;
            rows.iter().map(disruption_from_row).collect()
        })
    }

    pub(super) async fn disruption_impl(&self, key: &str) -> Result<Option<DisruptionRecord>> {
        with_pool!(self, pool => {
            let row = sqlx::query(concat!("SELECT ", disruption_columns!(), " FROM disruptions WHERE idempotency_key = $1"))
                .bind(key)
                .fetch_optional(pool)
                .await?;
            row.as_ref().map(disruption_from_row).transpose()
        })
    }

    pub(super) async fn acquire_disruption_impl(
        &self,
        owner: &str,
        key: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> Result<Option<DisruptionRecord>> {
        let d = with_pool!(self, pool => {
            let row = sqlx::query(concat!(
                "UPDATE disruptions SET lease_owner = $1, lease_expires_at = $2 \
                 WHERE idempotency_key = $4 AND (lease_owner IS NULL OR lease_expires_at < $3 OR lease_owner = $1) \
                 RETURNING ",
                disruption_columns!()
            ))
            .bind(owner)
            .bind(now.saturating_add(lease_ms))
            .bind(now)
            .bind(key)
            .fetch_optional(pool)
            .await?;
            row.as_ref().map(disruption_from_row).transpose()?
        });
        self.wrote(1);
        Ok(d)
    }

    pub(super) async fn advance_disruption_impl(
        &self,
        s: &DisruptionStep,
        now: Millis,
    ) -> Result<()> {
        let candidates = s
            .candidates
            .as_ref()
            .map(|c| to_json(&s.key, "candidates", c))
            .transpose()?;
        let done = with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let n = sqlx::query(
                "UPDATE disruptions SET state = $1, updated_at = $2, \
                   candidates = COALESCE($3, candidates), \
                   failure_reason = COALESCE($4, failure_reason), \
                   lease_owner = CASE WHEN $5 THEN NULL ELSE lease_owner END, \
                   lease_expires_at = CASE WHEN $5 THEN NULL ELSE lease_expires_at END \
                 WHERE idempotency_key = $6 AND state = $7 AND lease_owner = $8 AND lease_expires_at >= $2",
            )
            .bind(s.to.as_str())
            .bind(now)
            .bind(&candidates)
            .bind(&s.failure_reason)
            .bind(s.release)
            .bind(&s.key)
            .bind(s.from.as_str())
            .bind(&s.owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 1 {
                insert_event!(&mut *tx, &s.key, Some(s.from), s.to, &s.owner, &s.detail, now)?;
                let mut writes = 2u64;
                if !s.launches.is_empty() {
                    let plan_id = format!("disruption:{}", s.key);
                    sqlx::query(
                        "INSERT INTO plans (plan_id, session_id, basis_sequence, basis_now, in_flight, received_at) \
                         VALUES ($1, 'disruption', 0, 0, '[]', $2) ON CONFLICT (plan_id) DO NOTHING",
                    )
                    .bind(&plan_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    writes += 1;
                    for l in &s.launches {
                        let known = sqlx::query("SELECT name FROM claims WHERE idempotency_key = $1")
                            .bind(&l.idempotency_key)
                            .fetch_optional(&mut *tx)
                            .await?;
                        if known.is_some() {
                            continue;
                        }
                        let spec = to_json(&l.spec.name, "spec", &l.spec)?;
                        sqlx::query(
                            "INSERT INTO commands (idempotency_key, plan_id, kind, payload, received_at) \
                             VALUES ($1, $2, 'replacement', $3, $4)",
                        )
                        .bind(&l.idempotency_key)
                        .bind(&plan_id)
                        .bind(&l.payload)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                        sqlx::query(
                            "INSERT INTO claims (name, idempotency_key, plan_id, node_pool, state, spec, client_token, created_at, updated_at) \
                             VALUES ($1, $2, $3, $4, 'requested', $5, $6, $7, $7)",
                        )
                        .bind(&l.spec.name)
                        .bind(&l.idempotency_key)
                        .bind(&plan_id)
                        .bind(&l.spec.node_pool)
                        .bind(spec)
                        .bind(client_token(&l.spec.name, &l.idempotency_key))
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                        sqlx::query(
                            "INSERT INTO claim_events (claim_name, from_state, to_state, actor, detail, at) \
                             VALUES ($1, NULL, 'requested', $2, $3, $4)",
                        )
                        .bind(&l.spec.name)
                        .bind(&s.owner)
                        .bind(format!("replacement of disruption {} key {}", s.key, l.idempotency_key))
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                        writes += 3;
                    }
                }
                tx.commit().await?;
                self.wrote(writes);
            }
            n == 1
        });
        if done {
            Ok(())
        } else {
            Err(Error::DisruptionLost {
                key: s.key.clone(),
                expected: s.from,
            })
        }
    }

    pub(super) async fn disruption_events_impl(&self, key: &str) -> Result<Vec<DisruptionEvent>> {
        with_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT idempotency_key, from_state, to_state, actor, detail, at FROM disruption_events \
                 WHERE idempotency_key = $1 ORDER BY id",
            )
            .bind(key)
            .fetch_all(pool)
            .await?;
            rows.iter().map(event_from_row).collect()
        })
    }
}
