-- The operator's intent lives with the truth (issue 19): a pause, its reason and its generation
-- (each pause or resume counts one, so Redis keeps the newest of two operators' writes), and the
-- top-up a fix undid after its console died (its late database write must not land).
ALTER TABLE seckill_product ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE seckill_product ADD COLUMN pause_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE seckill_product ADD COLUMN pause_gen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE seckill_product ADD COLUMN topup_fence TEXT;
