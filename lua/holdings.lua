-- seckill-console: writes buyers' holdings while a rebuild holds the product (freeze.lua), after
-- the buyers hash was lost: each holding becomes what the ledger's active deductions of that
-- user add up to, as the console computed it. The placeholder field (the witness every script
-- checks) is written afterwards by set_stock.lua 'set', which ends the hold.
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua; only the buyers
--            hash is written)
-- ARGV[1] the rebuild's token
-- ARGV[2..] user id, units: one pair per buyer, at most 500 (0 removes the user's field)
--
-- Returns {users written}; {4, 'frozen', detail} when the product is not held by this token;
-- -4 on bad arguments. Nothing is written unless the reply is {n}.

local token = ARGV[1]
if token == nil or token == '' or (#ARGV - 1) % 2 ~= 0 or (#ARGV - 1) / 2 > 500 then
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
for i = 2, #ARGV, 2 do
  local units = int_or_nil(ARGV[i + 1])
  if ARGV[i] == '' or units == nil or units < 0 then
    return -4
  end
end
local meta_kind = redis.call('TYPE', KEYS[2])['ok']
local frozen = nil
if meta_kind == 'hash' then
  frozen = redis.call('HGET', KEYS[2], 'frozen')
end
if not frozen or string.sub(frozen, 1, #token + 1) ~= token .. '|' then
  return {4, 'frozen', frozen or ''}
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'none' then
  return {4, 'frozen', 'the stock key exists'}
end
local buyers_kind = redis.call('TYPE', KEYS[3])['ok']
if buyers_kind ~= 'hash' and buyers_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[3] .. ' is a ' .. buyers_kind .. ', not a hash')
end
local n = 0
for i = 2, #ARGV, 2 do
  if ARGV[i + 1] == '0' then
    redis.call('HDEL', KEYS[3], ARGV[i])
  else
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  end
  n = n + 1
end
return {n}
