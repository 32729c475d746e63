#!lua flags=no-writes
-- dead_list.lua: one page of dead letters, oldest death first.
-- Read-only (no-writes): served at maxmemory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: offset  ARGV[2]: page size
-- Returns: 1 when it stopped before the page's end because the records it read reached
--   BUDGET bytes (it returns at least one), else 0; then per dead letter: id, died-at ms,
--   attempts, max attempts, last error or false, payload, flags byte, priority, 1 if the
--   payload is sealed (src/values/sealing.rs) else 0.
local BUDGET = 4 * 1024 * 1024
local ids = redis.call('ZRANGE', k.dead, ARGV[1], tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local out, loaded = { 0 }, 0
for i = 1, #ids, 2 do
  if i > 1 and loaded >= BUDGET then
    out[1] = 1
    break
  end
  local id = ids[i]
  local rec = redis.call('HGET', k.dead_msgs, id)
  loaded = loaded + #rec
  local m = parse(rec)
  out[#out + 1] = id
  out[#out + 1] = tonumber(ids[i + 1])
  out[#out + 1] = m.attempts
  out[#out + 1] = m.max
  out[#out + 1] = redis.call('HGET', k.errors, id)
  out[#out + 1] = m.payload
  out[#out + 1] = m.flags
  out[#out + 1] = priority_of(m.seq)
  out[#out + 1] = m.sealed and 1 or 0
end
return out
