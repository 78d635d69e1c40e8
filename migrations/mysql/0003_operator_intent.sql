-- The operator's intent lives with the truth (issue 19): a pause, its reason and its generation
-- (each pause or resume counts one, so Redis keeps the newest of two operators' writes), and the
-- top-up a fix undid after its console died (its late database write must not land).
-- (MySQL has no ADD COLUMN IF NOT EXISTS: a rerun after a crash skips a column that exists.)
ALTER TABLE seckill_product ADD COLUMN paused BIGINT NOT NULL DEFAULT 0;
ALTER TABLE seckill_product ADD COLUMN pause_reason VARCHAR(500) NOT NULL DEFAULT '';
ALTER TABLE seckill_product ADD COLUMN pause_gen BIGINT NOT NULL DEFAULT 0;
ALTER TABLE seckill_product ADD COLUMN topup_fence VARCHAR(64) NULL;
