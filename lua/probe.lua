-- seckill-console: the check before a console write. Which of the commands the console is
-- about to send (through its scripts or itself) may the connected user NOT run on the key
-- KEYS[1]? Writes nothing. ARGV: one command per argument, words separated by spaces, the key
-- written as '$'. Returns the denied ones (an empty array: all allowed). A server without
-- redis.acl_check_cmd (before Redis 7) answers an error, and the console says it could not
-- check.
local denied = {}
for i = 1, #ARGV do
  local words = {}
  for w in string.gmatch(ARGV[i], '%S+') do
    if w == '$' then w = KEYS[1] end
    words[#words + 1] = w
  end
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(words))
  if not ok then
    return redis.error_reply('ERR cannot check ' .. ARGV[i] .. ': ' .. tostring(allowed))
  end
  if not allowed then
    denied[#denied + 1] = ARGV[i]
  end
end
return denied
