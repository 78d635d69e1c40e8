-- seckill-console schema, SQLite. Timestamps are UTC, stored as ISO-8601 text.
CREATE TABLE IF NOT EXISTS seckill_activity (
    activity_id  TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL,
    starts_at    TEXT NOT NULL,
    ends_at      TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'scheduled',
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS seckill_product (
    activity_id     TEXT NOT NULL REFERENCES seckill_activity (activity_id),
    product_id      TEXT NOT NULL,
    name            TEXT NOT NULL DEFAULT '',
    initial_stock   INTEGER NOT NULL CHECK (initial_stock >= 0),
    per_user_limit  INTEGER NOT NULL CHECK (per_user_limit >= 1),
    PRIMARY KEY (activity_id, product_id)
);

CREATE TABLE IF NOT EXISTS seckill_order (
    order_id     TEXT PRIMARY KEY NOT NULL,
    request_id   TEXT NOT NULL UNIQUE,
    activity_id  TEXT NOT NULL,
    product_id   TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    quantity     INTEGER NOT NULL CHECK (quantity > 0),
    status       TEXT NOT NULL CHECK (status IN ('pending_payment', 'paid', 'cancelled', 'expired')),
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS seckill_order_by_product ON seckill_order (activity_id, product_id, status);

CREATE TABLE IF NOT EXISTS seckill_compensation (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id   TEXT NOT NULL UNIQUE,
    activity_id  TEXT NOT NULL,
    product_id   TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    quantity     INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    reason       TEXT NOT NULL DEFAULT '',
    resolution   TEXT,
    created_at   TEXT NOT NULL,
    resolved_at  TEXT
);
CREATE INDEX IF NOT EXISTS seckill_compensation_by_activity ON seckill_compensation (activity_id, status);

CREATE TABLE IF NOT EXISTS seckill_outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id     TEXT NOT NULL,
    activity_id  TEXT NOT NULL,
    topic        TEXT NOT NULL,
    payload      TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    sent_at      TEXT
);
CREATE INDEX IF NOT EXISTS seckill_outbox_by_status ON seckill_outbox (activity_id, status);

CREATE TABLE IF NOT EXISTS seckill_audit (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    at            TEXT NOT NULL,
    actor         TEXT NOT NULL,
    action        TEXT NOT NULL,
    activity_id   TEXT NOT NULL,
    product_id    TEXT,
    before_value  TEXT,
    after_value   TEXT,
    reason        TEXT NOT NULL DEFAULT '',
    detail        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS seckill_audit_by_activity ON seckill_audit (activity_id, at);
