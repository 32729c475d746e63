#!lua flags=no-writes
-- browse.lua: one bounded step through the messages of one state, in order: a page of a list,
-- or a step of a payload search.
-- Read-only (no-writes): served at maxmemory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: state: 'delayed' or 'ready' (in order of due time, then sequence number, over every
--   priority's set), 'in_flight' (in order of lease deadline), 'dead' (in order of death)
-- ARGV[2]: where the step starts: '' for the first message; for delayed and ready the 13-byte
--   sort key of the last message already seen (the step starts after it, so messages that
--   leave meanwhile shift nothing); for dead '<died-at ms>:<id>' of the last dead letter
--   seen, likewise (or, from an older delayq, a number to skip); for in_flight the number
--   of messages to skip
-- ARGV[3]: most messages the step looks at, 1 to 1000
-- ARGV[4]: '' to return every message looked at; else only those whose payload (after a push
--   envelope: never the message's push headers) or id contains these bytes. A sealed payload
--   (src/values/sealing.rs) is never searched: only its message's id is, and only the
--   sealed payload's head (its key's id) is returned
-- ARGV[5]: most bytes of each payload returned ('' or absent: all of it); a search still
--   looks through all of each payload. What a step returns is then bounded, whatever the
--   payloads' sizes.
-- What a step loads is bounded too: it stops once the records it read reach BUDGET bytes
--   (with `next` where it stopped), having taken at least one. Pending sets are read a
--   record at a time past the last one taken, so a step loads what it looks at, plus the
--   next record of each priority's set (to know which comes first) and the buckets it reads
--   whole.
-- Returns: { looked at, next, then per message returned: id, due ms, attempts, max attempts,
--   error history or false, payload (its first ARGV[5] bytes), lease deadline ms (in
--   flight) or died-at ms (dead) or 0, flags byte, priority, group or false, deadline ms
--   (expiry.lua) or 0, a debounce's latest due ms (send.lua) or 0, sort key
--   (delayed, ready) or '', the whole payload's length, 1 if the payload is sealed else 0 }; for 'completed' (final records of
--   ended messages, retention.lua, the latest first) per message: id, final record, '', 0, 0
--   Ready messages of a group (in its group's set, groups.lua) are listed by group, not here;
--   grouped messages not yet due are.
--   next is where the following step starts (as ARGV[2]), or false when this step reached
--   the end.
local state, from, limit, needle = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local BUDGET = 4 * 1024 * 1024
-- Bytes of records this step has read.
local loaded = 0
local cut = tonumber(ARGV[5] or '')
if limit == nil or limit < 1 or limit > 1000 or limit % 1 ~= 0 then
  error('delayq: a browse step looks at 1 to 1000 messages')
end

local out = { 0, false }
-- Whether `a` sorts before `b` byte by byte, as a sorted set orders its members (Lua's `<`
-- follows the collation locale Redis sets).
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end
-- Where a search looks in a payload: after its push envelope, if it is in one (delayq
-- serve's `push/envelope.rs`: a 9-byte magic, a u32 length, that much JSON). The envelope
-- holds the message's push URL and headers, which no role but admin may read.
local ENVELOPE = '\0dq-push\1'
local function searched_from(payload)
  if #payload >= 13 and payload:sub(1, 9) == ENVELOPE then
    return 14 + struct.unpack('>I4', payload, 10)
  end
  return 1
end
local function add(m, extra, key)
  out[1] = out[1] + 1
  local payload_found = needle ~= '' and not m.sealed
    and string.find(m.payload, needle, searched_from(m.payload), true)
  if needle ~= '' and not payload_found and not string.find(m.id, needle, 1, true) then
    return
  end
  local n = #out
  out[n + 1] = m.id
  out[n + 2] = to_ms(m.due)
  out[n + 3] = m.attempts
  out[n + 4] = m.max
  out[n + 5] = redis.call('HGET', k.errors, m.id)
  if m.sealed then
    out[n + 6] = m.payload:sub(1, 1 + (m.payload:byte(1) or 0))
  else
    out[n + 6] = (cut and #m.payload > cut) and m.payload:sub(1, cut) or m.payload
  end
  out[n + 7] = extra
  out[n + 8] = m.flags
  out[n + 9] = priority_of(m.seq)
  out[n + 10] = m.group or false
  out[n + 11] = m.deadline or 0
  out[n + 12] = m.debounce_until or 0
  out[n + 13] = key or ''
  out[n + 14] = #m.payload
  out[n + 15] = m.sealed and 1 or 0
end

if state == 'delayed' or state == 'ready' then
  local now = now_us()
  local lower, upper = '-', '+'
  if from ~= '' then
    if #from ~= 13 then
      error('delayq: a browse position of a pending state is a 13-byte sort key')
    end
    lower = '[' .. key_of(unbe7(from, 1), unbe6(from, 8) + 1)
  end
  if state == 'ready' then
    upper = due_bound(now)
  else
    -- Compared as numbers: Redis sets a collation locale, so Lua's string order may not be
    -- byte order.
    if from == '' or unbe7(from, 1) <= now then
      lower = '[' .. be7(now + 1)
    end
  end
  -- Each priority's set is in order, and so is the groups' delayed set: each is a source
  -- read one record at a time past the last one taken from it.
  local sources = {}
  for _, p in ipairs(priorities(redis.call('HGET', k.control, 'levels'))) do
    sources[#sources + 1] = { set = pending_key(p), lower = lower }
  end
  sources[#sources + 1] = { set = groups().gk.delayed, lower = lower }
  -- A source's next record, read if need be; nil at its end.
  local function head(s)
    if s.rec == nil and not s.done then
      local got = redis.call('ZRANGE', s.set, s.lower, upper, 'BYLEX', 'LIMIT', 0, 1)
      if #got == 0 then
        s.done = true
      else
        s.rec, s.lower = got[1], '(' .. got[1]
        loaded = loaded + #got[1]
      end
    end
    return s.rec
  end
  -- And the buckets (buckets.lua), unordered inside: those from the one where the step
  -- starts, read whole until `limit` of their records are past where it starts, or the
  -- budget is spent. Any record not read is in a later bucket, so after every one read:
  -- due at or after `unread_from` (µs) when the budget left buckets unread.
  local bucketed, unread_from = {}, nil
  if redis.call('EXISTS', BUCKET_INDEX) == 1 then
    local lo_due, lo_seq = 0, 0
    if from ~= '' then
      lo_due, lo_seq = unbe7(from, 1), unbe6(from, 8) + 1
    end
    if state == 'delayed' and (from == '' or lo_due <= now) then
      lo_due, lo_seq = now + 1, 0
    end
    local to = state == 'ready' and to_ms(now) or '+inf'
    local unread = buckets().buckets_read(lo_due, to, limit, function(rec)
      loaded = loaded + #rec
      local d, q = unbe7(rec, 1), unbe6(rec, 8)
      if d < lo_due or (d == lo_due and q < lo_seq) or (state == 'ready' and d > now) then
        return false
      end
      bucketed[#bucketed + 1] = { due = d, seq = q, rec = rec }
      return true
    end, function()
      return loaded < BUDGET
    end)
    unread_from = unread and unread * 1000
    table.sort(bucketed, function(a, b)
      if a.due ~= b.due then
        return a.due < b.due
      end
      return a.seq < b.seq
    end)
  end
  -- Merged in order of due time, then sequence number (compared as numbers: Redis sets a
  -- collation locale, so Lua's string order may not be byte order).
  local taken, last, cut, b = 0, nil, false, 1
  while taken < limit do
    local best, best_due, best_seq, blind = nil, nil, nil, false
    for _, s in ipairs(sources) do
      if taken > 0 and loaded >= BUDGET and s.rec == nil and not s.done then
        -- The budget is spent and this source's next record is unknown: what comes first
        -- is not known either. The next step goes on from here.
        blind = true
        break
      end
      local rec = head(s)
      if rec then
        local d, q = unbe7(rec, 1), unbe6(rec, 8)
        if not best or d < best_due or (d == best_due and q < best_seq) then
          best, best_due, best_seq = s, d, q
        end
      end
    end
    local bucket = bucketed[b]
    if not blind and bucket
        and (not best or bucket.due < best_due or (bucket.due == best_due and bucket.seq < best_seq)) then
      best, best_due, best_seq = bucket, bucket.due, bucket.seq
    end
    if blind or (unread_from and (not best or best_due >= unread_from)) then
      -- The budget is spent, or what comes next may be in a bucket left unread.
      cut = true
      break
    end
    if not best then
      break
    end
    local rec = best.rec
    if best == bucket then
      b = b + 1
    else
      best.rec = nil
    end
    add(parse(rec), 0, rec:sub(1, 13))
    taken = taken + 1
    last = rec:sub(1, 13)
  end
  if last and (cut or taken >= limit) then
    out[2] = last
  elseif cut then
    -- Nothing taken: every record before the unread buckets was looked at. The next step
    -- starts at them.
    out[2] = key_of(unread_from - 1, 2 ^ 48 - 2)
  end
elseif state == 'in_flight' then
  -- In order of lease deadline, a claim's lease (data format 6) giving its messages in
  -- their order in the claim. A position counts messages, so the entries before it are
  -- walked, a claim counted by its live count without reading its places.
  local skip = tonumber(from == '' and '0' or from)
  if skip == nil or skip < 0 or skip % 1 ~= 0 then
    error('delayq: a browse position of in_flight is a count')
  end
  local entry, within, found = 0, skip, skip == 0
  while not found do
    local chunk = redis.call('ZRANGE', k.leases, entry, entry + 999)
    local claims = {}
    for _, member in ipairs(chunk) do
      if #member == 6 then
        claims[#claims + 1] = member
      end
    end
    local fields = #claims > 0 and redis.call('HMGET', k.claims, unpack(claims)) or {}
    local c = 0
    for _, member in ipairs(chunk) do
      local n = 1
      if #member == 6 then
        c = c + 1
        n = fields[c] and struct.unpack('>H', fields[c], 1) or 0
      end
      if within < n then
        found = true
        break
      end
      within, entry = within - n, entry + 1
    end
    if #chunk < 1000 then
      break
    end
  end
  -- Per message of each entry from `entry` on: seq, token; the first entry's first `within`
  -- messages are before the position.
  local looked = 0
  local entries = redis.call('ZRANGE', k.leases, entry, entry + limit - 1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    local member, score = entries[i], tonumber(entries[i + 1])
    local list = { member }
    if #member == 6 then
      list = claim_leases.members(member, redis.call('HGET', k.claims, member) or '')
    end
    for n = (i == 1 and within or 0) + 1, #list do
      if looked >= limit or (looked > 0 and loaded >= BUDGET) then
        -- The step is done: the next goes on at this message.
        out[2] = tostring(skip + looked)
        return out
      end
      looked = looked + 1
      local seq = list[n]:sub(1, 6)
      local v = redis.call('HGET', k.held, seq)
      loaded = loaded + (v and #v or 0)
      -- A lease whose held value has another token is stale: skip it, but count it, so
      -- that positions stay counts.
      if v and v:sub(1, 6) == list[n]:sub(7, 12) then
        add(parse_held(seq, v), score)
      else
        out[1] = out[1] + 1
      end
    end
  end
  if #entries / 2 >= limit then
    out[2] = tostring(skip + looked)
  end
elseif state == 'dead' then
  local set = k.dead
  local died, after = from:match('^(%d+):(.+)$')
  local skip
  if after then
    -- After dead letter `after`: where it is, or, requeued or purged meanwhile, where it
    -- was (after every death before its time, and those of its time whose id sorts first).
    skip = redis.call('ZRANK', set, after)
    if skip then
      skip = skip + 1
    else
      skip = redis.call('ZCOUNT', set, '-inf', '(' .. died)
      for _, member in ipairs(redis.call('ZRANGE', set, died, died, 'BYSCORE')) do
        if not bytes_before(member, after) then
          break
        end
        skip = skip + 1
      end
    end
  else
    skip = tonumber(from == '' and '0' or from)
    if skip == nil or skip < 0 or skip % 1 ~= 0 then
      error('delayq: a browse position of dead is <ms>:<id> (or a count)')
    end
  end
  -- Where the next step starts, after entry `i` of this one (1-based).
  local function next_after(i, entries)
    return string.format('%d', tonumber(entries[2 * i])) .. ':' .. entries[2 * i - 1]
  end
  local entries = redis.call('ZRANGE', set, skip, skip + limit - 1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    if i > 1 and loaded >= BUDGET then
      -- The budget is spent: the next step goes on after the last entry looked at.
      out[2] = next_after((i - 1) / 2, entries)
      return out
    end
    local member, score = entries[i], tonumber(entries[i + 1])
    local rec = redis.call('HGET', k.dead_msgs, member)
    loaded = loaded + #rec
    add(parse(rec), score)
  end
  if #entries / 2 >= limit then
    out[2] = next_after(limit, entries)
  end
elseif state == 'completed' then
  -- Final records (retention.lua), the latest first; per message: id, final record, '', 0, 0.
  local skip = tonumber(from == '' and '0' or from)
  if skip == nil or skip < 0 or skip % 1 ~= 0 then
    error('delayq: a browse position of completed is a count')
  end
  local ids = redis.call('ZREVRANGE', PART_PREFIX .. 'done_at', skip, skip + limit - 1)
  for _, id in ipairs(ids) do
    out[1] = out[1] + 1
    local final = redis.call('HGET', PART_PREFIX .. 'done', id)
    if final and (needle == '' or string.find(id, needle, 1, true)) then
      local n = #out
      out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = id, final, '', 0, 0
    end
  end
  if #ids >= limit then
    out[2] = tostring(skip + limit)
  end
else
  error('delayq: a state is delayed, ready, in_flight, dead or completed, not ' .. state)
end
return out
