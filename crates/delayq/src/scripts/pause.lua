#!lua flags=allow-oom
-- pause.lua: pauses or resumes one partition of a queue. While paused, claims take nothing
-- (claim.lua); sends, acks, nacks and extends go on. Resuming wakes waiting consumers.
-- Allowed at maxmemory: resuming is how a full queue gets drained again.
-- KEYS[1..10]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control
-- ARGV[1] '1' to pause, '0' to resume
-- Returns: 1 if this changed the partition's state, 0 if it was so already.
local pause = ARGV[1]
if pause ~= '1' and pause ~= '0' then
  return redis.error_reply('ERR delayq: pause takes 1 or 0, got ' .. tostring(pause))
end
if pause == '1' then
  return redis.call('HSET', k.control, 'paused', '1')
end
local changed = redis.call('HDEL', k.control, 'paused')
wake()
return changed
