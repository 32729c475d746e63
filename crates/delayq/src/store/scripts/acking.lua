-- acking.lua: completing deliveries (the message is gone for good), for ack.lua and for a
-- claim that carries the acks of its consumer's worker (claim.lua). Not a script of its own:
-- scripts.rs places it after pending.lua.

-- Acks the deliveries named by args[from..]: per delivery a triple: lease member (seq .. token),
-- id, '1' if the id is explicit (the id and the flag come from the client's receipt: the flag
-- must agree with the held record, a caller id with the index; a generated id is read from the
-- record instead). `now`: the call's time, µs.
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired) or a receipt that
-- does not match the message it holds; nothing changed for a 0.
local function ack_leases(args, from, now)
  local now_ms = to_ms(now)
  local members = {}
  for i = from, #args, 3 do
    members[#members + 1] = args[i]
  end
  -- Each delivery's lease: its claim's (data format 6: each claim named read once, its
  -- lease and its field; `flags`, per delivery held so, the flags byte its place keeps, so
  -- that its record need not be read) or its own (one ZMSCORE for all; a stale token's
  -- member is simply not there). A batch looks for claims first, as a claim's deliveries are
  -- acked together; a single ack for its own lease first.
  local deadlines, claims, bases, place, base_of, flags = {}, {}, {}, {}, {}, {}
  local function claimed(which)
    local named = {}
    for _, j in ipairs(which) do
      local member = members[j]
      if #member == 12 then
        local base, at = claim_leases.of(member:sub(7, 12))
        if at > 0 then
          place[j], base_of[j] = at, base
          named[#named + 1] = j
          if not claims[base] then
            claims[base] = { js = {}, named = {} }
            bases[#bases + 1] = base
          end
        end
      end
    end
    if #named == 0 then
      return
    end
    local fields = redis.call('HMGET', k.claims, unpack(bases))
    local ends = redis.call('ZMSCORE', k.leases, unpack(bases))
    for n, base in ipairs(bases) do
      claims[base].slots = fields[n] or nil
      claims[base].deadline = tonumber(ends[n])
    end
    for _, j in ipairs(named) do
      local claim, at = claims[base_of[j]], place[j]
      if claim.slots and not claim.named[at] and (claim.deadline or 0) > now_ms then
        local held_seq, f = claim_leases.slot(claim.slots, at)
        if held_seq == members[j]:sub(1, 6) then
          claim.named[at] = true
          flags[j], deadlines[j] = f, claim.deadline
        end
      end
    end
  end
  local function owned(which)
    local listed = {}
    for i, j in ipairs(which) do
      listed[i] = members[j]
    end
    for i, d in ipairs(redis.call('ZMSCORE', k.leases, unpack(listed))) do
      deadlines[which[i]] = tonumber(d)
    end
  end
  local all_j, rest = {}, {}
  for j = 1, #members do
    all_j[j] = j
  end
  if #members > 1 then
    claimed(all_j)
    for j = 1, #members do
      if not flags[j] then
        rest[#rest + 1] = j
      end
    end
    if #rest > 0 then
      owned(rest)
    end
  else
    owned(all_j)
    if not deadlines[1] then
      claimed(all_j)
    end
  end
  local live, live_seqs = {}, {}
  for j, member in ipairs(members) do
    local deadline = deadlines[j]
    if deadline and deadline > now_ms then
      live[#live + 1] = j
      live_seqs[#live_seqs + 1] = member:sub(1, 6)
    end
  end
  -- And one for the held records of the live deliveries that need them: what a lease of its
  -- own holds is named by its record, as is a message with a caller id or an extension area,
  -- and every one when errors or events need ids.
  local any_errors = redis.call('HLEN', k.errors) > 0
  local all = any_errors or (next(flags) ~= nil and events_on())
  local need, plain = {}, claim_leases.plain
  for n, j in ipairs(live) do
    local f = flags[j]
    if all or not f or not plain(f) then
      need[#need + 1] = n
    end
  end
  local held = {}
  if #need == #live and #live > 0 then
    held = redis.call('HMGET', k.held, unpack(live_seqs))
  elseif #need > 0 then
    local seqs = {}
    for i, n in ipairs(need) do
      seqs[i] = live_seqs[n]
    end
    for i, v in ipairs(redis.call('HMGET', k.held, unpack(seqs))) do
      held[need[i]] = v
    end
  end
  -- `generated`: the held values of every delivery acked (of generated ids, then of caller ids;
  -- false where not read: a place of a claim with a generated id and no extension area).
  local out, done, seqs, explicit, generated = {}, {}, {}, {}, {}
  for j = 1, #members do
    out[j] = 0
  end
  -- What the receipt says must be what the held record is, checked without parsing the
  -- record: its kind of id against the flags byte (F_ID, bit 0), and a caller id must be
  -- indexed to this lease's sequence number. A generated id is not taken from the receipt at
  -- all: it follows from the held record, and is only needed for the error history below.
  -- (A live lease's held value carries the same token: claim, extend and nack change the two
  -- together, so the lease read above has checked the token; a claim's place likewise.)
  local callers, caller_ids, caller_seqs, caller_values = {}, {}, {}, {}
  for n, j in ipairs(live) do
    local v = held[n]
    local f = flags[j] or (v and v:byte(22))
    if f then
      local indexed = f % 2 == 1
      if args[from + 3 * j - 1] == '1' then
        if indexed and v then
          callers[#callers + 1] = j
          caller_ids[#caller_ids + 1] = args[from + 3 * j - 2]
          caller_seqs[#caller_seqs + 1] = live_seqs[n]
          caller_values[#caller_values + 1] = v
        end
      elseif not indexed then
        done[#done + 1] = members[j]
        seqs[#seqs + 1] = live_seqs[n]
        generated[#generated + 1] = v or false
        out[j] = 1
      end
    end
  end
  -- A caller id indexed to another message was superseded (send.lua's upsert wrote a newer
  -- message under it): its ack counts if the held record bears that id, and leaves the id's
  -- index entry, errors and idempotency to the newer message.
  local superseded = {}
  if #callers > 0 then
    local keys = redis.call('HMGET', k.index, unpack(caller_ids))
    for n, j in ipairs(callers) do
      local key, id, v = keys[n], caller_ids[n], caller_values[n]
      local own = key and key:sub(8, 13) == caller_seqs[n]
      if own or id_of(v:sub(9), v:byte(22)) == id then
        done[#done + 1] = members[j]
        seqs[#seqs + 1] = caller_seqs[n]
        generated[#generated + 1] = v
        out[j] = 1
        if own then
          explicit[#explicit + 1] = id
        else
          superseded[id] = true
        end
      end
    end
  end
  if #done > 0 then
    add_history(now, 'a', #done)
    -- What the extension areas say, read without parsing whole records: a grouped message
    -- (its area names a group, groups.lua) frees its group's slot, count and index entry,
    -- each group changed once per call; a message sent while its queue retained (its area
    -- says when it was sent) leaves its final record (retention.lua) if the queue still
    -- retains. A message without an area costs a flags test.
    local gone, gone_superseded, retained = {}, {}, {}
    for i, v in ipairs(generated) do
      -- (A value not read is plain: it has no extension area.)
      local extension = v and select(2, kind_of(v:byte(22)))
      if extension then
        local rec, f = v:sub(9), v:byte(22)
        local _, from, to = policy_end(rec, f)
        local group = field_of(rec, from, to, TAG_GROUP)
        if group then
          local id = id_of(rec, f)
          local list = superseded[id] and gone_superseded or gone
          list[#list + 1] = { id, group }
        end
        if field_of(rec, from, to, TAG_SENT) then
          retained[#retained + 1] = i
        end
      end
    end
    if #retained > 0 and retention() then
      local ended = {}
      for _, i in ipairs(retained) do
        local ok, m = pcall(parse_held, seqs[i], generated[i])
        if ok and m.sent_at then
          ended[#ended + 1] = { m, 'a', any_errors and redis.call('HGET', k.errors, m.id) or nil }
        end
      end
      retention().keep(ended, now)
    end
    -- Leases of their own end; places leave their claims, and a claim's lease ends with its
    -- last message.
    local own = {}
    for j, member in ipairs(members) do
      if out[j] == 1 and flags[j] then
        local claim = claims[base_of[j]]
        claim.js[#claim.js + 1] = place[j]
      elseif out[j] == 1 then
        own[#own + 1] = member
      end
    end
    if #own > 0 then
      redis.call('ZREM', k.leases, unpack(own))
    end
    for _, base in ipairs(bases) do
      local claim = claims[base]
      if #claim.js > 0 then
        claim_leases.leave(base, claim.slots, claim.js)
      end
    end
    redis.call('HDEL', k.held, unpack(seqs))
    if #explicit > 0 then
      redis.call('HDEL', k.index, unpack(explicit))
      remember_gone(explicit, now_ms)
    end
    if any_errors then
      -- Errors are kept by id (a requeued dead letter keeps its history, whatever its
      -- attempts), so the generated ids are made only here, when some message has errors.
      local ids = {}
      for _, id in ipairs(explicit) do
        ids[#ids + 1] = id
      end
      for _, v in ipairs(generated) do
        if v:byte(22) % 2 == 0 then
          ids[#ids + 1] = string.format('%d-%d', unbe7(v, 9), unbe6(v, 16))
        end
      end
      redis.call('HDEL', k.errors, unpack(ids))
    end
    if events_on() then
      for _, v in ipairs(generated) do
        local flags = v:byte(22)
        event_packed('acked', v:sub(7, 21), has(flags, F_ID) and id_of(v:sub(9), flags) or '')
      end
      flush_events()
    end
    local woke = #gone > 0 and groups().groups_leave(gone, true)
    woke = #gone_superseded > 0 and groups().groups_leave(gone_superseded, true, true) or woke
    if woke then
      wake()
    end
  end
  return out
end
