#!lua
-- add_records.lua: the second step of a batch without caller ids (the Lua-free batch path)
-- when some of its messages are due far enough ahead for a bucket (buckets.lua): the
-- records, built by the client with the sequence numbers and clock of its first step, go
-- to the pending set or, grouped by the client, to their buckets, in one call. A batch with
-- none due that far takes a MULTI transaction instead, which does the same without buckets.
-- Refused at maxmemory (no allow-oom flag), as send.lua is.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: n, the number of records for the pending set; ARGV[2..n+1]: those records
-- Then per bucket: its start (ms), the number of its records c, and those c records.
-- Every record starts with its 13-byte sort key and is of the default priority.
-- Returns: { the number of records given for buckets, then the start of each bucket that is
--   full (the client sends the records of those to the pending set from now on) }.
local now = now_us()
local near = arg_number(1, 'records for the pending set')
-- The runs of bucketed records, checked whole before the first write.
local runs, i, far = {}, near + 2, 0
while i <= #ARGV do
  local start, count = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  if not start or not count or count < 1 or i + 1 + count > #ARGV then
    error('delayq: add_records: a bucket is its start, a count and that many records (argument ' .. i .. ')')
  end
  runs[#runs + 1] = { start, ARGV, i + 2, i + 1 + count }
  far = far + count
  i = i + 2 + count
end
if near < 0 or near % 1 ~= 0 or near + 1 > #ARGV then
  error('delayq: add_records: ' .. near .. ' records for the pending set, ' .. (#ARGV - 1) .. ' arguments')
end
-- Calls f(j) for the index j of every record in ARGV, those for the set first.
local function each_record(f)
  for j = 2, near + 1 do
    f(j)
  end
  for _, run in ipairs(runs) do
    for j = run[3], run[4] do
      f(j)
    end
  end
end
each_record(function(j)
  if #ARGV[j] < 13 then
    error('delayq: add_records: argument ' .. j .. ' has no sort key')
  end
end)
events_known(redis.call('HGET', k.control, 'events'))
if events_on() then
  each_record(function(j)
    event_packed('sent', '\0\0' .. ARGV[j]:sub(1, 13), '')
  end)
end
if near > 0 then
  buckets().add_to_sets({ unpack(ARGV, 2, near + 1) })
end
local _, full = buckets().put_runs(runs, now)
flush_events()
add_history(now, 's', near + far)
-- As the MULTI transaction does: one wake-up a batch.
wake()
local out = { far }
for _, start in ipairs(full) do
  out[#out + 1] = start
end
return out
