-- seckill-console: the stock deduction. App servers run this very file with EVALSHA.
--
-- KEYS[1] <prefix>:{A:P}:stock   string, an integer: remaining stock
-- KEYS[2] <prefix>:{A:P}:meta    hash: initial, limit, paused, deducted, returned, rev, ...
-- KEYS[3] <prefix>:{A:P}:buyers  hash: user id -> units the user holds
-- KEYS[4] <prefix>:{A:P}:ledger  hash: request id -> "<state>|<qty>|<at>|<result>|<user>"
--                                  state d = deducted, r@<id> = returned (by the event <id>);
--                                  <at> is the id of the deduction's event
-- KEYS[5] <prefix>:{A:P}:events  stream: one entry per change of the stock's books, oldest
--                                  first, one field: its kind (d deducted, r returned, b booked
--                                  by the console, a adjusted by the console) = "<units>|<request
--                                  id>" (for a: "<change>|")
-- ARGV[1] request id (non-empty), ARGV[2] user id (non-empty), ARGV[3] quantity (1..10^9)
--
-- Returns the remaining stock (>= 0) on success, or
--   -1 not preheated, or lost: the stock key, the meta hash's limit, or the buyers, ledger or
--      events key is missing (nothing written)       -2 not enough stock (sold out)
--   -3 the user's per-user limit would be exceeded  -4 bad arguments
--   -5 product paused (a sold-out product answers -2, paused or not)
-- A retry of a request id that already succeeded changes nothing and returns its first result.
-- Every check happens before the first write, because Redis does not roll back a script that
-- fails half way: a corrupt value is an error reply with nothing written.

-- One global lookup instead of one per call (this runs hundreds of thousands of times a second).
local call = redis.call
local rid, uid, q = ARGV[1], ARGV[2], ARGV[3]
if rid == nil or rid == '' or uid == nil or uid == '' or q == nil then
  return -4
end
if #q > 10 or not string.find(q, '^[1-9]%d*$') then
  return -4
end
local qty = tonumber(q)
if qty > 1000000000 then
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

-- The first result of this request id, if it already succeeded (nil otherwise). Looked up
-- only where the answer could differ from a fresh attempt, which keeps the sold-out path, by
-- far the most common in a flash sale, at two reads.
local function first_result()
  local prev = call('HGET', KEYS[4], rid)
  if not prev then
    return nil
  end
  local units, first = string.match(prev, '^[dr][^|]*|([^|]*)|[%d%-]+|([^|]*)|')
  units, first = int_or_nil(units), int_or_nil(first)
  if units and units >= 1 and first then
    return first
  end
  return redis.error_reply('ERR seckill: ledger entry of request ' .. rid .. ' in ' .. KEYS[4] .. ' is ' .. shown(prev) .. ', not a ledger record')
end

local raw = call('GET', KEYS[1])
-- Sold out is by far the most common answer in a flash sale: a stock of exactly 0 with no
-- earlier result of this request answers at once (the full checks below give the same answer).
if raw == '0' and not call('HGET', KEYS[4], rid) then
  return -2
end
-- GET answers false (not nil) for a missing key.
local stock = nil
if raw then
  stock = int_or_nil(raw)
end
if stock == nil or stock < qty then
  local again = first_result()
  if again then
    return again
  end
  if not raw then
    return -1
  end
  if stock == nil then
    return redis.error_reply('ERR seckill: stock in ' .. KEYS[1] .. ' is ' .. shown(raw) .. ', not an integer')
  end
  return -2
end
local again = first_result()
if again then
  return again
end

local meta = call('HMGET', KEYS[2], 'paused', 'limit', 'deducted')
if meta[1] == '1' then
  return -5
end
if meta[1] and meta[1] ~= '0' then
  return redis.error_reply('ERR seckill: paused in ' .. KEYS[2] .. ' is ' .. shown(meta[1]) .. ', neither 0 nor 1')
end
-- Nothing is sold that cannot be checked: without the meta hash's limit (the hash evicted, or
-- recreated by a stray write), or without the buyers, ledger or events key (each lives from the
-- preheat on: the hashes keep a placeholder field, so they never empty), a limit, a retry or the
-- console's books would go unchecked. Answered like a missing stock, with nothing written; the
-- console's fix or preheat rebuilds the piece from the database.
if not meta[2] or call('EXISTS', KEYS[3], KEYS[4], KEYS[5]) ~= 3 then
  return -1
end
local limit = int_or_nil(meta[2])
if limit == nil or limit < 1 then
  return redis.error_reply('ERR seckill: limit in ' .. KEYS[2] .. ' is ' .. shown(meta[2]) .. ', not a positive integer')
end
if meta[3] and int_or_nil(meta[3]) == nil then
  return redis.error_reply('ERR seckill: deducted in ' .. KEYS[2] .. ' is ' .. shown(meta[3]) .. ', not an integer')
end

local held = 0
local raw_held = call('HGET', KEYS[3], uid)
if raw_held then
  held = int_or_nil(raw_held)
  if held == nil then
    return redis.error_reply('ERR seckill: holding of user ' .. uid .. ' in ' .. KEYS[3] .. ' is ' .. shown(raw_held) .. ', not an integer')
  end
end
if held + qty > limit then
  return -3
end

-- All checks passed. The event goes first: it is the one write that can still fail on a value
-- not read above (an events key of the wrong type), and then nothing else has been written.
-- Its id is the deduction's time and place in the product's history.
local at = call('XADD', KEYS[5], '*', 'd', qty .. '|' .. rid)
local left = call('DECRBY', KEYS[1], qty)
call('HINCRBY', KEYS[3], uid, qty)
call('HINCRBY', KEYS[2], 'deducted', qty)
call('HSET', KEYS[4], rid, 'd|' .. qty .. '|' .. at .. '|' .. left .. '|' .. uid)
return left
