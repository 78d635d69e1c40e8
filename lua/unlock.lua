-- seckill-console: release a lock only if this caller still holds it (compare-and-delete), so a
-- lock that expired and was taken by someone else is never released by the late holder.
-- Used by the `lock` strategy of dry runs (seed document 000, section 4), not by app servers.
--
-- KEYS[1] the lock key, ARGV[1] the holder's token.
-- Returns 1 when released, 0 when the lock was not (or no longer) ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
