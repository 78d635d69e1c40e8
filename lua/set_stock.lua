-- seckill-console: the console's rewrite of a product's stock (fix, preheat --force, preheat
-- of absent keys). It never overwrites a sale: a live stock is corrected by its offset from
-- the scripts' own counters, computed here in the same atomic step as the write, so a
-- deduction before or after it moves stock and counters alike and the correction stays right.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua)
-- ARGV[1] mode:
--   'rebase'  the stock key holds an integer. The offset X = stock - initial + deducted -
--             returned (ARGV[2] = initial from the database) must equal ARGV[3], the offset the
--             caller saw; then stock = stock - X. That is below 0 when more is held than there
--             was (an oversell): the deduction then refuses everyone until returns pay it back.
--   'set'     the stock key is absent, corrupt or of another type (nothing can deduct it):
--             ARGV[3] is the guard ('!' absent, '=' .. value exactly this string, '@' .. type a
--             non-string type). ARGV[2] is the new stock, or 'initial:' .. n for
--             n - deducted + returned as the counters stand after ARGV[6..] are written (below 0
--             after an oversell, as for 'rebase').
-- ARGV[4] 'keep' to update the meta hash in place, 'reset' to rebuild it (corrupt): every field
--         goes except paused, epoch and the bucket figures
-- ARGV[5] expiry of every key, ms since the epoch; '' leaves expiries alone
-- ARGV[6..] field, value pairs written to the meta hash
--
-- Every applied call increments meta 'rev' and appends an event (a = "<change>|"), so a reader
-- can tell that the stock changed outside a deduction.
-- Returns {1, new stock, change} when applied; {0, the offset found} when 'rebase' finds
-- another offset; {0, what the key holds} when the 'set' guard fails (false when absent,
-- '<type>' for a non-string); -4 on bad arguments.

local mode, target, guard, meta_mode, expire = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if (mode ~= 'rebase' and mode ~= 'set') or target == nil or guard == nil or expire == nil then
  return -4
end
if meta_mode ~= 'keep' and meta_mode ~= 'reset' then
  return -4
end
if (#ARGV - 5) % 2 ~= 0 or (expire ~= '' and not string.find(expire, '^%d+$')) then
  return -4
end

-- Redis's own integer rule (what INCRBY and HINCRBY accept): 0, or an optional minus, a digit
-- 1-9 and more digits; at most 15 digits, which a Lua number (a double) holds exactly. `01`,
-- `-0`, `+5` or 16 digits would pass a looser test here and then make a later INCRBY or
-- HINCRBY fail, after the first write: so they are refused before any.
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

-- Types first: nothing is written unless every write below can succeed.
local function kind(key)
  return redis.call('TYPE', key)['ok']
end
local stock_kind = kind(KEYS[1])
local buyers_kind, ledger_kind = kind(KEYS[3]), kind(KEYS[4])
for i, k in pairs({ [3] = buyers_kind, [4] = ledger_kind }) do
  if k ~= 'hash' and k ~= 'none' then
    return redis.error_reply('ERR seckill: ' .. KEYS[i] .. ' is a ' .. k .. ', not a hash')
  end
end
local events_kind = kind(KEYS[5])
local meta_kind = kind(KEYS[2])
local reset = meta_mode == 'reset' or (meta_kind ~= 'hash' and meta_kind ~= 'none')

local current = false
if stock_kind == 'string' then
  current = redis.call('GET', KEYS[1])
elseif stock_kind ~= 'none' then
  current = '<' .. stock_kind .. '>'
end

local new, change
if mode == 'rebase' then
  local initial, want = int_or_nil(target), int_or_nil(guard)
  if initial == nil or want == nil then
    return -4
  end
  local stock = (stock_kind == 'string') and int_or_nil(current) or nil
  if stock == nil or reset or (events_kind ~= 'stream' and events_kind ~= 'none') then
    return redis.error_reply('ERR seckill: ' .. KEYS[1] .. ' cannot be rebased: its stock, meta or events key is corrupt')
  end
  local c = redis.call('HMGET', KEYS[2], 'deducted', 'returned')
  local d, r = int_or_nil(c[1] or '0'), int_or_nil(c[2] or '0')
  if d == nil or r == nil then
    return redis.error_reply('ERR seckill: the counters in ' .. KEYS[2] .. ' are not integers')
  end
  local offset = stock - initial + d - r
  if offset ~= want then
    return {0, offset}
  end
  new = stock - offset
  change = new - stock
else
  local first, rest = string.sub(guard, 1, 1), string.sub(guard, 2)
  local matches
  if first == '!' then
    matches = (stock_kind == 'none')
  elseif first == '=' then
    matches = (stock_kind == 'string' and current == rest)
  elseif first == '@' then
    -- Only a non-string type: '@string' would match any string value, one nobody saw.
    matches = (rest ~= 'string' and rest ~= 'none' and stock_kind == rest)
  else
    return -4
  end
  if not matches then
    return {0, current}
  end
  local from = string.match(target, '^initial:(%-?%d+)$')
  if not from and int_or_nil(target) == nil then
    return -4
  end
  if reset then
    -- The fields the console does not own survive the rebuild: a paused product stays paused
    -- (a `paused` that is neither 0 nor 1 stopped every sale, so it becomes 1, not 0), and
    -- the gateways keep their preheat epoch and token bucket.
    local keep = {}
    if meta_kind == 'hash' then
      local f = redis.call('HMGET', KEYS[2], 'paused', 'epoch', 'bucket_capacity', 'bucket_rate')
      if f[1] then
        keep[#keep + 1] = 'paused'
        keep[#keep + 1] = (f[1] == '0') and '0' or '1'
      end
      local names = { 'paused', 'epoch', 'bucket_capacity', 'bucket_rate' }
      for i = 2, 4 do
        if f[i] then
          keep[#keep + 1] = names[i]
          keep[#keep + 1] = f[i]
        end
      end
    end
    redis.call('DEL', KEYS[2])
    if #keep > 0 then
      redis.call('HSET', KEYS[2], unpack(keep))
    end
  end
  if events_kind ~= 'stream' and events_kind ~= 'none' then
    redis.call('DEL', KEYS[5])
  end
  if stock_kind ~= 'string' and stock_kind ~= 'none' then
    redis.call('DEL', KEYS[1])
  end
  if #ARGV > 5 then
    redis.call('HSET', KEYS[2], unpack(ARGV, 6))
  end
  if from then
    local c = redis.call('HMGET', KEYS[2], 'deducted', 'returned')
    local d, r = int_or_nil(c[1] or '0'), int_or_nil(c[2] or '0')
    if d == nil or r == nil then
      return redis.error_reply('ERR seckill: the counters in ' .. KEYS[2] .. ' are not integers')
    end
    new = tonumber(from) - d + r
  else
    new = tonumber(target)
  end
  change = new - (int_or_nil(current or '') or 0)
end

redis.call('XADD', KEYS[5], '*', 'a', change .. '|')
if mode == 'rebase' then
  redis.call('INCRBY', KEYS[1], change)
  if #ARGV > 5 then
    redis.call('HSET', KEYS[2], unpack(ARGV, 6))
  end
else
  redis.call('SET', KEYS[1], new, 'KEEPTTL')
end
redis.call('HINCRBY', KEYS[2], 'rev', 1)
if expire ~= '' then
  -- The hashes the deductions fill get a placeholder field (an empty request or user id,
  -- which the scripts refuse), so they exist, and keep their expiry, from the start.
  redis.call('HSETNX', KEYS[3], '', '0')
  redis.call('HSETNX', KEYS[4], '', '-')
  redis.call('HSET', KEYS[2], 'expire_at', expire)
  for i = 1, 5 do
    redis.call('PEXPIREAT', KEYS[i], expire)
  end
end
return {1, new, change}
