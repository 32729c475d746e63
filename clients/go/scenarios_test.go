package delayq_test

// The shared scenarios of clients/SCENARIOS.md that need no worker: S1, S2, S3 and S5.
// S4, S6 and S9 are in scenarios_worker_test.go; S7 and S8 in scenarios_edge_test.go.

import (
	"errors"
	"strings"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

type order struct {
	Order int    `json:"order"`
	Note  string `json:"note,omitempty"`
}

func TestS1_SendReceiveAck(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)

	sent, err := delayq.Send(ctx, c, q, order{Order: 1234}, delayq.Delay(200*time.Millisecond), delayq.ID("close-1234"))
	if err != nil {
		t.Fatal(err)
	}
	if sent.ID != "close-1234" || sent.Duplicate || sent.Due.IsZero() {
		t.Fatalf("sent = %+v, want id close-1234, not a duplicate, with a due time", sent)
	}

	// Before it is due, a receive gets nothing.
	asked := time.Now()
	early, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var d delayq.Delivery[order]
	if len(early) > 0 {
		if asked.Before(sent.Due) {
			t.Fatalf("received %+v before it was due (%v)", early, sent.Due)
		}
		// This machine stalled past the delay before the first receive: that check could
		// not be made, the rest can.
		t.Logf("the first receive started after the message was due: not-before-due not checked")
		d = early[0]
	} else {
		// A long poll gets it once due.
		got, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("long poll got %d deliveries, want 1", len(got))
		}
		if time.Now().Before(sent.Due) {
			t.Fatalf("delivered before it was due (%v)", sent.Due)
		}
		d = got[0]
	}
	// Its id, payload and attempt 1.
	if d.ID != "close-1234" || d.Payload != (order{Order: 1234}) || d.Attempt != 1 || d.Queue != q || d.Receipt == "" {
		t.Fatalf("delivery = %+v, want close-1234 {1234} attempt 1 of %s with a receipt", d, q)
	}
	if err := c.Ack(ctx, q, d.Receipt); err != nil {
		t.Fatal(err)
	}

	// Acked: gone (the queue keeps no final records), and nothing more to receive.
	_, err = c.Get(ctx, q, "close-1234")
	var apiErr *delayq.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != delayq.ErrNotFound {
		t.Fatalf("Get after ack: %v, want a 404 not_found *APIError", err)
	}
	again, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Wait: 300 * time.Millisecond})
	if err != nil || len(again) != 0 {
		t.Fatalf("second receive = %v, %v; want nothing", again, err)
	}
}

func TestS2_RetryWithBackoff(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)

	if _, err := delayq.Send(ctx, c, q, order{Order: 2}, delayq.ID("retry-2"), delayq.MaxAttempts(3),
		delayq.Backoff(delayq.FixedBackoff(200*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	first, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(first) != 1 || first[0].Attempt != 1 {
		t.Fatalf("first receive = %+v, %v; want attempt 1", first, err)
	}
	nacked := time.Now() // before the nack is sent: the retry is due 200 ms after the server takes it
	outcome, err := c.Nack(ctx, q, first[0].Receipt, delayq.NackOptions{Error: "PaymentDeclined: card declined"})
	if err != nil || outcome != "retry" {
		t.Fatalf("nack = %q, %v; want retry", outcome, err)
	}

	second, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(second) != 1 {
		t.Fatalf("second receive = %+v, %v; want the retry", second, err)
	}
	if waited := time.Since(nacked); waited < 195*time.Millisecond {
		t.Fatalf("the retry came %v after the nack, before its 200 ms backoff", waited)
	}
	if second[0].ID != "retry-2" || second[0].Attempt != 2 {
		t.Fatalf("retry = %+v, want retry-2 attempt 2", second[0])
	}

	m, err := c.Get(ctx, q, "retry-2")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Errors) != 1 || m.Errors[0].Attempt != 1 || m.Errors[0].Error != "PaymentDeclined: card declined" {
		t.Fatalf("error history = %+v, want attempt 1's error", m.Errors)
	}
	if m.LastError != "PaymentDeclined: card declined" || m.State != "in_flight" {
		t.Fatalf("message = %+v, want its last error, in flight", m)
	}
	if err := c.Ack(ctx, q, second[0].Receipt); err != nil {
		t.Fatal(err)
	}
}

func TestS3_DeadLetter(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	fail := func(id, text string) {
		t.Helper()
		if _, err := delayq.Send(ctx, c, q, order{Order: 3}, delayq.ID(id), delayq.MaxAttempts(1)); err != nil {
			t.Fatal(err)
		}
		got, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Wait: 5 * time.Second})
		if err != nil || len(got) != 1 || got[0].ID != id {
			t.Fatalf("receive = %+v, %v; want %s", got, err, id)
		}
		outcome, err := c.Nack(ctx, q, got[0].Receipt, delayq.NackOptions{Error: text})
		if err != nil || outcome != "dead" {
			t.Fatalf("nack of its only attempt = %q, %v; want dead", outcome, err)
		}
	}

	fail("dead-1", "ParseError: bad address")
	page, err := c.DeadLetters(ctx, q, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 1 || len(page.DeadLetters) != 1 {
		t.Fatalf("dead letters = %+v, want dead-1 alone", page)
	}
	dl := page.DeadLetters[0]
	if dl.ID != "dead-1" || dl.LastError != "ParseError: bad address" || len(dl.Errors) != 1 || dl.DiedAt.IsZero() {
		t.Fatalf("dead letter = %+v, want dead-1 with its error", dl)
	}
	var p order
	if err := dl.Payload.Decode(&p); err != nil || p.Order != 3 {
		t.Fatalf("dead letter payload = %+v, %v", p, err)
	}

	// Requeued, it is delivered again.
	if n, err := c.RequeueDead(ctx, q, "dead-1"); err != nil || n != 1 {
		t.Fatalf("requeue = %d, %v; want 1", n, err)
	}
	again, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(again) != 1 || again[0].ID != "dead-1" {
		t.Fatalf("after requeue: %+v, %v; want dead-1 delivered again", again, err)
	}
	if err := c.Ack(ctx, q, again[0].Receipt); err != nil {
		t.Fatal(err)
	}

	// Purge works on another one.
	fail("dead-2", "ParseError: no such order")
	if n, err := c.PurgeDead(ctx, q, "dead-2"); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1", n, err)
	}
	if page, err := c.DeadLetters(ctx, q, 0, 0); err != nil || page.Total != 0 {
		t.Fatalf("dead letters after purge = %+v, %v; want none", page, err)
	}
	if _, err := c.Get(ctx, q, "dead-2"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get of a purged dead letter: %v, want ErrNotFound", err)
	}
	if _, err := c.RequeueDead(ctx, q, "dead-2"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("requeue of a purged dead letter: %v, want ErrNotFound", err)
	}
}

func TestS5_Upsert(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)

	if _, err := delayq.Send(ctx, c, q, order{Order: 5, Note: "old"}, delayq.ID("u1"), delayq.Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	replaced, err := delayq.Send(ctx, c, q, order{Order: 5, Note: "new"}, delayq.ID("u1"),
		delayq.OnDuplicate(delayq.DuplicateReplace))
	if err != nil {
		t.Fatal(err)
	}
	if replaced.Replaced != "delayed" {
		t.Fatalf("upsert = %+v, want Replaced delayed", replaced)
	}

	got, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Max: 10, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "u1" || got[0].Payload.Note != "new" {
		t.Fatalf("deliveries = %+v, want u1 with the new payload, once", got)
	}
	more, err := delayq.Receive[order](ctx, c, q, delayq.ReceiveOptions{Max: 10, Wait: 300 * time.Millisecond})
	if err != nil || len(more) != 0 {
		t.Fatalf("a second delivery: %+v, %v; the old message must be gone", more, err)
	}

	plain, err := delayq.Send(ctx, c, q, order{Order: 5, Note: "again"}, delayq.ID("u1"))
	if err != nil || !plain.Duplicate || plain.ID != "u1" {
		t.Fatalf("plain repeat = %+v, %v; want duplicate", plain, err)
	}
	if err := c.Ack(ctx, q, got[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got[0].Payload.Note, "again") {
		t.Fatal("the duplicate changed the message")
	}
}
