#!lua flags=allow-oom
-- claim.lua: the heart of receive. Reclaims expired leases (each counted as a failed attempt),
-- then moves up to `max` due messages from pending to in flight under fresh lease tokens,
-- highest priority first (on a partition with groups: the groups in turn, groups.lua),
-- unless the queue is paused, and no more than its rate limit allows.
-- Allowed at maxmemory: draining the queue must not need free memory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- KEYS[13]: the consumer's claim record (Keys::claim_record): which messages its last claim took
-- ARGV[1] max messages  ARGV[2] lease ms  ARGV[3] random number in [0,1) for backoff jitter
--   ARGV[4] most expired leases to reclaim in this call
--   ARGV[5] token base: a random multiple of 1024 (leases.lua's claim_leases.SPAN) below
--     2^48 - 1024 from the client; message j of the claim gets lease token base + j, so tokens are neither
--     guessable nor repeated when Redis loses its last writes, and each names its claim
--   On a partition of data format 6 or later, the messages of a claim that are due now, if
--   more than one, are held under one lease, the claim's (leases.lua)
--   ARGV[6] '1' when this call repeats a claim whose reply was lost (same token base): the
--     messages that claim took are returned again, leases renewed, if still held under it
--     and their deadline (expiry.lua) has not come; one whose deadline came expires
--   ARGV[7] '1' for a claim by push delivery: a queue set to push (control field `push`) is
--     claimed only by those, any other only by the rest
--   ARGV[8] '0' for a consumer that never repeats a claim (one HTTP request's): no claim
--     record is written; '1': it is, for the length of the lease
--   ARGV[9] look-ahead µs: also take messages without a group that come due within this
--     time (their consumer hands each over at its due time); the lease of one taken ahead
--     runs from its due time
--   ARGV[10..]: acks this claim carries (a worker's handlers that finished since its last
--     claim, the worker's carried acks), per delivery one argument as ack.lua takes; done first, so what they
--     free (a group's slot) can be claimed by this call
-- Returns: { next_event_us, lease_deadline_ms (of a message due now; one taken ahead: its due
--   time's ms, rounded up, + lease ms), token base, now µs, expired leases retried,
--   what this call dead-lettered as a flat list { id, error, id, error, ... } (expired leases
--   on their last attempt, records too short to read), per carried ack 1 or 0 as ack.lua
--   returns them, then per message its record as it was pending (message j
--   has token base + j, and this delivery is its attempts + 1), or false for a message of a
--   repeated claim that is no longer held under its token }.
--   next_event_us: when to claim again: microseconds until the next message comes due or
--   the next lease expires, and not before the rate limit's next token (-1: nothing pending
--   or leased, or the queue is paused or not for this kind of consumer (ARGV[7]): the
--   consumer waits for a wake-up, which resuming or changing the kind sends); 0 when more
--   is due now (its consumer claims again).
-- Smallest valid record: sort key 13, flags 1, attempts 2, max attempts 2, backoff varint 1.
local MIN_RECORD = 19
-- How the reply names a message that expired (expiry.lua), by what became of it.
local EXPIRED_AS = { expired = 'expired', dropped = 'expired, dropped' }
local max, lease_ms = arg_number(1, 'max'), arg_number(2, 'lease ms')
local rnd, base = arg_number(3, 'rnd'), arg_number(5, 'token base')
arg_number(4, 'most expired leases')
local now = now_us()
local now_ms = to_ms(now)
-- Messages due by `ahead` are taken (the look-ahead); a group's messages only once due.
-- (The script's locals are few: the EVALSHA form, the library and a script in one
-- function, may hold 200.)
local ahead = now + arg_number(9, 'look-ahead us')
local deadline = now_ms + lease_ms
-- The lease deadline (ms) of a message due at `due` (µs): one taken ahead is leased from
-- its due time (ms, rounded up), the others from now.
local function lease_end(due)
  return due > now and math.ceil(due / 1000) + lease_ms or deadline
end
check_groups(1, 'claim', 9)
local acked = #ARGV > 9 and ack_leases(ARGV, 10, now) or {}

if ARGV[6] == '1' then
  local rec = redis.call('GET', KEYS[13])
  if rec and rec:sub(1, 6) == be6(base) then
    local expired = {}
    local out = { 0, deadline, base, now, 0, expired, acked }
    for j = 1, (#rec - 6) / 6 do
      local seq = rec:sub(6 * j + 1, 6 * j + 6)
      local member = seq .. be6(base + j)
      local v = redis.call('HGET', k.held, seq)
      local held_until, claim = claim_leases.deadline(seq, member:sub(7))
      out[7 + j] = false
      if v and v:sub(1, 6) == member:sub(7) and (held_until or 0) > now_ms then
        -- Handing it over now is a delivery now: past its deadline, it expires instead.
        -- (Parsed before any write: a Lua error after a write would not undo it.)
        local ok, m = false, nil
        if #v >= 8 + MIN_RECORD and expiry().held_past(v, now_ms) then
          ok, m = pcall(parse_held, seq, v)
        end
        if ok then
          expired[#expired + 1] = m.id
          expired[#expired + 1] = EXPIRED_AS[expiry().expire_held(m, member, now)]
        else
          redis.call('ZADD', k.leases, 'XX', lease_end(unbe7(v, 9)), claim or member)
          out[7 + j] = v:sub(9)
        end
      end
    end
    return out
  end
  -- The lost claim never ran (or took nothing): claim afresh under the same token base.
end

-- The first lease's deadline (ms), read once: it tells whether any lease expired, and the
-- reply's "when next" needs it too. nil: no lease.
local lease_head, lease_head_read = nil, false
local function first_lease()
  if not lease_head_read then
    local score = redis.call('ZRANGE', k.leases, '0', '0', 'WITHSCORES')[2]
    lease_head, lease_head_read = score and tonumber(score), true
  end
  return lease_head
end
local retried, buried = 0, {}
local function buried_as(id, err)
  buried[#buried + 1] = id
  buried[#buried + 1] = err
end
-- (A block: its locals end with it, and the EVALSHA form's function may hold 200.)
do
  local expired = {}
  if (first_lease() or math.huge) <= now_ms then
    expired = claim_leases.expire(now_ms, tonumber(ARGV[4]))
    -- What the reclaim leaves first is read again when needed.
    lease_head_read = false
  end
  for j, member in ipairs(expired) do
    local seq = member:sub(1, 6)
    local v = redis.call('HGET', k.held, seq)
    -- Parse before changing anything: a Lua error after a write would not undo the write.
    local ok, m = false, nil
    if v then
      ok, m = pcall(parse_held, seq, v)
    end
    if ok then
      redis.call('HDEL', k.held, seq)
      local outcome = retry_or_bury(m, 'lease expired', backoff_ms(m, nth_random(rnd, j)), now)
      if outcome == 'retry' then
        retried = retried + 1
      elseif outcome ~= 'superseded' then
        buried_as(m.id, EXPIRED_AS[outcome] or 'lease expired')
      end
    elseif v then
      local err = 'undecodable record of ' .. (#v - 8) .. ' bytes'
      buried_as(bury_raw(seq, v, err, now), err)
    end
  end
end
local control = redis.call('HMGET', k.control, 'paused', 'rate', 'burst', 'tokens', 'tokens_at', 'levels',
  'push', 'grouped', 'ttl_ms', 'deadlines', 'retain_ms', 'events', 'format', 'bucket_horizon_ms')
local prios = priorities(control[6])
events_known(control[12])
-- Messages due far ahead wait in buckets (buckets.lua) until a claim moves them.
local bucketed = redis.call('EXISTS', BUCKET_INDEX) == 1
if bucketed then
  buckets().known(control[13], control[14])
end

-- The due time (µs) of each pending set's first member once this call took from it (false:
-- the set is empty), so that saying when more comes reads it no second time. Nothing but a
-- take changes a set after the takes begin.
local heads = {}
local function earliest_pending()
  return earliest_due(prios, heads)
end

-- The reply when nothing is claimed: when to call again, not before `not_before` (µs).
local function nothing(not_before)
  -- When the next message comes due: a claim then takes it and, with a look-ahead, those
  -- that follow within it, so that at a steady rate one claim serves a look-ahead's worth.
  local next_us = earliest_pending()
  if control[8] then
    local G = groups()
    local rate_held = redis.call('ZRANGE', G.gk.wait, 0, 0, 'WITHSCORES')[2]
    -- (pairs: either may be nil)
    for _, at in pairs({ head_due(G.gk.delayed), tonumber(rate_held or '') }) do
      if next_us == nil or at < next_us then
        next_us = at
      end
    end
  end
  local lease = first_lease()
  if lease and (next_us == nil or lease * 1000 < next_us) then
    next_us = lease * 1000
  end
  -- The first bucket must be moved by then (past already: more is left to move).
  local move_at = bucketed and buckets().next_move_us()
  if move_at and (next_us == nil or move_at < next_us) then
    next_us = move_at
  end
  if next_us == nil then
    return { -1, 0, 0, now, retried, buried, acked }
  end
  return { math.max(next_us, not_before) - now, 0, 0, now, retried, buried, acked }
end

if control[1] or (control[7] ~= false) ~= (ARGV[7] == '1') then
  return { -1, 0, 0, now, retried, buried, acked }
end
-- What a move brings may be of priorities not in use before: `levels` is read again.
if bucketed and buckets().buckets_move(now) > 0 then
  prios = priorities(redis.call('HGET', k.control, 'levels'))
end
-- A rate limit is a token bucket of `burst` tokens refilled at `rate` per second by the
-- server's clock, one token per message claimed; with too few, nothing is claimed and the
-- consumer is told when the next token comes.
local rate, tokens = tonumber(control[2]), nil
local take = max
if rate then
  local burst = tonumber(control[3]) or 1
  local since = now - tonumber(control[5] or now)
  tokens = math.min(burst, tonumber(control[4] or burst) + since * rate / 1e6)
  if tokens < 1 then
    return nothing(now + math.ceil((1 - tokens) * 1e6 / rate))
  end
  take = math.min(max, math.floor(tokens))
end

local function bucket_of(rec)
  -- A record too short to hold a due time is buried below; it counts as on time.
  return #rec >= 7 and lateness_bucket(now - unbe7(rec, 1)) or 0
end

-- Counts the lateness of records run[i..j] into `late` (bucket -> deliveries). They are in due
-- order, so lateness only falls from i to j: a stretch that starts and ends in one bucket is
-- counted whole, and a claim computes a few buckets rather than one per message.
local function count_lateness(late, run, i, j)
  local bi, bj = bucket_of(run[i]), bucket_of(run[j])
  if bi == bj then
    late[bi] = (late[bi] or 0) + (j - i + 1)
  elseif j == i + 1 then
    late[bi] = (late[bi] or 0) + 1
    late[bj] = (late[bj] or 0) + 1
  else
    local mid = math.floor((i + j) / 2)
    count_lateness(late, run, i, mid)
    count_lateness(late, run, mid + 1, j)
  end
end

-- A claim reads a set's first READ_AHEAD + 1 members by rank: in a claim of a few messages,
-- that is all that is due and the first member that is not, whose due time the reply needs
-- (one command where a read of the due ones and one of the head were two). A claim of more
-- reads the rest by due time.
local READ_AHEAD = 4
-- True when pending member `rec` is due by `ahead` (now and the look-ahead), exactly as
-- ZRANGEBYLEX to due_bound(ahead) would find it (a record too short to hold a due time sorts
-- first: it is taken, and buried).
local function is_due(rec)
  return #rec < 7 or unbe7(rec, 1) <= ahead
end

-- Takes up to `wanted` (at least 1) due members of pending set `set`, its lowest. Returns them,
-- and the due time of the set's first member after them: false when none is left, nil when
-- not read.
local function take_from(set, wanted)
  local asked = math.min(wanted, READ_AHEAD) + 1
  local read = redis.call('ZRANGE', set, '0', string.format('%d', asked - 1))
  local got = {}
  while #got < wanted and #got < #read and is_due(read[#got + 1]) do
    got[#got + 1] = read[#got + 1]
  end
  local after = read[#got + 1]
  if after then
    after = #after < 7 and 0 or unbe7(after, 1)
  elseif #read < asked then
    after = false
  elseif #got < wanted then
    -- All that was read is due, and more is wanted: the rest that is due, by due time.
    local more = redis.call('ZRANGEBYLEX', set, '(' .. got[#got], due_bound(ahead), 'LIMIT', '0', string.format('%d', wanted - #got))
    local n = #got
    for i, rec in ipairs(more) do
      got[n + i] = rec
    end
  end
  if #got > 0 then
    -- The claimed messages are exactly the set's lowest members.
    redis.call('ZREMRANGEBYRANK', set, '0', string.format('%d', #got - 1))
  end
  return got, after
end

-- Takes up to `n` due messages without a group into `due`: highest priority first, from each
-- set its lowest members (due order, then send order). Returns how many it took.
local due, late = {}, {}
local function take_ungrouped(n)
  local before, kept = #due, {}
  for _, p in ipairs(prios) do
    local set = pending_key(p)
    local wanted = before + n - #due
    if wanted > 0 then
      local got, after = take_from(set, wanted)
      heads[set] = after
      local n = #due
      for i, rec in ipairs(got) do
        due[n + i] = rec
      end
      if #got > 0 then
        count_lateness(late, got, 1, #got)
      end
    end
    -- A priority whose set is gone leaves `levels`, so claims stop looking at it.
    local head = heads[set]
    if p == DEFAULT_PRIORITY or head or (head == nil and (wanted <= 0 or redis.call('EXISTS', set) == 1)) then
      kept[#kept + 1] = p
    end
  end
  if #kept < #prios then
    set_levels(kept)
    prios = kept
  end
  return #due - before
end

-- Takes up to `n` ready messages of group `g` into `due`: slot keepers always, the others
-- while the group has a free slot. Returns whether the group may be served again now. The
-- slots taken are counted in `busy_add` (by group, in `busy_order`), written once at the end.
local gready_taken, busy_add, busy_order = 0, {}, {}
local function count_busy(g, n)
  if not busy_add[g] then
    busy_add[g] = 0
    busy_order[#busy_order + 1] = g
  end
  busy_add[g] = busy_add[g] + n
end
local function take_grouped(g, n)
  local G = groups()
  if G.group_paused(g) then
    return false
  end
  -- A group's rate limit counts every message it is given, slot keepers too; a group with
  -- none left now waits out of the rotation for its next (gwait).
  local allowed = G.rate_allows(g, now)
  if allowed < 1 then
    G.rate_hold(g, G.rate_spend(g, 0, now))
    return false
  end
  n = math.min(n, allowed)
  local set = G.group_set(g)
  local limit = G.group_limit(g)
  local taken, new = 0, 0
  if not limit and allowed == math.huge then
    -- Nothing but its messages holds the group back: its lowest n, in one call. It stays in
    -- the rotation while its set holds more (a group left there empty could miss the wake-up
    -- of its next message: rotate_in would find it in).
    local popped = redis.call('ZPOPMIN', set, n)
    for i = 1, #popped, 2 do
      local member = popped[i]
      if member:byte(1) ~= 0 then
        new = new + 1
      end
      local rec = member:sub(2)
      due[#due + 1] = rec
      local b = bucket_of(rec)
      late[b] = (late[b] or 0) + 1
    end
    taken = #popped / 2
    gready_taken = gready_taken + taken
    if new > 0 then
      count_busy(g, new)
    end
    return taken == n and redis.call('EXISTS', set) == 1
  end
  local members = redis.call('ZRANGE', set, 0, n)
  local busy = limit and G.busy_of(g) + (busy_add[g] or 0) or 0
  for i = 1, math.min(n, #members) do
    if members[i]:byte(1) ~= 0 then
      if limit and busy + new >= limit then
        break
      end
      new = new + 1
    end
    taken = taken + 1
    local rec = members[i]:sub(2)
    due[#due + 1] = rec
    local b = bucket_of(rec)
    late[b] = (late[b] or 0) + 1
  end
  if taken > 0 then
    redis.call('ZREMRANGEBYRANK', set, 0, taken - 1)
    gready_taken = gready_taken + taken
    if new > 0 then
      count_busy(g, new)
    end
  end
  local following = members[taken + 1]
  local again = following ~= nil and (following:byte(1) == 0 or not limit or busy + new < limit)
  if taken > 0 and allowed ~= math.huge then
    local next_at = G.rate_spend(g, taken, now)
    if again and taken >= allowed then
      G.rate_hold(g, next_at)
      return false
    end
  end
  return again
end

-- True when a message without a group is due (within the look-ahead).
local function ungrouped_due()
  local earliest = earliest_pending()
  return earliest ~= nil and earliest <= ahead
end

if not control[8] then
  take_ungrouped(take)
else
  local G = groups()
  -- Groups take turns (groups.lua): each served group gives one message (an even share of
  -- the claim when every group in the rotation fits in it) and goes to the tail.
  G.promote(now)
  G.rate_release(now)
  if ungrouped_due() and not redis.call('ZSCORE', G.gk.rotation, G.UNGROUPED) then
    redis.call('ZADD', G.gk.rotation, G.rotation_tail(), G.UNGROUPED)
  end
  -- Each round serves the next groups in turn; a round that serves none and drops no
  -- group from the rotation ends the claim.
  for _ = 1, 2 * take + 2 do
    local want = take - #due
    if want <= 0 then
      break
    end
    local turn = redis.call('ZRANGE', G.gk.rotation, 0, want - 1)
    if #turn == 0 then
      break
    end
    local before, dropped, tail = #due, {}, G.rotation_tail()
    local back = {}
    -- When every group in the rotation fits in this claim, each gets an even share (times
    -- its weight) and its turn ends; otherwise a group gives what is left of its turn, its
    -- weight (1 unless set), over as many claims as that takes.
    local share = #turn < want and math.max(1, math.floor(want / #turn)) or nil
    for _, g in ipairs(turn) do
      local wanted = take - #due
      if wanted <= 0 then
        break
      end
      local weight = g == G.UNGROUPED and 1 or G.group_weight(g)
      local left = weight
      if weight > 1 and not share then
        left = tonumber(redis.call('HGET', G.gk.turn, g) or weight)
      end
      local n = math.min(share and share * weight or left, wanted)
      local again, before_g = nil, #due
      if g == G.UNGROUPED then
        again = take_ungrouped(n) > 0 and ungrouped_due()
      else
        again = take_grouped(g, n)
      end
      left = left - (#due - before_g)
      if again and weight > 1 and not share and left > 0 then
        -- Its turn goes on: it keeps its place at the head.
        redis.call('HSET', G.gk.turn, g, left)
      else
        if weight > 1 then
          redis.call('HDEL', G.gk.turn, g)
        end
        if again then
          back[#back + 1] = tail
          back[#back + 1] = g
          tail = tail + 1
        else
          dropped[#dropped + 1] = g
        end
      end
    end
    if #back > 0 then
      redis.call('ZADD', G.gk.rotation, 'XX', unpack(back))
    end
    if #dropped > 0 then
      redis.call('ZREM', G.gk.rotation, unpack(dropped))
    end
    if #due == before and #dropped == 0 then
      break
    end
  end
  if gready_taken > 0 then
    redis.call('HINCRBY', k.control, 'gready', -gready_taken)
  end
  G.add_counts(G.gk.busy, false, busy_order, busy_add)
end
-- Messages whose deadline came are never delivered: they expire here (expiry.lua), in due
-- order like the rest, and the claim goes on without them. Only a partition that was sent
-- a deadline (control field `deadlines`) or whose queue gives every message one looks.
local ttl = tonumber(control[9] or '')
if ttl or control[10] then
  local live = {}
  for _, rec in ipairs(due) do
    local deadline = #rec >= MIN_RECORD and expiry().deadline_of(rec, ttl)
    local ok, m = false, nil
    if deadline and deadline <= now_ms then
      ok, m = pcall(parse, rec)
    end
    if ok then
      local b = bucket_of(rec)
      late[b] = (late[b] or 1) - 1
      buried_as(m.id, EXPIRED_AS[expiry().expire(m, now)])
    else
      live[#live + 1] = rec
    end
  end
  due = live
end
local count = #due
if count == 0 then
  return nothing(now)
end
if rate then
  redis.call('HSET', k.control, 'tokens', string.format('%.6f', tokens - count),
    'tokens_at', string.format('%d', now))
end

local out = { 0, deadline, base, now, retried, buried, acked }
-- (A block: its locals end with it, and the EVALSHA form's function may hold 200.)
do
  -- Bulk arguments as strings: Lua would format a number argument for every element.
  local deadline_arg = string.format('%d', deadline)
  local unannounced = claim_leases.unannounced
  local held, leases, seqs = {}, {}, { be6(base) }
  -- Format 6: per place j of the claim, what its field in `claims` holds (ZERO_SLOT for a
  -- message leased alone: taken ahead, or not held); `shared`, the places under its lease.
  local places, shared = tonumber(control[13] or '1') >= 6 and {} or nil, {}
  -- A queue that retains notes when each message was first delivered (retention.lua).
  local retained = control[11] and retention()
  for j = 1, count do
    local rec = due[j]
    if retained and #rec >= MIN_RECORD then
      rec = retained.first_claim(rec, now_ms)
    end
    if #rec < MIN_RECORD then
      -- Too short to even name: kept as a dead letter, and this claim goes on without it.
      local pad = (rec .. string.rep('\0', 13)):sub(1, 13)
      local err = 'undecodable record of ' .. #rec .. ' bytes'
      buried_as(bury_raw(seq_of(pad), be6(base + j) .. '\0\0' .. rec, err, now), err)
      rec = false
      seqs[j + 1] = '\0\0\0\0\0\0'
      if places then
        places[j] = claim_leases.ZERO_SLOT
      end
    else
      -- (seq_of, be6 and unbe7 written out: this runs for every message claimed.)
      local seq = rec:sub(8, 13)
      local token = struct.pack('>I6', base + j)
      held[#held + 1] = seq
      held[#held + 1] = token .. struct.pack('>H', rec:byte(15) * 256 + rec:byte(16) + 1) .. rec
      -- (Read only when looking ahead: a claim of what is due gives all one deadline.)
      local due_later = ahead > now and struct.unpack('>I7', rec, 1) > now
      if places and not due_later then
        -- (Its seq and flags byte: the record's bytes 8-14, unless its extension area is a
        -- sealed payload's mark alone: claim_leases.unannounced.)
        local f = rec:byte(14)
        local u = unannounced[f]
        if u == nil then
          u = claim_leases.unannounced_of(f)
        end
        places[j] = u and claim_leases.place_announcing(rec, f, u) or rec:sub(8, 14)
        shared[#shared + 1] = j
      else
        leases[#leases + 1] = due_later and lease_end(unbe7(rec, 1)) or deadline_arg
        leases[#leases + 1] = seq .. token
        if places then
          places[j] = claim_leases.ZERO_SLOT
        end
      end
      seqs[j + 1] = seq
    end
    out[7 + j] = rec
  end
  if #held > 0 then
    add_history(now, 'd', #held / 2)
    for b, n in pairs(late) do
      add_history(now, 'l' .. b, n)
    end
    redis.call('HSET', k.held, unpack(held))
    if #shared > 1 then
      redis.call('HSET', k.claims, be6(base), u16(#shared) .. table.concat(places))
      leases[#leases + 1] = deadline_arg
      leases[#leases + 1] = be6(base)
    elseif #shared == 1 then
      -- One message due now: a lease of its own costs less than a claim's.
      leases[#leases + 1] = deadline_arg
      leases[#leases + 1] = seqs[shared[1] + 1] .. be6(base + shared[1])
    end
    redis.call('ZADD', k.leases, unpack(leases))
    if lease_head_read then
      lease_head = math.min(lease_head or deadline, deadline)
    end
    if events_on() then
      -- `held` alternates seq and held value (token, attempts, record): the value's bytes
      -- 7-21 are this delivery's attempts and the sort key.
      for j = 2, #held, 2 do
        local v = held[j]
        local flags = v:byte(22)
        event_packed('delivered', v:sub(7, 21), has(flags, F_ID) and id_of(v:sub(9), flags) or '')
      end
      flush_events()
    end
    -- Lets a repeat of this claim (its reply lost) find what it took. One key per consumer,
    -- overwritten by its next claim, gone with the lease.
    if ARGV[8] ~= '0' then
      redis.call('SET', KEYS[13], table.concat(seqs), 'PX', lease_ms)
    end
  end
end
-- Pass the wake-up on: another consumer can take what this call left behind (unless the rate
-- limit left it: then there are no tokens for it).
local next_due = count == max and take == max and earliest_pending()
if (next_due and next_due <= now)
    or (count == max and take == max and control[8] and redis.call('EXISTS', groups().gk.rotation) == 1) then
  wake()
end
-- Says when more comes, as a claim that found nothing would (0 if more is due already: it
-- took all it could, some expired, or the groups' rounds ended). Its consumer need not make
-- that claim, which would cost a call per message, and consumers that share its news (a
-- process's long-polls, the consumers' claim news) know that it took the last one due.
out[1] = nothing(now)[1]
return out
