#!lua
-- dead_requeue.lua: moves dead letters back to pending, ready now, with their attempts reset.
-- The last error stays readable through get until the message is acked.
-- Refused at maxmemory: it may add index entries; purge frees memory instead.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: 'id' then ARGV[2] the message id, or 'oldest' then ARGV[2] how many (at most)
-- Returns: how many were requeued.
local ids = { ARGV[2] }
if ARGV[1] == 'oldest' then
  ids = redis.call('ZRANGE', k.dead, 0, arg_number(2, 'how many') - 1)
elseif ARGV[1] ~= 'id' or ARGV[2] == nil then
  error('delayq: give id and an id, or oldest and a count')
end
-- Every record is read before the first write: one that cannot be read fails the call
-- and moves nothing.
local found = {}
for _, id in ipairs(ids) do
  local rec = redis.call('HGET', k.dead_msgs, id)
  if rec then
    local ok, m = pcall(parse, rec)
    if not ok then
      error('delayq: the dead letter ' .. id .. ' cannot be read')
    end
    found[#found + 1] = { id, m }
  end
end
local now = now_us()
local moved = 0
for _, pair in ipairs(found) do
  local id, m = pair[1], pair[2]
  m.attempts = 0
  redis.call('ZREM', k.dead, id)
  redis.call('HDEL', k.dead_msgs, id)
  if m.group then
    groups().group_size(m.group, 1)
  end
  put_pending(m, now, now)
  event('requeued', id)
  moved = moved + 1
end
if moved > 0 then
  wake()
end
return moved
