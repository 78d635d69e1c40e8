-- seckill-console: a live top-up of one product: the stock moves by ARGV[1] units (a negative
-- change takes units away, never more than the stock holds now) and the meta 'initial' with it,
-- in one atomic step while buyers deduct. The database's initial_stock moves by the same
-- change in the console's other write; the order of the two keeps Redis at or below the truth
-- whatever fails between them.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua; the stock, meta
--            and events are written)
-- ARGV[1] the change: an integer, not 0
-- ARGV[2] the top-up's id: a call with the id of the last top-up applied changes nothing (a
--         retry after a lost reply)
--
-- Returns {1, new stock} when applied; {2, stock} when this id was already applied; {0, stock}
-- when a negative change would take more than the stock holds (nothing written); {-1} when
-- the stock key is absent; -4 on bad arguments. Corrupt values are error replies with nothing
-- written.

local change, id = ARGV[1], ARGV[2]
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
local n = int_or_nil(change)
if n == nil or n == 0 or id == nil or id == '' then
  return -4
end

local stock_kind = redis.call('TYPE', KEYS[1])['ok']
if stock_kind == 'none' then
  return {-1}
end
local stock = (stock_kind == 'string') and int_or_nil(redis.call('GET', KEYS[1])) or nil
if stock == nil then
  return redis.error_reply('ERR seckill: ' .. KEYS[1] .. ' is not an integer: fix the product first')
end
local meta_kind = redis.call('TYPE', KEYS[2])['ok']
if meta_kind ~= 'hash' then
  return redis.error_reply('ERR seckill: ' .. KEYS[2] .. ' is a ' .. meta_kind .. ', not a hash: fix the product first')
end
local events_kind = redis.call('TYPE', KEYS[5])['ok']
if events_kind ~= 'stream' and events_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[5] .. ' is a ' .. events_kind .. ', not a stream: fix the product first')
end
local f = redis.call('HMGET', KEYS[2], 'initial', 'rev', 'last_topup')
local initial = int_or_nil(f[1] or '0')
local rev = int_or_nil(f[2] or '0')
if initial == nil or rev == nil then
  return redis.error_reply('ERR seckill: initial or rev in ' .. KEYS[2] .. ' is not an integer: fix the product first')
end
if f[3] == id then
  return {2, stock}
end
if stock + n < 0 then
  return {0, stock}
end

redis.call('XADD', KEYS[5], '*', 'a', n .. '|')
local left = redis.call('INCRBY', KEYS[1], n)
redis.call('HSET', KEYS[2], 'initial', initial + n, 'last_topup', id)
redis.call('HINCRBY', KEYS[2], 'rev', 1)
return {1, left}
