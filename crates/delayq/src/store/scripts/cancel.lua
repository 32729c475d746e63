#!lua flags=allow-oom
-- cancel.lua: removes a delayed or ready message. In-flight and dead messages are left alone.
-- Allowed at maxmemory: it frees memory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: message id
-- Returns: { state, cancelled } where state is what the message was in ('delayed', 'ready',
--   'in_flight', 'dead' or 'missing') and cancelled is 1 when it was removed.
local id = ARGV[1]
local m, key = find_pending(id)
if not m then
  return { settled_state(id, key), 0 }
end
local now = now_us()
local state = pending_state(m, now)
remove_pending(m)
if m.group and groups().groups_leave({ { m.id, m.group } }, m.keep) then
  wake()
end
keep_final(m, 'c', now)
event('cancelled', id)
redis.call('HDEL', k.errors, id)
if has(m.flags, F_ID) then
  remember_gone({ id }, to_ms(now))
end
return { state, 1 }
