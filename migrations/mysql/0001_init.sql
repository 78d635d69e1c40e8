-- seckill-console schema, MySQL / MariaDB (InnoDB, utf8mb4). Timestamps are UTC DATETIME(6).
CREATE TABLE IF NOT EXISTS seckill_activity (
    activity_id  VARCHAR(64) NOT NULL PRIMARY KEY,
    name         TEXT NOT NULL,
    starts_at    DATETIME(6) NOT NULL,
    ends_at      DATETIME(6) NOT NULL,
    status       VARCHAR(16) NOT NULL DEFAULT 'scheduled',
    created_at   DATETIME(6) NOT NULL,
    updated_at   DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS seckill_product (
    activity_id     VARCHAR(64) NOT NULL,
    product_id      VARCHAR(64) NOT NULL,
    name            VARCHAR(255) NOT NULL DEFAULT '',
    initial_stock   BIGINT NOT NULL CHECK (initial_stock >= 0),
    per_user_limit  BIGINT NOT NULL CHECK (per_user_limit >= 1),
    PRIMARY KEY (activity_id, product_id),
    CONSTRAINT seckill_product_activity FOREIGN KEY (activity_id) REFERENCES seckill_activity (activity_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS seckill_order (
    order_id     VARCHAR(64) NOT NULL PRIMARY KEY,
    request_id   VARCHAR(128) NOT NULL,
    activity_id  VARCHAR(64) NOT NULL,
    product_id   VARCHAR(64) NOT NULL,
    user_id      VARCHAR(128) NOT NULL,
    quantity     BIGINT NOT NULL CHECK (quantity > 0),
    status       VARCHAR(16) NOT NULL CHECK (status IN ('pending_payment', 'paid', 'cancelled', 'expired')),
    created_at   DATETIME(6) NOT NULL,
    updated_at   DATETIME(6) NOT NULL,
    UNIQUE KEY seckill_order_request (request_id),
    KEY seckill_order_by_product (activity_id, product_id, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS seckill_compensation (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    request_id   VARCHAR(128) NOT NULL,
    activity_id  VARCHAR(64) NOT NULL,
    product_id   VARCHAR(64) NOT NULL,
    user_id      VARCHAR(128) NOT NULL,
    quantity     BIGINT NOT NULL,
    status       VARCHAR(16) NOT NULL DEFAULT 'pending',
    reason       VARCHAR(255) NOT NULL DEFAULT '',
    resolution   VARCHAR(255) NULL,
    created_at   DATETIME(6) NOT NULL,
    resolved_at  DATETIME(6) NULL,
    UNIQUE KEY seckill_compensation_request (request_id),
    KEY seckill_compensation_by_activity (activity_id, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS seckill_outbox (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    order_id     VARCHAR(64) NOT NULL,
    activity_id  VARCHAR(64) NOT NULL,
    topic        VARCHAR(128) NOT NULL,
    payload      TEXT NOT NULL,
    status       VARCHAR(16) NOT NULL DEFAULT 'pending',
    attempts     BIGINT NOT NULL DEFAULT 0,
    created_at   DATETIME(6) NOT NULL,
    sent_at      DATETIME(6) NULL,
    KEY seckill_outbox_by_status (activity_id, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS seckill_audit (
    id            BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at            DATETIME(6) NOT NULL,
    actor         VARCHAR(128) NOT NULL,
    action        VARCHAR(64) NOT NULL,
    activity_id   VARCHAR(64) NOT NULL,
    product_id    VARCHAR(64) NULL,
    before_value  TEXT NULL,
    after_value   TEXT NULL,
    reason        TEXT NOT NULL,
    detail        TEXT NOT NULL,
    KEY seckill_audit_by_activity (activity_id, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
