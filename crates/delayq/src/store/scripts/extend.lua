#!lua flags=allow-oom
-- extend.lua: pushes the lease deadline of deliveries still held.
-- Allowed at maxmemory: it rewrites scores in place.
-- KEYS[1..11]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone
-- ARGV[1]: new lease length in ms from the server's now; then per delivery its lease member
--   (seq .. token)
-- Returns per delivery: the new deadline in ms, or 0 when the lease was lost (nothing changed).
local now_ms = to_ms(now_us())
local deadline = now_ms + arg_number(1, 'lease ms')
local out = {}
for i = 2, #ARGV do
  local member = ARGV[i]
  if leased(member, now_ms) then
    redis.call('ZADD', k.leases, 'XX', deadline, member)
    out[#out + 1] = deadline
  else
    out[#out + 1] = 0
  end
end
return out
