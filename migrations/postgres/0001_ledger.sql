-- The actuator's ledger (Postgres). Forward-only; times are Unix milliseconds (BIGINT) so that
-- the Postgres and SQLite schemas hold the same values and the same queries read them.

-- One row whose UPDATE serializes submissions across replicas (a row lock held to commit).
CREATE TABLE ledger_lock (
    id      INTEGER PRIMARY KEY,
    submits BIGINT  NOT NULL
);
INSERT INTO ledger_lock (id, submits) VALUES (1, 0);

-- Plans whose commands were accepted.
CREATE TABLE plans (
    plan_id        TEXT   PRIMARY KEY,
    session_id     TEXT   NOT NULL,
    basis_sequence BIGINT NOT NULL,
    basis_now      BIGINT NOT NULL,
    in_flight      TEXT   NOT NULL, -- JSON array of the claim names the plan saw in flight
    received_at    BIGINT NOT NULL
);

-- Accepted commands, one per idempotency key (rejected ones are not kept: they may be accepted
-- later from a fresh plan).
CREATE TABLE commands (
    idempotency_key TEXT   PRIMARY KEY,
    plan_id         TEXT   NOT NULL REFERENCES plans (plan_id),
    kind            TEXT   NOT NULL,
    payload         BYTEA  NOT NULL, -- the protobuf-encoded command as received
    received_at     BIGINT NOT NULL
);

-- Every NodeClaim the actuator launches, with its state machine.
CREATE TABLE claims (
    name             TEXT    PRIMARY KEY,
    idempotency_key  TEXT    NOT NULL UNIQUE REFERENCES commands (idempotency_key),
    plan_id          TEXT    NOT NULL REFERENCES plans (plan_id),
    node_pool        TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    spec             TEXT    NOT NULL, -- JSON launch spec
    client_token     TEXT    NOT NULL UNIQUE,
    instance_id      TEXT,
    provider_id      TEXT,
    instance_type    TEXT,
    zone             TEXT,
    capacity_type    TEXT,
    failure_reason   TEXT,
    attempts         BIGINT  NOT NULL DEFAULT 0,
    retry_at         BIGINT  NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
);
CREATE INDEX claims_state ON claims (state, retry_at);

-- Append-only history of every claim.
CREATE TABLE claim_events (
    id         BIGSERIAL PRIMARY KEY,
    claim_name TEXT      NOT NULL REFERENCES claims (name),
    from_state TEXT,
    to_state   TEXT      NOT NULL,
    actor      TEXT      NOT NULL,
    detail     TEXT      NOT NULL,
    at         BIGINT    NOT NULL
);
CREATE INDEX claim_events_claim ON claim_events (claim_name, id);

CREATE FUNCTION claim_events_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'claim_events is append-only';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER claim_events_no_update BEFORE UPDATE OR DELETE ON claim_events
    FOR EACH ROW EXECUTE FUNCTION claim_events_append_only();
