#!lua flags=allow-oom
-- drop_keys.lua: deletes one batch of a partition's keys, for a queue's delete
-- (a queue's delete). Allowed at maxmemory: it frees memory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- KEYS[13..]: keys of this partition to delete, found by SCAN under its hash tag (never its
--   control hash or its partition count, which keep the queue's data format)
-- ARGV[1]: 'empty' (delete only while the partition holds no message) or 'force'
-- ARGV[2]: '1' to clear the partition's settings too (every field of its control hash but
--   its data format), else '0'
-- Returns: { messages the partition held, keys deleted }: with 'empty' and messages held,
--   nothing is deleted.
local held = messages_held(now_us())
if ARGV[1] == 'empty' and held > 0 then
  return { held, 0 }
elseif ARGV[1] ~= 'empty' and ARGV[1] ~= 'force' then
  error('delayq: give empty or force')
end
local deleted = 0
for i = 13, #KEYS do
  deleted = deleted + redis.call('UNLINK', KEYS[i])
end
if ARGV[2] == '1' then
  -- A hash of a few settings and one field per recurring schedule: small.
  for _, field in ipairs(redis.call('HKEYS', k.control)) do
    if field ~= 'format' then
      redis.call('HDEL', k.control, field)
    end
  end
end
return { held, deleted }
