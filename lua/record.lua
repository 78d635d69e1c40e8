-- seckill-console: record in Redis deductions that the database's live orders prove but the
-- ledger lacks (lost with a restart, a failover or an eviction, or returned while the order
-- lived on). Each one gets its ledger entry and its event (b = "<units>|<request id>"), so
-- retries and later returns work for it. Idempotent per request id: an entry the ledger holds
-- as deducted is skipped.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua)
-- ARGV[1] 'rebuild': the product is held by the rebuild whose token is ARGV[4] (freeze.lua;
--                    the stock key is absent): only the entries and events are written, the
--                    rebuild then sets the holdings and the counters from the whole ledger
--         'absorb':  the stock key holds an integer and every piece of the product is there:
--                    each recorded deduction is counted as deduct.lua would have (counters,
--                    holding, stock), except that units the counters already hold without a
--                    ledger entry (meta 'unexplained', left by a rebuild after the ledger was
--                    lost) are claimed first: those are out of the stock already, and in the
--                    holdings too when meta 'unexplained_held' is 1
--         'absorb_fresh': as 'absorb', for deductions the counters never held (forgotten by a
--                    restart from an older snapshot, their orders alive): they claim only the
--                    units a heal held back for such orders (meta 'unexplained_rollback', part
--                    of 'unexplained': set_stock.lua's hold), never a rebuild's (those belong
--                    to deductions the counters hold)
-- ARGV[2] expiry of the keys this creates, ms since the epoch, or ''
-- ARGV[3] the meta field 'rev' as the caller read it ('' when absent; 'absorb' only)
-- ARGV[4] the rebuild's token ('rebuild' only; '' for 'absorb')
-- ARGV[5..] request id, user id, quantity: one triple per deduction, at most 500
--
-- Returns {1, deductions recorded, units recorded, rev}; {-1, what the stock key is} when it
-- does not meet the mode's condition; {2, rev now} when another console wrote since the read; {4,
-- why, detail} when the product is held ('frozen', 'topup') or a piece is gone ('lost'); -4 on
-- bad arguments. A corrupt value is an error reply. Nothing is written unless the reply is
-- {1, n, units, rev}.

local mode, expire, want_rev, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local claims = mode == 'absorb'
local fresh_mode = mode == 'absorb_fresh'
if mode == 'absorb_fresh' then
  mode = 'absorb'
end
if (mode ~= 'rebuild' and mode ~= 'absorb') or expire == nil or want_rev == nil or token == nil then
  return -4
end
local n = #ARGV - 4
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
-- A value as an error reply names it: at most 32 characters, anything but letters, digits,
-- signs, dots and blanks shown as '?' (a reply must stay one line of text).
local function shown(v)
  return "'" .. (string.gsub(string.sub(tostring(v), 1, 32), '[^%w%-%+%.%s_]', '?')) .. "'"
end

if expire ~= '' then
  local at = int_or_nil(expire)
  if at == nil or at < 1 then
    return -4
  end
end
if (mode == 'rebuild') == (token == '') then
  return -4
end

local function kind(key)
  return redis.call('TYPE', key)['ok']
end
local stock_kind = kind(KEYS[1])
local meta_kind = kind(KEYS[2])
if meta_kind ~= 'hash' and meta_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[2] .. ' is a ' .. meta_kind .. ', not a hash')
end
for i = 3, 4 do
  local k = kind(KEYS[i])
  if k ~= 'hash' and k ~= 'none' then
    return redis.error_reply('ERR seckill: ' .. KEYS[i] .. ' is a ' .. k .. ', not a hash')
  end
end
local events_kind = kind(KEYS[5])
if events_kind ~= 'stream' and events_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[5] .. ' is a ' .. events_kind .. ', not a stream')
end
local f = redis.call('HMGET', KEYS[2], 'rev', 'frozen', 'topup', 'deducted', 'unexplained', 'unexplained_held', 'unexplained_rollback')
local rev, frozen, topup = f[1], f[2], f[3]

local stock = nil
local deducted, unexplained = 0, 0
local rollback = 0
if mode == 'rebuild' then
  if not frozen or string.sub(frozen, 1, #token + 1) ~= token .. '|' then
    return {4, 'frozen', frozen or ''}
  end
  if stock_kind ~= 'none' then
    return {-1, stock_kind}
  end
else
  if frozen then
    return {4, 'frozen', frozen}
  end
  if topup then
    return {4, 'topup', topup}
  end
  if (rev or '') ~= want_rev then
    return {2, rev or ''}
  end
  if stock_kind == 'string' then
    stock = int_or_nil(redis.call('GET', KEYS[1]))
  end
  if stock == nil then
    return {-1, stock_kind}
  end
  if meta_kind ~= 'hash' or redis.call('EXISTS', KEYS[3], KEYS[4], KEYS[5]) ~= 3 then
    return {4, 'lost', 'the meta, buyers, ledger or events key'}
  end
  deducted, unexplained = int_or_nil(f[4] or '0'), int_or_nil(f[5] or '0')
  if deducted == nil or unexplained == nil or unexplained < 0 then
    return redis.error_reply('ERR seckill: deducted or unexplained in ' .. KEYS[2] .. ' is ' .. shown(f[4]) .. ' / ' .. shown(f[5]) .. ', not an integer')
  end
  -- A field only the console writes; unreadable, it is taken as none held for such orders.
  rollback = math.min(math.max(int_or_nil(f[7] or '0') or 0, 0), unexplained)
end
local claim_held = f[6] == '1'

-- Every check before the first write.
local todo, seen, held = {}, {}, {}
for i = 5, #ARGV, 3 do
  local rid, uid, q = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if rid == '' or uid == '' or not string.find(q, '^[1-9]%d*$') or #q > 10 then
    return -4
  end
  if not seen[rid] then
    seen[rid] = true
    local entry = redis.call('HGET', KEYS[4], rid)
    if entry and not string.find(entry, '^[dr][^|]*|%d+|[%d%-]+|%d+|') then
      return redis.error_reply('ERR seckill: ledger entry of request ' .. rid .. ' in ' .. KEYS[4] .. ' is ' .. shown(entry) .. ', not a ledger record')
    end
    if not entry or string.sub(entry, 1, 1) == 'r' then
      if mode == 'absorb' and held[uid] == nil then
        local h = redis.call('HGET', KEYS[3], uid)
        if h and int_or_nil(h) == nil then
          return redis.error_reply('ERR seckill: holding of user ' .. uid .. ' in ' .. KEYS[3] .. ' is ' .. shown(h) .. ', not an integer')
        end
        held[uid] = true
      end
      table.insert(todo, {rid, uid, tonumber(q)})
    end
  end
end

local units = 0
local claimed = 0
for _, t in ipairs(todo) do
  local rid, uid, qty = t[1], t[2], t[3]
  local at = redis.call('XADD', KEYS[5], '*', 'b', qty .. '|' .. rid)
  local left = 0
  if mode == 'absorb' then
    -- Units the counters already hold without an entry are claimed first.
    local take = 0
    if claims then
      take = math.min(unexplained - claimed, qty)
    elseif fresh_mode then
      take = math.min(rollback - claimed, qty)
    end
    claimed = claimed + take
    local fresh = qty - take
    if fresh > 0 then
      stock = redis.call('DECRBY', KEYS[1], fresh)
      redis.call('HINCRBY', KEYS[2], 'deducted', fresh)
    end
    -- A rollback's hold is stock only: the buyers hash forgot those holdings with the
    -- deductions, so a deduction recorded afresh counts its whole quantity again.
    local more = fresh
    if not claim_held or fresh_mode then
      more = qty
    end
    if more > 0 then
      redis.call('HINCRBY', KEYS[3], uid, more)
    end
    left = math.max(stock, 0)
  end
  redis.call('HSET', KEYS[4], rid, 'd|' .. qty .. '|' .. at .. '|' .. left .. '|' .. uid)
  units = units + qty
end
local new_rev = int_or_nil(rev or '0') or 0
if mode == 'absorb' and #todo > 0 then
  new_rev = new_rev + 1
  redis.call('HSET', KEYS[2], 'rev', new_rev)
  if claimed > 0 then
    redis.call('HSET', KEYS[2], 'unexplained', unexplained - claimed)
    -- The rollback's share never exceeds what is held.
    if fresh_mode then
      redis.call('HSET', KEYS[2], 'unexplained_rollback', rollback - claimed)
    elseif rollback > unexplained - claimed then
      redis.call('HSET', KEYS[2], 'unexplained_rollback', unexplained - claimed)
    end
  end
end
if expire ~= '' and #todo > 0 then
  for i = 2, 5 do
    redis.call('PEXPIREAT', KEYS[i], expire)
  end
end
return {1, #todo, units, new_rev}
