-- seckill-console: the console's rewrite of a product's stock (fix, preheat). It never overwrites
-- a sale: a live stock is corrected by its offset from the scripts' own counters, computed here
-- in the same atomic step as the write, so a deduction before or after it moves stock and
-- counters alike and the correction stays right. It never writes half: every value it reads or
-- is given is checked before the first write.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua)
-- ARGV[1] mode:
--   'rebase'  the stock key holds an integer and every other key of the product exists. The
--             offset X = stock - initial + deducted - returned (ARGV[2] = initial from the
--             database) must equal ARGV[3], the offset the caller saw; then stock = stock - X
--             (+ ARGV[8], below). That is below 0 when more is held than there was (an
--             oversell): the deduction then refuses everyone until returns pay it back.
--   'set'     the stock key is absent, corrupt or of another type (nothing can deduct it):
--             ARGV[3] is the guard ('!' absent, '=' .. value exactly this string, '@' .. type a
--             non-string type). ARGV[2] is the new stock, or 'initial:' .. n for
--             n - deducted + returned as the counters stand once ARGV[9..] are written. It
--             writes the buyers and ledger placeholders (the witnesses the scripts check), so
--             it is the last call of a rebuild: the pieces must be whole before it.
-- ARGV[4] 'keep' to update the meta hash in place, 'reset' to rebuild it (corrupt): every field
--         goes except paused, pause_gen, epoch and the bucket figures
-- ARGV[5] expiry of every key, ms since the epoch; '' leaves expiries alone
-- ARGV[6] the meta field 'rev' as the caller read it ('' when absent): another console's write
--         since then makes this call a conflict
-- ARGV[7] '' or the token of the rebuild that froze the product (freeze.lua); a 'set' with the
--         token ends the freeze. A product frozen by another token is not written.
-- ARGV[8] units of the meta 'unexplained' put back on sale ('rebase' only; '0' for none): the
--         counters give them back (returned) and the stock takes them. Negative: units the
--         rebase would add to the stock (an offset below 0) held back instead, -ARGV[8] of
--         them at most -offset: the counters take them (deducted) as 'unexplained', out of the
--         stock until a later rebase puts them back (after a restart from an older snapshot,
--         orders of deductions Redis forgot may still be on their way: a unit given back at once
--         would be sold twice)
-- ARGV[9..] field, value pairs written to the meta hash. 'paused' and 'pause_gen' are written
--         only if no newer pause or resume (a higher 'pause_gen') is there already.
--
-- Every applied call increments meta 'rev' and appends an event (a = "<change>|"; g, the same,
-- at the end of a rebuild: the events before it no longer describe the books, the ledger does).
-- Returns {1, new stock, change, new rev} when applied; {0, the offset found} when 'rebase'
-- finds another offset; {0, what the key holds} when the 'set' guard fails (false when absent,
-- '<type>' for a non-string); {2, rev now} when another console wrote since the read; {4, why,
-- detail} when the product is held ('frozen' by a rebuild, 'topup' between a top-up's two
-- writes, 'lost' a key is gone since the read); -4 on bad arguments. Nothing is written unless
-- the reply is {1, ...}.

local mode, target, guard, meta_mode, expire = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local want_rev, token, release = ARGV[6], ARGV[7], ARGV[8]
if (mode ~= 'rebase' and mode ~= 'set') or target == nil or guard == nil or release == nil then
  return -4
end
if meta_mode ~= 'keep' and meta_mode ~= 'reset' then
  return -4
end
if (#ARGV - 8) % 2 ~= 0 or want_rev == nil or token == nil then
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

local freed = int_or_nil(release)
if freed == nil or (freed ~= 0 and mode ~= 'rebase') then
  return -4
end
if expire ~= '' then
  local at = int_or_nil(expire)
  if at == nil or at < 1 then
    return -4
  end
end

-- The meta fields given: those the scripts read must be what they accept.
local lowest = { initial = 0, limit = 1, pause_gen = 0, deducted = 0, returned = 0, opens = 0, closes = 0,
  unexplained = 0, unexplained_since = 0, unexplained_rollback = 0, epoch = 0, fixed_at = 0, expire_at = 1 }
local given = {}
for i = 9, #ARGV, 2 do
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
  given[f] = v
end

-- Types first: nothing is written unless every write below can succeed.
local function kind(key)
  return redis.call('TYPE', key)['ok']
end
local stock_kind = kind(KEYS[1])
local meta_kind = kind(KEYS[2])
for i = 3, 4 do
  local k = kind(KEYS[i])
  if k ~= 'hash' and k ~= 'none' then
    return redis.error_reply('ERR seckill: ' .. KEYS[i] .. ' is a ' .. k .. ', not a hash')
  end
end
local events_kind = kind(KEYS[5])
local reset = meta_mode == 'reset' or (meta_kind ~= 'hash' and meta_kind ~= 'none')

-- What the meta hash holds now (nothing of a hash of another type).
local m = {}
if meta_kind == 'hash' then
  local names = { 'rev', 'frozen', 'topup', 'pause_gen', 'deducted', 'returned', 'unexplained',
    'unexplained_rollback' }
  local f = redis.call('HMGET', KEYS[2], unpack(names))
  for i, name in ipairs(names) do
    m[name] = f[i]
  end
end

-- Held by someone else: a rebuild that froze the product, or a top-up between its writes.
if m.frozen then
  if token == '' or string.sub(m.frozen, 1, #token + 1) ~= token .. '|' then
    return {4, 'frozen', m.frozen}
  end
elseif token ~= '' then
  return {4, 'frozen', ''}
end
if m.topup then
  return {4, 'topup', m.topup}
end
if (m.rev or '') ~= want_rev then
  return {2, m.rev or ''}
end
local rev = (int_or_nil(m.rev or '0') or 0) + 1

-- A newer pause or resume than the caller read from the database stays.
if given.pause_gen then
  local have = int_or_nil(m.pause_gen or '0') or 0
  if have > tonumber(given.pause_gen) then
    given.pause_gen, given.paused = nil, nil
  end
elseif given.paused then
  return -4
end

-- The counters as they stand once the given fields are written.
local function counter(name)
  local v = given[name]
  if v == nil and not reset then
    v = m[name]
  end
  return int_or_nil(v or '0')
end
local d, r, held = counter('deducted'), counter('returned'), counter('unexplained')
if d == nil or r == nil or held == nil or held < 0 then
  return redis.error_reply('ERR seckill: the counters in ' .. KEYS[2] .. ' (deducted ' .. shown(m.deducted) .. ', returned ' .. shown(m.returned) .. ', unexplained ' .. shown(m.unexplained) .. ') are not integers: rebuild them (give deducted, returned and unexplained)')
end
if freed > held then
  return -4
end

local current = false
if stock_kind == 'string' then
  current = redis.call('GET', KEYS[1])
elseif stock_kind ~= 'none' then
  current = '<' .. stock_kind .. '>'
end

local new, change
if mode == 'rebase' then
  local initial, seen = int_or_nil(target), int_or_nil(guard)
  if initial == nil or seen == nil then
    return -4
  end
  local stock = (stock_kind == 'string') and int_or_nil(current) or nil
  if stock == nil or reset then
    return redis.error_reply('ERR seckill: ' .. KEYS[1] .. ' cannot be rebased: the stock is ' .. shown(current) .. ' (or the meta key is corrupt)')
  end
  -- A piece lost since the read: only a rebuild may bring it back ('set' writes the witnesses
  -- after the pieces are whole; a rebase would reopen a product whose limits are gone).
  if meta_kind ~= 'hash' or redis.call('EXISTS', KEYS[3], KEYS[4], KEYS[5]) ~= 3 then
    return {4, 'lost', 'the meta, buyers, ledger or events key'}
  end
  if events_kind ~= 'stream' then
    return redis.error_reply('ERR seckill: ' .. KEYS[5] .. ' is a ' .. events_kind .. ', not a stream')
  end
  local offset = stock - initial + d - r
  if offset ~= seen then
    return {0, offset}
  end
  -- A hold takes only units the rebase would add.
  if freed < 0 and freed < offset then
    return -4
  end
  new = stock - offset + freed
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
  local from = string.match(target, '^initial:(.*)$')
  if from then
    local n = int_or_nil(from)
    if n == nil then
      return -4
    end
    new = n - d + r
  else
    new = int_or_nil(target)
    if new == nil then
      return -4
    end
  end
  change = new - (int_or_nil(current or '') or 0)
end

-- Every check passed: the writes.
if reset then
  -- The fields the console does not own survive the rebuild: a paused product stays paused
  -- (a `paused` that is neither 0 nor 1 stopped every sale, so it becomes 1, not 0), and the
  -- gateways keep their preheat epoch and token bucket.
  local keep = {}
  if meta_kind == 'hash' then
    local names = { 'paused', 'pause_gen', 'epoch', 'bucket_capacity', 'bucket_rate' }
    local f = redis.call('HMGET', KEYS[2], unpack(names))
    for i, name in ipairs(names) do
      if f[i] then
        keep[#keep + 1] = name
        if name == 'paused' then
          keep[#keep + 1] = (f[i] == '0') and '0' or '1'
        elseif name == 'pause_gen' then
          keep[#keep + 1] = tostring(int_or_nil(f[i]) or 0)
        else
          keep[#keep + 1] = f[i]
        end
      end
    end
  end
  redis.call('DEL', KEYS[2])
  if #keep > 0 then
    redis.call('HSET', KEYS[2], unpack(keep))
  end
end
if mode == 'set' then
  if events_kind ~= 'stream' and events_kind ~= 'none' then
    redis.call('DEL', KEYS[5])
  end
  if stock_kind ~= 'string' and stock_kind ~= 'none' then
    redis.call('DEL', KEYS[1])
  end
end
local pairs_out = {}
for f, v in pairs(given) do
  pairs_out[#pairs_out + 1] = f
  pairs_out[#pairs_out + 1] = v
end
if #pairs_out > 0 then
  redis.call('HSET', KEYS[2], unpack(pairs_out))
end
-- The end of a rebuild is an event of its own: the history before it is the ledger's.
redis.call('XADD', KEYS[5], '*', (token ~= '') and 'g' or 'a', change .. '|')
if mode == 'rebase' then
  redis.call('INCRBY', KEYS[1], change)
  local rollback = math.min(math.max(int_or_nil(m.unexplained_rollback or '0') or 0, 0), held)
  if freed > 0 then
    redis.call('HSET', KEYS[2], 'returned', r + freed, 'unexplained', held - freed,
      'unexplained_rollback', math.min(rollback, held - freed))
  elseif freed < 0 then
    -- Held for orders of deductions Redis forgot: those may claim them (record.lua).
    redis.call('HSET', KEYS[2], 'deducted', d - freed, 'unexplained', held - freed,
      'unexplained_rollback', rollback - freed)
  end
else
  redis.call('SET', KEYS[1], new, 'KEEPTTL')
  redis.call('HDEL', KEYS[2], 'frozen')
  -- The witnesses: the hashes the deductions fill exist (and keep their expiry) from here on,
  -- with a placeholder field (an empty request or user id, which the scripts refuse).
  redis.call('HSETNX', KEYS[3], '', '0')
  redis.call('HSETNX', KEYS[4], '', '-')
end
redis.call('HSET', KEYS[2], 'rev', rev)
if expire ~= '' then
  redis.call('HSET', KEYS[2], 'expire_at', expire)
  for i = 1, 5 do
    redis.call('PEXPIREAT', KEYS[i], expire)
  end
end
return {1, new, change, rev}
