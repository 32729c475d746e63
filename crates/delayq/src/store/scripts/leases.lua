-- leases.lua: the leases of messages in flight, each its own or (data format 6) its
-- claim's. Not a script of its own: scripts.rs places it after prelude.lua.

-- A lease per claim (data format 6). A claim that takes several messages due now leases
-- them together: one member in `leases`, the claim's token base (6 bytes; a message's own
-- lease member is 12), and one field of the same name in `claims`: a live count (u16), then
-- per message of the claim in order (message j has token base + j) its seq and flags byte,
-- zeroed when the message leaves the claim (settled, extended alone, taken ahead and so
-- leased alone). Token bases are multiples of SPAN (above the most a claim takes), so a
-- token names its claim and place (SPAN). Every format's own leases stay readable beside them.
-- (Its names live in one table: the EVALSHA form of a script, the library and the script in
-- one function, may hold 200 locals.)
local claim_leases = { SPAN = 1024, SLOT = 7, ZERO_SLOT = '\0\0\0\0\0\0\0', ZERO_SEQ = '\0\0\0\0\0\0' }

-- The claim member (token base) and place j of lease token `token` (6 bytes).
function claim_leases.of(token)
  local t = unbe6(token, 1)
  local j = t % claim_leases.SPAN
  return be6(t - j), j
end

-- Seq and flags byte of place j of a claim's field `slots` ('' past its end).
function claim_leases.slot(slots, j)
  local at = 3 + claim_leases.SLOT * (j - 1)
  return slots:sub(at, at + 5), slots:byte(at + 6)
end

-- The lease members (seq .. token) of the messages claim `base` still holds, its field being
-- `slots` ('' for none), in their order in the claim; and the place of each.
function claim_leases.members(base, slots)
  local members, places, token = {}, {}, unbe6(base, 1)
  for j = 1, (#slots - 2) / claim_leases.SLOT do
    local seq = claim_leases.slot(slots, j)
    if seq ~= claim_leases.ZERO_SEQ then
      members[#members + 1] = seq .. be6(token + j)
      places[#places + 1] = j
    end
  end
  return members, places
end

-- The claim's field for `base` when it holds `seq` at place j, else nil.
function claim_leases.holding(base, j, seq)
  local slots = redis.call('HGET', k.claims, base)
  if slots and j > 0 and claim_leases.slot(slots, j) == seq then
    return slots
  end
  return nil
end

-- Takes places `js` (distinct, each holding a message) out of claim `base` whose field is
-- `slots`; the claim's lease ends with its last message.
function claim_leases.leave(base, slots, js)
  local live = struct.unpack('>H', slots, 1) - #js
  if live <= 0 then
    redis.call('HDEL', k.claims, base)
    redis.call('ZREM', k.leases, base)
    return
  end
  table.sort(js)
  local parts, at = { u16(live) }, 3
  for _, j in ipairs(js) do
    local from = 3 + claim_leases.SLOT * (j - 1)
    parts[#parts + 1] = slots:sub(at, from - 1)
    parts[#parts + 1] = claim_leases.ZERO_SLOT
    at = from + claim_leases.SLOT
  end
  parts[#parts + 1] = slots:sub(at)
  redis.call('HSET', k.claims, base, table.concat(parts))
end

-- The deadline (ms) of the lease that holds `seq` under token `token`, its own or its
-- claim's (then also the claim's member, place and field), or nil when none does.
function claim_leases.deadline(seq, token)
  local own = redis.call('ZSCORE', k.leases, seq .. token)
  if own then
    return tonumber(own)
  end
  local base, j = claim_leases.of(token)
  local slots = claim_leases.holding(base, j, seq)
  if slots then
    return tonumber(redis.call('ZSCORE', k.leases, base)), base, j, slots
  end
  return nil
end

-- Whether a message with flags byte `f` is plain: its id generated, no extension area. An
-- ack of a plain message under its claim needs nothing of its record. Memoized by flags
-- byte (kept by the Functions library between calls).
claim_leases.plain_flags = {}
function claim_leases.plain(f)
  local p = claim_leases.plain_flags[f]
  if p == nil then
    local _, extension = kind_of(f)
    p = f % 2 == 0 and not extension
    claim_leases.plain_flags[f] = p
  end
  return p
end

-- A claim's place keeps a message's seq and flags byte (the record's bytes 8-14), but for a
-- record whose extension area holds only the mark of a sealed payload
-- (src/values/sealing.rs): its place's flags byte leaves the area unannounced, since an ack
-- needs nothing of it, so that such a message is plain too (claim_leases.plain) and its ack
-- reads no record. The place's flags byte serves the ack only (plain, and its id's kind).
-- unannounced[f]: flags byte `f` without its extension area announced, or false when `f`
-- announces none (memoized by flags byte; claim.lua reads it for every message it claims).
claim_leases.unannounced = {}
function claim_leases.unannounced_of(f)
  local kind, extension = kind_of(f)
  local u = extension and f - bit.band(f, KIND_BITS) + kind
  claim_leases.unannounced[f] = u
  return u
end

-- The place of whole record `rec` (flags byte `f`, which announces an extension area; `u`,
-- it unannounced).
function claim_leases.place_announcing(rec, f, u)
  local _, from, to = policy_end(rec, f)
  if to - from == 3 and rec:byte(from) == TAG_KEY then
    return rec:sub(8, 13) .. string.char(u)
  end
  return rec:sub(8, 14)
end

-- Ends leases whose deadline passed by `now_ms`, and returns the lease member (seq .. token)
-- of each delivery they held: at most `most`. A claim's lease gives the messages it still
-- holds; one that holds more than fit keeps the rest, still expired, for the next call.
function claim_leases.expire(now_ms, most)
  local expired, own = {}, {}
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', k.leases, '-inf', string.format('%d', now_ms), 'LIMIT', '0', string.format('%d', most))) do
    if #expired >= most then
      break
    elseif #member == 6 then
      local slots = redis.call('HGET', k.claims, member) or ''
      local held, places = claim_leases.members(member, slots)
      local js = {}
      for n = 1, math.min(#held, most - #expired) do
        expired[#expired + 1] = held[n]
        js[n] = places[n]
      end
      if slots == '' then
        redis.call('ZREM', k.leases, member)
      else
        claim_leases.leave(member, slots, js)
      end
    else
      own[#own + 1] = member
      expired[#expired + 1] = member
    end
  end
  if #own > 0 then
    redis.call('ZREM', k.leases, unpack(own))
  end
  return expired
end

-- True when lease `member` (seq .. token) is held and unexpired.
local function leased(member, now_ms)
  local deadline = claim_leases.deadline(member:sub(1, 6), member:sub(7, 12))
  return deadline ~= nil and deadline > now_ms
end

-- Ends the lease `member` (seq .. token), its own or its place in its claim's, and the hold.
local function release_lease(member)
  if redis.call('ZREM', k.leases, member) == 0 then
    local base, j = claim_leases.of(member:sub(7, 12))
    local slots = claim_leases.holding(base, j, member:sub(1, 6))
    if slots then
      claim_leases.leave(base, slots, { j })
    end
  end
  redis.call('HDEL', k.held, member:sub(1, 6))
end
