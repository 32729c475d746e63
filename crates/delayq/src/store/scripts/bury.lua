#!lua flags=allow-oom
-- bury.lua: moves deliveries whose record the client could not read to the dead letters,
-- bytes intact (see bury_raw in prelude.lua), so one bad record never fails a claim that
-- Redis has already made.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: per delivery a pair: lease member (seq .. token), error text
-- Returns per delivery: the id it is a dead letter under, or false when the lease was lost.
check_groups(2, 'bury')
local now = now_us()
local now_ms = to_ms(now)
local out = {}
for i = 1, #ARGV, 2 do
  local member = ARGV[i]
  local seq = member:sub(1, 6)
  local v = redis.call('HGET', k.held, seq)
  if v and v:sub(1, 6) == member:sub(7, 12) and leased(member, now_ms) then
    release_lease(member)
    out[#out + 1] = bury_raw(seq, v, ARGV[i + 1], now)
  else
    out[#out + 1] = false
  end
end
return out
