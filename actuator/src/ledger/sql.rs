//! The ledger over sqlx: one implementation for both backends. Every query is a plain
//! `sqlx::query` string with `$N` placeholders, which Postgres and SQLite both accept, run by the
//! same code on a `PgPool` or a `SqlitePool` ([`with_pool!`] expands the body once per pool
//! type). The only backend-specific SQL is the lease query: Postgres adds
//! `FOR UPDATE SKIP LOCKED` so that concurrent replicas never wait on or share a claim; SQLite
//! serializes writers itself.
//!
//! Submissions are serialized by updating the one `ledger_lock` row first in their transaction:
//! a row lock held to commit on Postgres, the database write lock on SQLite.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ColumnIndex, Decode, Row, Type};

use super::{
    ClaimRecord, ClaimState, Error, Event, InstanceRecord, Ledger, Outcome, Result, Submission,
    Transition,
};
use crate::launch::{LaunchSpec, client_token, generated_name};
use service_shell::clock::Millis;

static POSTGRES: LazyLock<Migrator> = LazyLock::new(|| migrations::migrator(migrations::POSTGRES));
static SQLITE: LazyLock<Migrator> = LazyLock::new(|| migrations::migrator(migrations::SQLITE));

/// Columns of a claim row, as [`claim_from_row`] reads them (a macro so that `concat!` can
/// build constant queries from it).
macro_rules! claim_columns {
    () => {
        "name, idempotency_key, plan_id, node_pool, state, spec, client_token, instance_id, \
         provider_id, instance_type, zone, capacity_type, failure_reason, attempts, retry_at, \
         lease_owner, lease_expires_at, created_at, updated_at"
    };
}

/// At most this many names are listed in a stale-plan rejection.
const STALE_LISTED: usize = 5;

/// Keys or names per batched look-up of a submission (one bind parameter each).
const LOOKUP_CHUNK: usize = 500;

/// Rows per multi-row insert of a submission (at most 7 bind parameters each; SQLite allows
/// 32,766 per statement, Postgres 65,535).
const INSERT_CHUNK: usize = 500;

/// `$1, $2, ..., $n`.
fn placeholders(n: usize) -> String {
    values(n, 1, |p| format!("${}", p[0]))
}

/// `rows` row texts made by `row` from each row's parameter numbers (`$1`-based, `cols` per
/// row), joined by `, `.
fn values(rows: usize, cols: usize, row: impl Fn(&[usize]) -> String) -> String {
    (0..rows)
        .map(|r| {
            let p: Vec<usize> = (1..=cols).map(|c| r * cols + c).collect();
            row(&p)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

enum Pool {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// Runs `$body` with `$p` bound to the backend's pool (the same code, typed per backend).
macro_rules! with_pool {
    ($self:expr, $p:ident => $body:expr) => {
        match &$self.pool {
            Pool::Postgres($p) => $body,
            Pool::Sqlite($p) => $body,
        }
    };
}

mod disruptions;
mod migrations;

/// The sqlx ledger (Postgres or SQLite).
pub struct SqlLedger {
    pool: Pool,
    writes: AtomicU64,
}

// === impl SqlLedger ===

impl SqlLedger {
    /// Opens `url` lazily (see [`super::open`]).
    ///
    /// # Errors
    /// [`Error::Url`], or [`Error::Database`] for options sqlx rejects.
    pub fn open(url: &str) -> Result<Self> {
        let pool = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Pool::Postgres(
                PgPoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(Duration::from_secs(5))
                    .connect_lazy(url)?,
            )
        } else if url.starts_with("sqlite://") {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // NORMAL with WAL survives a killed process (not a power cut) and is much faster
                // than FULL; the demo's ledger needs no more.
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(30))
                .foreign_keys(true);
            Pool::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(4)
                    .connect_lazy_with(options),
            )
        } else {
            return Err(Error::Url {
                url: url.to_string(),
            });
        };
        Ok(Self {
            pool,
            writes: AtomicU64::new(0),
        })
    }

    fn wrote(&self, n: u64) {
        self.writes.fetch_add(n, Ordering::Relaxed);
    }

    fn acquire_sql(&self, states: &[ClaimState]) -> String {
        let states = states
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let free = "(lease_owner IS NULL OR lease_expires_at < $3 OR lease_owner = $1)";
        let lock = match self.pool {
            Pool::Postgres(_) => " FOR UPDATE SKIP LOCKED",
            Pool::Sqlite(_) => "",
        };
        // The lease condition is repeated outside the subquery: on Postgres a concurrent
        // UPDATE re-checks the outer WHERE against the row it waited for, never the subquery.
        // The picked rows are a CTE so that the LIMIT is applied once (Postgres may run an
        // `IN (subquery)` more than once, leasing more rows than asked for).
        format!(
            "WITH picked AS (SELECT name FROM claims WHERE state IN ({states}) AND retry_at <= $3 \
                             AND {free} ORDER BY created_at, name LIMIT $4{lock}) \
             UPDATE claims SET lease_owner = $1, lease_expires_at = $2 \
             WHERE name IN (SELECT name FROM picked) \
               AND state IN ({states}) AND {free} \
             RETURNING {}",
            claim_columns!()
        )
    }
}

fn corrupt(name: &str, column: &'static str, value: impl Into<String>) -> Error {
    Error::Corrupt {
        name: name.to_string(),
        column,
        value: value.into(),
    }
}

fn state(name: &str, column: &'static str, s: &str) -> Result<ClaimState> {
    ClaimState::parse(s).ok_or_else(|| corrupt(name, column, s))
}

/// Reads a claim row of either backend.
fn claim_from_row<'r, R>(row: &'r R) -> Result<ClaimRecord>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
{
    let name: String = row.try_get("name")?;
    let spec_json: String = row.try_get("spec")?;
    let spec: LaunchSpec =
        serde_json::from_str(&spec_json).map_err(|e| corrupt(&name, "spec", e.to_string()))?;
    let state_s: String = row.try_get("state")?;
    let instance_id: Option<String> = row.try_get("instance_id")?;
    let instance = match instance_id {
        None => None,
        Some(instance_id) => Some(InstanceRecord {
            instance_id,
            provider_id: row
                .try_get::<Option<String>, _>("provider_id")?
                .unwrap_or_default(),
            instance_type: row
                .try_get::<Option<String>, _>("instance_type")?
                .unwrap_or_default(),
            zone: row
                .try_get::<Option<String>, _>("zone")?
                .unwrap_or_default(),
            capacity_type: row
                .try_get::<Option<String>, _>("capacity_type")?
                .unwrap_or_default(),
        }),
    };
    Ok(ClaimRecord {
        state: state(&name, "state", &state_s)?,
        idempotency_key: row.try_get("idempotency_key")?,
        plan_id: row.try_get("plan_id")?,
        node_pool: row.try_get("node_pool")?,
        spec,
        client_token: row.try_get("client_token")?,
        instance,
        failure_reason: row.try_get("failure_reason")?,
        attempts: row.try_get("attempts")?,
        retry_at: row.try_get("retry_at")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        name,
    })
}

fn event_from_row<'r, R>(row: &'r R) -> Result<Event>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let claim: String = row.try_get("claim_name")?;
    let from: Option<String> = row.try_get("from_state")?;
    let to: String = row.try_get("to_state")?;
    Ok(Event {
        from: from.map(|f| state(&claim, "from_state", &f)).transpose()?,
        to: state(&claim, "to_state", &to)?,
        actor: row.try_get("actor")?,
        detail: row.try_get("detail")?,
        at: row.try_get("at")?,
        claim,
    })
}

/// The key a claim's command came with: its stored key without the `#<generation>` suffix of a
/// launch accepted again after the claims before it were gone ([`Relaunch`]).
fn base_key(stored: &str) -> &str {
    match stored.rsplit_once('#') {
        Some((base, g)) if !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => stored,
    }
}

/// `LIKE` pattern text matching `s` literally (escape character `!`).
fn like_literal(s: &str) -> String {
    s.replace('!', "!!").replace('%', "!%").replace('_', "!_")
}

/// How a launch is stored when its command's key or name belongs to claims that are gone: a
/// claim that is gone never blocks a new one for the same pods (Karpenter creates a new
/// NodeClaim with a fresh name each time, `generateName`), so the command is accepted again
/// under `<key>#<generation>` with a generated name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Relaunch {
    stored_key: String,
    name: String,
}

/// The decision of a submission, before anything is written.
struct Decision {
    outcomes: Vec<(String, Outcome)>,
    /// Indexes into `submission.launches` to insert.
    accepted: Vec<usize>,
}

fn decide(
    submission: &Submission,
    known_keys: &BTreeMap<String, String>,
    names_taken: &BTreeSet<String>,
    relaunches: &BTreeMap<usize, Relaunch>,
    in_flight: &[(String, String)],
) -> Decision {
    let keys: BTreeSet<&str> = submission
        .launches
        .iter()
        .map(|l| l.idempotency_key.as_str())
        .collect();
    let seen: BTreeSet<&str> = submission
        .basis
        .in_flight
        .iter()
        .map(String::as_str)
        .collect();
    let missed: Vec<&str> = in_flight
        .iter()
        .filter(|(name, key)| !seen.contains(name.as_str()) && !keys.contains(base_key(key)))
        .map(|(name, _)| name.as_str())
        .collect();
    let stale = (!missed.is_empty()).then(|| {
        let mut listed = missed
            .iter()
            .take(STALE_LISTED)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if missed.len() > STALE_LISTED {
            listed.push_str(&format!(" and {} more", missed.len() - STALE_LISTED));
        }
        format!(
            "stale plan: the ledger has {} claim(s) in flight that the plan's basis does not list: {listed}",
            missed.len()
        )
    });

    let mut outcomes = Vec::with_capacity(submission.launches.len());
    let mut accepted = Vec::new();
    let mut this_keys: BTreeMap<&str, &str> = BTreeMap::new();
    let mut this_names: BTreeSet<&str> = BTreeSet::new();
    for (i, l) in submission.launches.iter().enumerate() {
        let key = l.idempotency_key.clone();
        let name = relaunches
            .get(&i)
            .map_or(l.spec.name.as_str(), |r| r.name.as_str());
        let outcome = if let Some(claim) = known_keys.get(&key) {
            Outcome::Duplicate {
                claim: claim.clone(),
            }
        } else if let Some(claim) = this_keys.get(key.as_str()) {
            Outcome::Duplicate {
                claim: (*claim).to_string(),
            }
        } else if let Some(reason) = &stale {
            Outcome::Rejected {
                reason: reason.clone(),
            }
        } else if names_taken.contains(name) || this_names.contains(name) {
            Outcome::Rejected {
                reason: format!(
                    "claim name {name} is already in the ledger under another idempotency key"
                ),
            }
        } else {
            this_keys.insert(l.idempotency_key.as_str(), name);
            this_names.insert(name);
            accepted.push(i);
            Outcome::Accepted {
                claim: name.to_string(),
            }
        };
        outcomes.push((key, outcome));
    }
    Decision { outcomes, accepted }
}

#[async_trait]
impl Ledger for SqlLedger {
    fn backend(&self) -> &'static str {
        match self.pool {
            Pool::Postgres(_) => "postgres",
            Pool::Sqlite(_) => "sqlite",
        }
    }

    async fn migrate(&self) -> Result<()> {
        match &self.pool {
            Pool::Postgres(p) => POSTGRES.run(p).await?,
            Pool::Sqlite(p) => SQLITE.run(p).await?,
        }
        Ok(())
    }

    async fn submit(&self, s: &Submission, now: Millis) -> Result<Vec<(String, Outcome)>> {
        with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            // Serializes submissions: held until commit.
            sqlx::query("UPDATE ledger_lock SET submits = submits + 1 WHERE id = 1")
                .execute(&mut *tx)
                .await?;
            let mut writes = 1u64;

            // Every claim each key launched: `key`, then `key#2`, `key#3`, ... A `key#N` exists
            // only after `key` (claims are never deleted) and only once the claims before it
            // are gone, so one batched look-up of the keys as sent settles every key but those
            // whose first claim is gone, which need the per-key search for later generations.
            let keys: Vec<&str> = s.launches.iter().map(|l| l.idempotency_key.as_str()).collect();
            let mut seen_keys: BTreeMap<String, (String, String)> = BTreeMap::new();
            for chunk in keys.chunks(LOOKUP_CHUNK) {
                let sql = format!(
                    "SELECT idempotency_key, name, state FROM claims WHERE idempotency_key IN ({})",
                    placeholders(chunk.len())
                );
                // Audited: only the placeholder list is built.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for k in chunk {
                    q = q.bind(*k);
                }
                for r in q.fetch_all(&mut *tx).await? {
                    seen_keys.insert(
                        r.try_get("idempotency_key")?,
                        (r.try_get("name")?, r.try_get("state")?),
                    );
                }
            }
            let names: Vec<&str> = s
                .launches
                .iter()
                .filter(|l| !seen_keys.contains_key(&l.idempotency_key))
                .map(|l| l.spec.name.as_str())
                .collect();
            let mut name_states: BTreeMap<String, String> = BTreeMap::new();
            for chunk in names.chunks(LOOKUP_CHUNK) {
                let sql = format!(
                    "SELECT name, state FROM claims WHERE name IN ({})",
                    placeholders(chunk.len())
                );
                // Audited: only the placeholder list is built.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for n in chunk {
                    q = q.bind(*n);
                }
                for r in q.fetch_all(&mut *tx).await? {
                    name_states.insert(r.try_get("name")?, r.try_get("state")?);
                }
            }

            let mut known_keys = BTreeMap::new();
            let mut names_taken = BTreeSet::new();
            let mut relaunches = BTreeMap::new();
            for (i, l) in s.launches.iter().enumerate() {
                let mut launched = 0usize;
                if let Some((name, st)) = seen_keys.get(&l.idempotency_key) {
                    if !state(name, "state", st)?.is_terminal() {
                        known_keys.insert(l.idempotency_key.clone(), name.clone());
                        continue;
                    }
                    let rows = sqlx::query(
                        "SELECT name, state FROM claims \
                         WHERE idempotency_key = $1 OR idempotency_key LIKE $2 ESCAPE '!'",
                    )
                    .bind(&l.idempotency_key)
                    .bind(format!("{}#%", like_literal(&l.idempotency_key)))
                    .fetch_all(&mut *tx)
                    .await?;
                    for r in &rows {
                        let name: String = r.try_get("name")?;
                        let st: String = r.try_get("state")?;
                        launched += 1;
                        if !state(&name, "state", &st)?.is_terminal() {
                            known_keys.insert(l.idempotency_key.clone(), name);
                        }
                    }
                    if known_keys.contains_key(&l.idempotency_key) {
                        continue;
                    }
                }
                let taken = if launched == 0 {
                    name_states.get(&l.spec.name).cloned()
                } else {
                    sqlx::query("SELECT state FROM claims WHERE name = $1")
                        .bind(&l.spec.name)
                        .fetch_optional(&mut *tx)
                        .await?
                        .map(|r| r.try_get::<String, _>("state"))
                        .transpose()?
                };
                let name_gone = match &taken {
                    None => false,
                    Some(st) => {
                        if !state(&l.spec.name, "state", st)?.is_terminal() {
                            names_taken.insert(l.spec.name.clone());
                            continue;
                        }
                        true
                    }
                };
                if launched == 0 && !name_gone {
                    continue;
                }
                let stored_key = if launched == 0 {
                    l.idempotency_key.clone()
                } else {
                    format!("{}#{}", l.idempotency_key, launched + 1)
                };
                let mut name = generated_name(&l.spec.node_pool, &stored_key);
                for n in 1..=16 {
                    let used = sqlx::query("SELECT name FROM claims WHERE name = $1")
                        .bind(&name)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if used.is_none() {
                        break;
                    }
                    name = generated_name(&l.spec.node_pool, &format!("{stored_key}#{n}"));
                }
                relaunches.insert(i, Relaunch { stored_key, name });
            }
            let rows = sqlx::query(
                "SELECT name, idempotency_key FROM claims \
                 WHERE state IN ('requested', 'launching', 'launched') ORDER BY name",
            )
            .fetch_all(&mut *tx)
            .await?;
            let mut in_flight = Vec::with_capacity(rows.len());
            for r in &rows {
                in_flight.push((r.try_get::<String, _>("name")?, r.try_get::<String, _>("idempotency_key")?));
            }

            let d = decide(s, &known_keys, &names_taken, &relaunches, &in_flight);
            if !d.accepted.is_empty() {
                let basis = serde_json::to_string(&s.basis.in_flight).unwrap_or_default();
                sqlx::query(
                    "INSERT INTO plans (plan_id, session_id, basis_sequence, basis_now, in_flight, received_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (plan_id) DO NOTHING",
                )
                .bind(&s.plan_id)
                .bind(&s.session_id)
                .bind(i64::try_from(s.basis.sequence).unwrap_or(i64::MAX))
                .bind(s.basis.now)
                .bind(basis)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                writes += 1;
            }
            // The accepted launches as stored (a relaunch under its new key and name), written
            // in multi-row statements: commands, then claims, then their first events.
            let mut rows = Vec::with_capacity(d.accepted.len());
            for &i in &d.accepted {
                let mut l = s.launches[i].clone();
                if let Some(r) = relaunches.get(&i) {
                    l.spec.name = r.name.clone();
                    l.idempotency_key = r.stored_key.clone();
                }
                let spec = serde_json::to_string(&l.spec).map_err(|e| corrupt(&l.spec.name, "spec", e.to_string()))?;
                let token = client_token(&l.spec.name, &l.idempotency_key);
                let detail = format!("plan {} session {} key {}", s.plan_id, s.session_id, l.idempotency_key);
                rows.push((l, spec, token, detail));
            }
            for chunk in rows.chunks(INSERT_CHUNK) {
                let sql = format!(
                    "INSERT INTO commands (idempotency_key, plan_id, kind, payload, received_at) VALUES {}",
                    values(chunk.len(), 4, |p| format!("(${}, ${}, 'launch', ${}, ${})", p[0], p[1], p[2], p[3]))
                );
                // Audited: only the placeholder list is built.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for (l, ..) in chunk {
                    q = q.bind(&l.idempotency_key).bind(&s.plan_id).bind(&l.payload).bind(now);
                }
                q.execute(&mut *tx).await?;
                let sql = format!(
                    "INSERT INTO claims (name, idempotency_key, plan_id, node_pool, state, spec, client_token, created_at, updated_at) VALUES {}",
                    values(chunk.len(), 7, |p| format!(
                        "(${}, ${}, ${}, ${}, 'requested', ${}, ${}, ${}, ${})",
                        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[6]
                    ))
                );
                // Audited: only the placeholder list is built.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for (l, spec, token, _) in chunk {
                    q = q
                        .bind(&l.spec.name)
                        .bind(&l.idempotency_key)
                        .bind(&s.plan_id)
                        .bind(&l.spec.node_pool)
                        .bind(spec)
                        .bind(token)
                        .bind(now);
                }
                q.execute(&mut *tx).await?;
                let sql = format!(
                    "INSERT INTO claim_events (claim_name, from_state, to_state, actor, detail, at) VALUES {}",
                    values(chunk.len(), 3, |p| format!("(${}, NULL, 'requested', 'submit', ${}, ${})", p[0], p[1], p[2]))
                );
                // Audited: only the placeholder list is built.
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for (l, _, _, detail) in chunk {
                    q = q.bind(&l.spec.name).bind(detail).bind(now);
                }
                q.execute(&mut *tx).await?;
                writes += 3;
            }
            tx.commit().await?;
            self.wrote(writes);
            Ok(d.outcomes)
        })
    }

    async fn acquire(
        &self,
        owner: &str,
        states: &[ClaimState],
        now: Millis,
        lease_ms: Millis,
        limit: u32,
    ) -> Result<Vec<ClaimRecord>> {
        if states.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let sql = self.acquire_sql(states);
        let claims = with_pool!(self, pool => {
            // Audited: the only variable part is the list of state names, from the enum.
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(owner)
                .bind(now.saturating_add(lease_ms))
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
            rows.iter().map(claim_from_row).collect::<Result<Vec<_>>>()?
        });
        self.wrote(1);
        let mut claims = claims;
        claims.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        Ok(claims)
    }

    async fn acquire_claim(
        &self,
        owner: &str,
        name: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> Result<Option<ClaimRecord>> {
        let claim = with_pool!(self, pool => {
            let row = sqlx::query(concat!(
                "UPDATE claims SET lease_owner = $1, lease_expires_at = $2 \
                 WHERE name = $4 AND (lease_owner IS NULL OR lease_expires_at < $3 OR lease_owner = $1) \
                 RETURNING ",
                claim_columns!()
            ))
            .bind(owner)
            .bind(now.saturating_add(lease_ms))
            .bind(now)
            .bind(name)
            .fetch_optional(pool)
            .await?;
            row.as_ref().map(claim_from_row).transpose()?
        });
        self.wrote(1);
        Ok(claim)
    }

    async fn renew(&self, name: &str, owner: &str, now: Millis, until: Millis) -> Result<()> {
        let done = with_pool!(self, pool => {
            sqlx::query(
                "UPDATE claims SET lease_expires_at = $1 \
                 WHERE name = $2 AND lease_owner = $3 AND lease_expires_at >= $4",
            )
            .bind(until)
            .bind(name)
            .bind(owner)
            .bind(now)
            .execute(pool)
            .await?
            .rows_affected()
        });
        self.wrote(1);
        if done == 1 {
            Ok(())
        } else {
            let expected = self
                .claim(name)
                .await?
                .map_or(ClaimState::Requested, |c| c.state);
            Err(Error::LeaseLost {
                name: name.to_string(),
                expected,
            })
        }
    }

    async fn transition(&self, t: &Transition, now: Millis) -> Result<()> {
        let i = t.instance.clone().unwrap_or_default();
        let has_instance = t.instance.is_some();
        let release = t.release || t.retry_at.is_some();
        let done = with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let n = sqlx::query(
                "UPDATE claims SET state = $1, updated_at = $2, \
                   instance_id = CASE WHEN $3 THEN $4 ELSE instance_id END, \
                   provider_id = CASE WHEN $3 THEN $5 ELSE provider_id END, \
                   instance_type = CASE WHEN $3 THEN $6 ELSE instance_type END, \
                   zone = CASE WHEN $3 THEN $7 ELSE zone END, \
                   capacity_type = CASE WHEN $3 THEN $8 ELSE capacity_type END, \
                   failure_reason = COALESCE($9, failure_reason), \
                   attempts = CASE WHEN $10 THEN attempts + 1 ELSE attempts END, \
                   retry_at = COALESCE($11, retry_at), \
                   lease_owner = CASE WHEN $12 THEN NULL ELSE lease_owner END, \
                   lease_expires_at = CASE WHEN $12 THEN NULL ELSE lease_expires_at END \
                 WHERE name = $13 AND state = $14 AND lease_owner = $15 AND lease_expires_at >= $2",
            )
            .bind(t.to.as_str())
            .bind(now)
            .bind(has_instance)
            .bind(&i.instance_id)
            .bind(&i.provider_id)
            .bind(&i.instance_type)
            .bind(&i.zone)
            .bind(&i.capacity_type)
            .bind(&t.failure_reason)
            .bind(t.retry_at.is_some())
            .bind(t.retry_at)
            .bind(release)
            .bind(&t.name)
            .bind(t.from.as_str())
            .bind(&t.owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 1 {
                sqlx::query(
                    "INSERT INTO claim_events (claim_name, from_state, to_state, actor, detail, at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&t.name)
                .bind(t.from.as_str())
                .bind(t.to.as_str())
                .bind(&t.owner)
                .bind(&t.detail)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
            n == 1
        });
        if done {
            self.wrote(2);
            Ok(())
        } else {
            Err(Error::LeaseLost {
                name: t.name.clone(),
                expected: t.from,
            })
        }
    }

    async fn release_all(&self, owner: &str) -> Result<u64> {
        let n = with_pool!(self, pool => {
            sqlx::query(
                "UPDATE claims SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = $1",
            )
            .bind(owner)
            .execute(pool)
            .await?
            .rows_affected()
        });
        self.wrote(1);
        Ok(n)
    }

    async fn claim(&self, name: &str) -> Result<Option<ClaimRecord>> {
        with_pool!(self, pool => {
            let row = sqlx::query(concat!("SELECT ", claim_columns!(), " FROM claims WHERE name = $1")).bind(name).fetch_optional(pool).await?;
            row.as_ref().map(claim_from_row).transpose()
        })
    }

    async fn claims(&self) -> Result<Vec<ClaimRecord>> {
        with_pool!(self, pool => {
            let rows = sqlx::query(concat!("SELECT ", claim_columns!(), " FROM claims ORDER BY created_at, name")).fetch_all(pool).await?;
            rows.iter().map(claim_from_row).collect()
        })
    }

    async fn events(&self, name: &str) -> Result<Vec<Event>> {
        with_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT claim_name, from_state, to_state, actor, detail, at FROM claim_events \
                 WHERE claim_name = $1 ORDER BY id",
            )
            .bind(name)
            .fetch_all(pool)
            .await?;
            rows.iter().map(event_from_row).collect()
        })
    }

    async fn counts(&self) -> Result<BTreeMap<ClaimState, i64>> {
        with_pool!(self, pool => {
            let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM claims GROUP BY state")
                .fetch_all(pool)
                .await?;
            let mut out = BTreeMap::new();
            for r in &rows {
                let s: String = r.try_get("state")?;
                out.insert(state("claims", "state", &s)?, r.try_get::<i64, _>("n")?);
            }
            Ok(out)
        })
    }

    async fn propose(
        &self,
        proposals: &super::Proposals,
        confirm_after_ms: Millis,
        now: Millis,
    ) -> Result<Vec<(String, super::ProposalOutcome)>> {
        self.propose_impl(proposals, confirm_after_ms, now).await
    }

    async fn disruptions(&self, active_only: bool) -> Result<Vec<super::DisruptionRecord>> {
        self.disruptions_impl(active_only).await
    }

    async fn disruption(&self, key: &str) -> Result<Option<super::DisruptionRecord>> {
        self.disruption_impl(key).await
    }

    async fn acquire_disruption(
        &self,
        owner: &str,
        key: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> Result<Option<super::DisruptionRecord>> {
        self.acquire_disruption_impl(owner, key, now, lease_ms)
            .await
    }

    async fn advance_disruption(&self, step: &super::DisruptionStep, now: Millis) -> Result<()> {
        self.advance_disruption_impl(step, now).await
    }

    async fn disruption_events(&self, key: &str) -> Result<Vec<super::DisruptionEvent>> {
        self.disruption_events_impl(key).await
    }

    fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    async fn close(&self) {
        with_pool!(self, pool => pool.close().await)
    }
}
