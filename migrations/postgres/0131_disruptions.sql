-- Disruptions (issue 13): each DisruptCommand of a plan, recorded when first proposed and
-- executed only once a plan at least the confirmation delay later proposes it again. Additive:
-- no existing table changes. Same columns as sqlite/0131_disruptions.sql.
CREATE TABLE disruptions (
    idempotency_key  TEXT   PRIMARY KEY,
    plan_id          TEXT   NOT NULL,  -- the plan that proposed it first (this attempt)
    reason           TEXT   NOT NULL,  -- Empty, Underutilized, Drifted, Expired
    nodes            TEXT   NOT NULL,  -- JSON array of the candidate Node names
    replacements     TEXT   NOT NULL,  -- JSON array of launch specs
    savings          DOUBLE PRECISION NOT NULL,
    payload          BYTEA  NOT NULL,  -- the protobuf-encoded command as received
    state            TEXT   NOT NULL,
    first_seen       BIGINT NOT NULL,  -- basis.now (seconds) of the first proposing plan
    confirmed_seen   BIGINT,           -- basis.now (seconds) of the confirming plan
    attempt          BIGINT NOT NULL DEFAULT 1,
    candidates       TEXT   NOT NULL DEFAULT '[]', -- JSON array of the claim names disrupted
    failure_reason   TEXT,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX disruptions_state ON disruptions (state);

-- Append-only history of every disruption.
CREATE TABLE disruption_events (
    id              BIGSERIAL PRIMARY KEY,
    idempotency_key TEXT      NOT NULL REFERENCES disruptions (idempotency_key),
    from_state      TEXT,
    to_state        TEXT      NOT NULL,
    actor           TEXT      NOT NULL,
    detail          TEXT      NOT NULL,
    at              BIGINT    NOT NULL
);
CREATE INDEX disruption_events_key ON disruption_events (idempotency_key, id);

CREATE FUNCTION disruption_events_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'disruption_events is append-only';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER disruption_events_no_update BEFORE UPDATE OR DELETE ON disruption_events
    FOR EACH ROW EXECUTE FUNCTION disruption_events_append_only();
