package delayq_test

// Events against a real server: turned on with Configure, a page of one message's sent,
// delivered and acked events, filters, resuming from a cursor, and FollowEvents seeing
// events sent after it started, stopping when its context ends or its handler fails.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

// sendReceiveAck sends a message with id, receives it and acks it.
func sendReceiveAck(t *testing.T, c *delayq.Client, q, id string) {
	t.Helper()
	ctx := testContext(t)
	if _, err := delayq.Send(ctx, c, q, order{Order: 1}, delayq.ID(id)); err != nil {
		t.Fatal(err)
	}
	got, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("received %+v, %v; want %s", got, err, id)
	}
	if err := c.Ack(ctx, q, got[0].Receipt); err != nil {
		t.Fatal(err)
	}
}

func kindsOf(events []delayq.Event) []delayq.EventKind {
	kinds := make([]delayq.EventKind, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	return kinds
}

func TestEventsPage(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	stats, err := c.Configure(ctx, q, delayq.SetEvents(0))
	if err != nil || stats.EventsMax != 20000 {
		t.Fatalf("events on: %+v, %v; want events_max 20000", stats, err)
	}
	start, err := c.Events(ctx, q, delayq.EventQuery{From: delayq.EventsFromNow})
	if err != nil || len(start.Events) != 0 || start.Cursor == "" {
		t.Fatalf("a page from now = %+v, %v; want no events and a cursor", start, err)
	}
	before := time.Now()
	sendReceiveAck(t, c, q, "ev-1")

	page, err := c.Events(ctx, q, delayq.EventQuery{From: start.Cursor, ID: "ev-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []delayq.EventKind{delayq.EventSent, delayq.EventDelivered, delayq.EventAcked}
	if got := kindsOf(page.Events); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events of ev-1: %v, want %v", got, want)
	}
	for i, e := range page.Events {
		if e.ID != "ev-1" || e.Cursor == "" || e.At.Before(before.Add(-time.Second)) || e.At.After(time.Now().Add(time.Second)) ||
			(i > 0 && e.At.Before(page.Events[i-1].At)) {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if sent, delivered := page.Events[0], page.Events[1]; sent.Due.IsZero() || delivered.Attempt != 1 {
		t.Errorf("sent %+v (want its due time), delivered %+v (want attempt 1)", sent, delivered)
	}

	// Kinds filter, from the oldest kept.
	acked, err := c.Events(ctx, q, delayq.EventQuery{From: delayq.EventsFromOldest, Kinds: []delayq.EventKind{delayq.EventAcked}})
	if err != nil || len(acked.Events) != 1 || acked.Events[0].Kind != delayq.EventAcked || acked.Events[0].ID != "ev-1" {
		t.Fatalf("acked events: %+v, %v; want ev-1's ack", acked, err)
	}

	// A page at a time: each goes on from the cursor of the one before.
	var walked []delayq.EventKind
	for from := start.Cursor; len(walked) < 3; {
		one, err := c.Events(ctx, q, delayq.EventQuery{From: from, Limit: 1})
		if err != nil || len(one.Events) != 1 {
			t.Fatalf("a page of one from %s: %+v, %v", from, one, err)
		}
		walked = append(walked, one.Events[0].Kind)
		from = one.Cursor
	}
	if walked[0] != want[0] || walked[1] != want[1] || walked[2] != want[2] {
		t.Fatalf("pages of one: %v, want %v", walked, want)
	}

	// A long poll with nothing to read waits, then answers no events.
	asked := time.Now()
	quiet, err := c.Events(ctx, q, delayq.EventQuery{From: page.Cursor, Wait: 400 * time.Millisecond})
	if err != nil || len(quiet.Events) != 0 || quiet.Cursor == "" {
		t.Fatalf("a wait with nothing new: %+v, %v", quiet, err)
	}
	if waited := time.Since(asked); waited < 300*time.Millisecond {
		t.Errorf("the server answered after %v of a 400 ms wait", waited)
	}

	if _, err := c.Events(ctx, q, delayq.EventQuery{From: "not-a-cursor"}); !errors.Is(err, delayq.ErrInvalidCursor) {
		t.Errorf("a bad cursor: %v, want ErrInvalidCursor", err)
	}
	var argErr *delayq.ArgumentError
	if _, err := c.Events(ctx, q, delayq.EventQuery{Wait: -time.Second}); !errors.As(err, &argErr) {
		t.Errorf("a negative wait: %v, want an *ArgumentError", err)
	}
}

func TestFollowEvents(t *testing.T) {
	t.Parallel() // it long-polls: let it overlap the other waiting tests
	ctx, c, q := testContext(t), client(t), queueName(t)
	if _, err := c.Configure(ctx, q, delayq.SetEvents(0)); err != nil {
		t.Fatal(err)
	}
	sendReceiveAck(t, c, q, "before")

	// From a cursor taken before the follower starts: it misses nothing sent after.
	start, err := c.Events(ctx, q, delayq.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan delayq.Event, 100)
	followCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.FollowEvents(followCtx, q, delayq.EventQuery{From: start.Cursor, Wait: 5 * time.Second},
			func(e delayq.Event) error { seen <- e; return nil })
	}()
	sendReceiveAck(t, c, q, "after")
	var kinds []delayq.EventKind
	for len(kinds) < 3 {
		select {
		case e := <-seen:
			if e.ID != "after" {
				t.Fatalf("followed %+v: only after's events are after the cursor", e)
			}
			kinds = append(kinds, e.Kind)
		case <-time.After(10 * time.Second):
			t.Fatalf("followed only %v of after's events in 10 s", kinds)
		}
	}
	if kinds[0] != delayq.EventSent || kinds[1] != delayq.EventDelivered || kinds[2] != delayq.EventAcked {
		t.Fatalf("followed %v, want sent, delivered, acked", kinds)
	}
	// Cancelling its context ends it, long poll in flight included, with nil.
	stopped := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("FollowEvents returned %v once cancelled, want nil", err)
		}
		if took := time.Since(stopped); took > 2*time.Second {
			t.Errorf("FollowEvents took %v to stop", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FollowEvents did not stop when its context was cancelled")
	}

	// From now (the default): what happens after it started, never what happened before.
	// When its first page reaches the server is not known here, so send until it sees one.
	nowCtx, stopNow := context.WithCancel(ctx)
	defer stopNow()
	fromNow := make(chan delayq.Event, 100)
	go c.FollowEvents(nowCtx, q, delayq.EventQuery{Kinds: []delayq.EventKind{delayq.EventSent}, Wait: 2 * time.Second},
		func(e delayq.Event) error { fromNow <- e; return nil })
	var first delayq.Event
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; first.ID == "" && time.Now().Before(deadline); i++ {
		if _, err := delayq.Send(ctx, c, q, i, delayq.ID("later-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-fromNow:
		case <-time.After(300 * time.Millisecond):
		}
	}
	if !strings.HasPrefix(first.ID, "later-") || first.Kind != delayq.EventSent {
		t.Fatalf("following from now saw %+v first, want a later send", first)
	}

	// A handler's error stops it, and is what it returns.
	errStop := errors.New("stop here")
	calls := 0
	err = c.FollowEvents(ctx, q, delayq.EventQuery{From: delayq.EventsFromOldest}, func(e delayq.Event) error {
		calls++
		return errStop
	})
	if !errors.Is(err, errStop) || calls != 1 {
		t.Fatalf("a failing handler: %v after %d calls, want errStop after 1", err, calls)
	}
}
