-- buckets.lua: the far-future tier of pending messages (data format 5). Not a script of its
-- own: scripts.rs inserts it after expiry.lua, before pending.lua.
--
-- Why: a sorted set costs about 233 bytes per 124-byte record at ten million members, and
-- inserting into one that large runs at less than half the rate of a small one (cache
-- misses in its skiplist). A message due far ahead needs no order until shortly before it
-- is due, so it waits in a plain list instead (about 127 bytes a record, appended at a flat
-- rate), and moves into its pending set before it comes due.
--
-- Layout: a bucket is a LIST `b:<name>` under the partition's prefix, holding the records
-- (unordered) of ungrouped messages due in [start, start + BUCKET_MS); the ZSET `buckets`
-- scores each bucket's name by its start; the control field `bucketed` counts the records in
-- all buckets (stats.lua). A lookup by id scans one bucket, and a move takes whole buckets,
-- so each bucket is kept small:
-- * a bucket per start, named by it (`<start ms>`), of at most BUCKET_MAX records; in
--   format 5 what does not fit goes to the pending set at once;
-- * from format 6, what does not fit goes to the start's overflow buckets, one per
--   PART_SEQS sequence numbers (`<start ms>.<seq div PART_SEQS>`), each at most PART_SEQS
--   records by construction: a burst of one due time (a big batch sent at once) fills
--   buckets, not the pending set, while due times spread thin keep one bucket per start. A
--   lookup scans the start's bucket, then the one overflow bucket its sort key names.
--
-- The rule that keeps delivery on time: a message goes to a bucket only when its bucket
-- starts later than now + the horizon (control field `bucket_horizon_ms`, HORIZON_MS unless
-- set: tests make it small), and every claim first moves each bucket that starts by now +
-- the horizon (claim.lua), so a due message is always in a pending set when a claim looks.
-- A consumer with nothing to claim sleeps no later than the first bucket's start - the
-- horizon (next_move_us). Grouped messages never go to a bucket (groups.lua orders them).
-- Only a partition of format 5 or later gets buckets: an older delayq would not look there.

-- ZSET bucket start -> start: which buckets exist (claims look for it before anything else).
-- Per call (the partition's).
local BUCKET_INDEX

-- Made on first use, once (make_buckets; as groups.lua's); buckets() readies them for a
-- call. Per call: buckets_made, and the partition's data format and horizon (`format`, `horizon`:
-- read once per call, or told).
local buckets_made, format, horizon = nil, nil, nil
local buckets_helpers
local function make_buckets()
  local BUCKET_MS, BUCKET_MAX, HORIZON_MS = 100, 1000, 60000
  -- A claim moves whole buckets until it has moved this many records: the work of one call
  -- stays near a millisecond.
  local MOVE_MAX = 2000
  -- A run of more records than this for one bucket checks the bucket's room first.
  local LONG_RUN = 16
  local BUCKET_FORMAT, PARTS_FORMAT, PART_SEQS = 5, 6, 1024

  -- The start (ms) of the bucket of a message due at `due` (µs).
  local function bucket_start(due)
    local ms = math.floor(due / 1000)
    return ms - ms % BUCKET_MS
  end

  -- The bucket named `name` (an index member).
  local function bucket_key(name)
    return PART_PREFIX .. 'b:' .. name
  end

  -- The name of a format-5 bucket (one per start).
  local function whole_name(start)
    return string.format('%d', start)
  end

  -- The name of the format-6 bucket of the record with sort key `key` (its first 13 bytes).
  local function part_name(start, key)
    return string.format('%d.%d', start, math.floor(unbe6(key, 8) / PART_SEQS))
  end

  -- The horizon (ms) from the control field's value (nil: the default).
  local function horizon_of(value)
    return tonumber(value or '') or HORIZON_MS
  end

  -- The partition's data format and horizon, read once per call (or told: known).
  local function known(format_value, horizon_value)
    format, horizon = tonumber(format_value or '1'), horizon_of(horizon_value)
  end
  local function settings()
    if not format then
      local c = redis.call('HMGET', k.control, 'format', 'bucket_horizon_ms')
      known(c[1], c[2])
    end
    return format, horizon
  end

  -- Whether a message due at `due` (µs) goes to a bucket now (µs).
  local function far_enough(due, now)
    local f, h = settings()
    return f >= BUCKET_FORMAT and bucket_start(due) > math.floor(now / 1000) + h
  end

  -- The priority of a record: priority_of its sequence number's level bits, the top 4 bits
  -- of byte 8, read without struct so that it cannot fail half-way through a move.
  local function priority_of_record(rec)
    return priority_of(math.floor((rec:byte(8) or 0) / 16) * LEVEL)
  end

  -- Adds records straight to their pending sets (those a bucket had no room for, or moves).
  local function add_to_sets(recs)
    local by_set, order = {}, {}
    for _, rec in ipairs(recs) do
      local p = priority_of_record(rec)
      local set = pending_key(p)
      if not by_set[set] then
        by_set[set] = {}
        order[#order + 1] = set
        use_priority(p)
      end
      local list = by_set[set]
      list[#list + 1] = '0'
      list[#list + 1] = rec
    end
    for _, set in ipairs(order) do
      local list = by_set[set]
      -- In slices: unpack has a limit on its results.
      for i = 1, #list, 4000 do
        redis.call('ZADD', set, unpack(list, i, math.min(i + 3999, #list)))
      end
    end
  end

  -- Appends `recs[from..to]` (records of messages due in the bucket that starts at `start`)
  -- to their bucket; those it has no room for go to its overflow buckets (format 6) or their
  -- pending sets (format 5). Returns how many went into buckets, whether a bucket is new,
  -- and whether the start's bucket is full and sends the rest to the sets (format 5 only).
  -- The caller adds the count to `bucketed` (buckets_counted) once per call.
  local function bucket_append(start, recs, from, to)
    if settings() >= PARTS_FORMAT then
      -- The start's bucket first, as far as it has room; the rest by overflow bucket, in the
      -- order first met, each one's records pushed at once.
      local whole = whole_name(start)
      local upto = math.min(to, from - 1 + math.max(BUCKET_MAX - redis.call('LLEN', bucket_key(whole)), 0))
      local parts, order = {}, {}
      if upto >= from then
        parts[whole] = { unpack(recs, from, upto) }
        order[1] = whole
      end
      for i = upto + 1, to do
        local name = part_name(start, recs[i])
        if not parts[name] then
          parts[name] = {}
          order[#order + 1] = name
        end
        local list = parts[name]
        list[#list + 1] = recs[i]
      end
      local fresh = false
      for _, name in ipairs(order) do
        local list = parts[name]
        if redis.call('RPUSH', bucket_key(name), unpack(list)) == #list then
          redis.call('ZADD', BUCKET_INDEX, start, name)
          fresh = true
        end
      end
      return to - from + 1, fresh, false
    end
    local key = bucket_key(whole_name(start))
    local n = to - from + 1
    if n > LONG_RUN then
      -- A long run (a burst of one due time) may not fit: what does is pushed, the rest
      -- goes to the sets, rather than pushed and trimmed again.
      local room = BUCKET_MAX - redis.call('LLEN', key)
      if room < n then
        add_to_sets({ unpack(recs, from + math.max(room, 0), to) })
        if room <= 0 then
          return 0, false, true
        end
        to = from + room - 1
      end
    end
    local pushed = to - from + 1
    local len = redis.call('RPUSH', key, unpack(recs, from, to))
    local over = len - BUCKET_MAX
    if over > 0 then
      -- The bucket held at most BUCKET_MAX before, so the records over are the last pushed.
      redis.call('LTRIM', key, 0, BUCKET_MAX - 1)
      add_to_sets({ unpack(recs, to - over + 1, to) })
    end
    local fresh = len == pushed
    if fresh then
      redis.call('ZADD', BUCKET_INDEX, start, whole_name(start))
    end
    return pushed - math.max(over, 0), fresh, len >= BUCKET_MAX
  end

  local function buckets_counted(n)
    if n ~= 0 then
      redis.call('HINCRBY', k.control, 'bucketed', n)
    end
  end

  -- The start (ms) of the first bucket, or nil.
  local function first_bucket()
    local first = redis.call('ZRANGE', BUCKET_INDEX, 0, 0, 'WITHSCORES')[2]
    return first and tonumber(first)
  end

  -- When (µs) a claim must run to move the first bucket in time, or nil when there is none.
  local function next_move_us()
    local first = first_bucket()
    local _, h = settings()
    return first and (first - h) * 1000
  end

  -- Puts runs of records into their buckets, each run `{ start, recs, from, to }`: the
  -- records recs[from..to], all due in the bucket that starts at `start` (far enough ahead
  -- when they were found so: a run whose bucket comes within the horizon meanwhile goes to
  -- the pending sets), and counts them. Returns whether a consumer must be woken (a new first
  -- bucket may come due to move before whatever a waiting consumer sleeps on), and the
  -- starts of the buckets now full.
  local function put_runs(runs, now)
    local _, h = settings()
    local first, wake_needed, added, full = first_bucket(), false, 0, {}
    local horizon_end = math.floor(now / 1000) + h
    for _, run in ipairs(runs) do
      local start, recs, from, to = run[1], run[2], run[3], run[4]
      if start > horizon_end then
        local n, fresh, is_full = bucket_append(start, recs, from, to)
        added = added + n
        wake_needed = wake_needed or (fresh and (first == nil or start < first))
        if is_full then
          full[#full + 1] = start
        end
      else
        add_to_sets({ unpack(recs, from, to) })
        wake_needed = true
      end
    end
    buckets_counted(added)
    return wake_needed, full
  end

  -- Buckets the records `recs` (due far enough ahead, far_enough): put_runs, one run per
  -- bucket.
  local function put_in_buckets(recs, now)
    local by_start, order = {}, {}
    for _, rec in ipairs(recs) do
      local start = bucket_start(unbe7(rec, 1))
      if not by_start[start] then
        by_start[start] = {}
        order[#order + 1] = start
      end
      local list = by_start[start]
      list[#list + 1] = rec
    end
    local runs = {}
    for _, start in ipairs(order) do
      runs[#runs + 1] = { start, by_start[start], 1, #by_start[start] }
    end
    return put_runs(runs, now)
  end

  -- The record with sort key `key` in its bucket, and the bucket's name; nil if not there.
  -- The start's bucket is looked in first, then (format 6) the overflow bucket of its part.
  local function bucket_find(key)
    local start = bucket_start(unbe7(key, 1))
    local names = { whole_name(start) }
    if settings() >= PARTS_FORMAT then
      names[2] = part_name(start, key)
    end
    for _, name in ipairs(names) do
      for _, rec in ipairs(redis.call('LRANGE', bucket_key(name), 0, -1)) do
        if rec:sub(1, 13) == key then
          return rec, name
        end
      end
    end
    return nil
  end

  -- Takes record `rec` out of the bucket named `name`.
  local function bucket_remove(rec, name)
    local key = bucket_key(name)
    redis.call('LREM', key, 1, rec)
    buckets_counted(-1)
    if redis.call('EXISTS', key) == 0 then
      redis.call('ZREM', BUCKET_INDEX, name)
    end
  end

  -- Moves every bucket that starts by now + the horizon into the pending sets, whole buckets
  -- until about MOVE_MAX records moved (the next claim moves the rest: next_move_us is then
  -- already past). Returns how many records moved.
  local function buckets_move(now)
    local _, h = settings()
    local names = redis.call('ZRANGEBYSCORE', BUCKET_INDEX, '-inf', math.floor(now / 1000) + h,
      'LIMIT', 0, MOVE_MAX)
    if #names == 0 then
      return 0
    end
    local recs, done, keys = {}, {}, {}
    for _, name in ipairs(names) do
      if #recs >= MOVE_MAX then
        break
      end
      local key = bucket_key(name)
      for _, rec in ipairs(redis.call('LRANGE', key, 0, -1)) do
        recs[#recs + 1] = rec
      end
      keys[#keys + 1] = key
      done[#done + 1] = name
    end
    -- Into the sets before the buckets go: nothing is ever only in a deleted bucket.
    add_to_sets(recs)
    redis.call('DEL', unpack(keys))
    redis.call('ZREM', BUCKET_INDEX, unpack(done))
    buckets_counted(-#recs)
    return #recs
  end

  -- The buckets that may hold messages due from `from` (µs) to `to` (ms, or '+inf'), in
  -- order, read whole until `take(rec)` accepted `enough` records (the bucket that reached it
  -- is finished). A bucket holds at least one record, so at most `enough` + 1 are read.
  -- With `more` (optional), a bucket is read only while `more()` says so. Returns the start
  -- (ms) of the first bucket that a stop by `more` left unread, if one did.
  local function buckets_read(from, to, enough, take, more)
    local read = 0
    local named = redis.call('ZRANGEBYSCORE', BUCKET_INDEX, bucket_start(from), to, 'WITHSCORES',
      'LIMIT', 0, enough + 1)
    for i = 1, #named, 2 do
      if read >= enough then
        return
      end
      if more and not more() then
        return tonumber(named[i + 1])
      end
      for _, rec in ipairs(redis.call('LRANGE', bucket_key(named[i]), 0, -1)) do
        if take(rec) then
          read = read + 1
        end
      end
    end
  end

  -- How many bucketed messages there are, how many are due by now (µs), and the earliest due
  -- time (µs) among them (nil when none is due). Buckets that started by now hold messages
  -- that no claim has moved yet (none ran); the first STATS_BUCKETS of them are counted
  -- (over half an hour of buckets at 100 ms), a bound on the work of a call.
  local STATS_BUCKETS = 20000
  local function buckets_due(now)
    local total = tonumber(redis.call('HGET', k.control, 'bucketed') or '0')
    if total <= 0 then
      return 0, 0, nil
    end
    local now_ms = math.floor(now / 1000)
    local named = redis.call('ZRANGEBYSCORE', BUCKET_INDEX, '-inf', now_ms, 'WITHSCORES', 'LIMIT', 0,
      STATS_BUCKETS)
    local due, earliest = 0, nil
    for i = 1, #named, 2 do
      local s = tonumber(named[i + 1])
      local key = bucket_key(named[i])
      if i == 1 or s + BUCKET_MS > now_ms then
        -- The first (for the earliest due) and the one still open: read record by record.
        for _, rec in ipairs(redis.call('LRANGE', key, 0, -1)) do
          local d = unbe7(rec, 1)
          if d <= now then
            due = due + 1
            earliest = math.min(earliest or d, d)
          end
        end
      else
        due = due + redis.call('LLEN', key)
      end
    end
    return total, due, earliest
  end

  buckets_helpers = {
    bucket_start = bucket_start,
    far_enough = far_enough,
    settings = settings,
    known = known,
    add_to_sets = add_to_sets,
    put_in_buckets = put_in_buckets,
    put_runs = put_runs,
    bucket_find = bucket_find,
    bucket_remove = bucket_remove,
    buckets_move = buckets_move,
    next_move_us = next_move_us,
    buckets_read = buckets_read,
    buckets_due = buckets_due,
  }
end

local function buckets()
  if not buckets_made then
    if not buckets_helpers then
      make_buckets()
    end
    format, horizon = nil, nil
    buckets_made = buckets_helpers
  end
  return buckets_made
end
