package delayq

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A queue's events (docs/events.md; any role but monitor): one per change of a message's
// state, recorded while the queue records them (Configure with SetEvents). Events reads one
// page; FollowEvents reads page after page, each a long poll, and hands each event to a
// function as it happens. Every event carries the cursor after it: keep the last one
// handled, and give it as From to go on from there after a restart.

// EventKind is the kind of change an event records.
type EventKind string

// The kinds of events.
const (
	// EventSent: sent (Due is when it is due; Detail "replaced" or "superseded" for an
	// upsert).
	EventSent EventKind = "sent"
	// EventDelivered: given to a consumer (Attempt is the delivery's number).
	EventDelivered EventKind = "delivered"
	// EventAcked: acked.
	EventAcked EventKind = "acked"
	// EventRetry: nacked or its lease ended, to be retried (Attempt, Error, Due).
	EventRetry EventKind = "retry"
	// EventReleased: released, ready again with the attempt not counted.
	EventReleased EventKind = "released"
	// EventDead: became a dead letter (Attempt, Error).
	EventDead EventKind = "dead"
	// EventExpired: expired (Detail "dropped" when the queue drops expired messages).
	EventExpired EventKind = "expired"
	// EventSuperseded: replaced by a send that took its id while it was in flight.
	EventSuperseded EventKind = "superseded"
	// EventCancelled: cancelled.
	EventCancelled EventKind = "cancelled"
	// EventRescheduled: rescheduled (Due is its new due time).
	EventRescheduled EventKind = "rescheduled"
	// EventRequeued: a dead letter put back to ready.
	EventRequeued EventKind = "requeued"
	// EventPurged: a dead letter deleted.
	EventPurged EventKind = "purged"
)

// Where a read of events starts, besides a cursor an event or a page carried.
const (
	// EventsFromOldest starts at the oldest event the queue keeps.
	EventsFromOldest = "oldest"
	// EventsFromNow starts with what happens from now on (the default).
	EventsFromNow = "now"
)

// Event is one change of a message's state (never its payload).
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// ID is the message's id.
	ID string
	// At is when, by the Redis server's clock (to the millisecond).
	At time.Time
	// Attempt is, of a delivery, its number; of a retry, death or expiry, the attempts made
	// (0 for other kinds).
	Attempt int
	// Due is when the message is due, of a send, a retry or a reschedule (zero otherwise).
	Due time.Time
	// Error is the error that ended an attempt (its first 200 bytes), of a retry or death.
	Error string
	// Detail is "replaced", "superseded" (a send that took a message's id) or "dropped" (an
	// expired message gone rather than dead), when it applies.
	Detail string
	// Cursor is where a reader that handled this event goes on from (EventQuery.From).
	Cursor string
}

type wireEvent struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	At      msTime `json:"at_ms"`
	Attempt int    `json:"attempt"`
	Due     msTime `json:"due_ms"`
	Error   string `json:"error"`
	Detail  string `json:"detail"`
	Cursor  string `json:"cursor"`
}

// EventQuery chooses the events of Events and FollowEvents.
type EventQuery struct {
	// From is where to start: EventsFromOldest, EventsFromNow ("" too), or a cursor an
	// event or a page carried (ErrInvalidCursor for one the queue never gave).
	From string
	// Kinds keeps only events of these kinds (none: every kind).
	Kinds []EventKind
	// ID keeps only the events of the message with this id.
	ID string
	// Limit is the most events a page holds (1-1000; 0: the server's default, 100).
	Limit int
	// Wait is how long a page waits for a first event when there is none yet (Events: 0,
	// answer at once; FollowEvents: 0 means FollowWait). At most the server's --max-wait
	// (30 s by default; a longer wait is refused with ErrOverLimit). A filtered page that
	// found nothing in what it looked at answers at once.
	Wait time.Duration
}

// EventPage is one page of events, and where the next page starts.
type EventPage struct {
	// Events are this page's, oldest first.
	Events []Event
	// Cursor is where the next page starts (its From): past every event this read looked
	// at, so a filtered page with no events still moves on.
	Cursor string
}

// Events reads one page of the queue's events. A read: retried.
func (c *Client) Events(ctx context.Context, queue string, query EventQuery) (EventPage, error) {
	wait, err := millis("wait", query.Wait)
	if err != nil {
		return EventPage{}, err
	}
	q := url.Values{}
	if query.From != "" {
		q.Set("from", query.From)
	}
	if len(query.Kinds) > 0 {
		kinds := make([]string, len(query.Kinds))
		for i, k := range query.Kinds {
			kinds[i] = string(k)
		}
		q.Set("kind", strings.Join(kinds, ","))
	}
	if query.ID != "" {
		q.Set("id", query.ID)
	}
	if query.Limit > 0 {
		q.Set("limit", strconv.Itoa(query.Limit))
	}
	if wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(wait, 10))
	}
	var out struct {
		Events []wireEvent `json:"events"`
		Cursor string      `json:"cursor"`
	}
	if _, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/events", params: []string{queue}, query: q,
		idempotent: true, hold: query.Wait,
	}, &out); err != nil {
		return EventPage{}, err
	}
	page := EventPage{Cursor: out.Cursor, Events: make([]Event, len(out.Events))}
	for i, e := range out.Events {
		page.Events[i] = Event{
			Kind: EventKind(e.Kind), ID: e.ID, At: e.At.Time, Attempt: e.Attempt, Due: e.Due.Time,
			Error: e.Error, Detail: e.Detail, Cursor: e.Cursor,
		}
	}
	return page, nil
}

// FollowWait is FollowEvents' long poll when EventQuery.Wait is 0: give a shorter Wait to
// a server whose --max-wait is shorter.
const FollowWait = 20 * time.Second

// quietPause is how long FollowEvents pauses after a page that answered at once with
// nothing (a filter that found nothing in what it looked at), so that following a quiet
// filter is not a busy loop.
const quietPause = 250 * time.Millisecond

// FollowEvents reads the queue's events from query.From on, page after page (each a long
// poll of query.Wait, default FollowWait), and calls handle with each, in order, as they
// happen, until ctx ends: it then returns nil. The next page is read once handle has
// returned for the events before it. When handle returns an error, FollowEvents stops and
// returns it; when a page fails (after the client's retries), it returns that error.
// Either way, go on from the Cursor of the last event handled.
//
// To miss nothing that happens after some point (a send of yours, say), take the Cursor of
// an Events page read from EventsFromNow before it, and follow from that cursor.
func (c *Client) FollowEvents(ctx context.Context, queue string, query EventQuery, handle func(Event) error) error {
	if query.Wait == 0 {
		query.Wait = FollowWait
	}
	if _, err := millis("wait", query.Wait); err != nil {
		return err
	}
	for ctx.Err() == nil {
		asked := time.Now()
		page, err := c.Events(ctx, queue, query)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, e := range page.Events {
			if ctx.Err() != nil {
				return nil
			}
			if err := handle(e); err != nil {
				return err
			}
		}
		if page.Cursor != "" {
			query.From = page.Cursor
		}
		quick := quietPause
		if query.Wait < quick {
			quick = query.Wait
		}
		if len(page.Events) == 0 && time.Since(asked) < quick {
			timer := time.NewTimer(quietPause)
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
		}
	}
	return nil
}
