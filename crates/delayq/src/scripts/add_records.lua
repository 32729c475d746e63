#!lua
-- add_records.lua: the second step of a batch without caller ids (src/send_generated.rs)
-- when some of its messages are due far enough ahead for a bucket (buckets.lua): the
-- records, built by the client with the sequence numbers and clock of its first step, go
-- to the pending set or to their buckets, in one call. A batch with none of them due that
-- far takes a MULTI transaction instead, which does the same without a bucket.
-- Refused at maxmemory (no allow-oom flag), as send.lua is.
-- KEYS[1..11]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone
-- ARGV[1..]: the records (each starting with its 13-byte sort key; default priority)
-- Returns: the number of records put in buckets.
local now = now_us()
events_known(redis.call('HGET', k.control, 'events'))
local B = buckets()
local near, far = {}, {}
for i, rec in ipairs(ARGV) do
  if #rec < 13 then
    error('delayq: add_records: record ' .. i .. ' has no sort key')
  end
end
for _, rec in ipairs(ARGV) do
  local due = unbe7(rec, 1)
  if due > now and B.far_enough(due, now) then
    far[#far + 1] = rec
  else
    near[#near + 1] = '0'
    near[#near + 1] = rec
  end
  if events_on() then
    event_packed('sent', '\0\0' .. rec:sub(1, 13), '')
  end
end
for i = 1, #near, 4000 do
  redis.call('ZADD', k.pending, unpack(near, i, math.min(i + 3999, #near)))
end
if #far > 0 then
  B.put_in_buckets(far)
end
flush_events()
add_history(now, 's', #ARGV)
-- As the MULTI transaction does: one wake-up a batch.
wake()
return #far
