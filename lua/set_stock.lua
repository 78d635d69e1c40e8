-- seckill-console: the compare-and-set behind preheat --force and the one-key fix. It rewrites a
-- product's stock only if the key still holds exactly what the operator saw, so it never
-- overwrites a deduction that happened in between.
--
-- KEYS[1] <prefix>:{A:P}:stock
-- KEYS[2] <prefix>:{A:P}:meta
-- ARGV[1] the guard: '!' the key must be absent; '=' .. value the key must hold exactly this
--         string; '@' .. type the key must be of this non-string type (e.g. '@list')
-- ARGV[2] the new stock, an integer
-- ARGV[3] 'keep' to update the meta hash in place, 'reset' to delete it first (a meta hash of
--         the wrong type, or corrupt fields)
-- ARGV[4..] field, value pairs written to the meta hash
--
-- Returns {1, new stock} when applied, {0, what the key holds} on a conflict (the second item
-- is false when the key is absent, '<type>' for a non-string), or -4 on bad arguments.

local guard, new, meta_mode = ARGV[1], ARGV[2], ARGV[3]
if guard == nil or new == nil or (meta_mode ~= 'keep' and meta_mode ~= 'reset') then
  return -4
end
if #new > 16 or not string.find(new, '^-?%d+$') then
  return -4
end
if (#ARGV - 3) % 2 ~= 0 then
  return -4
end

local kind = redis.call('TYPE', KEYS[1])['ok']
local current = false
if kind == 'string' then
  current = redis.call('GET', KEYS[1])
elseif kind ~= 'none' then
  current = '<' .. kind .. '>'
end

local first = string.sub(guard, 1, 1)
local rest = string.sub(guard, 2)
local matches = false
if first == '!' then
  matches = (kind == 'none')
elseif first == '=' then
  matches = (kind == 'string' and current == rest)
elseif first == '@' then
  -- Only a non-string type: '@string' would match any string value, one nobody saw.
  matches = (rest ~= 'string' and rest ~= 'none' and kind == rest)
else
  return -4
end
if not matches then
  return {0, current}
end

local meta_kind = redis.call('TYPE', KEYS[2])['ok']
if meta_mode == 'reset' or (meta_kind ~= 'hash' and meta_kind ~= 'none') then
  redis.call('DEL', KEYS[2])
end
if kind ~= 'string' and kind ~= 'none' then
  redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[1], new)
if #ARGV > 3 then
  redis.call('HSET', KEYS[2], unpack(ARGV, 4))
end
return {1, tonumber(new)}
