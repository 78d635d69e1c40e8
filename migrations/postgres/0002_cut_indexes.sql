-- Indexes for reconciliation that never reads every order (issue 10): a product's live
-- orders newest first (the search for sales Redis lost), the orders that changed since a moment
-- (the live view's feed of changes), and the oldest pending outbox message and compensation
-- entry (index seeks).
CREATE INDEX IF NOT EXISTS seckill_order_by_created ON seckill_order (activity_id, product_id, created_at, request_id);
CREATE INDEX IF NOT EXISTS seckill_order_by_change ON seckill_order (activity_id, updated_at, request_id);
CREATE INDEX IF NOT EXISTS seckill_outbox_by_age ON seckill_outbox (activity_id, status, created_at);
CREATE INDEX IF NOT EXISTS seckill_compensation_by_age ON seckill_compensation (activity_id, status, created_at);
