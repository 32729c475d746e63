package delayq

import "time"

// QueueSetting is one setting of Configure: SetRateLimit(100, 10), ClearRateLimit(), ...
// Settings left out stay as they are.
type QueueSetting func(*settingsBody)

type settingsBody struct {
	body map[string]any
	err  error
}

func (s *settingsBody) duration(key string, d time.Duration) {
	ms, err := millis(key, d)
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.body[key] = ms
}

// SetIdempotencyWindow keeps a caller id reserved for d after its message is acked,
// cancelled or purged, so a late retry of its send is still a duplicate (0 turns it off).
func SetIdempotencyWindow(d time.Duration) QueueSetting {
	return func(s *settingsBody) { s.duration("idempotency_window", d) }
}

// SetRateLimit allows at most perSecond deliveries a second across every consumer, burst
// at once after a quiet spell (0: the server's default, 1).
func SetRateLimit(perSecond, burst int) QueueSetting {
	return func(s *settingsBody) { s.body["rate_limit"] = RateLimit{PerSecond: perSecond, Burst: burst} }
}

// ClearRateLimit lifts the queue's rate limit.
func ClearRateLimit() QueueSetting { return func(s *settingsBody) { s.body["rate_limit"] = nil } }

// SetGroupConcurrency allows at most n messages of one group in flight at once (1: each
// group one at a time, in order).
func SetGroupConcurrency(n int) QueueSetting {
	return func(s *settingsBody) { s.body["group_concurrency"] = n }
}

// ClearGroupConcurrency lifts the per-group limit.
func ClearGroupConcurrency() QueueSetting {
	return func(s *settingsBody) { s.body["group_concurrency"] = nil }
}

// SetGroupRateLimit allows each group at most perSecond deliveries a second (unless the
// group has its own limit).
func SetGroupRateLimit(perSecond, burst int) QueueSetting {
	return func(s *settingsBody) { s.body["group_rate_limit"] = RateLimit{PerSecond: perSecond, Burst: burst} }
}

// ClearGroupRateLimit lifts the per-group rate limit.
func ClearGroupRateLimit() QueueSetting {
	return func(s *settingsBody) { s.body["group_rate_limit"] = nil }
}

// SetDefaultTTL: a message without a deadline of its own is never delivered more than d
// after it is due.
func SetDefaultTTL(d time.Duration) QueueSetting {
	return func(s *settingsBody) { s.duration("default_ttl", d) }
}

// ClearDefaultTTL lifts the default TTL.
func ClearDefaultTTL() QueueSetting { return func(s *settingsBody) { s.body["default_ttl"] = nil } }

// ExpirePolicy is what an expired message becomes.
type ExpirePolicy string

const (
	// ExpireDeadLetter makes it a dead letter with the error "expired" (the default).
	ExpireDeadLetter ExpirePolicy = "dead_letter"
	// ExpireDrop drops it.
	ExpireDrop ExpirePolicy = "drop"
)

// SetOnExpire sets what an expired message becomes.
func SetOnExpire(p ExpirePolicy) QueueSetting {
	return func(s *settingsBody) { s.body["on_expire"] = string(p) }
}

// SetMaxDelay refuses sends due further out than d from now (400 invalid_schedule).
func SetMaxDelay(d time.Duration) QueueSetting {
	return func(s *settingsBody) { s.duration("max_delay", d) }
}

// ClearMaxDelay lifts the queue's own limit on delays.
func ClearMaxDelay() QueueSetting { return func(s *settingsBody) { s.body["max_delay"] = nil } }

// SetRetainCompleted keeps the final record of each message that ends for keepFor, at most
// max per partition, so that Get answers it as "completed".
func SetRetainCompleted(keepFor time.Duration, max int) QueueSetting {
	return func(s *settingsBody) {
		ms, err := millis("retain_completed keep_for", keepFor)
		if err != nil {
			if s.err == nil {
				s.err = err
			}
			return
		}
		s.body["retain_completed"] = map[string]any{"keep_for": ms, "max": max}
	}
}

// ClearRetainCompleted stops keeping final records and drops those kept.
func ClearRetainCompleted() QueueSetting {
	return func(s *settingsBody) { s.body["retain_completed"] = nil }
}

// SetEvents records an event for each change of a message's state, about max per
// partition (0: the server's default, 20,000).
func SetEvents(max int) QueueSetting {
	return func(s *settingsBody) {
		e := map[string]any{}
		if max > 0 {
			e["max"] = max
		}
		s.body["events"] = e
	}
}

// ClearEvents stops recording events and drops those kept.
func ClearEvents() QueueSetting { return func(s *settingsBody) { s.body["events"] = nil } }
