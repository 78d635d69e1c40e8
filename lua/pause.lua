-- seckill-console: writes the operator's pause (or resume) of one product into Redis. The
-- database holds the intent (seckill_product.paused, with its reason and generation); this is
-- its copy where the deduction reads it: while the meta field 'paused' is '1' the deduction
-- answers -5 and sells nothing; returns of earlier sales still give their units back (they are
-- not sales). Preheat and fix write the same two fields from the database, so a Redis that lost
-- them gets them back.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua; the meta hash is
--            written, and an event of no units appended when the stream is there)
-- ARGV[1] '1' to pause, '0' to resume
-- ARGV[2] the generation of this pause or resume in the database (seckill_product.pause_gen):
--         Redis keeps the newest, so two operators pressing at once end as the database does
--
-- A pause always wins: stopping a sale is never wrong, so a pause is written whatever
-- generation Redis holds (it keeps the higher of the two: a database restored or failed over
-- holds an older one than Redis, and a pause must not be lost to that). A resume is written
-- only over an older generation: it must not lift a newer pause.
--
-- Written whether or not the stock key exists (a rebuild in progress keeps the newer
-- generation). Returns {1, what 'paused' was ('0' or '1'; '0' when absent), 1 when the stock
-- key exists else 0}; {3, the generation Redis holds} when a resume meets a newer generation
-- (nothing written); -4 on bad arguments. A meta key of another type is an error reply with
-- nothing written.

local want, gen = ARGV[1], ARGV[2]
if (want ~= '0' and want ~= '1') or gen == nil or not string.find(gen, '^%d+$') or #gen > 15 then
  return -4
end
local meta_kind = redis.call('TYPE', KEYS[2])['ok']
if meta_kind ~= 'hash' and meta_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[2] .. ' is a ' .. meta_kind .. ', not a hash: fix the product first')
end
local f = redis.call('HMGET', KEYS[2], 'paused', 'pause_gen')
local have = tonumber(f[2] and string.match(f[2], '^%d+$') and #f[2] <= 15 and f[2] or '0')
if have > tonumber(gen) then
  if want == '0' then
    return {3, have}
  end
  gen = tostring(have)
end
local was = (f[1] == '1') and '1' or '0'
redis.call('HSET', KEYS[2], 'paused', want, 'pause_gen', gen)
-- An event of no units, as every script's write appends one: a live view that asks only
-- whether the stream moved sees the pause at once. A stream that is gone stays gone (the
-- product's lost piece, for a repair to rebuild).
if redis.call('TYPE', KEYS[5])['ok'] == 'stream' then
  redis.call('XADD', KEYS[5], '*', 'a', '0|')
end
local present = (redis.call('EXISTS', KEYS[1]) == 1) and 1 or 0
return {1, was, present}
