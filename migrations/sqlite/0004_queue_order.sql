-- The compensation list without a sort of the whole queue (a million entries after an
-- incident): its pending entries, oldest first, walk the (activity_id, status) index, whose
-- entries end with the id; the others, newest first, walk this one backwards.
CREATE INDEX IF NOT EXISTS seckill_compensation_by_id ON seckill_compensation (activity_id, id);
