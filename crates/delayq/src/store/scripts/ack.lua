#!lua flags=allow-oom
-- ack.lua: completes deliveries; the message is gone for good.
-- Allowed at maxmemory: it frees memory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: per delivery a triple: lease member (seq .. token), id, '1' if the id is explicit
--   (acking.lua says more)
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired) or a receipt
--   that does not match the message it holds; nothing changed for a 0.
check_groups(3, 'ack')
return ack_leases(ARGV, 1, now_us())
