-- seckill-console: a live top-up of one product, in the two steps that bracket the database's
-- write of initial_stock. Between them the meta field 'topup' = "<id>|<change>|<ms>" tells every
-- other console that the stock and the database are about to move (fix and preheat do not
-- correct a product across it; a top-up left there by a console that died is finished or undone
-- by the next fix, once the database says which). The order keeps Redis at or below the truth
-- whatever fails: a raise moves the stock only after the database took it ('begin', then
-- 'apply'); a cut moves it before ('begin' takes the units, then 'finish', or 'undo' when the
-- database refused).
--
-- KEYS[1..5] stock, meta, buyers, ledger, events of one {A:P} (as deduct.lua; the stock, meta
--            and events are written)
-- ARGV[1] 'begin', 'apply' (a raise's second step), 'finish' (a cut's), 'undo' (a cut the
--         database did not take: the units come back) or 'abort' (a raise the database did
--         not take)
-- ARGV[2] the top-up's id (non-empty, no '|')
-- ARGV[3] 'begin' only: the change, an integer, not 0
--
-- Returns {1, stock now} when done; {2, stock} when this id was applied already (a retry);
-- {3, stock} when 'begin' finds this id begun already; {0, stock} when a cut would take more
-- than the stock holds; {5} when 'begin' finds no stock key (the marker alone is written, or
-- was already); {-1} when a second step finds no stock key (it drops the marker: a rebuild
-- writes the stock from the database anyway); {-2,
-- marker} when the step does not match what is pending (another top-up, or none: a fix
-- resolved it); {4, 'frozen', detail} when a rebuild holds the product, {4, 'lost', detail} when
-- a piece of it is missing ('begin'); -4 on bad arguments.
-- Corrupt values are error replies with nothing written.

local op, id, change = ARGV[1], ARGV[2], ARGV[3]
if id == nil or id == '' or string.find(id, '|', 1, true) then
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
-- A value as an error reply names it: at most 32 characters, anything but letters, digits,
-- signs, dots and blanks shown as '?' (a reply must stay one line of text).
local function shown(v)
  return "'" .. (string.gsub(string.sub(tostring(v), 1, 32), '[^%w%-%+%.%s_]', '?')) .. "'"
end

local n = nil
if op == 'begin' then
  n = int_or_nil(change)
  if n == nil or n == 0 then
    return -4
  end
elseif op ~= 'apply' and op ~= 'finish' and op ~= 'undo' and op ~= 'abort' then
  return -4
end

local meta_kind = redis.call('TYPE', KEYS[2])['ok']
if meta_kind ~= 'hash' and meta_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[2] .. ' is a ' .. meta_kind .. ', not a hash: fix the product first')
end
local events_kind = redis.call('TYPE', KEYS[5])['ok']
if events_kind ~= 'stream' and events_kind ~= 'none' then
  return redis.error_reply('ERR seckill: ' .. KEYS[5] .. ' is a ' .. events_kind .. ', not a stream: fix the product first')
end
local f = redis.call('HMGET', KEYS[2], 'initial', 'rev', 'last_topup', 'topup', 'frozen')
local initial = int_or_nil(f[1] or '0')
local rev = int_or_nil(f[2] or '0')
local last, marker, frozen = f[3], f[4], f[5]
if frozen then
  return {4, 'frozen', frozen}
end

local stock_kind = redis.call('TYPE', KEYS[1])['ok']
local stock, stock_raw = nil, stock_kind
if stock_kind == 'string' then
  stock_raw = redis.call('GET', KEYS[1])
  stock = int_or_nil(stock_raw)
end
local unreadable = initial == nil or rev == nil or (stock_kind ~= 'none' and stock == nil)
if unreadable and op == 'begin' then
  if initial == nil or rev == nil then
    return redis.error_reply('ERR seckill: initial or rev in ' .. KEYS[2] .. ' is ' .. shown(f[1]) .. ' / ' .. shown(f[2]) .. ', not an integer: fix the product first')
  end
  return redis.error_reply('ERR seckill: stock in ' .. KEYS[1] .. ' is ' .. shown(stock_raw) .. ', not an integer: fix the product first')
end

if op == 'begin' then
  if marker then
    if string.sub(marker, 1, #id + 1) == id .. '|' then
      if stock == nil then
        return {5}
      end
      return {3, stock}
    end
    return {-2, marker}
  end
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if stock == nil then
    -- No stock to move: the marker alone (creating the meta hash when it is gone). A fix or
    -- preheat that read the database's initial stock before this top-up's database write
    -- then cannot write the stock from it: the marker holds it off, and the rev it read is
    -- gone once the marker is.
    redis.call('HSET', KEYS[2], 'topup', id .. '|' .. n .. '|' .. now_ms, 'rev', rev + 1)
    return {5}
  end
  -- A product missing a piece sells nothing until a fix rebuilds it; a top-up waits for that.
  if not redis.call('HGET', KEYS[2], 'limit') or redis.call('EXISTS', KEYS[3], KEYS[4], KEYS[5]) ~= 3 then
    return {4, 'lost', 'a piece of the product is missing: fix it first'}
  end
  if last == id then
    return {2, stock}
  end
  if stock + n < 0 then
    return {0, stock}
  end
  if n < 0 then
    redis.call('XADD', KEYS[5], '*', 'a', n .. '|')
    stock = redis.call('INCRBY', KEYS[1], n)
    redis.call('HSET', KEYS[2], 'initial', initial + n)
  else
    -- A raise moves nothing yet, but the marker must reach the readers that only watch the
    -- streams (a live view asks a quiet product whether its stream moved): a console that
    -- dies after the database write leaves the marker alone, and a live view never saw the
    -- top-up held nor read the product's new row until its whole read (chaos test).
    redis.call('XADD', KEYS[5], '*', 'a', '0|')
  end
  redis.call('HSET', KEYS[2], 'topup', id .. '|' .. n .. '|' .. now_ms, 'rev', rev + 1)
  return {1, stock}
end

-- The second steps: only of the top-up that is pending.
if not marker then
  if last == id then
    return {2, stock or 0}
  end
  return {-2, ''}
end
local pid, pending = string.match(marker, '^([^|]*)|(%-?%d+)|')
pending = int_or_nil(pending)
if pid ~= id or pending == nil then
  return {-2, marker}
end
if (op == 'apply' or op == 'abort') ~= (pending > 0) then
  return -4
end
if stock == nil or unreadable then
  -- No stock to move, or figures nobody can move (a top-up whose console died, then a stray
  -- write): the marker goes, and the rebuild that must follow writes the stock from the
  -- database, which the caller has settled (fenced, when the console died) before this step.
  redis.call('HDEL', KEYS[2], 'topup')
  redis.call('HSET', KEYS[2], 'rev', (rev or 0) + 1)
  return {-1}
end
local move = 0
if op == 'apply' then
  move = pending
elseif op == 'undo' then
  move = -pending
end
if move ~= 0 then
  redis.call('XADD', KEYS[5], '*', 'a', move .. '|')
  stock = redis.call('INCRBY', KEYS[1], move)
  redis.call('HSET', KEYS[2], 'initial', initial + move)
end
redis.call('HDEL', KEYS[2], 'topup')
if op == 'apply' or op == 'finish' then
  redis.call('HSET', KEYS[2], 'last_topup', id)
end
redis.call('HSET', KEYS[2], 'rev', rev + 1)
return {1, stock}
