#!lua flags=allow-oom
-- push_target.lua: sets or removes a queue's push target together with the push-delivery flag
-- (control field `push`) of its partition 0, in one step: no reader ever sees a target whose
-- queue is not delivered by push, nor a queue delivered by push without a target (nobody
-- would consume it). The target is the server's (JSON); nothing here reads it. The flags of
-- partitions 1.. live in other slots; the push target handle makes them follow this one.
-- Allowed at maxmemory: removing a target gives the queue back to pull consumers, who drain
-- it; a target is a few hundred bytes.
-- KEYS[1..12]: partition 0's keys (Keys::all): pending, index, leases, held, dead, dead_msgs,
--   errors, seq, wake, control, gone, claims
-- KEYS[13]: the queue's push target (Keys::push_target), a STRING under partition 0's tag
-- ARGV[1] 'set' (ARGV[2] the target), 'remove', or 'sync' (the flag made to say whether a
--   target is there: the repair of a state left by a change that failed part-way, or by a
--   version that made these separate steps)
-- Returns: 1 if the queue has a target after this call, 0 if not; then 1 if it had one
--   before, 0 if not.
-- Writes nothing when nothing changes (a 'remove' of no target leaves every key as it was).
local op, target_key = ARGV[1], KEYS[13]
if op == 'set' then
  if type(ARGV[2]) ~= 'string' or ARGV[2] == '' then
    error('delayq: a push target cannot be empty')
  end
elseif op ~= 'remove' and op ~= 'sync' then
  error('delayq: push_target takes set, remove or sync, not ' .. tostring(op))
end

local had = redis.call('EXISTS', target_key)
if op == 'set' then
  redis.call('SET', target_key, ARGV[2])
elseif op == 'remove' and had == 1 then
  redis.call('DEL', target_key)
end
local has = had
if op == 'set' then
  has = 1
elseif op == 'remove' then
  has = 0
end

local flagged = redis.call('HEXISTS', k.control, 'push')
if has == 1 and flagged == 0 then
  redis.call('HSET', k.control, 'push', '1')
  wake()
elseif has == 0 and flagged == 1 then
  redis.call('HDEL', k.control, 'push')
  wake()
end
return { has, had }
