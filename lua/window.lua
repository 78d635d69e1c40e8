-- seckill-console: write an activity's new sale window into one product's meta hash (a
-- re-import that moved the window of an activity already preheated). deduct.lua answers -8
-- outside `opens` <= Redis time < `closes`.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua)
-- ARGV[1] opens, ARGV[2] closes: ms since the epoch, integers, opens < closes
--
-- Returns {1, rev} when written (the meta 'rev' counts the write, and, on a product that has
-- sold, an event of no units, a = "0|", tells the live views it moved); {2} when the meta hash
-- holds this window already (nothing written); {0} when it holds no 'limit' (not preheated, or
-- lost: the preheat or fix that writes it writes the window too); {4, 'frozen', marker} when a
-- rebuild holds the product (its last write carries the 'rev' it read: a write between would
-- leave the product without its stock key; fix writes the window after it); -4 on bad
-- arguments; an error reply, with nothing written, when the meta hash or the events key is of
-- another type.

local function int_or_nil(v)
  if v == '0' then
    return 0
  end
  local digits = v and string.match(v, '^%-?([1-9]%d*)$')
  if digits and #digits <= 15 then
    return tonumber(v)
  end
  return nil
end

local opens, closes = int_or_nil(ARGV[1]), int_or_nil(ARGV[2])
if opens == nil or closes == nil or opens < 0 or closes <= opens then
  return -4
end

local meta_kind = redis.call('TYPE', KEYS[2])['ok']
if meta_kind == 'none' then
  return { 0 }
end
if meta_kind ~= 'hash' then
  return redis.error_reply('ERR seckill: ' .. KEYS[2] .. ' is a ' .. meta_kind .. ', not a hash')
end
local events_kind = redis.call('TYPE', KEYS[5])['ok']
if events_kind ~= 'stream' and events_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[5] .. ' is a ' .. events_kind .. ', not a stream')
end
local m = redis.call('HMGET', KEYS[2], 'limit', 'rev', 'frozen', 'opens', 'closes')
if not m[1] then
  return { 0 }
end
if m[2] and int_or_nil(m[2]) == nil then
  return redis.error_reply('ERR seckill: rev in ' .. KEYS[2] .. ' is not an integer')
end
if m[3] then
  return { 4, 'frozen', m[3] }
end
if m[4] == ARGV[1] and m[5] == ARGV[2] then
  return { 2 }
end

redis.call('HSET', KEYS[2], 'opens', ARGV[1], 'closes', ARGV[2])
local now = redis.call('HINCRBY', KEYS[2], 'rev', 1)
-- Only a stream that holds entries takes the event: an unsold product's stream is empty, and
-- its first entry would open a 4 KB node (100,000 products: about 435 MB of a live Redis).
if events_kind == 'stream' and redis.call('XLEN', KEYS[5]) > 0 then
  redis.call('XADD', KEYS[5], '*', 'a', '0|')
end
return { 1, now }
