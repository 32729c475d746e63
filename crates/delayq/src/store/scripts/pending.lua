-- pending.lua: pending messages, grouped or not: put, found by id, taken out, retried or
-- buried. Not a script of its own: scripts.rs inserts it after buckets.lua.

-- Puts a parsed message pending at `due` (µs). Its id must stay findable: an id that no
-- longer decodes to the sort key becomes explicit and gets an index entry. A grouped message
-- goes where its group's messages wait (groups.lua), `keep` saying whether it keeps its
-- group's slot, and wakes a waiting consumer when it must; for the others that is the
-- caller's (wake_for). One due far enough ahead goes to its bucket (buckets.lua), waking a
-- consumer when that must be moved before whatever it sleeps on.
local function put_pending(m, due, now, keep)
  if due ~= m.due and not has(m.flags, F_ID) then
    m.flags = m.flags + F_ID
  end
  if m.group then
    if groups().put_grouped(m, due, now, keep) then
      wake()
    end
    return
  end
  m.due = due
  local B = buckets()
  if B.far_enough(due, now) then
    if B.put_in_buckets({ encode(m) }, now) then
      wake()
    end
  else
    local p = priority_of(m.seq)
    use_priority(p)
    redis.call('ZADD', pending_key(p), 0, encode(m))
  end
  if has(m.flags, F_ID) then
    redis.call('HSET', k.index, m.id, sort_key(m))
  end
end

-- Sort key of `id`: from the index (explicit ids and grouped messages, pending or in
-- flight), else decoded from a generated id; nil when neither applies. And its group, if
-- the index names one.
local function key_for(id)
  local key = redis.call('HGET', k.index, id)
  if key then
    if #key > 13 then
      return key:sub(1, 13), key:sub(14)
    end
    return key
  end
  local d, s = string.match(id, '^(%d+)-(%d+)$')
  if not d then
    return nil
  end
  d, s = tonumber(d), tonumber(s)
  -- Only the canonical spelling names a message: '01-2' must not reach the message '1-2'.
  if d >= TWO56 or s >= TWO48 - 1 or string.format('%d-%d', d, s) ~= id then
    return nil
  end
  return key_of(d, s)
end


-- The pending message of `id`, parsed (with `member` set; for a grouped one also `set` and
-- `keep`, groups.lua; for a bucketed one `bucket`, its start), or nil; and its sort key if
-- known.
local function find_pending(id)
  local key, group = key_for(id)
  if not key then
    return nil, nil
  end
  if group then
    return groups().find_grouped(id, key, group), key
  end
  local seq = unbe6(key, 8)
  local upper = key:sub(1, 7) .. be6(seq + 1)
  local set = pending_key(priority_of(seq))
  local hit = redis.call('ZRANGEBYLEX', set, '[' .. key, '(' .. upper, 'LIMIT', 0, 1)[1]
  if hit then
    local m = parse(hit)
    if m.id == id then
      m.member = hit
      return m, key
    end
    return nil, key
  end
  local rec, bucket = buckets().bucket_find(key)
  if rec then
    local m = parse(rec)
    if m.id == id then
      m.member, m.bucket = rec, bucket
      return m, key
    end
  end
  return nil, key
end

local function remove_pending(m)
  if m.group then
    groups().remove_grouped(m)
    return
  end
  if m.bucket then
    buckets().bucket_remove(m.member, m.bucket)
  else
    redis.call('ZREM', pending_key(priority_of(m.seq)), m.member)
  end
  if has(m.flags, F_ID) then
    redis.call('HDEL', k.index, m.id)
  end
end


-- Whether in-flight message `m` was superseded: an upsert (send.lua) wrote a newer message
-- under its caller id, which the index now names (or named, and it is gone).
local function superseded(m)
  if not has(m.flags, F_ID) then
    return false
  end
  local key = redis.call('HGET', k.index, m.id)
  return not key or key:sub(8, 13) ~= be6(m.seq)
end

-- Ends superseded message `m`, whose delivery failed (with error `err`) or was released
-- (`err` nil): the newer message carries what it was for, so it is neither retried nor a
-- dead letter; its group's slot is freed, and the index and errors are left to the newer
-- message.
local function drop_superseded(m, err)
  if m.group and groups().groups_leave({ { m.id, m.group } }, true, true) then
    wake()
  end
  if err then
    event('superseded', m.id, 'n', m.attempts, 'err', event_error(err))
  else
    event('superseded', m.id, 'n', m.attempts)
  end
  return 'superseded'
end

-- Ends a delivery that failed: dead letter after the last attempt (or at once when `dead`),
-- otherwise back to pending `delay_ms` after `now` (microseconds), unless that is at or
-- after the message's deadline: then it expires (expiry.lua). Returns 'retry', 'dead',
-- 'expired' (dead-lettered as such), 'dropped' (expired, and the queue drops those) or
-- 'superseded' (drop_superseded).
local function retry_or_bury(m, err, delay_ms, now, dead)
  if superseded(m) then
    add_history(now, 'f', 1)
    return drop_superseded(m, err)
  end
  add_history(now, 'f', 1)
  if not dead and m.attempts < m.max and m.deadline and to_ms(now) + delay_ms >= m.deadline then
    add_error(m.id, m.attempts, now, err)
    return expiry().expire(m, now)
  end
  add_error(m.id, m.attempts, now, err)
  if dead or m.attempts >= m.max then
    add_history(now, 'x', 1)
    keep_final(m, 'd', now)
    redis.call('ZADD', k.dead, to_ms(now), m.id)
    redis.call('HSET', k.dead_msgs, m.id, encode(m))
    if has(m.flags, F_ID) then
      redis.call('HDEL', k.index, m.id)
    end
    if m.group and groups().groups_leave({ { m.id, m.group } }, true) then
      wake()
    end
    event('dead', m.id, 'n', m.attempts, 'err', event_error(err))
    return 'dead'
  end
  event('retry', m.id, 'n', m.attempts, 'due', string.format('%d', to_ms(now) + delay_ms),
    'err', event_error(err))
  if m.group then
    -- The retry keeps its group's slot: a group of concurrency 1 delivers nothing else
    -- before it.
    put_pending(m, now + delay_ms * 1000, now, true)
    return 'retry'
  end
  local old_head = head_due(pending_key(priority_of(m.seq)))
  put_pending(m, now + delay_ms * 1000, now)
  wake_for(m.due, old_head, now)
  return 'retry'
end

local function pending_state(m, now)
  if m.due <= now or m.ready then
    return 'ready'
  end
  return 'delayed'
end

-- State of an id that is not pending ('in_flight', 'dead' or 'missing'), given its sort key.
local function settled_state(id, key)
  if key and held_value(key) then
    return 'in_flight'
  end
  if redis.call('HEXISTS', k.dead_msgs, id) == 1 then
    return 'dead'
  end
  return 'missing'
end

-- Moves an in-flight message whose record cannot be read (`v` is its held value: token,
-- attempts, record) to the dead letters without losing a byte: it is stored as a minimal
-- record of its own (no retries left) whose payload is the unreadable record, under the
-- generated id of its sort key, with `err` as its last error.
local function bury_raw(seq, v, err, now)
  local raw = v:sub(9)
  local key = (raw .. string.rep('\0', 13)):sub(1, 13)
  local attempts = (struct.unpack('>H', v .. '\0\0', 7))
  local id = string.format('%d-%d', unbe7(key, 1), unbe6(key, 8))
  redis.call('HDEL', k.held, seq)
  add_error(id, attempts, now, err)
  add_history(now, 'f', 1)
  add_history(now, 'x', 1)
  redis.call('ZADD', k.dead, to_ms(now), id)
  redis.call('HSET', k.dead_msgs, id, key .. '\0' .. u16(attempts) .. u16(attempts) .. '\0' .. raw)
  event('dead', id, 'n', attempts, 'err', event_error(err))
  return id
end

-- How many messages the partition holds: pending (in any priority's set, a bucket or a
-- group), in flight, and dead. What a queue's delete asks before it removes anything.
local function messages_held(now)
  local control = redis.call('HMGET', k.control, 'levels', 'gready')
  local held = 0
  for _, p in ipairs(priorities(control[1])) do
    held = held + redis.call('ZCARD', pending_key(p))
  end
  if redis.call('EXISTS', BUCKET_INDEX) == 1 then
    held = held + buckets().buckets_due(now)
  end
  held = held + tonumber(control[2] or '0') + redis.call('ZCARD', groups().gk.delayed)
  return held + redis.call('HLEN', k.held) + redis.call('ZCARD', k.dead)
end
