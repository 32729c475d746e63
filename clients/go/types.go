package delayq

import "time"

// Sent is the result of a send.
type Sent struct {
	// ID is the message's id: the caller's, or one the server made.
	ID string
	// Due is when it comes due (zero if the server did not say).
	Due time.Time
	// Duplicate: a message with this caller id existed, and nothing new was written
	// (unless Replaced says it was replaced).
	Duplicate bool
	// Replaced is the state ("delayed", "ready", "in_flight") of the message an upsert
	// (DuplicateReplace or DuplicateDebounce) replaced; empty when it replaced none.
	Replaced string
}

type wireSent struct {
	ID        string `json:"id"`
	Due       msTime `json:"due_ms"`
	Duplicate bool   `json:"duplicate"`
	Replaced  string `json:"replaced"`
}

func (w wireSent) public() Sent {
	return Sent{ID: w.ID, Due: w.Due.Time, Duplicate: w.Duplicate, Replaced: w.Replaced}
}

// FailedAttempt is one failed attempt in a message's error history.
type FailedAttempt struct {
	// Attempt is the delivery that failed (0: kept before histories were).
	Attempt int `json:"attempt"`
	// At is when (zero if not known).
	At time.Time `json:"-"`
	// Error is what the consumer said went wrong (the newest error of a message is kept
	// up to 4 KiB, older ones up to 512 bytes).
	Error string `json:"error"`
}

type wireFailed struct {
	Attempt int    `json:"attempt"`
	At      msTime `json:"at_ms"`
	Error   string `json:"error"`
}

func failedAttempts(w []wireFailed) []FailedAttempt {
	out := make([]FailedAttempt, len(w))
	for i, f := range w {
		out[i] = FailedAttempt{Attempt: f.Attempt, At: f.At.Time, Error: f.Error}
	}
	return out
}

// Message is one message as Get answers it, in any state.
type Message struct {
	// ID is the message's id.
	ID string
	// State is "delayed", "ready", "in_flight", "dead", or "completed" (a final record, on
	// a queue that retains them).
	State string
	// Due is when it is (or was) due.
	Due time.Time
	// Attempts counts its deliveries so far; MaxAttempts is how many it may have.
	Attempts, MaxAttempts int
	// Priority is 0 (lowest) to 9 (highest).
	Priority int
	// Group is its group, if it has one.
	Group string
	// ExpiresAt is its deadline, if it has one.
	ExpiresAt time.Time
	// DebounceUntil is the latest a debounce may push its due time to, if debounced.
	DebounceUntil time.Time
	// Traceparent is the W3C trace context it carries, if any.
	Traceparent string
	// LastError is its newest error ("" if none).
	LastError string
	// Errors is its last few failed attempts, oldest first.
	Errors []FailedAttempt
	// LeaseDeadline is when its lease ends, while in flight.
	LeaseDeadline time.Time
	// DiedAt is when it became a dead letter.
	DiedAt time.Time
	// Outcome is how a completed message ended: "acked", "cancelled", "expired", "dead".
	Outcome string
	// SentAt, FirstDeliveredAt and FinishedAt are known for completed messages.
	SentAt, FirstDeliveredAt, FinishedAt time.Time
	// Payload is its payload (none for a completed message: a final record keeps none).
	Payload RawPayload
}

type wireMessage struct {
	wirePayload
	ID               string       `json:"id"`
	State            string       `json:"state"`
	Due              msTime       `json:"due_ms"`
	Attempts         int          `json:"attempts"`
	MaxAttempts      int          `json:"max_attempts"`
	Priority         int          `json:"priority"`
	Group            string       `json:"group"`
	ExpiresAt        msTime       `json:"expires_at_ms"`
	DebounceUntil    msTime       `json:"debounce_until_ms"`
	Traceparent      string       `json:"traceparent"`
	LastError        string       `json:"last_error"`
	Errors           []wireFailed `json:"errors"`
	LeaseDeadline    msTime       `json:"lease_deadline_ms"`
	DiedAt           msTime       `json:"died_at_ms"`
	Outcome          string       `json:"outcome"`
	SentAt           msTime       `json:"sent_at_ms"`
	FirstDeliveredAt msTime       `json:"first_delivered_at_ms"`
	FinishedAt       msTime       `json:"finished_at_ms"`
}

func (w wireMessage) public() (*Message, error) {
	raw, err := w.raw()
	if err != nil {
		return nil, err
	}
	return &Message{
		ID: w.ID, State: w.State, Due: w.Due.Time, Attempts: w.Attempts, MaxAttempts: w.MaxAttempts,
		Priority: w.Priority, Group: w.Group, ExpiresAt: w.ExpiresAt.Time, DebounceUntil: w.DebounceUntil.Time,
		Traceparent: w.Traceparent, LastError: w.LastError, Errors: failedAttempts(w.Errors),
		LeaseDeadline: w.LeaseDeadline.Time, DiedAt: w.DiedAt.Time, Outcome: w.Outcome, SentAt: w.SentAt.Time,
		FirstDeliveredAt: w.FirstDeliveredAt.Time, FinishedAt: w.FinishedAt.Time, Payload: raw,
	}, nil
}

// Delivery is a received message, leased to the receiver until LeaseDeadline: settle it
// (Ack, Nack, Release; Extend to keep it longer) by its Receipt at its Queue.
type Delivery[T any] struct {
	// Queue is the queue it came from: settle it there.
	Queue string
	// Receipt names this delivery (not the message: each delivery has its own).
	Receipt string
	// ID is the message's id.
	ID string
	// Attempt counts deliveries of the message, this one included (1 the first time).
	Attempt int
	// Priority is 0 (lowest) to 9 (highest).
	Priority int
	// Group is its group, if it has one.
	Group string
	// Due is when it came due.
	Due time.Time
	// LeaseDeadline is when the lease ends (by the server's clock).
	LeaseDeadline time.Time
	// ExpiresAt is its deadline, if it has one.
	ExpiresAt time.Time
	// HandlerTimeout is the sender's limit on the time spent on it (0: none given).
	HandlerTimeout time.Duration
	// Traceparent is the W3C trace context it was sent with, if any.
	Traceparent string
	// Payload is the payload decoded into T.
	Payload T
	// Raw is the payload as the server sent it.
	Raw RawPayload
}

type wireDelivery struct {
	wirePayload
	Queue          string     `json:"queue"`
	Receipt        string     `json:"receipt"`
	ID             string     `json:"id"`
	Attempt        int        `json:"attempt"`
	Priority       int        `json:"priority"`
	Group          string     `json:"group"`
	Due            msTime     `json:"due_ms"`
	LeaseDeadline  msTime     `json:"lease_deadline_ms"`
	ExpiresAt      msTime     `json:"expires_at_ms"`
	HandlerTimeout msDuration `json:"handler_timeout_ms"`
	Traceparent    string     `json:"traceparent"`
}

// decodeDeliveries decodes each delivery's payload into T. Those that do not decode are
// left out of the answer and named in a *PayloadError (they are still leased).
func decodeDeliveries[T any](wire []wireDelivery) ([]Delivery[T], error) {
	out := make([]Delivery[T], 0, len(wire))
	var failed []*PayloadError
	for _, w := range wire {
		d := Delivery[T]{
			Queue: w.Queue, Receipt: w.Receipt, ID: w.ID, Attempt: w.Attempt, Priority: w.Priority,
			Group: w.Group, Due: w.Due.Time, LeaseDeadline: w.LeaseDeadline.Time, ExpiresAt: w.ExpiresAt.Time,
			HandlerTimeout: time.Duration(w.HandlerTimeout), Traceparent: w.Traceparent,
		}
		raw, err := w.raw()
		if err == nil {
			d.Raw = raw
			d.Payload, err = decodeAs[T](raw)
		}
		if err != nil {
			failed = append(failed, &PayloadError{
				Queue: w.Queue, ID: w.ID, Receipt: w.Receipt, Attempt: w.Attempt, Raw: raw, Err: err,
			})
			continue
		}
		out = append(out, d)
	}
	if len(failed) > 0 {
		first := failed[0]
		first.More = failed[1:]
		return out, first
	}
	return out, nil
}

// Settled is the result of one receipt when several are acked, released or extended.
type Settled struct {
	// Receipt is the receipt given.
	Receipt string
	// OK is false when its lease was lost (or, for an ack, it was acked before): the
	// message is not (or no longer) this consumer's.
	OK bool
	// LeaseDeadline is the new end of the lease, for an extend.
	LeaseDeadline time.Time
}

type wireSettled struct {
	Receipt       string `json:"receipt"`
	OK            bool   `json:"ok"`
	LeaseDeadline msTime `json:"lease_deadline_ms"`
}

func settledList(w []wireSettled) []Settled {
	out := make([]Settled, len(w))
	for i, s := range w {
		out[i] = Settled{Receipt: s.Receipt, OK: s.OK, LeaseDeadline: s.LeaseDeadline.Time}
	}
	return out
}

// CancelResult is what became of one id of CancelMany.
type CancelResult struct {
	// ID is the id given.
	ID string `json:"id"`
	// Outcome is "cancelled", "not_cancelled" (in flight or dead: left alone) or
	// "not_found".
	Outcome string `json:"outcome"`
	// State is the state it was in (empty when not found).
	State string `json:"state"`
}

// CancelManyResult is what CancelMany did, a result per id in the order given.
type CancelManyResult struct {
	// Cancelled counts the messages cancelled.
	Cancelled int `json:"cancelled"`
	// Results has one entry per id.
	Results []CancelResult `json:"results"`
}

// MessageSummary is a message as ListMessages shows it, with a preview of its payload.
type MessageSummary struct {
	// ID and State are as Message has them.
	ID, State string
	// Due is when it is (or was) due.
	Due time.Time
	// Attempts counts its deliveries; MaxAttempts is how many it may have.
	Attempts, MaxAttempts int
	// Priority is 0 (lowest) to 9 (highest).
	Priority int
	// Group is its group, if it has one.
	Group string
	// ExpiresAt is its deadline, if it has one.
	ExpiresAt time.Time
	// LastError is its newest error ("" if none).
	LastError string
	// LeaseDeadline is when its lease ends, while in flight.
	LeaseDeadline time.Time
	// DiedAt is when it became a dead letter.
	DiedAt time.Time
	// Outcome is how a completed message ended.
	Outcome string
	// FinishedAt is when a completed message ended.
	FinishedAt time.Time
	// PayloadKind is "json" or "bytes".
	PayloadKind string
	// PayloadBytes is the payload's size.
	PayloadBytes int
	// PayloadPreview is its first 200 bytes as text.
	PayloadPreview string
}

type wireSummary struct {
	ID             string `json:"id"`
	State          string `json:"state"`
	Due            msTime `json:"due_ms"`
	Attempts       int    `json:"attempts"`
	MaxAttempts    int    `json:"max_attempts"`
	Priority       int    `json:"priority"`
	Group          string `json:"group"`
	ExpiresAt      msTime `json:"expires_at_ms"`
	LastError      string `json:"last_error"`
	LeaseDeadline  msTime `json:"lease_deadline_ms"`
	DiedAt         msTime `json:"died_at_ms"`
	Outcome        string `json:"outcome"`
	FinishedAt     msTime `json:"finished_at_ms"`
	PayloadKind    string `json:"payload_kind"`
	PayloadBytes   int    `json:"payload_bytes"`
	PayloadPreview string `json:"payload_preview"`
}

func (w wireSummary) public() MessageSummary {
	return MessageSummary{
		ID: w.ID, State: w.State, Due: w.Due.Time, Attempts: w.Attempts, MaxAttempts: w.MaxAttempts,
		Priority: w.Priority, Group: w.Group, ExpiresAt: w.ExpiresAt.Time, LastError: w.LastError,
		LeaseDeadline: w.LeaseDeadline.Time, DiedAt: w.DiedAt.Time, Outcome: w.Outcome,
		FinishedAt: w.FinishedAt.Time, PayloadKind: w.PayloadKind, PayloadBytes: w.PayloadBytes,
		PayloadPreview: w.PayloadPreview,
	}
}

// MessagePage is one page of ListMessages.
type MessagePage struct {
	// Messages are this page's messages.
	Messages []MessageSummary
	// Scanned counts the messages a search step looked at.
	Scanned int
	// Next is the cursor of the next page; "" at the end.
	Next string
}
