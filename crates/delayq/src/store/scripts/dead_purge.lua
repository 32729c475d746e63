#!lua flags=allow-oom
-- dead_purge.lua: deletes dead letters for good.
-- Allowed at maxmemory: it frees memory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: 'id' then ARGV[2] the message id, or 'oldest' then ARGV[2] how many (at most)
-- Returns: how many were purged.
local ids = { ARGV[2] }
if ARGV[1] == 'oldest' then
  ids = redis.call('ZRANGE', k.dead, 0, arg_number(2, 'how many') - 1)
elseif ARGV[1] ~= 'id' or ARGV[2] == nil then
  error('delayq: give id and an id, or oldest and a count')
end
local purged, explicit = 0, {}
for _, id in ipairs(ids) do
  if redis.call('ZREM', k.dead, id) == 1 then
    -- Byte 14 of a record is its flags: a caller id stays reserved for the window.
    local rec = redis.call('HGET', k.dead_msgs, id)
    if rec and #rec >= 14 and has(rec:byte(14), F_ID) then
      explicit[#explicit + 1] = id
    end
    redis.call('HDEL', k.dead_msgs, id)
    redis.call('HDEL', k.errors, id)
    event('purged', id)
    purged = purged + 1
  end
end
remember_gone(explicit, to_ms(now_us()))
return purged
