-- groups.lua: messages with a group (data format 3): where they wait, and whose turn a claim
-- serves. Not a script of its own: scripts.rs inserts it after prelude.lua.
--
-- A message's group is field 1 of its record's extension area (`m.group`, prelude.lua). A
-- group lives in one partition (the hash of its name picks it, the send handle), in these keys
-- under the partition's hash tag:
--   gdelayed   ZSET, all scores 0, members whole records: the grouped messages not yet due
--              (sent with a delay, waiting for a retry, rescheduled). A claim moves the due
--              ones into their groups' sets first (`promote`).
--   g:<group>  ZSET, all scores 0: the group's ready messages, each a rank byte then the
--              record. Rank 0 is a message that keeps its group's slot (a retry, a released
--              message), else 10 - priority; so a claim takes a slot keeper first, then
--              higher priorities, then due order, then send order.
--   groups     ZSET group -> turn: the rotation, the groups a claim may serve now (ready
--              messages and a free slot, or a slot keeper at their head). A claim serves the
--              lowest turns, one message each, and puts each served group back at the tail,
--              so a group waits at most one turn of the others however long its backlog.
--   gbusy      HASH group -> slots taken: its messages in flight, and its retries waiting
--              (a retry keeps its group's slot, so a group of concurrency 1 stays in order).
--   gkeep      HASH seq bytes -> '1': the messages in gdelayed that keep their group's slot.
--   gsize      ZSET group -> its messages, pending and in flight: which groups exist, and
--              the largest first.
--   gretry     HASH group -> its slot keepers waiting in gdelayed (for a group's counts).
--   gconf      HASH group -> its own settings, 'l=<limit>,w=<weight>,p=1,r=<rate>,b=<burst>'
--              (any of them): a concurrency in place of the queue's, a weight (messages
--              per turn), paused, a rate limit in place of the queue's group rate limit.
--   gtat       ZSET group -> µs: a rate-limited group's theoretical arrival time (GCRA, the
--              token bucket kept as one time): it may be given `burst` messages at once,
--              one more each 1/rate s, and a message whenever tat <= now + (burst - 1)/rate.
--              An entry in the past says nothing (a full bucket), so claims trim them.
--   gwait      ZSET group -> µs: groups with ready work held out of the rotation until
--              their rate limit gives them their next message then.
--   gturn      HASH group -> what is left of the turn of a group of weight over 1 that is
--              at the head of the rotation: it stays there until it has given its weight.
-- Control fields: `grouped` ('1' once a grouped message was sent here: claims then use the
-- rotation), `gready` (messages in the groups' sets), `gconc` (the queue's group concurrency:
-- at most that many messages of one group in flight; none: no limit), `gconf` ('1' once a
-- group has settings of its own: only then are they looked up), `grate` (the rate limit of
-- each group, '<per second>/<burst>', unless a group has its own).
-- Every grouped message that is pending or in flight has an index entry, id -> sort key ..
-- group, so that a lookup by id (generated or not) knows where it waits.
-- On a partition with groups the messages without one take turns as one more group, named
-- '' (no group has an empty name).

-- The helpers are made on first use (make_groups), once: the Functions library keeps them
-- from then on; a script run by EVALSHA makes them again in each call that uses them (see
-- call_state.lua). groups() readies them for a call: a call on a partition without groups
-- pays nothing for them. Per call: groups_made; the partition's group keys (gk); the queue's group settings and each
-- group's own, read once a call (queue_group_conf, group_conf_cache).
local groups_made, gk, queue_group_conf, group_conf_cache = nil, nil, nil, nil
local groups_helpers
local function make_groups()
  local UNGROUPED = ''
  local KEEPER_RANK = '\0'
  -- How many due grouped messages one claim moves from gdelayed at most: a claim's work stays
  -- bounded; the rest move at the next.
  local PROMOTE_MAX = 1000

  local function group_set(g)
    return PART_PREFIX .. 'g:' .. g
  end

  -- The rank byte of a ready message of sequence number `seq` that keeps no slot.
  local function rank_of(seq)
    return string.char(10 - priority_of(seq))
  end

  -- The queue's group concurrency (false: no limit), whether any group has settings of its
  -- own, and the queue's rate limit of each group (rate false: none), read once per call.
  local function group_defaults()
    if queue_group_conf == nil then
      local c = redis.call('HMGET', k.control, 'gconc', 'gconf', 'grate')
      local rate, burst = (c[3] or ''):match('^(%d+)/(%d+)$')
      queue_group_conf = { limit = tonumber(c[1] or '') or false, own = c[2] ~= false,
        rate = tonumber(rate or '') or false, burst = tonumber(burst or '') or 1 }
    end
    return queue_group_conf
  end

  -- Group `g`'s own settings from its gconf value `text`: { l = limit, w = weight, p = 1 }.
  local function parse_group_conf(text)
    local conf = {}
    for name, value in (text or ''):gmatch('(%a)=(%d+)') do
      conf[name] = tonumber(value)
    end
    return conf
  end

  -- Group `g`'s own settings, read once per call.
  local function group_conf(g)
    if not group_defaults().own then
      return {}
    end
    local conf = group_conf_cache[g]
    if conf == nil then
      conf = parse_group_conf(redis.call('HGET', gk.conf, g))
      group_conf_cache[g] = conf
    end
    return conf
  end

  -- At most how many messages of group `g` may be in flight (false: no limit).
  local function group_limit(g)
    return group_conf(g).l or group_defaults().limit
  end

  local function group_paused(g)
    return group_conf(g).p == 1
  end

  -- How many messages group `g` gives per turn.
  local function group_weight(g)
    return group_conf(g).w or 1
  end

  -- Group `g`'s rate limit: messages per second and burst; or false.
  local function group_rate(g)
    local conf = group_conf(g)
    if conf.r then
      return conf.r, conf.b or 1
    end
    local d = group_defaults()
    return d.rate, d.burst
  end

  -- How many messages group `g` may be given at `now` (µs) by its rate limit (math.huge:
  -- none).
  local function rate_allows(g, now)
    local rate, burst = group_rate(g)
    if not rate then
      return math.huge
    end
    local interval = 1e6 / rate
    local tat = math.max(tonumber(redis.call('ZSCORE', gk.tat, g) or '0'), now)
    return math.floor((now - tat) / interval + burst + 1e-9)
  end

  -- Counts `n` messages given to rate-limited group `g` at `now`. Returns when (µs) it may be
  -- given its next one.
  local function rate_spend(g, n, now)
    local rate, burst = group_rate(g)
    local interval = 1e6 / rate
    local tat = math.max(tonumber(redis.call('ZSCORE', gk.tat, g) or '0'), now) + n * interval
    redis.call('ZADD', gk.tat, string.format('%d', math.ceil(tat)), g)
    return math.ceil(tat - (burst - 1) * interval)
  end

  -- Holds group `g` out of the rotation until `at` (µs), when its rate limit gives it its
  -- next message.
  local function rate_hold(g, at)
    redis.call('ZADD', gk.wait, string.format('%d', at), g)
  end

  local function busy_of(g)
    return tonumber(redis.call('HGET', gk.busy, g) or '0')
  end

  -- The turn after the rotation's last.
  local function rotation_tail()
    local last = redis.call('ZRANGE', gk.rotation, -1, -1, 'WITHSCORES')[2]
    if last then
      return tonumber(last) + 1
    end
    return 0
  end

  -- Puts group `g` at the tail of the rotation if it is not in it and a claim may serve it:
  -- it has a ready message, and a free slot or a slot keeper at its head. True when it went
  -- in (a waiting consumer has work).
  local function rotate_in(g)
    if redis.call('ZSCORE', gk.rotation, g) then
      return false
    end
    local head = redis.call('ZRANGE', group_set(g), 0, 0)[1]
    if not head or group_paused(g) then
      return false
    end
    local limit = group_limit(g)
    if head:byte(1) ~= 0 and limit and busy_of(g) >= limit then
      return false
    end
    if group_rate(g) and redis.call('ZSCORE', gk.wait, g) then
      return false
    end
    redis.call('ZADD', gk.rotation, rotation_tail(), g)
    return true
  end

  -- Lets the groups whose rate limit gives them a message by `now` back into the rotation,
  -- and forgets the arrival times that no longer hold anything back.
  local function rate_release(now)
    local bound = string.format('%d', now)
    local due = redis.call('ZRANGEBYSCORE', gk.wait, '-inf', bound, 'LIMIT', 0, PROMOTE_MAX)
    if #due > 0 then
      redis.call('ZREM', gk.wait, unpack(due))
      for _, g in ipairs(due) do
        rotate_in(g)
      end
    end
    redis.call('ZREMRANGEBYSCORE', gk.tat, '-inf', bound)
  end

  -- Whether only the presence of ready messages decides if group `g` may be served: no
  -- pause, no concurrency limit and no rate limit hold it back.
  local function ungated(g)
    return not group_paused(g) and not group_limit(g) and not group_rate(g)
  end

  -- Puts the groups of `list`, each just given a ready message, at the tail of the rotation
  -- if not in it: the ungated ones in one call. True when any went in.
  local function rotate_in_all(list)
    local woke, plain = false, {}
    for _, g in ipairs(list) do
      if ungated(g) then
        plain[#plain + 1] = g
      else
        woke = rotate_in(g) or woke
      end
    end
    if #plain > 0 then
      local args, tail = {}, rotation_tail()
      for i, g in ipairs(plain) do
        args[2 * i - 1] = tail + i - 1
        args[2 * i] = g
      end
      woke = redis.call('ZADD', gk.rotation, 'NX', unpack(args)) > 0 or woke
    end
    return woke
  end

  -- Adds `deltas[g]` to the count of each group g of `order` in `key`, a ZSET (`zset`) or a
  -- HASH of counts: three calls however many groups. A count that falls to 0 goes.
  local function add_counts(key, zset, order, deltas)
    if #order == 0 then
      return
    end
    local old = redis.call(zset and 'ZMSCORE' or 'HMGET', key, unpack(order))
    local put, gone = {}, {}
    for i, g in ipairs(order) do
      local n = tonumber(old[i] or '0') + deltas[g]
      if n > 0 then
        put[#put + 1] = zset and n or g
        put[#put + 1] = zset and g or n
      else
        gone[#gone + 1] = g
      end
    end
    if #put > 0 then
      redis.call(zset and 'ZADD' or 'HSET', key, unpack(put))
    end
    if #gone > 0 then
      redis.call(zset and 'ZREM' or 'HDEL', key, unpack(gone))
    end
  end

  -- Counts `n` messages into (positive) or out of (negative) group `g`.
  local function group_size(g, n)
    add_counts(gk.size, true, { g }, { [g] = n })
  end

  -- Puts parsed grouped message `m` pending at `due` (µs), `now` being the server's time: into
  -- its group's set when due, else into gdelayed. `keep`: it keeps its group's slot. True when
  -- a waiting consumer must be woken.
  local function put_grouped(m, due, now, keep)
    m.due = due
    local rec = encode(m)
    redis.call('HSET', k.index, m.id, sort_key(m) .. m.group)
    if due <= now then
      redis.call('ZADD', group_set(m.group), 0, (keep and KEEPER_RANK or rank_of(m.seq)) .. rec)
      redis.call('HINCRBY', k.control, 'gready', 1)
      return rotate_in(m.group)
    end
    local old_head = head_due(gk.delayed)
    redis.call('ZADD', gk.delayed, 0, rec)
    if keep then
      redis.call('HSET', gk.keep, be6(m.seq), '1')
      redis.call('HINCRBY', gk.retry, m.group, 1)
    end
    return wakes(due, old_head, now)
  end

  -- One of group `g`'s slot keepers left gdelayed.
  local function retry_done(g)
    if redis.call('HINCRBY', gk.retry, g, -1) <= 0 then
      redis.call('HDEL', gk.retry, g)
    end
  end

  -- Moves the grouped messages due by `now` from gdelayed into their groups' sets (at most
  -- PROMOTE_MAX), and lets their groups into the rotation.
  local function promote(now)
    local due = redis.call('ZRANGEBYLEX', gk.delayed, '-', due_bound(now), 'LIMIT', 0, PROMOTE_MAX)
    if #due == 0 then
      return
    end
    redis.call('ZREMRANGEBYLEX', gk.delayed, '-', '[' .. due[#due])
    local touched, seen, ready = {}, {}, 0
    for _, rec in ipairs(due) do
      local ok, m = pcall(parse, rec)
      if ok and m.group then
        local keep = redis.call('HDEL', gk.keep, rec:sub(8, 13)) == 1
        if keep then
          retry_done(m.group)
        end
        redis.call('ZADD', group_set(m.group), 0, (keep and KEEPER_RANK or rank_of(m.seq)) .. rec)
        ready = ready + 1
        if not seen[m.group] then
          seen[m.group] = true
          touched[#touched + 1] = m.group
        end
      else
        -- Not a grouped record: with the ungrouped ones a claim takes it (and buries it there
        -- if it cannot be read), so it is never stuck here.
        redis.call('ZADD', k.pending, 0, rec)
      end
    end
    redis.call('HINCRBY', k.control, 'gready', ready)
    rotate_in_all(touched)
  end

  -- The pending grouped message `id` of group `g` (sort key `key`), parsed, with `member`,
  -- `set` and `keep` (whether it keeps its group's slot) set; or nil.
  local function find_grouped(id, key, g)
    local seq = unbe6(key, 8)
    local upper = key:sub(1, 7) .. be6(seq + 1)
    local hit = redis.call('ZRANGEBYLEX', gk.delayed, '[' .. key, '(' .. upper, 'LIMIT', 0, 1)[1]
    if hit then
      local m = parse(hit)
      if m.id == id then
        m.member, m.set = hit, gk.delayed
        m.keep = redis.call('HEXISTS', gk.keep, key:sub(8, 13)) == 1
        return m
      end
    end
    for _, rank in ipairs({ KEEPER_RANK, rank_of(seq) }) do
      local set = group_set(g)
      hit = redis.call('ZRANGEBYLEX', set, '[' .. rank .. key, '(' .. rank .. upper, 'LIMIT', 0, 1)[1]
      if hit then
        local m = parse(hit:sub(2))
        if m.id == id then
          m.member, m.set, m.keep, m.ready = hit, set, rank == KEEPER_RANK, true
          return m
        end
      end
    end
    return nil
  end

  -- Takes grouped message `m` (from find_grouped) out of where it waits, index entry and all;
  -- its slot and its count in the group are the caller's.
  local function remove_grouped(m)
    redis.call('ZREM', m.set, m.member)
    redis.call('HDEL', k.index, m.id)
    if m.ready then
      redis.call('HINCRBY', k.control, 'gready', -1)
    elseif m.keep then
      redis.call('HDEL', gk.keep, be6(m.seq))
      retry_done(m.group)
    end
  end

  -- Grouped messages gone for good (acked, dead, cancelled): `gone` lists { id, group }
  -- pairs, and `held` says whether each held a slot of its group (in flight, or a slot
  -- keeper). Their index entries go in one call (unless `superseded`: their ids belong to
  -- newer messages, send.lua's upsert), and each group's count and slots change once
  -- however many of its messages went. True when a consumer must be woken.
  local function groups_leave(gone, held, superseded)
    local ids, counts, order = {}, {}, {}
    for _, m in ipairs(gone) do
      ids[#ids + 1] = m[1]
      if not counts[m[2]] then
        counts[m[2]] = 0
        order[#order + 1] = m[2]
      end
      counts[m[2]] = counts[m[2]] + 1
    end
    if #ids > 0 and not superseded then
      redis.call('HDEL', k.index, unpack(ids))
    end
    local woke, deltas = false, {}
    for _, g in ipairs(order) do
      deltas[g] = -counts[g]
    end
    add_counts(gk.size, true, order, deltas)
    if held then
      -- Their slots are free; only a limit keeps a group with ready messages out of the
      -- rotation (an empty set leaves it, and the next message put in lets it in again).
      add_counts(gk.busy, false, order, deltas)
      for _, g in ipairs(order) do
        if group_limit(g) then
          woke = rotate_in(g) or woke
        end
      end
    end
    return woke
  end

  -- Forgets the settings this call has read of group `g` and of the queue (they changed).
  local function forget_conf(g)
    group_conf_cache[g] = nil
    queue_group_conf = nil
  end

  groups_helpers = {
    UNGROUPED = UNGROUPED,
    KEEPER_RANK = KEEPER_RANK,
    group_set = group_set,
    rank_of = rank_of,
    parse_group_conf = parse_group_conf,
    group_limit = group_limit,
    group_paused = group_paused,
    group_weight = group_weight,
    busy_of = busy_of,
    rate_allows = rate_allows,
    rate_spend = rate_spend,
    rate_hold = rate_hold,
    rate_release = rate_release,
    rotation_tail = rotation_tail,
    rotate_in = rotate_in,
    rotate_in_all = rotate_in_all,
    add_counts = add_counts,
    group_size = group_size,
    put_grouped = put_grouped,
    promote = promote,
    find_grouped = find_grouped,
    remove_grouped = remove_grouped,
    groups_leave = groups_leave,
    forget_conf = forget_conf,
  }
end

local function groups()
  if not groups_made then
    if not groups_helpers then
      make_groups()
    end
    gk = {
      delayed = PART_PREFIX .. 'gdelayed', rotation = PART_PREFIX .. 'groups',
      busy = PART_PREFIX .. 'gbusy', keep = PART_PREFIX .. 'gkeep', size = PART_PREFIX .. 'gsize',
      retry = PART_PREFIX .. 'gretry', conf = PART_PREFIX .. 'gconf', turn = PART_PREFIX .. 'gturn',
      tat = PART_PREFIX .. 'gtat', wait = PART_PREFIX .. 'gwait',
    }
    queue_group_conf, group_conf_cache = nil, {}
    groups_helpers.gk = gk
    groups_made = groups_helpers
  end
  return groups_made
end
