package delayq

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"
)

// Handler handles one delivery. Returning nil acks it; an error nacks it with
// FailureText(err): retried by its backoff (after RetryAfter for a RetryLaterError), or a
// dead letter now for a PermanentError. A panic is recovered and counts as an error with
// its stack. ctx is cancelled when the result no longer counts: the lease was lost, the
// handler timeout passed, or the Worker's stop grace ran out (the delivery was released).
type Handler[T any] func(ctx context.Context, d Delivery[T]) error

// Logger is where a Worker writes what goes wrong (*log.Logger is one).
type Logger interface {
	Printf(format string, v ...any)
}

// WorkerOptions configure a Worker. Zero fields take the defaults.
type WorkerOptions[T any] struct {
	// Concurrency is how many handlers run at once (default 1).
	Concurrency int
	// Lease is each delivery's lease (default 30 s), renewed while its handler runs.
	Lease time.Duration
	// Wait is the long poll of each receive (default 10 s; at most the server's --max-wait).
	Wait time.Duration
	// HeartbeatEvery is how often the leases of running handlers are extended (default a
	// third of Lease), all in one request per queue.
	HeartbeatEvery time.Duration
	// HandlerTimeout bounds a handler (0: none), unless its message has its own.
	HandlerTimeout time.Duration
	// Grace is how long a stop lets running handlers finish (default 30 s); those still
	// running then are cancelled and their deliveries released.
	Grace time.Duration
	// RetryAfter retries a failed message after this long instead of by its backoff (0: by
	// its backoff).
	RetryAfter time.Duration
	// ErrorBackoff is the pause after a failed receive (default 1 s), doubled while they
	// keep failing, at most 30 s.
	ErrorBackoff time.Duration
	// Logger gets failed handlers (with their stack) and the Worker's own failures
	// (default log.Default()).
	Logger Logger
	// The hooks are called from the Worker's goroutines, several at once when handlers
	// end together: make them safe for concurrent use.
	//
	// OnCompleted is called after a handler succeeded (its ack made, or carried on the
	// next receive), with how long it took.
	OnCompleted func(d Delivery[T], took time.Duration)
	// OnFailed is called after a handler failed (or its payload did not decode, or it
	// timed out), with its error, as the delivery is nacked.
	OnFailed func(d Delivery[T], err error)
	// OnError is called with the Worker's own failures: a receive, an ack, an extend, a
	// lost lease (default: they are logged).
	OnError func(err error)
}

// maxReceive is the most messages one receive asks for: the server's default --max-batch.
const maxReceive = 1000

// QueueSelection is the queues a Worker of NewMultiWorker serves: Queues in strict order
// (the first highest), or Weights (served in proportion).
type QueueSelection struct {
	// Queues in strict priority order, the first highest (or give Weights).
	Queues []string
	// Weights serves queues in proportion to their weights, 1 to 1000 (or give Queues).
	Weights map[string]int
}

// Worker receives messages and runs a Handler on each: Concurrency at once, long-polling,
// extending the leases of running handlers, acking with its next receive, nacking
// failures, and stopping gracefully. Make one with NewWorker and Run it.
type Worker[T any] struct {
	c       *Client
	queue   string         // the queue, for a Worker of one queue
	sel     QueueSelection // the queues, for one of several
	handler Handler[T]
	opts    WorkerOptions[T]

	mu             sync.Mutex
	jobs           map[*job[T]]struct{}
	carried        []string // receipts of handlers that succeeded, acked by the next receive
	waitingForSlot bool     // the receive loop waits for a handler to end
	stopping       bool
	started        bool
	stoppedFirst   bool // Stop came before Run: Run returns at once

	slot     chan struct{} // a handler ended (buffered: a wake-up is never lost)
	stopCh   chan struct{} // closed when a stop is asked
	hurry    chan struct{} // closed when the stop's grace is cut short
	done     chan struct{} // closed when Run has returned
	stopOnce sync.Once
	hurryOne sync.Once
	handlers sync.WaitGroup
}

// NewWorker makes a Worker of one queue: its acks go with its next receive.
func NewWorker[T any](c *Client, queue string, handler Handler[T], opts WorkerOptions[T]) (*Worker[T], error) {
	if queue == "" {
		return nil, &ArgumentError{Arg: "queue", Problem: "required"}
	}
	return newWorker(c, queue, QueueSelection{}, handler, opts)
}

// NewMultiWorker makes a Worker of several queues, received from in one long poll
// (POST /v1/receive). Such a receive takes no acks, so each ack is a request of its own.
func NewMultiWorker[T any](c *Client, from QueueSelection, handler Handler[T], opts WorkerOptions[T]) (*Worker[T], error) {
	if (len(from.Queues) == 0) == (len(from.Weights) == 0) {
		return nil, &ArgumentError{Arg: "QueueSelection", Problem: "give Queues (strict order) or Weights, one of them"}
	}
	return newWorker(c, "", from, handler, opts)
}

func newWorker[T any](c *Client, queue string, sel QueueSelection, handler Handler[T], opts WorkerOptions[T]) (*Worker[T], error) {
	if c == nil || handler == nil {
		return nil, &ArgumentError{Arg: "handler", Problem: "a client and a handler are required"}
	}
	for name, d := range map[string]time.Duration{
		"Lease": opts.Lease, "Wait": opts.Wait, "HeartbeatEvery": opts.HeartbeatEvery,
		"HandlerTimeout": opts.HandlerTimeout, "Grace": opts.Grace, "RetryAfter": opts.RetryAfter,
		"ErrorBackoff": opts.ErrorBackoff,
	} {
		if d < 0 {
			return nil, &ArgumentError{Arg: name, Problem: fmt.Sprintf("%v is negative", d)}
		}
	}
	if opts.Concurrency < 0 {
		return nil, &ArgumentError{Arg: "Concurrency", Problem: "is negative"}
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 1
	}
	if opts.Lease == 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Wait == 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.HeartbeatEvery == 0 {
		opts.HeartbeatEvery = opts.Lease / 3
	}
	if opts.Grace == 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.ErrorBackoff == 0 {
		opts.ErrorBackoff = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = log.Default()
	}
	return &Worker[T]{
		c: c, queue: queue, sel: sel, handler: handler, opts: opts,
		jobs: map[*job[T]]struct{}{}, slot: make(chan struct{}, 1),
		stopCh: make(chan struct{}), hurry: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Run works until ctx is cancelled or Stop is called, then stops gracefully and returns
// nil: it stops receiving at once (a long poll in flight is cancelled), lets running
// handlers finish within Grace and acks them, and releases every delivery it holds
// unfinished, so that it is ready again at once for another consumer. Handlers get a
// context that carries ctx's values but not its cancellation: a stop lets them finish.
// A Worker runs once.
func (w *Worker[T]) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		stoppedFirst := w.stoppedFirst
		w.mu.Unlock()
		if stoppedFirst {
			return nil // stopped before it ran: nothing to do
		}
		return errors.New("delayq: a Worker runs once")
	}
	w.started = true
	w.mu.Unlock()
	defer close(w.done)

	base := detached{ctx}
	poll, cancelPoll := context.WithCancel(base)
	defer cancelPoll()
	go func() {
		select {
		case <-ctx.Done():
			w.requestStop()
		case <-w.stopCh:
		}
		// The long poll in flight ends now: the server claims nothing more for a receive
		// whose client has gone.
		cancelPoll()
	}()
	beat := make(chan struct{})
	beaten := make(chan struct{})
	go w.heartbeat(base, beat, beaten)

	w.receiveLoop(poll, base)
	w.shutDown(base)
	close(beat)
	<-beaten
	return nil
}

// Stop asks the Worker to stop and waits until Run has returned. When ctx ends first, the
// grace is cut short: running handlers are cancelled and their deliveries released, and
// Stop answers ctx.Err() once that is done. A Worker never run is stopped at once.
func (w *Worker[T]) Stop(ctx context.Context) error {
	w.requestStop()
	w.mu.Lock()
	if !w.started {
		w.started, w.stoppedFirst = true, true
		close(w.done)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.hurryOne.Do(func() { close(w.hurry) })
		<-w.done
		return ctx.Err()
	}
}

// Done is closed once the Worker has stopped.
func (w *Worker[T]) Done() <-chan struct{} { return w.done }

// Active counts the handlers running now.
func (w *Worker[T]) Active() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}

func (w *Worker[T]) requestStop() {
	w.stopOnce.Do(func() {
		w.mu.Lock()
		w.stopping = true
		w.mu.Unlock()
		close(w.stopCh)
	})
}

func (w *Worker[T]) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

// receiveLoop receives as many deliveries as there are free handler slots, starts a
// handler on each, and waits for a slot when all are busy. It returns once stopping.
func (w *Worker[T]) receiveLoop(poll, base context.Context) {
	pause := w.opts.ErrorBackoff
	for {
		w.mu.Lock()
		for len(w.jobs) >= w.opts.Concurrency && !w.stopping {
			w.waitingForSlot = true
			w.mu.Unlock()
			select {
			case <-w.slot:
			case <-w.stopCh:
			}
			w.mu.Lock()
		}
		w.waitingForSlot = false
		if w.stopping {
			w.mu.Unlock()
			return
		}
		free := w.opts.Concurrency - len(w.jobs)
		if free > maxReceive {
			free = maxReceive
		}
		acks := w.carried
		w.carried = nil
		w.mu.Unlock()

		sentAt := time.Now()
		deliveries, err := w.receive(poll, acks, free)
		var bad *PayloadError
		if errors.As(err, &bad) {
			w.refusePayloads(base, bad)
			err = nil
		}
		if err != nil {
			// Whether the acks it carried were made is unknown: they are made again, on
			// their own (one made already answers "not ok", which is fine).
			w.ackOnTheirOwn(base, acks)
			if w.isStopping() {
				return
			}
			w.report(fmt.Errorf("delayq worker: receive failed (pausing %v): %w", pause, err))
			select {
			case <-time.After(pause):
			case <-w.stopCh:
			}
			if pause *= 2; pause > 30*time.Second {
				pause = 30 * time.Second
			}
			continue
		}
		pause = w.opts.ErrorBackoff
		if len(deliveries) > 0 && time.Since(sentAt) >= w.opts.Lease-leaseMargin(w.opts.Lease) {
			// The claim came somewhere in a wait about as long as a lease: its lease may have
			// ended, or be within its margin. Renew before starting.
			sentAt = time.Now()
			deliveries = w.renew(base, deliveries)
		}
		w.startAll(base, deliveries, sentAt)
	}
}

// receive makes one receive; a Worker of one queue carries acks on it.
func (w *Worker[T]) receive(ctx context.Context, acks []string, max int) ([]Delivery[T], error) {
	opts := ReceiveOptions{Max: max, Lease: w.opts.Lease, Wait: w.opts.Wait}
	if w.queue == "" {
		return ReceiveMany[T](ctx, w.c, MultiReceiveOptions{Queues: w.sel.Queues, Weights: w.sel.Weights, ReceiveOptions: opts})
	}
	acked, deliveries, err := AckAndReceive[T](ctx, w.c, w.queue, acks, opts)
	for _, a := range acked {
		if !a.OK {
			w.report(fmt.Errorf("delayq worker: %s: the lease of %s was lost before its ack: it will be delivered again", w.queue, a.Receipt))
		}
	}
	return deliveries, err
}

// startAll starts a handler on each delivery, unless the Worker is stopping: deliveries
// received as it stops are released, never started.
func (w *Worker[T]) startAll(base context.Context, deliveries []Delivery[T], claimedAt time.Time) {
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		w.release(base, deliveries)
		return
	}
	for _, d := range deliveries {
		j, timeout := w.newJob(base, d, claimedAt)
		w.jobs[j] = struct{}{}
		w.handlers.Add(1)
		go w.run(base, j, timeout)
	}
	w.mu.Unlock()
}

// shutDown runs once the receive loop has returned: it acks what was carried, waits for
// the running handlers within the grace, then releases the deliveries still unfinished.
func (w *Worker[T]) shutDown(base context.Context) {
	w.mu.Lock()
	acks := w.carried
	w.carried = nil
	w.mu.Unlock()
	w.ackOnTheirOwn(base, acks)

	finished := make(chan struct{})
	go func() { w.handlers.Wait(); close(finished) }()
	grace := time.NewTimer(w.opts.Grace)
	defer grace.Stop()
	select {
	case <-finished:
		return
	case <-grace.C:
	case <-w.hurry:
	}
	w.mu.Lock()
	var unfinished []Delivery[T]
	for j := range w.jobs {
		if j.decide(jobReleased) {
			j.cancel()
			unfinished = append(unfinished, j.d)
		}
	}
	w.mu.Unlock()
	w.release(base, unfinished)
}

// detached carries its parent's values but not its cancellation or deadline (Go 1.21's
// context.WithoutCancel, for Go 1.19): what settles a delivery must outlive a stop.
type detached struct{ parent context.Context }

// Deadline: none.
func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done: never.
func (detached) Done() <-chan struct{} { return nil }

// Err: never.
func (detached) Err() error { return nil }

// Value is the parent's.
func (d detached) Value(key any) any { return d.parent.Value(key) }
