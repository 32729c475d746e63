#!lua
-- send.lua: adds one or more messages to the pending sets (those due far ahead to their
-- buckets, buckets.lua).
-- Refused at maxmemory (no allow-oom flag): the caller gets the OOM error.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: the queue's partition count P   ARGV[2]: this partition's index k (src/partitions.rs)
--   Sequence numbers here are k modulo P, so a message's sequence number names its partition.
-- ARGV[3]: '' or a tick guard: the control field `tick:<schedule>`, which holds the last tick
--   of that recurring schedule sent to this partition; ARGV[4]: '' or the tick (unix ms). A
--   guarded send of a tick no later than the field's is reported as a duplicate of its first
--   message and writes nothing, so each tick becomes one message however many schedulers
--   send it (the scheduler). Or `backfill:<schedule>`: a missed tick sent later
--   (the schedules' backfill), refused the same way if the tick was ever sent.
--   Every tick sent is recorded in the ZSET `ticks:<schedule>` of its partition (the last
--   TICKS_KEPT of them; the control field `ticks_trimmed:<schedule>` holds the latest tick
--   trimmed off, before which a backfill cannot know what was sent and is refused).
-- ARGV[5..]: per message a group of four
--   id        caller id, or '' for an id made from the sort key
--   due       '<ms>' delay from the server's now, or '@<ms>' absolute unix ms; then, for a
--             message with a deadline (expiry.lua), '/' and '<ms>' after its due time or
--             '@<ms>' absolute unix ms, written into the record's deadline field (refused
--             unless format 4 or later); then, for an upsert of a caller id, ';' and 'r'
--             (replace) or 'd<ms>' (debounce, with its max wait), and '!' to refuse rather
--             than send a second message while the id's message is in flight (see upsert)
--   priority  0 to 9 (prelude.lua: it goes into the sequence number's top bits)
--   body      the record without its 13-byte sort key (flags .. payload; src/record.rs); a
--             message with a group (groups.lua) carries it in the body's extension area, and
--             is refused unless the partition's data is format 3 or later; on a queue that
--             encrypts (control.lua's `encrypt`) a body whose payload is not sealed (its
--             extension area names no key) is refused, nothing written
-- An id given more than once in one call is as if its messages were sent one after the other:
--   an upsert replaces the message of its id given earlier in the call (which is then never
--   written; it answers as sent), and a plain send after one is a duplicate of it.
-- Returns: { now µs, sequence before the first message, then per caller id that already
--   existed a triple: its position (1-based), a due ms, and what happened: 0 a duplicate
--   (nothing written; the due ms is the existing message's, or -1 if in flight, dead or gone
--   within the idempotency window), or an upsert that wrote a new message in place of one
--   1 delayed, 2 ready, 3 in flight, or 4 an upsert that found none to replace (the due ms
--   is the new message's: a debounce may bring it forward) }.
--   Message i gets sequence first + i * P (plus its priority's bits); the client derives due
--   times and generated ids from these, exactly as computed here.
local stride, offset = arg_number(1, 'partitions'), arg_number(2, 'partition')
check_groups(4, 'send', 4)
local guard, tick, schedule, backfill = ARGV[3], nil, nil, false
if guard ~= '' then
  tick = arg_number(4, 'tick')
  schedule = guard:match('^tick:(.+)$')
  if not schedule then
    schedule, backfill = guard:match('^backfill:(.+)$'), true
  end
  if not schedule then
    error('delayq: a tick guard is a tick: or backfill: field, not ' .. guard)
  end
end
local now = now_us()
local now_ms = to_ms(now)
local TICKS_KEPT, DELETED_TICK = 10000, 9007199254740992
local ticks_sent = schedule and PART_PREFIX .. 'ticks:' .. schedule
if tick then
  local last = tonumber(redis.call('HGET', k.control, 'tick:' .. schedule) or '-1')
  if redis.call('ZSCORE', ticks_sent, tick) or last == DELETED_TICK or (not backfill and tick <= last) then
    return { now, 0, 1, -1, 0 }
  end
  local trimmed = backfill and tonumber(redis.call('HGET', k.control, 'ticks_trimmed:' .. schedule) or '-1')
  if trimmed and tick <= trimmed then
    error('delayq: before the record of sent ticks: tick ' .. tick .. ', record from after ' .. trimmed)
  end
end
local n = (#ARGV - 4) / 4
-- Due times and priorities first: a bad one fails the call before INCRBY, its first write.
local dues, prios, deadlines, modes = {}, {}, {}, {}
for i = 1, n do
  local spec = ARGV[4 * i + 2]
  local semi = spec:find(';', 1, true)
  if semi then
    local kind, wait, refuse = spec:sub(semi + 1):match('^([rd])(%d*)(!?)$')
    if not kind or (kind == 'd') ~= (wait ~= '') or ARGV[4 * i + 1] == '' then
      error('delayq: an upsert of a caller id is r or d<ms>, then an optional !, not ' .. spec:sub(semi + 1))
    end
    modes[i] = { max_wait = tonumber(wait), refuse = refuse == '!' }
    spec = spec:sub(1, semi - 1)
  end
  local slash = spec:find('/', 1, true)
  local d = slash and spec:sub(slash + 1)
  dues[i] = due_from(slash and spec:sub(1, slash - 1) or spec, now)
  if d then
    local at, after = d:match('^@(%d+)$'), d:match('^(%d+)$')
    if not at and not after then
      error('delayq: a deadline is <ms> or @<ms>, not ' .. d)
    end
    -- Made a time once the due time is final (a debounce may bring it forward).
    deadlines[i] = { at = tonumber(at), after = tonumber(after) }
  end
  local p = ARGV[4 * i + 3]
  if not p:match('^%d$') then
    error('delayq: a priority is 0 to 9, not ' .. p)
  end
  prios[i] = tonumber(p)
end
-- The queue's longest delay: a send due further out is refused, nothing written (the client
-- knows the error by its prefix).
local settings = redis.call('HMGET', k.control, 'max_delay_ms', 'retain_ms', 'events', 'format',
  'bucket_horizon_ms', 'encrypt')
local max_delay = tonumber(settings[1] or '')
events_known(settings[3])
-- Whether a message due at `due` goes to a bucket (buckets.lua), told the settings read above.
local buckets_told = false
local function far_ahead(due)
  if not buckets_told then
    buckets().known(settings[4], settings[5])
    buckets_told = true
  end
  return buckets().far_enough(due, now)
end
-- A queue that retains: each message notes when it was sent (retention.lua).
local retained = settings[2] and retention()
if max_delay then
  for i = 1, n do
    if dues[i] - now > max_delay * 1000 then
      error('delayq: over the max delay: due ' .. to_ms(dues[i] - now) .. ' ms from now, at most '
        .. max_delay .. ' ms')
    end
  end
end
-- The groups of the grouped messages, by position (only the group is read of a record); their
-- partition must be of format 3 or later (an older delayq would deliver them without their
-- group's turn or limit). Checked before the first write.
-- A deadline or a debounce's cap is written into its field, checked here to be there.
local function check_field8(rec, from, to, tag, what)
  local value = from and field_of(rec, from, to, tag)
  if not value or #value ~= 8 then
    error('delayq: ' .. what .. ' needs its record to hold an 8-byte field for it')
  end
end
-- On a queue that encrypts (control.lua's `encrypt`), every payload must be sealed: its record
-- names its key (TAG_KEY). A client that read the setting before it was turned on is
-- refused, nothing written, and sends again sealed.
local encrypts = settings[6] == '1'
local function refuse_unsealed()
  error('delayq: unsealed payload on a queue that encrypts')
end
local grouped, any_grouped, needed = {}, false, 1
for i = 1, n do
  local body = ARGV[4 * i + 4]
  local flags = body:byte(1) or 0
  local _, extension = kind_of(flags)
  local debounce = modes[i] and modes[i].max_wait
  local rec, from, to = nil, nil, nil
  if extension or deadlines[i] or debounce then
    rec = key_of(0, 0) .. body
  end
  if extension then
    -- Any field (a trace context, a debounce's cap) makes the record one that a delayq of
    -- format 1 cannot read.
    needed = math.max(needed, 2)
    _, from, to = policy_end(rec, flags)
    local group = field_of(rec, from, to, TAG_GROUP)
    if group then
      grouped[i], any_grouped, needed = group, true, math.max(needed, 3)
    end
    if encrypts and not field_of(rec, from, to, TAG_KEY) then
      refuse_unsealed()
    end
  elseif encrypts then
    refuse_unsealed()
  end
  if deadlines[i] then
    check_field8(rec, from, to, TAG_DEADLINE, 'a deadline')
    needed = 4
  end
  if debounce then
    check_field8(rec, from, to, TAG_DEBOUNCE, 'a debounce')
    needed = math.max(needed, 2)
  end
end
if needed > 1 then
  local format = tonumber(settings[4] or '1')
  if format < needed then
    error('delayq: fields (trace context, debounces) need data format 2, groups 3, deadlines 4, and this partition is format '
      .. format)
  end
  if needed == 4 then
    -- From now on claims here look for deadlines (claim.lua).
    redis.call('HSET', k.control, 'deadlines', '1')
  end
end
-- Messages an upsert later in this call replaces: each stands in for its id until then, and
-- is never written.
local replaced_in_call, upsert_later = {}, {}
for i = n, 1, -1 do
  local id = ARGV[4 * i + 1]
  if id ~= '' then
    replaced_in_call[i] = upsert_later[id]
    if modes[i] then
      upsert_later[id] = true
    end
  end
end
if stride > 1 then
  redis.call('SET', k.seq, offset, 'NX')
end
local first = redis.call('INCRBY', k.seq, string.format('%d', n * stride)) - n * stride
if first + n * stride >= LEVEL then
  error('delayq: this queue has used up its sequence numbers')
end
local out = { now, first }
-- Per pending set: the members to add, and its head before them (false: empty).
local members, heads, indexed, taken, far = {}, {}, {}, {}, {}
local wake_now = false
-- Grouped messages: per group its ready members and count, in order of first appearance; and
-- those not yet due.
local group_sends, group_order, grouped_ready, grouped_later, earliest_later = {}, {}, 0, {}, nil
-- Per id, the message of this call that stands in for it unwritten (replaced_in_call): its
-- due time (µs) and a debounce's latest due time (unix ms).
local in_call = {}
-- An upsert (`mode`, of a caller id: 'replace' or 'debounce') meets `existing`, what its id
-- names: a sort key, or true (dead, or gone within the idempotency window). Returns true
-- when it is a duplicate after all (nothing written), else what the new message takes the
-- place of (1 delayed, 2 ready, 3 in flight; nil for a message gone for good) and, for a
-- debounce, the latest due time (unix ms) the message it replaces had been given.
--   A pending message is taken out, its group slot too (its errors go with it: the new
--   message starts over). One in flight is never changed: the new message is written
--   beside it and owns the id from now on, so the one in flight is superseded (its ack
--   still counts; a failure of it ends it, pending.lua's drop_superseded) - or, with
--   `refuse`, the send is a duplicate. A dead letter keeps its id until it is requeued or
--   purged: a duplicate.
local function upsert(id, existing, mode)
  if existing == true then
    return redis.call('HEXISTS', k.dead_msgs, id) == 1
  end
  if held_value(existing) then
    return mode.refuse, 3
  end
  local m = find_pending(id)
  if not m then
    return true
  end
  local was = pending_state(m, now) == 'ready' and 2 or 1
  remove_pending(m)
  if m.group and groups().groups_leave({ { m.id, m.group } }, m.keep) then
    wake_now = true
  end
  redis.call('HDEL', k.errors, id)
  return false, was, m.debounce_until
end
for i = 1, n do
  local id, body = ARGV[4 * i + 1], ARGV[4 * i + 4]
  local existing = id ~= '' and (taken[id] or redis.call('HGET', k.index, id)
    or redis.call('HEXISTS', k.dead_msgs, id) == 1 or recently_gone(id, now_ms))
  if type(existing) == 'string' then
    -- A grouped message's index entry carries its group after the sort key.
    existing = existing:sub(1, 13)
  end
  -- An id's later message in one call: an upsert replaces the one that stands in for it
  -- (never written); a plain send is its duplicate.
  local mode, replaced, until_ms = modes[i], nil, nil
  if existing and mode and in_call[id] then
    local prev = in_call[id]
    existing, replaced, until_ms = false, prev.due > now and 1 or 2, prev.until_ms
    in_call[id] = nil
  elseif existing and mode and not taken[id] then
    existing, replaced, until_ms = upsert(id, existing, mode)
  end
  local debounce = not existing and mode and mode.max_wait
  if debounce or (deadlines[i] and not existing) or (retained and not existing) then
    -- The fields the server writes (their places checked above), into the record once.
    local F, rec = record_fields(), key_of(0, 0) .. body
    if debounce then
      -- Due as sent, but no later than max wait after the first send of the messages it
      -- replaced in turn.
      until_ms = until_ms or now_ms + debounce
      dues[i] = math.min(dues[i], until_ms * 1000)
      rec = F.set_field8(rec, TAG_DEBOUNCE, until_ms)
    end
    local d = deadlines[i]
    if d then
      rec = F.set_field8(rec, TAG_DEADLINE, d.at or to_ms(dues[i]) + d.after)
    end
    if retained then
      rec = F.with_fields(rec, retained.new_fields(now_ms))
    end
    body = rec:sub(14)
  end
  if mode and not existing then
    out[#out + 1] = i
    out[#out + 1] = to_ms(dues[i])
    out[#out + 1] = replaced or 4
  end
  if existing then
    local existing_due = -1
    if type(existing) == 'string' and not held_value(existing) then
      existing_due = to_ms(unbe7(existing, 1))
    end
    out[#out + 1] = i
    out[#out + 1] = existing_due
    out[#out + 1] = 0
  elseif replaced_in_call[i] then
    -- Replaced later in this call: it stands in for its id until then, unwritten.
    taken[id] = key_of(dues[i], level_base(prios[i]) + first + i * stride)
    in_call[id] = { due = dues[i], until_ms = debounce and until_ms or nil }
  elseif grouped[i] then
    -- Into its group's set when due, else gdelayed (groups.lua); each set is written once
    -- below, each group counted and let into the rotation once.
    local g, due = grouped[i], dues[i]
    local seq = level_base(prios[i]) + first + i * stride
    local key = key_of(due, seq)
    if id ~= '' then
      taken[id] = key
    end
    indexed[#indexed + 1] = id ~= '' and id or string.format('%d-%d', due, seq)
    indexed[#indexed + 1] = key .. g
    local entry = group_sends[g]
    if not entry then
      entry = { n = 0 }
      group_sends[g] = entry
      group_order[#group_order + 1] = g
    end
    entry.n = entry.n + 1
    if due <= now then
      entry[#entry + 1] = '0'
      entry[#entry + 1] = groups().rank_of(seq) .. key .. body
      grouped_ready = grouped_ready + 1
    else
      grouped_later[#grouped_later + 1] = '0'
      grouped_later[#grouped_later + 1] = key .. body
      earliest_later = math.min(earliest_later or due, due)
    end
  else
    local due, p = dues[i], prios[i]
    local key = key_of(due, level_base(p) + first + i * stride)
    if due > now and far_ahead(due) then
      -- Due far ahead: into its bucket (buckets.lua), below.
      far[#far + 1] = key .. body
    else
      local set = pending_key(p)
      if members[set] == nil then
        members[set] = {}
        heads[set] = head_due(set) or false
        use_priority(p)
      end
      local list = members[set]
      list[#list + 1] = '0'
      list[#list + 1] = key .. body
      wake_now = wake_now or wakes(due, heads[set] or nil, now)
    end
    if id ~= '' then
      taken[id] = key
      indexed[#indexed + 1] = id
      indexed[#indexed + 1] = key
    end
  end
  if not existing and not replaced_in_call[i] and events_on() then
    local seq = level_base(prios[i]) + first + i * stride
    if replaced then
      -- An upsert's send says what it replaced: an entry of its own.
      local sent_id = id ~= '' and id or string.format('%d-%d', dues[i], seq)
      event('sent', sent_id, 'due', string.format('%d', to_ms(dues[i])), 'x',
        replaced == 3 and 'superseded' or 'replaced')
    else
      event_packed('sent', '\0\0' .. key_of(dues[i], seq), id)
    end
  end
end
if events_cap then
  flush_events()
end
for set, list in pairs(members) do
  redis.call('ZADD', set, unpack(list))
  add_history(now, 's', #list / 2)
end
if #far > 0 then
  wake_now = buckets().put_in_buckets(far, now) or wake_now
  add_history(now, 's', #far)
end
if #indexed > 0 then
  redis.call('HSET', k.index, unpack(indexed))
end
if any_grouped then
  local G = groups()
  local sent, sizes, now_ready = 0, {}, {}
  for _, g in ipairs(group_order) do
    local entry = group_sends[g]
    sent = sent + entry.n
    sizes[g] = entry.n
    if #entry > 0 then
      redis.call('ZADD', G.group_set(g), unpack(entry))
      now_ready[#now_ready + 1] = g
    end
  end
  G.add_counts(G.gk.size, true, group_order, sizes)
  wake_now = G.rotate_in_all(now_ready) or wake_now
  if grouped_ready > 0 then
    redis.call('HINCRBY', k.control, 'gready', grouped_ready)
  end
  if #grouped_later > 0 then
    local old_head = head_due(G.gk.delayed)
    redis.call('ZADD', G.gk.delayed, unpack(grouped_later))
    wake_now = wake_now or wakes(earliest_later, old_head, now)
  end
  add_history(now, 's', sent)
  redis.call('HSET', k.control, 'grouped', '1')
end
if wake_now then
  wake()
end
if tick then
  if not backfill then
    redis.call('HSET', k.control, guard, string.format('%d', tick))
  end
  redis.call('ZADD', ticks_sent, tick, string.format('%d', tick))
  local over = redis.call('ZCARD', ticks_sent) - TICKS_KEPT
  if over > 0 then
    local popped = redis.call('ZPOPMIN', ticks_sent, over)
    redis.call('HSET', k.control, 'ticks_trimmed:' .. schedule, popped[#popped])
  end
end
return out
