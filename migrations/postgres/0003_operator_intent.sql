-- The operator's intent lives with the truth (issue 19): a pause, its reason and its generation
-- (each pause or resume counts one, so Redis keeps the newest of two operators' writes), and the
-- top-up a fix undid after its console died (its late database write must not land).
ALTER TABLE seckill_product ADD COLUMN IF NOT EXISTS paused BIGINT NOT NULL DEFAULT 0;
ALTER TABLE seckill_product ADD COLUMN IF NOT EXISTS pause_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE seckill_product ADD COLUMN IF NOT EXISTS pause_gen BIGINT NOT NULL DEFAULT 0;
ALTER TABLE seckill_product ADD COLUMN IF NOT EXISTS topup_fence VARCHAR(64);
