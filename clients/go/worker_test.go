package delayq_test

// Worker behaviour beyond the shared scenarios, against the real server.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

// newTestWorker makes a Worker whose failures go to the test's log.
func newTestWorker[T any](t *testing.T, c *delayq.Client, q string, h delayq.Handler[T], opts delayq.WorkerOptions[T]) *delayq.Worker[T] {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = &capturedLog{}
	}
	w, err := delayq.NewWorker(c, q, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func messageState(t *testing.T, c *delayq.Client, q, id string) (*delayq.Message, error) {
	return c.Get(context.Background(), q, id)
}

func TestWorkerPanicAndPermanent(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	delayq.Send(ctx, c, q, "panic", delayq.ID("p1"), delayq.MaxAttempts(1))
	delayq.Send(ctx, c, q, "permanent", delayq.ID("p2"), delayq.MaxAttempts(5))
	logs := &capturedLog{}
	var failures int32
	w := newTestWorker(t, c, q, func(ctx context.Context, d delayq.Delivery[string]) error {
		if d.Payload == "panic" {
			var m map[string]int
			m["x"] = 1 // a nil map: a runtime panic
		}
		return delayq.Permanent(errors.New("no such customer"))
	}, delayq.WorkerOptions[string]{Wait: time.Second, Concurrency: 2, Logger: logs,
		OnFailed: func(delayq.Delivery[string], error) { atomic.AddInt32(&failures, 1) }})
	runWorker(t, w)
	waitFor(t, 10*time.Second, "both dead", func() (bool, error) {
		page, err := c.DeadLetters(ctx, q, 0, 10)
		return err == nil && page.Total == 2, err
	})
	m, _ := messageState(t, c, q, "p1")
	if !strings.HasPrefix(m.LastError, "panic: assignment to entry in nil map\n") || !strings.Contains(m.LastError, "TestWorkerPanicAndPermanent") {
		t.Errorf("a panic's error: %q, want its value and the stack of the handler", m.LastError)
	}
	m, _ = messageState(t, c, q, "p2")
	if m.Attempts != 1 || m.LastError != "errors.errorString: no such customer" {
		t.Errorf("a permanent failure: %d attempts, %q; want a dead letter after its first", m.Attempts, m.LastError)
	}
	if atomic.LoadInt32(&failures) != 2 || !strings.Contains(logs.String(), "message p1 (attempt 1) failed: panic:") {
		t.Errorf("OnFailed %d times; log:\n%s", failures, logs)
	}
}

func TestWorkerHeartbeatKeepsTheLease(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	delayq.Send(ctx, c, q, 1, delayq.ID("long"))
	var errs []error
	var mu sync.Mutex
	done := make(chan struct{})
	started := make(chan struct{})
	w := newTestWorker(t, c, q, func(ctx context.Context, d delayq.Delivery[int]) error {
		close(started)
		select {
		case <-time.After(2500 * time.Millisecond): // two and a half leases
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, delayq.WorkerOptions[int]{Lease: time.Second, Wait: time.Second,
		OnCompleted: func(delayq.Delivery[int], time.Duration) { close(done) },
		OnError:     func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }})
	runWorker(t, w)
	<-started
	// Meanwhile another consumer never gets it: its lease is kept.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		got, err := delayq.Receive[int](ctx, c, q, delayq.ReceiveOptions{Wait: 200 * time.Millisecond})
		if err != nil || len(got) > 0 {
			t.Fatalf("another consumer got %+v, %v while the handler ran", got, err)
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not complete")
	}
	// Its ack may go with the worker's next receive, just after.
	waitFor(t, 5*time.Second, "the message acked", func() (bool, error) {
		_, err := c.Get(ctx, q, "long")
		return errors.Is(err, delayq.ErrNotFound), err
	})
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("worker errors: %v", errs)
	}
}

func TestWorkerHandlerTimeout(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	delayq.Send(ctx, c, q, 1, delayq.ID("slow"), delayq.HandlerTimeout(300*time.Millisecond), delayq.MaxAttempts(1))
	seen := make(chan error, 1)
	w := newTestWorker(t, c, q, func(ctx context.Context, d delayq.Delivery[int]) error {
		if d.HandlerTimeout != 300*time.Millisecond {
			t.Errorf("HandlerTimeout = %v", d.HandlerTimeout)
		}
		<-ctx.Done()
		seen <- ctx.Err()
		return ctx.Err()
	}, delayq.WorkerOptions[int]{Wait: time.Second})
	runWorker(t, w)
	select {
	case err := <-seen:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the handler's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	waitFor(t, 10*time.Second, "the timed-out message dead", func() (bool, error) {
		m, err := c.Get(ctx, q, "slow")
		return err == nil && m.State == "dead" && m.LastError == "delayq.HandlerTimeoutError: handler timed out after 300ms", err
	})
}

// routeCounter is a proxy in front of the shared server that counts the requests by path
// and keeps the receive bodies.
type routeCounter struct {
	mu       sync.Mutex
	byPath   map[string]int
	receives []string
}

func proxy(t *testing.T) (*routeCounter, string) {
	target, _ := url.Parse(server(t).URL)
	rc := &routeCounter{byPath: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	// A long poll the Worker cancels as it stops is no news.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		parts := strings.Split(r.URL.Path, "/")
		rc.mu.Lock()
		rc.byPath[parts[len(parts)-1]]++
		if strings.HasSuffix(r.URL.Path, "/receive") {
			rc.receives = append(rc.receives, string(body))
		}
		rc.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return rc, s.URL
}

func TestWorkerCarriesAcksOnItsNextReceive(t *testing.T) {
	ctx, q := testContext(t), queueName(t)
	rc, url := proxy(t)
	c := delayq.NewClient(url)
	for i := 0; i < 5; i++ {
		delayq.Send(ctx, c, q, i)
	}
	var completed int32
	w := newTestWorker(t, c, q, func(ctx context.Context, d delayq.Delivery[int]) error { return nil },
		delayq.WorkerOptions[int]{Concurrency: 1, Wait: time.Second,
			OnCompleted: func(delayq.Delivery[int], time.Duration) { atomic.AddInt32(&completed, 1) }})
	runWorker(t, w)
	waitFor(t, 10*time.Second, "5 completed", func() (bool, error) { return atomic.LoadInt32(&completed) == 5, nil })
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stats, _ := c.Stats(ctx, q)
	if stats.Ready+stats.InFlight != 0 {
		t.Fatalf("after the stop: %+v, want every message acked", stats)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	carried := 0
	for _, body := range rc.receives {
		if strings.Contains(body, `"acks"`) {
			carried++
		}
	}
	// With one slot, each handler ends while the loop waits for its slot: its ack goes
	// with the next receive; the last one's is made at the stop, on its own.
	if carried < 4 || rc.byPath["ack"] > 1 {
		t.Fatalf("%d receives carried acks, %d acks on their own; want 4 or more and at most 1", carried, rc.byPath["ack"])
	}
}

func TestMultiQueueWorker(t *testing.T) {
	ctx, c := testContext(t), client(t)
	high, low := queueName(t), queueName(t)
	delayq.Send(ctx, c, low, "l")
	delayq.Send(ctx, c, high, "h")
	var mu sync.Mutex
	seen := map[string]string{}
	w, err := delayq.NewMultiWorker(c, delayq.QueueSelection{Queues: []string{high, low}},
		func(ctx context.Context, d delayq.Delivery[string]) error {
			mu.Lock()
			seen[d.Queue] = d.Payload
			mu.Unlock()
			return nil
		}, delayq.WorkerOptions[string]{Wait: time.Second, Logger: &capturedLog{}})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, 10*time.Second, "both queues handled and acked", func() (bool, error) {
		h, err1 := c.Stats(ctx, high)
		l, err2 := c.Stats(ctx, low)
		mu.Lock()
		defer mu.Unlock()
		return err1 == nil && err2 == nil && h.Ready+h.InFlight+l.Ready+l.InFlight == 0 && len(seen) == 2, err1
	})
	if seen[high] != "h" || seen[low] != "l" {
		t.Fatalf("seen %v", seen)
	}
	if _, err := delayq.NewMultiWorker(c, delayq.QueueSelection{}, func(context.Context, delayq.Delivery[int]) error { return nil },
		delayq.WorkerOptions[int]{}); err == nil {
		t.Fatal("a worker of no queue was made")
	}
}

func TestStopPastTheGraceReleases(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	delayq.Send(ctx, c, q, 1, delayq.ID("stuck"))
	started := make(chan struct{})
	cancelled := make(chan struct{})
	w := newTestWorker(t, c, q, func(ctx context.Context, d delayq.Delivery[int]) error {
		close(started)
		<-ctx.Done() // it would run on forever: only the grace's end stops it
		close(cancelled)
		return ctx.Err()
	}, delayq.WorkerOptions[int]{Wait: time.Second, Grace: 200 * time.Millisecond})
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	stopRun() // a cancelled context stops the Worker as Stop does
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its grace")
	}
	<-cancelled
	m, err := c.Get(ctx, q, "stuck")
	if err != nil || m.State != "ready" || m.Attempts != 0 {
		t.Fatalf("after the grace: %+v, %v; want ready at once, the attempt not counted", m, err)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("a Worker ran twice")
	}
}

func TestStopBeforeRun(t *testing.T) {
	w := newTestWorker(t, client(t), queueName(t), func(context.Context, delayq.Delivery[int]) error { return nil },
		delayq.WorkerOptions[int]{})
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("Run after Stop: %v, want nil at once", err)
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("Done is not closed")
	}
}

// A handler whose lease cannot be extended (the server unreachable for extends) is cancelled
// once a fifth of its lease is left, not when an extend finally fails: the server hands the
// message to another consumer the moment the lease ends.
func TestWorkerCancelsAHandlerWellBeforeAnUnrenewedLeaseEnds(t *testing.T) {
	ctx, q := testContext(t), queueName(t)
	target, _ := url.Parse(server(t).URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var cut atomic.Bool
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Load() && strings.HasSuffix(r.URL.Path, "/extend") {
			// Held until the client gives up on it (the server notices that only once the
			// body was read).
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	c := delayq.NewClient(s.URL)
	lease := 1500 * time.Millisecond
	var startedAt, cancelledAt atomic.Int64
	w := newTestWorker(t, c, q, func(ctx context.Context, d delayq.Delivery[string]) error {
		startedAt.Store(time.Now().UnixNano())
		<-ctx.Done()
		cancelledAt.Store(time.Now().UnixNano())
		return ctx.Err()
	}, delayq.WorkerOptions[string]{Wait: time.Second, Lease: lease})
	runWorker(t, w)
	if _, err := delayq.Send(ctx, c, q, "x", delayq.ID("m1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the handler to start", func() (bool, error) { return startedAt.Load() != 0, nil })
	cut.Store(true)
	waitFor(t, 10*time.Second, "the handler to be cancelled", func() (bool, error) { return cancelledAt.Load() != 0, nil })
	cut.Store(false)
	ran := time.Duration(cancelledAt.Load() - startedAt.Load())
	if ran > lease-lease/10 {
		t.Fatalf("the handler ran %v of its %v lease unrenewed before it was cancelled", ran, lease)
	}
}
