#!lua flags=allow-oom
-- add_history.lua: adds counts kept outside the scripts (a server's push responses) to the
-- current minute of the partition's history (add_history in prelude.lua).
-- Allowed at maxmemory: statistics must not fail a push, and they expire.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: pairs of field name and count (a non-negative integer)
-- Returns: the number of fields added to.
check_groups(2, 'add_history')
for i = 1, #ARGV, 2 do
  if not ARGV[i]:match('^p[1-5e]$') then
    error('delayq: add_history takes the fields p1-p5 and pe, not ' .. ARGV[i])
  end
  local n = tonumber(ARGV[i + 1])
  if n == nil or n < 0 or n % 1 ~= 0 then
    error('delayq: a count is a non-negative integer, not ' .. ARGV[i + 1])
  end
end
local now = now_us()
for i = 1, #ARGV, 2 do
  add_history(now, ARGV[i], tonumber(ARGV[i + 1]))
end
return #ARGV / 2
