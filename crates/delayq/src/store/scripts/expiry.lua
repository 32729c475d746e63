-- expiry.lua: messages that must not be delivered late (data format 4). Not a script of its
-- own: scripts.rs inserts it after retention.lua.
--
-- A message's deadline is field 2 of its record's extension area (`m.deadline`, unix ms,
-- prelude.lua): a claim at or after it never delivers the message. The queue's `ttl_ms`
-- (control field) gives the others a deadline of their own due time plus that much, so a
-- queue can say "never more than this late". What an expired message becomes is the
-- queue's `on_expire`: a dead letter with the error 'expired' (the default), or, with
-- 'drop', nothing (gone as if acked). Either counts in the history field `e`.
-- A partition that was sent a deadline says so (control field `deadlines`, set by send.lua):
-- only then, or with a `ttl_ms`, do claims look at each record's deadline.
-- Nothing scans for expired messages: a claim meets them in due order, as it meets every
-- due message, a retry that would start after the deadline expires instead, and so does a
-- message a claim still holds when that claim is repeated (its reply lost) after the deadline.

-- Made on first use, once (make_expiry; as groups.lua's); expiry() readies them for a call.
-- Per call: expiry_made, `drop` (the queue's on_expire, read
-- once a call expires a message) and `held_settings` (read once a call asks held_past).
local expiry_made, drop, held_settings = nil, nil, nil
local expiry_helpers
local function make_expiry()

  -- The deadline (unix ms) of whole record `rec`, or nil: its own, else its due time plus
  -- the queue's `ttl_ms` (`ttl`: a number, or nil).
  local function deadline_of(rec, ttl)
    local flags = rec:byte(14)
    local _, extension = kind_of(flags)
    if extension then
      local _, from, to = policy_end(rec, flags)
      local own = field_of(rec, from, to, TAG_DEADLINE)
      if own and #own == 8 then
        return (struct.unpack('>I8', own))
      end
    end
    if ttl then
      return to_ms(unbe7(rec, 1)) + ttl
    end
    return nil
  end

  -- Ends parsed message `m`, taken out of where it waited or was held, whose deadline came:
  -- a dead letter (error 'expired'), or gone when the queue drops expired messages. Its
  -- group (if any) frees the slot it held. Returns 'expired' or 'dropped'.
  local function expire(m, now)
    if drop == nil then
      drop = redis.call('HGET', k.control, 'on_expire') == 'drop'
    end
    add_history(now, 'e', 1)
    local explicit = has(m.flags, F_ID)
    if explicit and not m.group then
      redis.call('HDEL', k.index, m.id)
    end
    -- A dead letter's history ends with why; a dropped message's goes with it, after its
    -- final record (if any) took it.
    if not drop then
      add_error(m.id, m.attempts, now, 'expired')
    end
    keep_final(m, 'e', now)
    if drop then
      if explicit then
        remember_gone({ m.id }, to_ms(now))
      end
      redis.call('HDEL', k.errors, m.id)
    else
      add_history(now, 'x', 1)
      redis.call('ZADD', k.dead, to_ms(now), m.id)
      redis.call('HSET', k.dead_msgs, m.id, encode(m))
    end
    local outcome = drop and 'dropped' or 'expired'
    if drop then
      event('expired', m.id, 'n', m.attempts, 'x', 'dropped')
    else
      event('expired', m.id, 'n', m.attempts)
    end
    if m.group and groups().groups_leave({ { m.id, m.group } }, true) then
      wake()
    end
    return outcome
  end

  -- Whether held value `v` (lease token, attempts, then the record as it was pending, whole:
  -- the caller checks its length) is of a message whose deadline came by `now_ms`: a claim
  -- repeated after its reply was lost asks before it hands a message over again.
  local function held_past(v, now_ms)
    if held_settings == nil then
      local c = redis.call('HMGET', k.control, 'ttl_ms', 'deadlines')
      held_settings = { on = c[1] ~= false or c[2] ~= false, ttl = tonumber(c[1] or '') }
    end
    if not held_settings.on then
      return false
    end
    local at = deadline_of(v:sub(9), held_settings.ttl)
    return at ~= nil and at <= now_ms
  end

  -- Ends held message `m` (parse_held), whose deadline came before it reached anyone: its
  -- lease (`member`) and hold end, and it expires with the attempts it had before.
  local function expire_held(m, member, now)
    release_lease(member)
    m.attempts = math.max(m.attempts - 1, 0)
    return expire(m, now)
  end

  expiry_helpers = { deadline_of = deadline_of, expire = expire, held_past = held_past,
    expire_held = expire_held }
end

local function expiry()
  if not expiry_made then
    if not expiry_helpers then
      make_expiry()
    end
    drop, held_settings = nil, nil
    expiry_made = expiry_helpers
  end
  return expiry_made
end
