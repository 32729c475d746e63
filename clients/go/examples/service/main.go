// Command service is a small order-closing service on delayq: each order it places sends
// a delayed "close order N unless paid" message (15 minutes in real life), with the caller
// id close-<order> so a retried send is harmless and a payment can cancel it; each payment
// cancels that message; a Worker closes the orders still unpaid when their messages come
// due. It runs until SIGINT or SIGTERM, then stops gracefully: no new messages, running
// handlers finish and are acked, the rest are handed back for the next instance.
//
//	go run ./examples/service -url http://127.0.0.1:7400 -orders 6 -close-after 2s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

// closeOrder is the payload of a close-order message.
type closeOrder struct {
	Order string `json:"order"`
}

// shop is the service's state: each order's status ("placed", "paid" or "closed").
type shop struct {
	mu     sync.Mutex
	orders map[string]string
	out    io.Writer
}

func (s *shop) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format+"\n", args...)
}

// place records an order and sends its close-order message, due closeAfter from now.
func (s *shop) place(ctx context.Context, c *delayq.Client, queue, order string, closeAfter time.Duration) error {
	s.mu.Lock()
	s.orders[order] = "placed"
	s.mu.Unlock()
	_, err := delayq.Send(ctx, c, queue, closeOrder{Order: order},
		delayq.ID("close-"+order), delayq.Delay(closeAfter), delayq.MaxAttempts(5))
	return err
}

// pay records a payment and cancels the order's close-order message.
func (s *shop) pay(ctx context.Context, c *delayq.Client, queue, order string) error {
	s.mu.Lock()
	s.orders[order] = "paid"
	s.mu.Unlock()
	_, err := c.Cancel(ctx, queue, "close-"+order)
	switch {
	case err == nil:
		s.say("order %s paid: its close-order message cancelled", order)
	case errors.Is(err, delayq.ErrWrongState), errors.Is(err, delayq.ErrNotFound):
		// Its message is being handled, or was: the handler sees the order paid.
		s.say("order %s paid as its close-order message was handled", order)
	default:
		return err
	}
	return nil
}

// closeIfUnpaid is the Worker's handler. Idempotent: a message delivered again (after a
// crash, say) finds the order closed already and does nothing.
func (s *shop) closeIfUnpaid(ctx context.Context, d delayq.Delivery[closeOrder]) error {
	s.mu.Lock()
	status, known := s.orders[d.Payload.Order]
	if known && status == "placed" {
		s.orders[d.Payload.Order] = "closed"
	}
	s.mu.Unlock()
	switch {
	case !known:
		// Not ours (another instance's order): fail for good, it goes to the dead letters.
		return delayq.Permanent(fmt.Errorf("unknown order %q", d.Payload.Order))
	case status == "placed":
		s.say("order %s closed: unpaid when due (attempt %d)", d.Payload.Order, d.Attempt)
	}
	return nil
}

func (s *shop) count(status string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.orders {
		if st == status {
			n++
		}
	}
	return n
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("service", flag.ContinueOnError)
	flags.SetOutput(stderr)
	url := flags.String("url", envOr("DELAYQ_URL", "http://127.0.0.1:7400"), "the delayq server")
	queue := flags.String("queue", "close-unpaid-orders", "the queue of close-order messages")
	orders := flags.Int("orders", 6, "orders to place (every second one is paid at once)")
	closeAfter := flags.Duration("close-after", 15*time.Minute, "how long an order may stay unpaid")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	logger := log.New(stderr, "service: ", log.LstdFlags)
	// A token with the send and consume roles, when the server has tokens.
	c := delayq.NewClient(*url, delayq.WithToken(os.Getenv("DELAYQ_TOKEN")))

	// SIGINT or SIGTERM cancels ctx, which stops the Worker gracefully.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	s := &shop{orders: map[string]string{}, out: stdout}
	w, err := delayq.NewWorker(c, *queue, s.closeIfUnpaid, delayq.WorkerOptions[closeOrder]{
		Concurrency: 4, Wait: 5 * time.Second, Logger: logger, Grace: 10 * time.Second,
	})
	if err != nil {
		logger.Print(err)
		return 1
	}
	batch := time.Now().Unix()
	for i := 1; i <= *orders; i++ {
		order := fmt.Sprintf("%d-%d", batch, i)
		if err := s.place(ctx, c, *queue, order, *closeAfter); err != nil {
			logger.Printf("placing order %s: %v", order, err)
			return 1
		}
		if i%2 == 0 {
			if err := s.pay(ctx, c, *queue, order); err != nil {
				logger.Printf("paying order %s: %v", order, err)
				return 1
			}
		}
	}
	s.say("placed %d orders; the unpaid ones close after %v; SIGINT or SIGTERM stops", *orders, *closeAfter)
	if err := w.Run(ctx); err != nil {
		logger.Print(err)
		return 1
	}
	s.say("stopped: %d placed, %d paid, %d closed", *orders, s.count("paid"), s.count("closed"))
	return 0
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
