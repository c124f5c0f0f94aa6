-- Disruptions (issue 13): each DisruptCommand of a plan, recorded when first proposed and
-- executed only once a plan at least the confirmation delay later proposes it again. Additive:
-- no existing table changes. Same columns as postgres/0131_disruptions.sql.
CREATE TABLE disruptions (
    idempotency_key  TEXT   PRIMARY KEY,
    plan_id          TEXT   NOT NULL,
    reason           TEXT   NOT NULL,
    nodes            TEXT   NOT NULL,
    replacements     TEXT   NOT NULL,
    savings          DOUBLE PRECISION NOT NULL,
    payload          BLOB   NOT NULL,
    state            TEXT   NOT NULL,
    first_seen       BIGINT NOT NULL,
    confirmed_seen   BIGINT,
    attempt          BIGINT NOT NULL DEFAULT 1,
    candidates       TEXT   NOT NULL DEFAULT '[]',
    failure_reason   TEXT,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX disruptions_state ON disruptions (state);

CREATE TABLE disruption_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT    NOT NULL REFERENCES disruptions (idempotency_key),
    from_state      TEXT,
    to_state        TEXT    NOT NULL,
    actor           TEXT    NOT NULL,
    detail          TEXT    NOT NULL,
    at              BIGINT  NOT NULL
);
CREATE INDEX disruption_events_key ON disruption_events (idempotency_key, id);

CREATE TRIGGER disruption_events_no_update BEFORE UPDATE ON disruption_events
BEGIN
    SELECT RAISE(ABORT, 'disruption_events is append-only');
END;
CREATE TRIGGER disruption_events_no_delete BEFORE DELETE ON disruption_events
BEGIN
    SELECT RAISE(ABORT, 'disruption_events is append-only');
END;
