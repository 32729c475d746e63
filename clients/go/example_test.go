package delayq_test

// The README's Go code, verbatim (readme_test.go checks that each of its ```go blocks is in
// this file, and runs the functions against a real server), so the README cannot drift
// from what compiles and works.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

// closedOrders is what closeIfUnpaid did, for the test of the README's worker.
var closedOrders sync.Map

// closeIfUnpaid stands for the application's own code in the README's worker.
func closeIfUnpaid(ctx context.Context, order int) error {
	closedOrders.Store(order, true)
	return nil
}

// README: quick start.

type Order struct {
	ID int `json:"id"`
}

func quickStart(ctx context.Context, url string) error {
	c := delayq.NewClient(url) // e.g. "http://127.0.0.1:7400"

	// Due in a second; the caller id makes a retried send harmless and lets a payment cancel it.
	sent, err := delayq.Send(ctx, c, "orders", Order{ID: 1234},
		delayq.Delay(time.Second), delayq.ID("close-1234"))
	if err != nil {
		return err
	}
	fmt.Println("sent", sent.ID, "due at", sent.Due.Format(time.RFC3339))

	// Wait up to 5 s for it (a long poll), leased for 30 s.
	deliveries, err := delayq.Receive[Order](ctx, c, "orders",
		delayq.ReceiveOptions{Max: 10, Lease: 30 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		return err
	}
	for _, d := range deliveries {
		fmt.Println("close order", d.Payload.ID, "attempt", d.Attempt)
		if err := c.Ack(ctx, d.Queue, d.Receipt); err != nil {
			return err
		}
	}
	return nil
}

// README: the worker.

func serve(url string) error {
	// SIGINT or SIGTERM cancels ctx: the Worker then stops gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return closeUnpaidOrders(ctx, delayq.NewClient(url))
}

func closeUnpaidOrders(ctx context.Context, c *delayq.Client) error {
	w, err := delayq.NewWorker(c, "orders", func(ctx context.Context, d delayq.Delivery[Order]) error {
		return closeIfUnpaid(ctx, d.Payload.ID) // nil acks; an error nacks (retried by its backoff)
	}, delayq.WorkerOptions[Order]{
		Concurrency: 8,                // handlers at once
		Lease:       30 * time.Second, // extended every 10 s while a handler runs
		OnFailed: func(d delayq.Delivery[Order], err error) {
			log.Printf("order %d, attempt %d: %v", d.Payload.ID, d.Attempt, err)
		},
	})
	if err != nil {
		return err
	}
	return w.Run(ctx) // returns once stopped: running handlers finished and acked, the rest released
}

// README: failures.

type CardDeclinedError struct{ Order int }

func (e *CardDeclinedError) Error() string { return fmt.Sprintf("card declined for order %d", e.Order) }

func charge(ctx context.Context, d delayq.Delivery[Order]) error {
	if d.Attempt >= 3 {
		// No retry will fix it: a dead letter now.
		return delayq.Permanent(&CardDeclinedError{Order: d.Payload.ID})
	}
	// Nacked with "<package>.CardDeclinedError: card declined for order 1234" and, on the
	// lines after it, the stack of this call; retried after a minute.
	return delayq.RetryLater(delayq.WithStack(&CardDeclinedError{Order: d.Payload.ID}), time.Minute)
}

// README: errors.

func cancelClose(ctx context.Context, c *delayq.Client, order int) error {
	_, err := c.Cancel(ctx, "orders", fmt.Sprintf("close-%d", order))
	var apiErr *delayq.APIError
	switch {
	case err == nil, errors.Is(err, delayq.ErrNotFound):
		return nil // cancelled, or there was nothing to cancel
	case errors.Is(err, delayq.ErrWrongState):
		return fmt.Errorf("order %d is being closed right now", order)
	case errors.As(err, &apiErr):
		return fmt.Errorf("delayq refused: %d %s: %s", apiErr.Status, apiErr.Code, apiErr.Message)
	default:
		return err // no answer: a *delayq.TransportError (the connection, a timeout, ctx)
	}
}

// README: verifying pushes.

func pushReceiver(keys []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body) // the bytes as sent: verify before parsing
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		// Zero time: now; zero tolerance: 5 minutes.
		if err := delayq.VerifyPush(keys, r.Header, body, time.Time{}, 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		fmt.Println("pushed", r.Header.Get("Delayq-Message-Id"), "attempt", r.Header.Get("Delayq-Attempt"))
		w.WriteHeader(http.StatusOK) // a 2xx acks it
	})
}

// README: administration.

type Report struct {
	Name string `json:"name"`
}

func dailyReports(ctx context.Context, c *delayq.Client) error {
	// A message to "reports" every weekday at 09:30 in Berlin; after downtime, the latest one missed.
	s, err := delayq.PutSchedule(ctx, c, "reports", "daily-sales", Report{Name: "sales"}, delayq.ScheduleSpec{
		Cron: "0 30 9 * * MON-FRI", TimeZone: "Europe/Berlin", Missed: delayq.MissedOnce,
	})
	if err != nil {
		return err
	}
	fmt.Println("next report at", s.NextTicks[0].Format(time.RFC3339))

	// Record the queue's events, and follow its acks as they happen, until ctx ends.
	if _, err := c.Configure(ctx, "reports", delayq.SetEvents(0)); err != nil {
		return err
	}
	return c.FollowEvents(ctx, "reports", delayq.EventQuery{Kinds: []delayq.EventKind{delayq.EventAcked}},
		func(e delayq.Event) error {
			fmt.Println("report", e.ID, "done at", e.At.Format(time.RFC3339)) // keep e.Cursor to resume there
			return nil
		})
}
