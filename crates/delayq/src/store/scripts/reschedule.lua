#!lua
-- reschedule.lua: moves a delayed or ready message to a new due time, keeping its id.
-- Refused at maxmemory: it may add an index entry.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: message id  ARGV[2]: '<ms>' delay from the server's now, or '@<ms>' absolute unix ms
-- Returns: { state before, new due ms } when moved; { state, -1 } when the message is not
--   pending ('in_flight', 'dead' or 'missing') and nothing changed.
-- Refuses, as a send would and with nothing changed, a due time further out than the queue's
--   max delay ('delayq: over the max delay: ') or at or after the message's deadline
--   ('delayq: past its deadline: '): it would never run, and end dead 'expired'.
local id, spec = ARGV[1], ARGV[2]
local m, key = find_pending(id)
if not m then
  return { settled_state(id, key), -1 }
end
local now = now_us()
local due = due_from(spec, now)
local max_delay = tonumber(redis.call('HGET', k.control, 'max_delay_ms') or '')
if max_delay and due - now > max_delay * 1000 then
  error('delayq: over the max delay: due ' .. to_ms(due - now) .. ' ms from now, at most '
    .. max_delay .. ' ms')
end
if m.deadline and to_ms(due) >= m.deadline then
  error('delayq: past its deadline: due at ' .. to_ms(due) .. ' ms, and it expires at '
    .. m.deadline .. ' ms')
end
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
