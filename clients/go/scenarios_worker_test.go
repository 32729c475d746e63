package delayq_test

// The shared scenarios of clients/SCENARIOS.md that run a Worker: S4, S6 and S9.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func TestS4_OrderedGroup(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	if _, err := c.Configure(ctx, q, delayq.SetGroupConcurrency(1)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := delayq.Send(ctx, c, q, i, delayq.Group("order-7"), delayq.ID(fmt.Sprintf("step-%d", i))); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var order []int
	active, maxActive := 0, 0
	done := make(chan struct{}, 5)
	w, err := delayq.NewWorker(c, q, func(ctx context.Context, d delayq.Delivery[int]) error {
		mu.Lock()
		order = append(order, d.Payload)
		active++
		if active > maxActive {
			maxActive = active
		}
		mu.Unlock()
		// Long enough for a second handler to start meanwhile if the group allowed it.
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		active--
		mu.Unlock()
		return nil
	}, delayq.WorkerOptions[int]{
		Concurrency: 4, Wait: time.Second,
		OnCompleted: func(delayq.Delivery[int], time.Duration) { done <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	for i := 0; i < 5; i++ {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of 5 handled within 20 s", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxActive != 1 {
		t.Fatalf("%d handlers of the group ran at once, want 1", maxActive)
	}
	if fmt.Sprint(order) != "[0 1 2 3 4]" {
		t.Fatalf("handled in the order %v, want the send order [0 1 2 3 4]", order)
	}
}

func TestS6_GracefulStopUnderLoad(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	items := make([]delayq.BatchItem[int], 50)
	for i := range items {
		items[i] = delayq.Item(i, delayq.ID(fmt.Sprintf("load-%02d", i)))
	}
	if _, err := delayq.SendBatch(ctx, c, q, items); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	started := map[string]bool{}
	finished := map[string]bool{}
	completed := map[string]bool{}
	var lastEnd time.Time
	w, err := delayq.NewWorker(c, q, func(ctx context.Context, d delayq.Delivery[int]) error {
		mu.Lock()
		started[d.ID] = true
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		finished[d.ID] = true
		lastEnd = time.Now()
		mu.Unlock()
		return nil
	}, delayq.WorkerOptions[int]{
		Concurrency: 8, Wait: 5 * time.Second, Lease: 30 * time.Second,
		OnCompleted: func(d delayq.Delivery[int], _ time.Duration) {
			mu.Lock()
			completed[d.ID] = true
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	// Stop while handlers run: after some finished, with others in their handler.
	waitFor(t, 20*time.Second, "12 handlers started and some running", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(started) >= 12 && len(started) > len(finished), nil
	})
	stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped := time.Now()

	mu.Lock()
	defer mu.Unlock()
	if len(started) == 50 {
		t.Fatal("every message was handled before the stop: nothing was tested")
	}
	if stopped.Sub(lastEnd) > 2*time.Second {
		t.Fatalf("Stop returned %v after the last handler ended, want within 2 s", stopped.Sub(lastEnd))
	}
	for id := range started {
		if !finished[id] || !completed[id] {
			t.Errorf("%s started but did not finish and complete (finished %v, completed %v)", id, finished[id], completed[id])
		}
	}

	// At once, without waiting out any lease: every started message acked (gone), every
	// other one ready, none in flight.
	stats, err := c.Stats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if stats.InFlight != 0 || stats.Delayed != 0 || stats.Dead != 0 {
		t.Fatalf("after the stop: %d in flight, %d delayed, %d dead; want none", stats.InFlight, stats.Delayed, stats.Dead)
	}
	acked := 0
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("load-%02d", i)
		m, err := c.Get(ctx, q, id)
		switch {
		case started[id] && errors.Is(err, delayq.ErrNotFound):
			acked++
		case started[id]:
			t.Errorf("%s was handled but is %+v, %v; want acked (gone)", id, m, err)
		case err != nil || m.State != "ready":
			t.Errorf("%s was never started but is %+v, %v; want ready at once", id, m, err)
		}
	}
	if acked+int(stats.Ready) != 50 {
		t.Fatalf("acked %d + ready %d != 50", acked, stats.Ready)
	}
}

// PaymentDeclinedError is the typed error of S9's handler.
type PaymentDeclinedError struct{ Order int }

func (e *PaymentDeclinedError) Error() string {
	return fmt.Sprintf("card declined for order %d", e.Order)
}

// chargeCard fails the way application code does, deep in a call chain (deep enough that
// its stack goes past 4 KiB, so that the cut to 4 KiB is tested too).
func chargeCard(order, depth int) error {
	if depth > 0 {
		return chargeCard(order, depth-1)
	}
	return delayq.WithStack(&PaymentDeclinedError{Order: order})
}

func TestS9_HandlerFailureIsLoud(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	if _, err := delayq.Send(ctx, c, q, order{Order: 9}, delayq.ID("loud-9"), delayq.MaxAttempts(1)); err != nil {
		t.Fatal(err)
	}

	logs := &capturedLog{}
	type failure struct {
		d   delayq.Delivery[order]
		err error
	}
	failed := make(chan failure, 1)
	w, err := delayq.NewWorker(c, q, func(ctx context.Context, d delayq.Delivery[order]) error {
		return chargeCard(d.Payload.Order, 60)
	}, delayq.WorkerOptions[order]{
		Wait: time.Second, Logger: logs,
		OnFailed: func(d delayq.Delivery[order], err error) { failed <- failure{d, err} },
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	var f failure
	select {
	case f = <-failed:
	case <-time.After(15 * time.Second):
		t.Fatal("OnFailed was not called within 15 s")
	}
	// The hook has the message and the typed error.
	var declined *PaymentDeclinedError
	if f.d.ID != "loud-9" || !errors.As(f.err, &declined) || declined.Order != 9 {
		t.Fatalf("OnFailed(%+v, %v): want loud-9 and a *PaymentDeclinedError for order 9", f.d, f.err)
	}

	// Logged with its type, message and stack.
	firstLine := "delayq_test.PaymentDeclinedError: card declined for order 9"
	logged := logs.String()
	if !strings.Contains(logged, firstLine) || !strings.Contains(logged, "go_test.chargeCard") {
		t.Fatalf("the log does not show the error with its stack:\n%s", logged)
	}

	// The server's error history holds the type, message and stack, bounded to 4 KiB.
	sentText := delayq.FailureText(f.err)
	if len(sentText) != delayq.MaxErrorText || !strings.HasPrefix(sentText, firstLine+"\n") {
		t.Fatalf("the worker's error text is %d bytes, want the cut to %d starting with %q", len(sentText), delayq.MaxErrorText, firstLine)
	}
	var kept string
	waitFor(t, 10*time.Second, "the nack's error in the message's history", func() (bool, error) {
		m, err := c.Get(ctx, q, "loud-9")
		if err != nil || len(m.Errors) == 0 {
			return false, err
		}
		kept = m.Errors[len(m.Errors)-1].Error
		return m.State == "dead", nil
	})
	if !strings.HasPrefix(kept, firstLine+"\n") || !strings.Contains(kept, "go_test.chargeCard") {
		t.Fatalf("the server kept %q, want the type, message and stack", kept)
	}
	if kept != sentText {
		t.Fatalf("the server kept %d bytes of the %d-byte error text (a server that cuts the newest error "+
			"to 512 bytes instead of 4 KiB fails here)", len(kept), len(sentText))
	}
}
