#!lua
-- reseal.lua: puts records whose payload was sealed again (`delayq keys rotate`,
-- src/handles/reseal.rs) in place of the records they were made from, each only while that
-- record is still as it was read (reseal_scan.lua): a message that moved, was delivered,
-- changed or ended meanwhile is left as it is. The record keeps its place: same sort key,
-- group, index entry and counts (a pending one is taken out and put back as a reschedule
-- to its own due time does).
-- Refused at maxmemory: the new record may be a few bytes longer.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: per record a group of four
--   state     'p' pending or 'd' dead, as reseal_scan.lua found it
--   id        the message's id
--   old       the record as it was read
--   new       the record to put in its place (same sort key; the payload sealed again)
-- Returns per record: 1 when it was put in place, 0 when the message is no longer as read.
check_groups(4, 'reseal')
for i = 1, #ARGV, 4 do
  local state, old, new = ARGV[i], ARGV[i + 2], ARGV[i + 3]
  if state ~= 'p' and state ~= 'd' then
    error('delayq: a resealed record is p or d, not ' .. state)
  end
  if new:sub(1, 13) ~= old:sub(1, 13) then
    error('delayq: a resealed record keeps its sort key')
  end
end
local now = now_us()
local out = {}
for i = 1, #ARGV, 4 do
  local state, id, old, new = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local done = 0
  if state == 'd' then
    if redis.call('HGET', k.dead_msgs, id) == old then
      redis.call('HSET', k.dead_msgs, id, new)
      done = 1
    end
  else
    local m = find_pending(id)
    if m and encode(m) == old then
      local fresh = parse(new)
      if fresh.id == id and fresh.group == m.group then
        remove_pending(m)
        put_pending(fresh, m.due, now, m.keep)
        done = 1
      end
    end
  end
  out[#out + 1] = done
end
return out
