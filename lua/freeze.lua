-- seckill-console: holds one product for a rebuild. The stock key goes (every deduction and
-- return then answers -1 and writes nothing) and the meta field 'frozen' = "<token>|<what the
-- stock held>|<ms>" says who holds it: the console that rebuilds the product's ledger, holdings
-- and counters from the database writes them with this token (record.lua, holdings.lua) and
-- ends the hold with set_stock.lua 'set', which writes the stock last. A console that dies half
-- way leaves the stock missing (nothing can be sold twice): the next fix or preheat takes over
-- once the hold is older than the lease.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua)
-- ARGV[1] the rebuild's token (non-empty, no '|')
-- ARGV[2] what the caller saw in the stock key: '!' absent, '=' .. value, '@' .. a non-string
--         type
-- ARGV[3] the meta field 'rev' as the caller read it ('' when absent)
-- ARGV[4] the lease, ms: a hold by another token older than this is taken over
--
-- Returns {1, new rev} when the product is held by this token (now or already); {0, what the
-- stock holds} when it is not what the caller saw; {2, rev now} when another console wrote
-- since the read; {4, why, detail} when another console holds it ('frozen', younger than the
-- lease) or a top-up is between its two writes ('topup'); -4 on bad arguments. Nothing is
-- written unless the reply is {1, ...}.

local token, guard, want_rev, lease = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if token == nil or token == '' or string.find(token, '|', 1, true) or guard == nil then
  return -4
end
if want_rev == nil or lease == nil or not string.find(lease, '^%d+$') or #lease > 12 then
  return -4
end

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

local function kind(key)
  return redis.call('TYPE', key)['ok']
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local meta_kind = kind(KEYS[2])
local m = {}
if meta_kind == 'hash' then
  local f = redis.call('HMGET', KEYS[2], 'rev', 'frozen', 'topup')
  m.rev, m.frozen, m.topup = f[1], f[2], f[3]
end
if m.topup then
  return {4, 'topup', m.topup}
end
local kept = nil
if m.frozen then
  local holder, value, at = string.match(m.frozen, '^([^|]*)|(.*)|(%d+)$')
  if holder == token then
    return {1, int_or_nil(m.rev or '0') or 0}
  end
  if holder and now_ms - tonumber(at) < tonumber(lease) then
    return {4, 'frozen', m.frozen}
  end
  -- A hold its console gave up (or an unreadable one): taken over, with what the stock held
  -- before the first hold.
  kept = value or ''
end
if (m.rev or '') ~= want_rev then
  return {2, m.rev or ''}
end

local stock_kind = kind(KEYS[1])
local current = false
if stock_kind == 'string' then
  current = redis.call('GET', KEYS[1])
elseif stock_kind ~= 'none' then
  current = '<' .. stock_kind .. '>'
end
local first, rest = string.sub(guard, 1, 1), string.sub(guard, 2)
local matches
if first == '!' then
  matches = (stock_kind == 'none')
elseif first == '=' then
  matches = (stock_kind == 'string' and current == rest)
elseif first == '@' then
  matches = (rest ~= 'string' and rest ~= 'none' and stock_kind == rest)
else
  return -4
end
if not matches then
  return {0, current}
end

-- The writes. A meta key of another type holds nothing the scripts can read: it goes.
if meta_kind ~= 'hash' and meta_kind ~= 'none' then
  redis.call('DEL', KEYS[2])
end
local rev = (int_or_nil(m.rev or '0') or 0) + 1
local held = kept or (current or '')
redis.call('HSET', KEYS[2], 'frozen', token .. '|' .. held .. '|' .. now_ms, 'rev', rev)
redis.call('DEL', KEYS[1])
-- An event, so a reader whose cut spans the hold sees the product move and reads it again.
local events_kind = kind(KEYS[5])
if events_kind == 'stream' or events_kind == 'none' then
  redis.call('XADD', KEYS[5], '*', 'a', '0|')
end
return {1, rev}
