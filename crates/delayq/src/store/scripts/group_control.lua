#!lua flags=allow-oom
-- group_control.lua: changes one group's own settings (groups.lua, `gconf`).
-- Allowed at maxmemory: resuming a group is how its messages get drained again.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: the group
-- ARGV[2..]: pairs of a setting and its value, '' to clear it:
--   l   at most this many of the group's messages in flight, in place of the queue's
--       group concurrency
--   w   messages the group gives per turn of the rotation (its weight), 1 to 1000
--   p   '1': paused, claims skip the group while the rest flows; clearing it resumes it
--   r   at most this many of the group's messages delivered a second, in place of the
--       queue's group rate limit (`grate`)
--   b   the burst of that rate limit (default 1)
-- Returns: the group's settings as they now are ('' for none).
local G = groups()
check_groups(2, 'group_control', 1)
local g = ARGV[1]
if g == nil or g == '' or #g > 128 then
  error('delayq: a group is 1 to 128 bytes')
end
local count = '^[1-9]%d?%d?%d?%d?%d?%d?%d?%d?%d?$'
local patterns = { l = count, w = count, p = '^1$', r = count, b = count }
for i = 2, #ARGV, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if not patterns[name] then
    error('delayq: no group setting ' .. name)
  end
  if value ~= '' and (not value:match(patterns[name]) or (name == 'w' and tonumber(value) > 1000)) then
    error('delayq: group setting ' .. name .. ' cannot be ' .. value)
  end
end
local conf = G.parse_group_conf(redis.call('HGET', G.gk.conf, g))
for i = 2, #ARGV, 2 do
  conf[ARGV[i]] = tonumber(ARGV[i + 1])
end
local parts = {}
for _, name in ipairs({ 'l', 'w', 'p', 'r', 'b' }) do
  if conf[name] then
    parts[#parts + 1] = name .. '=' .. string.format('%d', conf[name])
  end
end
local text = table.concat(parts, ',')
if text == '' then
  redis.call('HDEL', G.gk.conf, g)
else
  redis.call('HSET', G.gk.conf, g, text)
  redis.call('HSET', k.control, 'gconf', '1')
end
-- Settings are read afresh below (the cache of this call may hold the old ones).
G.forget_conf(g)
-- A group held for its rate limit is let go: its next claim holds it again if it must.
redis.call('ZREM', G.gk.wait, g)
if conf.p == 1 then
  redis.call('ZREM', G.gk.rotation, g)
elseif G.rotate_in(g) then
  wake()
end
return text
