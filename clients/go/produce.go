package delayq

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// Send sends one message to queue: payload as JSON, or as bytes when it is a []byte. With
// ID (and the default DuplicatePolicy) it is safe to repeat and is retried after a lost
// answer; a repeat answers Duplicate.
func Send[T any](ctx context.Context, c *Client, queue string, payload T, opts ...SendOption) (Sent, error) {
	body, s, err := sendBody(any(payload), opts)
	if err != nil {
		return Sent{}, err
	}
	var out wireSent
	_, err = c.do(ctx, request{
		route: "POST /v1/queues/{queue}/messages", params: []string{queue}, body: body,
		idempotent: s.safeToRepeat(),
	}, &out)
	return out.public(), err
}

// BatchItem is one message of SendBatch: its payload and options.
type BatchItem[T any] struct {
	// Payload is sent as JSON, or as bytes when T is []byte.
	Payload T
	// Options are the message's send options.
	Options []SendOption
}

// Item makes a BatchItem.
func Item[T any](payload T, opts ...SendOption) BatchItem[T] {
	return BatchItem[T]{Payload: payload, Options: opts}
}

// SendBatch sends up to the server's --max-batch (default 1000) messages in one request,
// all or nothing; a result each, in order.
func SendBatch[T any](ctx context.Context, c *Client, queue string, items []BatchItem[T]) ([]Sent, error) {
	messages := make([]map[string]any, len(items))
	repeatable := true
	for i, item := range items {
		body, s, err := sendBody(any(item.Payload), item.Options)
		if err != nil {
			return nil, err
		}
		messages[i] = body
		repeatable = repeatable && s.safeToRepeat()
	}
	var out struct {
		Results []wireSent `json:"results"`
	}
	_, err := c.do(ctx, request{
		route: "POST /v1/queues/{queue}/batch", params: []string{queue},
		body: map[string]any{"messages": messages}, idempotent: repeatable,
	}, &out)
	if err != nil {
		return nil, err
	}
	sent := make([]Sent, len(out.Results))
	for i, r := range out.Results {
		sent[i] = r.public()
	}
	return sent, nil
}

// Get reads a message by id, in any state, with its error history. A message that is gone
// is an *APIError with ErrNotFound (on a queue that retains final records, it is answered
// with State "completed" for a while).
func (c *Client) Get(ctx context.Context, queue, id string) (*Message, error) {
	var out wireMessage
	if _, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/messages/{id}", params: []string{queue, id}, idempotent: true,
	}, &out); err != nil {
		return nil, err
	}
	return out.public()
}

// Cancel removes a delayed or ready message and answers the state it was in. One in flight
// or dead is refused with ErrWrongState; one that is not there with ErrNotFound.
func (c *Client) Cancel(ctx context.Context, queue, id string) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	_, err := c.do(ctx, request{route: "DELETE /v1/queues/{queue}/messages/{id}", params: []string{queue, id}}, &out)
	return out.State, err
}

// CancelMany cancels many messages by id in one request (1 to the server's --max-batch),
// each its own atomic cancel: one in flight or dead is left alone ("not_cancelled"). Not
// retried: a repeat would answer "not_found" for those it cancelled.
func (c *Client) CancelMany(ctx context.Context, queue string, ids []string) (CancelManyResult, error) {
	var out CancelManyResult
	_, err := c.do(ctx, request{
		route: "POST /v1/queues/{queue}/cancel", params: []string{queue}, body: map[string]any{"ids": ids},
	}, &out)
	return out, err
}

// Reschedule makes a delayed or ready message due d from now; it answers the new due time.
func (c *Client) Reschedule(ctx context.Context, queue, id string, d time.Duration) (time.Time, error) {
	ms, err := millis("delay", d)
	if err != nil {
		return time.Time{}, err
	}
	return c.reschedule(ctx, queue, id, map[string]any{"delay": ms}, false)
}

// RescheduleAt makes a delayed or ready message due at t; it answers the new due time.
func (c *Client) RescheduleAt(ctx context.Context, queue, id string, t time.Time) (time.Time, error) {
	ms, err := unixMillis("deliver_at", t)
	if err != nil {
		return time.Time{}, err
	}
	// A time is absolute: repeating it changes nothing, so it may be retried.
	return c.reschedule(ctx, queue, id, map[string]any{"deliver_at": ms}, true)
}

func (c *Client) reschedule(ctx context.Context, queue, id string, body map[string]any, idempotent bool) (time.Time, error) {
	var out struct {
		Due msTime `json:"due_ms"`
	}
	_, err := c.do(ctx, request{
		route: "POST /v1/queues/{queue}/messages/{id}/reschedule", params: []string{queue, id},
		body: body, idempotent: idempotent,
	}, &out)
	return out.Due.Time, err
}

// ListOptions chooses the messages of ListMessages.
type ListOptions struct {
	// State is "delayed", "ready", "in_flight", "dead" or "completed" (required).
	State string
	// Limit is the messages per page (default 50; for a search, the messages looked at
	// per partition in one step, default 500).
	Limit int
	// Cursor goes on from a previous page's Next.
	Cursor string
	// Contains searches the payloads and ids for this text.
	Contains string
}

// ListMessages reads one page of the messages in a state, in that state's order; give the
// answer's Next as the Cursor of the next call until it is "".
func (c *Client) ListMessages(ctx context.Context, queue string, opts ListOptions) (MessagePage, error) {
	if opts.State == "" {
		return MessagePage{}, &ArgumentError{Arg: "State", Problem: `required: "delayed", "ready", "in_flight", "dead" or "completed"`}
	}
	q := url.Values{"state": {opts.State}}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Contains != "" {
		q.Set("contains", opts.Contains)
	}
	var out struct {
		Messages []wireSummary `json:"messages"`
		Scanned  int           `json:"scanned"`
		Next     *string       `json:"next"`
	}
	if _, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/messages", params: []string{queue}, query: q, idempotent: true,
	}, &out); err != nil {
		return MessagePage{}, err
	}
	page := MessagePage{Scanned: out.Scanned, Messages: make([]MessageSummary, len(out.Messages))}
	for i, m := range out.Messages {
		page.Messages[i] = m.public()
	}
	if out.Next != nil {
		page.Next = *out.Next
	}
	return page, nil
}
