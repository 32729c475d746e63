#!lua flags=allow-oom
-- ack.lua: completes deliveries; the message is gone for good.
-- Allowed at maxmemory: it frees memory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: per delivery its lease member (seq .. token, 12 bytes), then its id if the caller
--   chose it (acking.lua says more)
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired) or a receipt
--   that does not match the message it holds; nothing changed for a 0.
return ack_leases(ARGV, 1, now_us())
