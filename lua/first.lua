-- seckill-console: a product's first write (a preheat of a product Redis holds nothing of): the
-- meta hash, the witnesses, the event stream and, last, the stock, in one atomic step and at a
-- fraction of set_stock.lua's cost (a preheat of 100,000 products sends one call each). Only
-- when none of the product's five keys exists: otherwise nothing is written, the reply says
-- so, and the console reads the product again and takes the general path (set_stock.lua).
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua)
-- ARGV[1] the stock: an integer, 0 or more (nothing is sold yet, so it is the initial stock)
-- ARGV[2] expiry of every key, ms since the epoch; '' for none
-- ARGV[3..] field, value pairs of the meta hash: the fields set_stock.lua accepts, 'initial',
--           'limit' and 'deducted' among them (a field left out reads as 0: 'returned',
--           'unexplained', 'paused', 'pause_gen'; each costs Redis memory on every product)
-- Returns {1, stock, stock, 1} as set_stock.lua does (the stock, its change from nothing, the
-- meta 'rev'); {0} when a key of the product exists; -4 on bad arguments. Nothing is written
-- unless the reply is {1, ...}.

-- Redis's own integer rule, as set_stock.lua applies it: every value is checked before the
-- first write, so a later INCRBY or HINCRBY of it cannot fail half way.
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

local stock, expire = int_or_nil(ARGV[1]), ARGV[2]
if stock == nil or stock < 0 or expire == nil or (#ARGV - 2) % 2 ~= 0 then
  return -4
end
if expire ~= '' then
  local at = int_or_nil(expire)
  if at == nil or at < 1 then
    return -4
  end
end
local lowest = { initial = 0, limit = 1, pause_gen = 0, deducted = 0, returned = 0, opens = 0, closes = 0,
  unexplained = 0, unexplained_since = 0, epoch = 0, fixed_at = 0, expire_at = 1 }
local meta = {}
local given = {}
for i = 3, #ARGV, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  if lowest[f] then
    local n = int_or_nil(v)
    if n == nil or n < lowest[f] then
      return -4
    end
  elseif f == 'paused' or f == 'unexplained_held' then
    if v ~= '0' and v ~= '1' then
      return -4
    end
  elseif f ~= 'bucket_capacity' and f ~= 'bucket_rate' then
    return -4
  end
  given[f] = true
  meta[#meta + 1] = f
  meta[#meta + 1] = v
end
-- The deduction needs these; a first write without them would open a product it refuses.
if not (given.initial and given.limit and given.deducted) then
  return -4
end

if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]) ~= 0 then
  return {0}
end
meta[#meta + 1] = 'rev'
meta[#meta + 1] = '1'
if expire ~= '' then
  meta[#meta + 1] = 'expire_at'
  meta[#meta + 1] = expire
end
redis.call('HSET', KEYS[2], unpack(meta))
-- The witnesses the deduction checks, with a placeholder field (an empty user or request id,
-- which the scripts refuse), so the hashes never empty.
redis.call('HSET', KEYS[3], '', '0')
redis.call('HSET', KEYS[4], '', '-')
-- The stream is created empty: nobody can hold a position in a stream that did not exist, and
-- a stream's first entry allocates a 4 KB node that an empty stream does not keep (372 bytes
-- against 4,728 on Redis 7.0). Its position reads as "no event yet" until the first sale.
redis.call('XADD', KEYS[5], 'MAXLEN', 0, '*', 'a', ARGV[1] .. '|')
if expire ~= '' then
  for i = 2, 5 do
    redis.call('PEXPIREAT', KEYS[i], expire)
  end
  -- The text as given (checked above): Lua would print a number of 15 digits as 1e+14.
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', expire)
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return {1, stock, stock, 1}
