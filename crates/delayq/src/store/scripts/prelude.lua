-- prelude.lua: helpers shared by every delayq script.
-- Not a script of its own: scripts.rs inserts it after each script's `#!lua` line.
--
-- Record layout (the bytes stored for one message; see src/record.rs):
--   [1..7]   due in microseconds, big-endian 56-bit } together "K", the sort key: members of
--   [8..13]  seq, big-endian 48-bit                  } the pending ZSET (all scores 0) sort by
--                                                      (due, seq)
--   [14]     flags: 1 explicit id, 2 exponential, 4 factor byte, 8 jitter byte, 16 JSON payload
--            (the payload's kind: stored and returned, never read by the scripts), 32 linear,
--            64 list of delays, 128 handler timeout
--   [15..16] attempts so far (u16 BE)   [17..18] max attempts (u16 BE)
--   policy:  varint base ms (the count, for a list), [varint cap ms] (exponential, linear) or
--            [count varint ms] (list), [factor u8], [jitter % u8], [varint handler timeout ms]
--            (the timeout is for the worker: scripts only carry it along)
--   [extension area] (data format 2): varint length, then fields of [tag u8][varint
--            length][value]; announced by the kind bits (2, 32, 64) set to the complement
--            of the backoff kind's, so two or three of them. It stays with the policy
--            (`m.policy`), so every move of a record carries fields of a later delayq
--            unchanged. Scripts read two fields: tag 1, the message's group (`m.group`,
--            data format 3; groups.lua), and tag 2, its deadline (`m.deadline`, unix ms as
--            8 bytes big-endian, data format 4; expiry.lua).
--   [idlen u8, id]  only when flag 1 is set; otherwise the id is "<due us>-<seq>" of K
--   payload: the rest
--
-- Due times are kept in microseconds of the server's clock so that "due" is exact: a message
-- sent with a delay is never claimed before request arrival + delay. Leases are in ms.
--
-- Priorities: a message's priority (0-9, DEFAULT_PRIORITY unless the sender said) lives in
-- the top 4 bits of its sequence number (0 for the default, else priority + 1), so it stays
-- with the message through every state and move without a byte of its own. Pending messages
-- of the default priority are in `pending`; those of priority p in `pending:<p>`, a key
-- under the same hash tag (so in the same slot), listed in the control field `levels`
-- (digits, highest first) while it exists. A claim takes from the sets highest priority
-- first, so its cost grows with the priorities in use, never with the messages.
--
-- Names: pending messages are found by their sort key (the index maps explicit ids to it; a
-- generated id decodes to it). In flight, a message is named by its 6 sequence bytes (`seq`,
-- fixed for its life): `held` maps seq -> lease token (6 bytes) .. attempts (u16, this
-- delivery counted) .. record (as it was pending), and `leases` scores each lease by its
-- deadline in ms: a message's own (member seq .. token) or, from data format 6, its claim's
-- (leases.lua). Dead letters and errors are keyed by id.

-- Per call: the call's KEYS and ARGV, and `k`, the queue's keys, which every script receives
-- first, in the order of Keys::all() (src/keys.rs). begin_call (call_state.lua) sets them, and
-- every other name marked "per call": the helpers are made once for every call (scripts.rs).
local KEYS, ARGV, k

local F_ID, F_EXP, F_FACTOR, F_JITTER = 1, 2, 4, 8
local F_LINEAR, F_STEPS, F_TIMEOUT = 32, 64, 128
local KIND_BITS = F_EXP + F_LINEAR + F_STEPS
local TWO48 = 281474976710656

-- Sequence numbers count below LEVEL; the bits above it hold the priority.
local LEVEL, DEFAULT_PRIORITY = 17592186044416, 5

-- Per-minute history, for the dashboard's charts: a HASH per partition and minute of the
-- server's clock, `dq:{tag}:m:<minute>` (a key under the partition's tag, so in its slot),
-- kept HISTORY_TTL seconds. Fields: s sent, d delivered, a acked, f failed attempts, x
-- dead-lettered, and l<b> the deliveries whose lateness fell in bucket b (the history handle
-- reads them).
local HISTORY_TTL = '90000'
-- What every key of the partition starts with (`dq:{tag}:`): keys not passed in KEYS (the
-- history, the groups' keys) are named from it, so they share the partition's slot.
-- Per call, as is HISTORY_PREFIX.
local PART_PREFIX, HISTORY_PREFIX

-- Adds `n` to field `field` of the minute of `now` (microseconds).
local function add_history(now, field, n)
  if n > 0 then
    local key = HISTORY_PREFIX .. string.format('%d', math.floor(now / 60000000))
    -- A field's first count of the minute sets the key's expiry: a few EXPIREs a minute.
    -- (Numbers reach Redis as strings made here: Lua would print each with %.14g, which
    -- costs a call about 1,500 instructions a number.)
    if redis.call('HINCRBY', key, field, string.format('%d', n)) == n then
      redis.call('EXPIRE', key, HISTORY_TTL)
    end
  end
end

-- The lateness bucket of a delivery `late_us` after its due time: 0 below 1 ms, then four
-- buckets per doubling (bucket b ends at 2^(b/4) ms).
local function lateness_bucket(late_us)
  if late_us < 1000 then
    return 0
  end
  return math.floor(4 * math.log(late_us / 1000) / math.log(2)) + 1
end

local function has(flags, f)
  return math.floor(flags / f) % 2 == 1
end

-- Big-endian unsigned integers of 6 and 7 bytes, through the struct library (C, exact for
-- integers below 2^53): these run for every message.
local function be6(n)
  return struct.pack('>I6', n)
end

local function be7(n)
  return struct.pack('>I7', n)
end

local function unbe6(s, i)
  return (struct.unpack('>I6', s, i))
end

local function unbe7(s, i)
  return (struct.unpack('>I7', s, i))
end

local TWO56 = 72057594037927936

local function u16(n)
  return string.char(math.floor(n / 256) % 256, n % 256)
end

local function uvarint(s, i)
  local n, mul = 0, 1
  while true do
    local b = s:byte(i)
    i = i + 1
    n = n + (b % 128) * mul
    if b < 128 then
      return n, i
    end
    mul = mul * 128
  end
end

-- Server time in microseconds: the one clock that decides what is due.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function to_ms(us)
  return math.floor(us / 1000)
end

-- Due time in microseconds from '<ms>' (delay from now) or '@<ms>' (absolute unix ms); an
-- error for anything else.
local function due_from(spec, now)
  local absolute = spec:byte(1) == 64
  local ms = tonumber(absolute and spec:sub(2) or spec)
  if ms == nil then
    error('delayq: a due time is <ms> or @<ms>, not ' .. spec)
  end
  if absolute then
    return ms * 1000
  end
  return now + ms * 1000
end

-- Sort key: due time and sequence number.
local function key_of(due, seq)
  return struct.pack('>I7I6', due, seq)
end

-- Exclusive upper bound in the pending set for messages due at or before `us`.
local function due_bound(us)
  return '(' .. be7(us + 1)
end

-- The backoff kind of `flags` (F_EXP, F_LINEAR, F_STEPS, or 0 for a fixed delay), and
-- whether an extension area follows the policy (the kind bits hold their complement).
local function kind_of(flags)
  local bits = bit.band(flags, KIND_BITS)
  if bits == 0 or bits == F_EXP or bits == F_LINEAR or bits == F_STEPS then
    return bits, false
  end
  return KIND_BITS - bits, true
end

-- Index of the first byte after the retry policy (and extension area) of a record with
-- `flags`; and where the extension area's fields start and end (exclusive), if it has one.
local function policy_end(rec, flags)
  local n, i = uvarint(rec, 19)
  local kind, extension = kind_of(flags)
  local skip = 0
  if kind == F_STEPS then
    skip = n
  elseif kind ~= 0 then
    skip = 1
  end
  for _ = 1, skip do
    n, i = uvarint(rec, i)
  end
  if has(flags, F_FACTOR) then
    i = i + 1
  end
  if has(flags, F_JITTER) then
    i = i + 1
  end
  if has(flags, F_TIMEOUT) then
    n, i = uvarint(rec, i)
  end
  if extension then
    n, i = uvarint(rec, i)
    return i + n, i, i + n
  end
  return i
end

-- Extension fields (src/extension.rs): a message's group, its deadline, the latest due
-- time a debounced message may be pushed to (send.lua), and when it was sent and first
-- delivered (kept for its final record, retention.lua).
local TAG_GROUP, TAG_DEADLINE, TAG_DEBOUNCE, TAG_SENT, TAG_FIRST, TAG_TRACE = 1, 2, 3, 4, 5, 6
-- The mark of a sealed payload (src/values/sealing.rs; the payload names its key): a
-- sealed payload is stored, moved and returned as it is, never searched.
local TAG_KEY = 7

-- The value of field `tag` of the extension fields in rec[from, to), or nil.
local function field_of(rec, from, to, tag)
  local i = from
  while i < to do
    local t = rec:byte(i)
    local n, at = uvarint(rec, i + 1)
    if t == tag then
      return rec:sub(at, at + n - 1)
    end
    i = at + n
  end
  return nil
end

-- The id of a record and the index where its payload starts.
local function id_of(rec, flags)
  local i = policy_end(rec, flags)
  if has(flags, F_ID) then
    local n = rec:byte(i)
    return rec:sub(i + 1, i + n), i + 1 + n
  end
  return string.format('%d-%d', unbe7(rec, 1), unbe6(rec, 8)), i
end

local function parse(rec)
  local m = { due = unbe7(rec, 1), seq = unbe6(rec, 8), flags = rec:byte(14) }
  m.kind = kind_of(m.flags)
  local a1, a2, x1, x2 = rec:byte(15, 18)
  m.attempts = a1 * 256 + a2
  m.max = x1 * 256 + x2
  local i = 19
  m.base, i = uvarint(rec, i)
  m.cap, m.factor, m.jitter = m.base, 2, 0
  if m.kind == F_STEPS then
    m.steps = {}
    for j = 1, m.base do
      m.steps[j], i = uvarint(rec, i)
    end
  elseif m.kind ~= 0 then
    m.cap, i = uvarint(rec, i)
  end
  if has(m.flags, F_FACTOR) then
    m.factor = rec:byte(i)
    i = i + 1
  end
  if has(m.flags, F_JITTER) then
    m.jitter = rec:byte(i)
  end
  local policy_to, fields_from, fields_to = policy_end(rec, m.flags)
  m.policy = rec:sub(19, policy_to - 1)
  -- The extension fields this delayq knows, in one pass: the group, the traceparent, and
  -- times (unix ms; 0 is one not yet set).
  local at = fields_from
  while at and at < fields_to do
    local n, value_at = uvarint(rec, at + 1)
    local tag = rec:byte(at)
    if tag == TAG_GROUP then
      m.group = rec:sub(value_at, value_at + n - 1)
    elseif tag == TAG_TRACE then
      m.trace = rec:sub(value_at, value_at + n - 1)
    elseif tag == TAG_KEY then
      m.sealed = rec:sub(value_at, value_at + n - 1)
    elseif n == 8 and tag <= TAG_FIRST then
      local t = struct.unpack('>I8', rec, value_at)
      t = t > 0 and t or nil
      if tag == TAG_DEADLINE then
        m.deadline = t
      elseif tag == TAG_DEBOUNCE then
        m.debounce_until = t
      elseif tag == TAG_SENT then
        m.sent_at = t
      elseif tag == TAG_FIRST then
        m.first_at = t
      end
    end
    at = value_at + n
  end
  local payload_at
  m.id, payload_at = id_of(rec, m.flags)
  m.payload = rec:sub(payload_at)
  return m
end

local function sort_key(m)
  return key_of(m.due, m.seq)
end

local function encode(m)
  local idpart = ''
  if has(m.flags, F_ID) then
    idpart = string.char(#m.id) .. m.id
  end
  return sort_key(m) .. string.char(m.flags) .. u16(m.attempts) .. u16(m.max) .. m.policy .. idpart .. m.payload
end

-- The priority of sequence number `seq`.
local function priority_of(seq)
  local level = math.floor(seq / LEVEL)
  if level == 0 then
    return DEFAULT_PRIORITY
  end
  return level - 1
end

-- What a message of priority `p` adds to its sequence number.
local function level_base(p)
  if p == DEFAULT_PRIORITY then
    return 0
  end
  return (p + 1) * LEVEL
end

-- The pending set of priority `p`.
local function pending_key(p)
  if p == DEFAULT_PRIORITY then
    return k.pending
  end
  return k.pending .. ':' .. p
end

-- Priorities with a pending set, from the control field `levels`, highest first, with the
-- default priority in its place.
local function priorities(levels)
  local out, placed = {}, false
  for c in (levels or ''):gmatch('%d') do
    local p = tonumber(c)
    if not placed and p < DEFAULT_PRIORITY then
      out[#out + 1] = DEFAULT_PRIORITY
      placed = true
    end
    out[#out + 1] = p
  end
  if not placed then
    out[#out + 1] = DEFAULT_PRIORITY
  end
  return out
end

-- Writes the control field `levels` from a list of priorities.
local function set_levels(list)
  local digits = {}
  for _, p in ipairs(list) do
    if p ~= DEFAULT_PRIORITY then
      digits[#digits + 1] = tostring(p)
    end
  end
  table.sort(digits, function(a, b) return a > b end)
  if #digits == 0 then
    redis.call('HDEL', k.control, 'levels')
  else
    redis.call('HSET', k.control, 'levels', table.concat(digits))
  end
end

-- Lists priority `p` in `levels` before its pending set gets a message.
local function use_priority(p)
  if p == DEFAULT_PRIORITY then
    return
  end
  local levels = redis.call('HGET', k.control, 'levels') or ''
  if not levels:find(tostring(p), 1, true) then
    local list = priorities(levels)
    list[#list + 1] = p
    set_levels(list)
  end
end

-- The 6 sequence bytes that name a message in flight.
local function seq_of(key)
  return key:sub(8, 13)
end

-- The held value of the in-flight message with sort key `key`, or nil.
local function held_value(key)
  local v = redis.call('HGET', k.held, seq_of(key))
  if v and v:sub(9, 21) == key then
    return v
  end
  return nil
end

-- A held value parsed: the message as it stands in this delivery, with its lease member.
local function parse_held(seq, v)
  local m = parse(v:sub(9))
  m.attempts = (struct.unpack('>H', v, 7))
  m.lease = seq .. v:sub(1, 6)
  return m
end

-- Due time of the earliest message in pending set `set` (default: the default priority's),
-- or nil.
local function head_due(set)
  local h = redis.call('ZRANGE', set or k.pending, '0', '0')[1]
  if h then
    return unbe7(h, 1)
  end
  return nil
end

-- Due time of the earliest pending message of any of `list` (priorities), or nil. `known`
-- (optional): heads already read, by set (false: the set is empty).
local function earliest_due(list, known)
  local earliest = nil
  for _, p in ipairs(list) do
    local set = pending_key(p)
    local due = known and known[set]
    if due == nil then
      due = head_due(set)
    end
    if due and (earliest == nil or due < earliest) then
      earliest = due
    end
  end
  return earliest
end

-- Tells every consumer that is waiting (subscribed to the queue's wake channel) to claim.
-- A broadcast, not a token: a busy or departed consumer cannot swallow it. SPUBLISH stays on
-- the queue's shard in a cluster, and is allowed when Redis is out of memory.
local function wake()
  redis.call('SPUBLISH', k.wake, '1')
end

-- True when a message due at `due` must wake a consumer: it is already due or earlier than everything it may be sleeping on
-- (all in microseconds). `old_head` is the head of the set the message went into: a consumer
-- sleeps until the earliest head of all sets, which is no later, so this wakes whenever it
-- must (and, with several priorities in use, sometimes when it need not).
local function wakes(due, old_head, now)
  return due <= now or old_head == nil or due < old_head
end

local function wake_for(due, old_head, now)
  if wakes(due, old_head, now) then
    wake()
  end
end

-- Delay before the next attempt; `rnd` in [0,1) comes from the client (scripts stay deterministic).
local function backoff_ms(m, rnd)
  local d = m.base
  local retry = math.max(m.attempts, 1)
  if m.kind == F_STEPS then
    d = m.steps[math.min(retry, #m.steps)]
  elseif m.kind == F_LINEAR then
    d = math.min(m.base * retry, m.cap)
  elseif m.kind == F_EXP and d > 0 then
    -- Capping the exponent keeps the power finite (255^64 < 2^512), so a zero base never
    -- meets infinity and no attempt count makes NaN.
    d = math.min(m.base * m.factor ^ math.min(math.max(m.attempts - 1, 0), 64), m.cap)
  end
  if m.jitter > 0 then
    d = d - d * m.jitter / 100 * rnd
  end
  return math.floor(d)
end

-- The j-th of many random numbers in [0,1) spread from one client-supplied `rnd`: each
-- message of a batch gets its own jitter, so failures that happened together (a mass lease
-- expiry) are not retried together. Golden-ratio steps fill [0,1) evenly.
local function nth_random(rnd, j)
  return (rnd + j * 0.6180339887498949) % 1
end

-- Redis does not undo what a script wrote before an error, so every script checks its
-- arguments with these before its first write: a malformed call fails and changes nothing.
-- ARGV after the first `head` (0 if absent) comes in groups of `size`.
local function check_groups(size, what, head)
  head = head or 0
  if #ARGV < head or (#ARGV - head) % size ~= 0 then
    error('delayq: ' .. what .. ' takes ' .. head .. ' arguments, then groups of ' .. size
      .. ', not ' .. #ARGV .. ' arguments')
  end
end

-- ARGV[i] as a number, or an error that names it.
local function arg_number(i, what)
  local n = tonumber(ARGV[i])
  if n == nil then
    error('delayq: ' .. what .. ' (argument ' .. i .. ') is not a number')
  end
  return n
end

-- A message's error history: its last MAX_ERRORS failures, oldest first, in one field of the
-- errors hash. Each is \1, attempt (u16), time in ms (6 bytes), text length (u16), text: the
-- newest up to MAX_ERROR_BYTES (a client's error with its stack), the older ones cut to
-- OLDER_ERROR_BYTES when a newer one comes, so a history stays within about 6 KiB. See
-- src/error_history.rs.
local MAX_ERRORS, MAX_ERROR_BYTES, OLDER_ERROR_BYTES = 5, 4096, 512

-- The entries of a history, as strings; whatever does not parse (an older plain-text error)
-- is dropped, never an error: callers have written already.
local function error_entries(history)
  local entries, i = {}, 1
  while history and i + 10 <= #history and history:byte(i) == 1 do
    local n = history:byte(i + 9) * 256 + history:byte(i + 10)
    if i + 10 + n > #history then
      break
    end
    entries[#entries + 1] = history:sub(i, i + 10 + n)
    i = i + 11 + n
  end
  return entries
end

-- Appends a failure of attempt `attempt` at `now` (µs) to the history of `id`.
local function add_error(id, attempt, now, err)
  local text = err:sub(1, MAX_ERROR_BYTES)
  local entries = error_entries(redis.call('HGET', k.errors, id))
  for i, e in ipairs(entries) do
    if #e > 11 + OLDER_ERROR_BYTES then
      entries[i] = e:sub(1, 9) .. u16(OLDER_ERROR_BYTES) .. e:sub(12, 11 + OLDER_ERROR_BYTES)
    end
  end
  entries[#entries + 1] = '\1' .. u16(math.min(attempt, 65535)) .. be6(to_ms(now)) .. u16(#text) .. text
  local from = math.max(1, #entries - MAX_ERRORS + 1)
  redis.call('HSET', k.errors, id, table.concat(entries, '', from))
end

-- How many caller ids of gone messages one call forgets at most once their window is over:
-- the work of a call stays bounded however many windows end at once.
local FORGET_MAX = 100

-- Keeps the caller ids `ids` of messages just gone (acked, cancelled, purged) reserved for
-- the queue's idempotency window, if it has one, so that a late retry of their send is
-- still a duplicate; and forgets ids whose window is over.
local function remember_gone(ids, now_ms)
  local window = tonumber(redis.call('HGET', k.control, 'window_ms') or '0')
  if window > 0 and #ids > 0 then
    local until_arg = string.format('%d', now_ms + window)
    local args = {}
    for _, id in ipairs(ids) do
      args[#args + 1] = until_arg
      args[#args + 1] = id
    end
    redis.call('ZADD', k.gone, unpack(args))
  end
  local over = redis.call('ZRANGEBYSCORE', k.gone, '-inf', now_ms, 'LIMIT', 0, FORGET_MAX)
  if #over > 0 then
    redis.call('ZREM', k.gone, unpack(over))
  end
end

-- True when caller id `id` belongs to a message gone within the idempotency window.
local function recently_gone(id, now_ms)
  local until_ms = redis.call('ZSCORE', k.gone, id)
  return until_ms ~= false and tonumber(until_ms) > now_ms
end
