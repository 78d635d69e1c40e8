-- seckill-console: return the stock of one deduction (an order cancelled or unpaid past its
-- window, an orphaned deduction). Idempotent per request id; never returns more than the
-- deduction took.
--
-- KEYS: the same five keys as deduct.lua (stock, meta, buyers, ledger, events) of one {A:P}.
-- ARGV[1] request id of the deduction to return (any length: a deduction made before
-- deduct.lua refused ids past 128 bytes must still go back; an unknown one answers -6).
--
-- Returns the units returned by this call (> 0), or
--    0 already returned earlier (nothing changes)
--   -1 stock key missing (an INCRBY would invent a tiny stock), or another piece of the
--      product is (the meta hash's limit, the buyers, ledger or events key): nothing is
--      written; preheat or fix rebuilds it from database truth first. A lost ledger says
--      nothing of the request, so it is -1 here as in deduct.lua, never -6
--   -4 bad arguments
--   -6 the request id is not in the ledger, which is there (nothing was deducted for it)

local rid = ARGV[1]
if rid == nil or rid == '' then
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

-- A value as an error reply names it: at most 32 characters, anything but letters, digits,
-- signs, dots and blanks shown as '?' (a reply must stay one line of text).
local function shown(v)
  return "'" .. (string.gsub(string.sub(tostring(v), 1, 32), '[^%w%-%+%.%s_]', '?')) .. "'"
end

local entry = redis.call('HGET', KEYS[4], rid)
if not entry then
  if redis.call('EXISTS', KEYS[4]) == 0 then
    return -1
  end
  return -6
end
local state, qty, at, first, uid = string.match(entry, '^([dr])[^|]*|(%d+)|([%d%-]+)|(%d+)|(.*)$')
if not state then
  return redis.error_reply('ERR seckill: ledger entry of request ' .. rid .. ' in ' .. KEYS[4] .. ' is ' .. shown(entry) .. ', not a ledger record')
end
if state == 'r' then
  return 0
end
qty = int_or_nil(qty)
if qty == nil or qty < 1 or int_or_nil(first) == nil then
  return redis.error_reply('ERR seckill: ledger entry of request ' .. rid .. ' in ' .. KEYS[4] .. ' is ' .. shown(entry) .. ', not a ledger record')
end

local raw = redis.call('GET', KEYS[1])
if not raw then
  return -1
end
if int_or_nil(raw) == nil then
  return redis.error_reply('ERR seckill: stock in ' .. KEYS[1] .. ' is ' .. shown(raw) .. ', not an integer')
end
-- A product missing a piece (the meta hash's limit, the buyers or events key) is not written:
-- the HINCRBY and HSET below would recreate the piece half empty, and the deduction would then
-- trust it. The console's fix rebuilds the piece and returns the deduction afterwards.
local m = redis.call('HMGET', KEYS[2], 'returned', 'limit')
if not m[2] or redis.call('EXISTS', KEYS[3], KEYS[5]) ~= 2 then
  return -1
end
local returned = m[1]
if returned and int_or_nil(returned) == nil then
  return redis.error_reply('ERR seckill: returned in ' .. KEYS[2] .. ' is ' .. shown(returned) .. ', not an integer')
end
local raw_held = redis.call('HGET', KEYS[3], uid)
local held = 0
if raw_held then
  held = int_or_nil(raw_held)
  if held == nil then
    return redis.error_reply('ERR seckill: holding of user ' .. uid .. ' in ' .. KEYS[3] .. ' is ' .. shown(raw_held) .. ', not an integer')
  end
end

-- The event first, as in deduct.lua: the one write that can fail on a key not read above.
local ret = redis.call('XADD', KEYS[5], '*', 'r', qty .. '|' .. rid)
redis.call('INCRBY', KEYS[1], qty)
if held - qty > 0 then
  redis.call('HSET', KEYS[3], uid, held - qty)
else
  redis.call('HDEL', KEYS[3], uid)
end
redis.call('HINCRBY', KEYS[2], 'returned', qty)
redis.call('HSET', KEYS[4], rid, 'r@' .. ret .. '|' .. qty .. '|' .. at .. '|' .. first .. '|' .. uid)
return qty
