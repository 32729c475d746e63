package delayq

import (
	"encoding/json"
	"time"
)

// SendOption is an option of a send: Delay(15*time.Minute), ID("close-1234"), ...
type SendOption func(*sendSettings)

// sendSettings collects a send's options as the API's JSON fields, and the first option
// the client refuses (reported before any request).
type sendSettings struct {
	body        map[string]any
	err         error
	id          string
	onDuplicate DuplicatePolicy
}

func (s *sendSettings) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *sendSettings) duration(key string, d time.Duration) {
	if ms, err := millis(key, d); err != nil {
		s.fail(err)
	} else {
		s.body[key] = ms
	}
}

func (s *sendSettings) time(key string, t time.Time) {
	if ms, err := unixMillis(key, t); err != nil {
		s.fail(err)
	} else {
		s.body[key] = ms
	}
}

// sendBody is the JSON body of one message: the payload and the options.
func sendBody(payload any, opts []SendOption) (map[string]any, *sendSettings, error) {
	s := &sendSettings{body: map[string]any{}}
	for _, opt := range opts {
		opt(s)
	}
	if s.err != nil {
		return nil, nil, s.err
	}
	if err := exclusive(s.body, "delay", "deliver_at"); err != nil {
		return nil, nil, err
	}
	if err := exclusive(s.body, "ttl", "expires_at"); err != nil {
		return nil, nil, err
	}
	if err := putPayload(s.body, payload); err != nil {
		return nil, nil, err
	}
	return s.body, s, nil
}

func exclusive(body map[string]any, a, b string) error {
	_, hasA := body[a]
	_, hasB := body[b]
	if hasA && hasB {
		return &ArgumentError{Arg: a, Problem: "give " + a + " or " + b + ", not both"}
	}
	return nil
}

// safeToRepeat: a send with a caller id that keeps an existing message changes nothing the
// second time (it answers duplicate), so it may be retried after a lost answer.
func (s *sendSettings) safeToRepeat() bool {
	return s.id != "" && (s.onDuplicate == "" || s.onDuplicate == DuplicateKeep)
}

// Delay makes the message due d after the server receives it (default: at once).
func Delay(d time.Duration) SendOption { return func(s *sendSettings) { s.duration("delay", d) } }

// DeliverAt makes the message due at t (in place of Delay).
func DeliverAt(t time.Time) SendOption { return func(s *sendSettings) { s.time("deliver_at", t) } }

// ID is the caller's id of the message (1 to 128 of A-Za-z0-9._:@/-): a second send with
// it answers Duplicate (or replaces it, with OnDuplicate), and Cancel, Get and Reschedule
// take it.
func ID(id string) SendOption {
	return func(s *sendSettings) { s.id = id; s.body["id"] = id }
}

// MaxAttempts is how many deliveries it gets before it becomes a dead letter (1-65535,
// default 5).
func MaxAttempts(n int) SendOption { return func(s *sendSettings) { s.body["max_attempts"] = n } }

// Priority orders due messages: 0 (lowest) to 9 (highest), default 5.
func Priority(p int) SendOption { return func(s *sendSettings) { s.body["priority"] = p } }

// Group puts the message in a group (a tenant, a customer, an order): claims serve the
// groups in turn, and the queue's group concurrency bounds a group's messages in flight
// (1: one at a time, in order).
func Group(g string) SendOption { return func(s *sendSettings) { s.body["group"] = g } }

// TTL: never delivered more than d after it is due (in place of ExpiresAt).
func TTL(d time.Duration) SendOption { return func(s *sendSettings) { s.duration("ttl", d) } }

// ExpiresAt: never delivered at or after t.
func ExpiresAt(t time.Time) SendOption { return func(s *sendSettings) { s.time("expires_at", t) } }

// HandlerTimeout is how long a worker may spend on it (a Worker uses it in place of its
// own HandlerTimeout); delivered as Delivery.HandlerTimeout.
func HandlerTimeout(d time.Duration) SendOption {
	return func(s *sendSettings) { s.duration("handler_timeout", d) }
}

// DuplicatePolicy is what a send with an ID does when a message with that id exists.
type DuplicatePolicy string

const (
	// DuplicateKeep keeps the existing message; the send answers Duplicate (the default).
	DuplicateKeep DuplicatePolicy = "keep"
	// DuplicateReplace replaces it with this send's payload and options (an upsert).
	DuplicateReplace DuplicatePolicy = "replace"
	// DuplicateDebounce replaces it and moves its due time, at most MaxWait after the first.
	DuplicateDebounce DuplicatePolicy = "debounce"
)

// OnDuplicate sets what a send with an ID does when a message with that id exists.
func OnDuplicate(p DuplicatePolicy) SendOption {
	return func(s *sendSettings) { s.onDuplicate = p; s.body["on_duplicate"] = string(p) }
}

// MaxWait bounds a debounce: never due later than d after the first send it replaced.
func MaxWait(d time.Duration) SendOption { return func(s *sendSettings) { s.duration("max_wait", d) } }

// InFlightPolicy is what a replace or debounce does when the id's message is in flight.
type InFlightPolicy string

const (
	// InFlightSend sends a second message; the one in flight is superseded (the default).
	InFlightSend InFlightPolicy = "send"
	// InFlightRefuse answers Duplicate and sends nothing.
	InFlightRefuse InFlightPolicy = "refuse"
)

// IfInFlight sets what a replace or debounce does when the id's message is in flight.
func IfInFlight(p InFlightPolicy) SendOption {
	return func(s *sendSettings) { s.body["if_in_flight"] = string(p) }
}

// Replicas answers only once count replicas have the message, waiting at most timeout (0:
// the server's default, 1 s); fewer in time is a 503 ErrNotReplicated (the message is kept
// all the same).
func Replicas(count int, timeout time.Duration) SendOption {
	return func(s *sendSettings) {
		r := map[string]any{"count": count}
		if timeout > 0 {
			ms, err := millis("replicas timeout", timeout)
			if err != nil {
				s.fail(err)
				return
			}
			r["timeout"] = ms
		}
		s.body["replicas"] = r
	}
}

// PushURL is this message's own URL on a push queue (on an origin the target allows).
func PushURL(u string) SendOption { return func(s *sendSettings) { s.push()["url"] = u } }

// PushHeaders are extra headers of this message's push request.
func PushHeaders(h map[string]string) SendOption {
	return func(s *sendSettings) { s.push()["headers"] = h }
}

func (s *sendSettings) push() map[string]any {
	p, ok := s.body["push"].(map[string]any)
	if !ok {
		p = map[string]any{}
		s.body["push"] = p
	}
	return p
}

// Traceparent is a W3C trace context handed to whoever handles the message.
func Traceparent(tp string) SendOption { return func(s *sendSettings) { s.body["traceparent"] = tp } }

// Backoff sets the retry policy of the message (default: exponential from 1 s, doubling,
// at most 10 minutes, 10 % jitter).
func Backoff(p BackoffPolicy) SendOption {
	return func(s *sendSettings) {
		if p.err != nil {
			s.fail(p.err)
			return
		}
		s.body["backoff"] = p
	}
}

// BackoffPolicy is how long a failed message waits before its next attempt. Make one with
// FixedBackoff, ExponentialBackoff, LinearBackoff or ListBackoff.
type BackoffPolicy struct {
	kind   string
	fields map[string]any
	err    error
}

func backoff(kind string, durations map[string]time.Duration, extra map[string]any) BackoffPolicy {
	p := BackoffPolicy{kind: kind, fields: map[string]any{}}
	for k, v := range extra {
		p.fields[k] = v
	}
	for k, d := range durations {
		ms, err := millis("backoff "+k, d)
		if err != nil && p.err == nil {
			p.err = err
		}
		p.fields[k] = ms
	}
	return p
}

// FixedBackoff waits delay before every retry.
func FixedBackoff(delay time.Duration) BackoffPolicy {
	return backoff("fixed", map[string]time.Duration{"delay": delay}, nil)
}

// ExponentialBackoff waits base, then base*factor, ... at most limit (factor 0: the
// server's default, 2).
func ExponentialBackoff(base, limit time.Duration, factor int) BackoffPolicy {
	extra := map[string]any{}
	if factor > 0 {
		extra["factor"] = factor
	}
	return backoff("exponential", map[string]time.Duration{"base": base, "cap": limit}, extra)
}

// LinearBackoff waits base, 2*base, 3*base, ... at most limit.
func LinearBackoff(base, limit time.Duration) BackoffPolicy {
	return backoff("linear", map[string]time.Duration{"base": base, "cap": limit}, nil)
}

// ListBackoff waits each of delays in turn (1 to 8 of them); the last one repeats.
func ListBackoff(delays ...time.Duration) BackoffPolicy {
	p := BackoffPolicy{kind: "list", fields: map[string]any{}}
	list := make([]int64, 0, len(delays))
	for _, d := range delays {
		ms, err := millis("backoff delays", d)
		if err != nil && p.err == nil {
			p.err = err
		}
		list = append(list, ms)
	}
	p.fields["delays"] = list
	return p
}

// WithJitter shortens each wait at random by up to percent (0-100).
func (p BackoffPolicy) WithJitter(percent int) BackoffPolicy {
	fields := map[string]any{"jitter_percent": percent}
	for k, v := range p.fields {
		if k != "jitter_percent" {
			fields[k] = v
		}
	}
	return BackoffPolicy{kind: p.kind, fields: fields, err: p.err}
}

// MarshalJSON gives the API's form, e.g. {"fixed": {"delay": 200}}.
func (p BackoffPolicy) MarshalJSON() ([]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	return json.Marshal(map[string]any{p.kind: p.fields})
}
