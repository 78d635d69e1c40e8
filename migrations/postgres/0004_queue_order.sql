-- The compensation list without a sort of the whole queue (a million entries after an
-- incident): its pending entries oldest first, and the others newest first, each a walk along
-- an index that ends with the id.
CREATE INDEX IF NOT EXISTS seckill_compensation_pending ON seckill_compensation (activity_id, status, id);
CREATE INDEX IF NOT EXISTS seckill_compensation_by_id ON seckill_compensation (activity_id, id);
