#!lua
-- reschedule.lua: moves a delayed or ready message to a new due time, keeping its id.
-- Refused at maxmemory: it may add an index entry.
-- KEYS[1..11]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone
-- ARGV[1]: message id  ARGV[2]: '<ms>' delay from the server's now, or '@<ms>' absolute unix ms
-- Returns: { state before, new due ms } when moved; { state, -1 } when the message is not
--   pending ('in_flight', 'dead' or 'missing') and nothing changed.
local id, spec = ARGV[1], ARGV[2]
local m, key = find_pending(id)
if not m then
  return { settled_state(id, key), -1 }
end
local now = now_us()
local due = due_from(spec, now)
local state = pending_state(m, now)
remove_pending(m)
if m.group then
  -- A slot keeper (a retry) keeps its slot wherever it moves.
  put_pending(m, due, now, m.keep)
else
  local old_head = head_due(pending_key(priority_of(m.seq)))
  put_pending(m, due, now)
  wake_for(due, old_head, now)
end
event('rescheduled', id, 'due', string.format('%d', to_ms(due)))
return { state, to_ms(due) }
