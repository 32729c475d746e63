-- retention.lua: the final records of messages that ended (acked, cancelled, expired or
-- dead), kept for a while so that "did my message run?" has an answer after it is gone. Not
-- a script of its own: scripts.rs inserts it after groups.lua.
--
-- A queue that retains (control fields `retain_ms`, how long, and `retain_max`, how many per
-- partition; Setting::RetainCompleted) keeps per partition:
--   done     HASH id -> final record: outcome (1 byte: a acked, c cancelled, e expired,
--            d dead), attempts (u16), max attempts (u16), then four unix ms
--            (u64 each, 0 unknown): sent, first delivered, due (of the last delivery),
--            finished; then the message's error history as prelude.lua keeps it
--   done_at  ZSET id by finished ms: trimmed by age and count as records are added, at
--            most TRIM_MAX a call, so a call's work stays bounded
-- While a queue retains, send.lua gives each message two more extension fields, when it was
-- sent (TAG_SENT) and first delivered (TAG_FIRST, written by its first claim). They also
-- mark it as one to keep: a message ends with a final record if it was sent while its queue
-- retained and its queue still retains, so the ends of other messages (a queue that never
-- retained: every ack) never read the queue's settings for it.

-- Helpers that write extension fields into a record, made on first use, once (as
-- groups.lua's); they hold nothing of a call.
local record_fields_helpers
local function make_record_fields()
  -- `rec` (a whole record) with the 8-byte value of its extension field `tag` set to `value`;
  -- nil when it has no such field.
  local function set_field8(rec, tag, value)
    local flags = rec:byte(14)
    local _, extension = kind_of(flags)
    if not extension then
      return nil
    end
    local _, from, to = policy_end(rec, flags)
    local at = from
    while at < to do
      local len, value_at = uvarint(rec, at + 1)
      if rec:byte(at) == tag and len == 8 then
        return rec:sub(1, value_at - 1) .. struct.pack('>I8', value) .. rec:sub(value_at + 8)
      end
      at = value_at + len
    end
    return nil
  end

  local function put_uvarint(n)
    local out = {}
    while n >= 128 do
      out[#out + 1] = string.char(n % 128 + 128)
      n = math.floor(n / 128)
    end
    out[#out + 1] = string.char(n)
    return table.concat(out)
  end

  -- `rec` (a whole record) with `fields` (encoded: tag, length, value each) added to the end
  -- of its extension area, which it gains if it had none.
  local function with_fields(rec, fields)
    local flags = rec:byte(14)
    local kind, extension = kind_of(flags)
    local policy_to, from, to = policy_end(rec, flags)
    if extension then
      local area = rec:sub(from, to - 1) .. fields
      local len_at = from - #put_uvarint(to - from)
      return rec:sub(1, len_at - 1) .. put_uvarint(#area) .. area .. rec:sub(to)
    end
    -- The kind bits hold their complement when an area follows the policy.
    flags = flags - kind + (KIND_BITS - kind)
    return rec:sub(1, 13) .. string.char(flags) .. rec:sub(15, policy_to - 1)
      .. put_uvarint(#fields) .. fields .. rec:sub(policy_to)
  end

  record_fields_helpers = { set_field8 = set_field8, with_fields = with_fields }
end

local function record_fields()
  if not record_fields_helpers then
    make_record_fields()
  end
  return record_fields_helpers
end

-- Made on first use, once (make_retention; as groups.lua's); retention() readies them for a
-- call (false when the queue does not retain). Per call: retention_made, and the queue's
-- retention (keep_ms, retain_max) and the partition's keys of final records (rk).
local retention_made, keep_ms, retain_max, rk = nil, nil, nil, nil
local retention_helpers
local function make_retention()
  local TRIM_MAX = 100

  -- The two fields a message sent now carries: sent at `now_ms`, first delivered not yet.
  local function new_fields(now_ms)
    return string.char(TAG_SENT, 8) .. struct.pack('>I8', now_ms)
      .. string.char(TAG_FIRST, 8) .. string.rep('\0', 8)
  end

  -- `rec` (a whole record) as its first claim at `now_ms` hands it out: with the time it
  -- was first delivered, if it carries the field and has not been delivered before.
  local function first_claim(rec, now_ms)
    if rec:byte(15) ~= 0 or rec:byte(16) ~= 0 then
      return rec
    end
    return record_fields().set_field8(rec, TAG_FIRST, now_ms) or rec
  end

  -- Drops final records older than the queue keeps them, then the oldest over its count.
  local function trim(now_ms)
    local old = redis.call('ZRANGEBYSCORE', rk.done_at, '-inf', now_ms - keep_ms, 'LIMIT', 0, TRIM_MAX)
    local over = redis.call('ZCARD', rk.done_at) - #old - retain_max
    if over > 0 then
      local popped = redis.call('ZRANGE', rk.done_at, #old, #old + math.min(over, TRIM_MAX) - 1)
      for _, id in ipairs(popped) do
        old[#old + 1] = id
      end
    end
    if #old > 0 then
      redis.call('ZREM', rk.done_at, unpack(old))
      redis.call('HDEL', rk.done, unpack(old))
    end
  end

  -- Keeps the final records of `ended`: per message { m (parsed), outcome letter, error
  -- history or nil }, all finished at `now` (µs).
  local function keep(ended, now)
    if #ended == 0 then
      return
    end
    local now_ms = to_ms(now)
    local records, scores = {}, {}
    for _, e in ipairs(ended) do
      local m = e[1]
      records[#records + 1] = m.id
      records[#records + 1] = e[2] .. u16(m.attempts) .. u16(m.max)
        .. struct.pack('>I8I8I8I8', m.sent_at or 0, m.first_at or 0, to_ms(m.due), now_ms)
        .. (e[3] or '')
      scores[#scores + 1] = now_ms
      scores[#scores + 1] = m.id
    end
    redis.call('HSET', rk.done, unpack(records))
    redis.call('ZADD', rk.done_at, unpack(scores))
    trim(now_ms)
  end

  -- The final record of `id`, or nil.
  local function final_record(id)
    return redis.call('HGET', rk.done, id) or nil
  end

  retention_helpers = {
    new_fields = new_fields, first_claim = first_claim, keep = keep,
    final_record = final_record,
  }
end

local function retention()
  if retention_made == nil then
    if not retention_helpers then
      make_retention()
    end
    local conf = redis.call('HMGET', k.control, 'retain_ms', 'retain_max')
    keep_ms, retain_max = tonumber(conf[1] or ''), tonumber(conf[2] or '')
    if not keep_ms or not retain_max then
      retention_made = false
      return false
    end
    rk = { done = PART_PREFIX .. 'done', done_at = PART_PREFIX .. 'done_at' }
    retention_made = retention_helpers
  end
  return retention_made
end

-- Keeps the final record of parsed message `m`, which ended as `outcome` at `now` (µs),
-- with its error history as it stands, if it was sent while its queue retained and the
-- queue still retains.
local function keep_final(m, outcome, now)
  if m.sent_at and retention() then
    retention().keep({ { m, outcome, redis.call('HGET', k.errors, m.id) } }, now)
  end
end
