-- seckill-console schema, PostgreSQL.
CREATE TABLE IF NOT EXISTS seckill_activity (
    activity_id  VARCHAR(64) PRIMARY KEY,
    name         TEXT NOT NULL,
    starts_at    TIMESTAMPTZ NOT NULL,
    ends_at      TIMESTAMPTZ NOT NULL,
    status       VARCHAR(16) NOT NULL DEFAULT 'scheduled',
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS seckill_product (
    activity_id     VARCHAR(64) NOT NULL REFERENCES seckill_activity (activity_id),
    product_id      VARCHAR(64) NOT NULL,
    name            TEXT NOT NULL DEFAULT '',
    initial_stock   BIGINT NOT NULL CHECK (initial_stock >= 0),
    per_user_limit  BIGINT NOT NULL CHECK (per_user_limit >= 1),
    PRIMARY KEY (activity_id, product_id)
);

CREATE TABLE IF NOT EXISTS seckill_order (
    order_id     VARCHAR(64) PRIMARY KEY,
    request_id   VARCHAR(128) NOT NULL UNIQUE,
    activity_id  VARCHAR(64) NOT NULL,
    product_id   VARCHAR(64) NOT NULL,
    user_id      VARCHAR(128) NOT NULL,
    quantity     BIGINT NOT NULL CHECK (quantity > 0),
    status       VARCHAR(16) NOT NULL CHECK (status IN ('pending_payment', 'paid', 'cancelled', 'expired')),
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS seckill_order_by_product ON seckill_order (activity_id, product_id, status);

CREATE TABLE IF NOT EXISTS seckill_compensation (
    id           BIGSERIAL PRIMARY KEY,
    request_id   VARCHAR(128) NOT NULL UNIQUE,
    activity_id  VARCHAR(64) NOT NULL,
    product_id   VARCHAR(64) NOT NULL,
    user_id      VARCHAR(128) NOT NULL,
    quantity     BIGINT NOT NULL,
    status       VARCHAR(16) NOT NULL DEFAULT 'pending',
    reason       TEXT NOT NULL DEFAULT '',
    resolution   TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    resolved_at  TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS seckill_compensation_by_activity ON seckill_compensation (activity_id, status);

CREATE TABLE IF NOT EXISTS seckill_outbox (
    id           BIGSERIAL PRIMARY KEY,
    order_id     VARCHAR(64) NOT NULL,
    activity_id  VARCHAR(64) NOT NULL,
    topic        VARCHAR(128) NOT NULL,
    payload      TEXT NOT NULL,
    status       VARCHAR(16) NOT NULL DEFAULT 'pending',
    attempts     BIGINT NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ NOT NULL,
    sent_at      TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS seckill_outbox_by_status ON seckill_outbox (activity_id, status);

CREATE TABLE IF NOT EXISTS seckill_audit (
    id            BIGSERIAL PRIMARY KEY,
    at            TIMESTAMPTZ NOT NULL,
    actor         VARCHAR(128) NOT NULL,
    action        VARCHAR(64) NOT NULL,
    activity_id   VARCHAR(64) NOT NULL,
    product_id    VARCHAR(64),
    before_value  TEXT,
    after_value   TEXT,
    reason        TEXT NOT NULL DEFAULT '',
    detail        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS seckill_audit_by_activity ON seckill_audit (activity_id, at);
