-- seckill-console: record in Redis deductions that the database's live orders prove but the
-- ledger lacks (lost with a restart or a failover, or returned while the order lived on). Each
-- one gets its ledger entry, its event (b = "<units>|<request id>"), the buyer's holding and
-- the 'deducted' counter, exactly as if deduct.lua had run, so per-user limits, retries and later returns
-- work for it. Idempotent per request id: an entry the ledger holds as deducted is skipped.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua)
-- ARGV[1] 'rebuild': the stock key must be absent (keys lost or never written; the console
--                    writes the stock after the holdings, so no buyer can slip past a limit)
--         'absorb':  the stock key must hold an integer; each recorded deduction also takes
--                    its units from the stock (a sale Redis had forgotten)
-- ARGV[2] expiry of the keys this creates, ms since the epoch, or ''
-- ARGV[3..] request id, user id, quantity: one triple per deduction, at most 500
--
-- Returns {deductions recorded, units recorded}; {-1, what the stock key holds} when it does
-- not meet the mode's condition (nothing written); -4 on bad arguments. A corrupt value is an
-- error reply with nothing written.

local mode, expire = ARGV[1], ARGV[2]
if (mode ~= 'rebuild' and mode ~= 'absorb') or expire == nil then
  return -4
end
if expire ~= '' and not string.find(expire, '^%d+$') then
  return -4
end
local n = #ARGV - 2
if n % 3 ~= 0 or n / 3 > 500 then
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

local kind = redis.call('TYPE', KEYS[1])['ok']
local stock = nil
if mode == 'rebuild' then
  if kind ~= 'none' then
    return {-1, kind}
  end
else
  if kind == 'string' then
    stock = int_or_nil(redis.call('GET', KEYS[1]))
  end
  if stock == nil then
    return {-1, kind}
  end
end
local events_kind = redis.call('TYPE', KEYS[5])['ok']
if events_kind ~= 'stream' and events_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[5] .. ' is a ' .. events_kind .. ', not a stream')
end
local deducted = redis.call('HGET', KEYS[2], 'deducted')
if deducted and int_or_nil(deducted) == nil then
  return redis.error_reply('ERR seckill: deducted in ' .. KEYS[2] .. ' is not an integer')
end

-- Every check before the first write.
local todo, seen, held = {}, {}, {}
for i = 3, #ARGV, 3 do
  local rid, uid, q = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if rid == '' or uid == '' or not string.find(q, '^[1-9]%d*$') or #q > 10 then
    return -4
  end
  if not seen[rid] then
    seen[rid] = true
    local entry = redis.call('HGET', KEYS[4], rid)
    if entry and not string.find(entry, '^[dr][^|]*|%d+|[%d%-]+|%d+|') then
      return redis.error_reply('ERR seckill: ledger entry of request ' .. rid .. ' in ' .. KEYS[4] .. ' is corrupt')
    end
    if not entry or string.sub(entry, 1, 1) == 'r' then
      if held[uid] == nil then
        local h = redis.call('HGET', KEYS[3], uid)
        if h and int_or_nil(h) == nil then
          return redis.error_reply('ERR seckill: holding of user ' .. uid .. ' in ' .. KEYS[3] .. ' is not an integer')
        end
        held[uid] = true
      end
      table.insert(todo, {rid, uid, tonumber(q)})
    end
  end
end

local units = 0
for _, t in ipairs(todo) do
  local rid, uid, qty = t[1], t[2], t[3]
  local at = redis.call('XADD', KEYS[5], '*', 'b', qty .. '|' .. rid)
  local left = 0
  if mode == 'absorb' then
    left = redis.call('DECRBY', KEYS[1], qty)
  end
  redis.call('HINCRBY', KEYS[3], uid, qty)
  redis.call('HINCRBY', KEYS[2], 'deducted', qty)
  redis.call('HSET', KEYS[4], rid, 'd|' .. qty .. '|' .. at .. '|' .. math.max(left, 0) .. '|' .. uid)
  units = units + qty
end
if expire ~= '' and #todo > 0 then
  redis.call('HSETNX', KEYS[3], '', '0')
  redis.call('HSETNX', KEYS[4], '', '-')
  for i = 2, 5 do
    redis.call('PEXPIREAT', KEYS[i], expire)
  end
end
return {#todo, units}
