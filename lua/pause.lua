-- seckill-console: pauses or resumes one product. While the meta field 'paused' is '1' the
-- deduction answers -5 and sells nothing; returns of earlier sales still give their units back
-- (they are not sales).
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua; only the stock
--            and the meta hash are read, only the meta hash is written)
-- ARGV[1] '1' to pause, '0' to resume
--
-- Returns {1, what 'paused' was ('0' or '1')} when written; {0, 'missing'} when the stock key
-- is absent (nothing to pause: preheat first); -4 on bad arguments. A meta hash of another type
-- or a 'paused' / 'rev' that is not what the scripts read is an error reply with nothing
-- written.

local want = ARGV[1]
if want ~= '0' and want ~= '1' then
  return -4
end
if redis.call('TYPE', KEYS[1])['ok'] == 'none' then
  return {0, 'missing'}
end
local meta_kind = redis.call('TYPE', KEYS[2])['ok']
if meta_kind ~= 'hash' then
  return redis.error_reply('ERR seckill: ' .. KEYS[2] .. ' is a ' .. meta_kind .. ', not a hash: fix the product first')
end
local f = redis.call('HMGET', KEYS[2], 'paused', 'rev')
local was = f[1] or '0'
if was ~= '0' and was ~= '1' then
  return redis.error_reply('ERR seckill: paused in ' .. KEYS[2] .. ' is neither 0 nor 1: fix the product first')
end
-- The contract's integer rule for 'rev' (the one every script applies: 0, or an optional minus,
-- a digit 1-9 and at most 15 digits in all), checked before the first write.
local rev = f[2]
local rev_digits = rev and string.match(rev, '^%-?([1-9]%d*)$')
if rev and rev ~= '0' and not (rev_digits and #rev_digits <= 15) then
  return redis.error_reply('ERR seckill: rev in ' .. KEYS[2] .. ' is not an integer: fix the product first')
end
redis.call('HSET', KEYS[2], 'paused', want)
redis.call('HINCRBY', KEYS[2], 'rev', 1)
return {1, was}
