#!lua flags=no-writes
-- get.lua: what is known of one message.
-- Read-only (no-writes): served at maxmemory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: message id
-- Returns: { state } when missing; { 'completed', final record (retention.lua) } when gone
--   and retained; else { state, due ms, attempts, max attempts, last error or
--   false, payload, lease deadline ms (in flight) or died-at ms (dead) or 0, flags byte,
--   priority, group or false, deadline ms (expiry.lua) or 0, a debounce's latest due ms
--   (send.lua) or 0, traceparent or false, 1 if the payload is sealed (src/values/sealing.rs)
--   else 0 }.
--   For an in-flight or dead message, due ms is the due time of its last delivery.
local id = ARGV[1]
local m, key = find_pending(id)
local state, extra = nil, 0
if m then
  state = pending_state(m, now_us())
else
  state = settled_state(id, key)
  if state == 'in_flight' then
    m = parse_held(seq_of(key), held_value(key))
    extra = claim_leases.deadline(m.lease:sub(1, 6), m.lease:sub(7, 12)) or 0
  elseif state == 'dead' then
    m = parse(redis.call('HGET', k.dead_msgs, id))
    extra = tonumber(redis.call('ZSCORE', k.dead, id)) or 0
  else
    -- Gone: its final record, if the queue retains one (retention.lua).
    local final = retention() and retention().final_record(id)
    if final then
      return { 'completed', final }
    end
    return { state }
  end
end
return { state, to_ms(m.due), m.attempts, m.max, redis.call('HGET', k.errors, id), m.payload, extra, m.flags,
  priority_of(m.seq), m.group or false, m.deadline or 0, m.debounce_until or 0,
  m.trace or false, m.sealed and 1 or 0 }
