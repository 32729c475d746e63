package delayq

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// settleTimeout bounds an ack, nack, release or extend a Worker makes on its own behalf.
const settleTimeout = 10 * time.Second

// extendChunk is the most receipts in one extend (the server's default batch limit is 1000).
const extendChunk = 500

// leaseMargin is how long before its lease ends a handler whose lease could not be extended
// is cancelled: a fifth of the lease. Cancelling only once an extend fails would leave it
// running after the server handed the message to another consumer, which happens the moment
// the lease ends; and a busy process acts on its timers late. With heartbeats every third of
// the lease, a lease still gets two tries at renewal first.
func leaseMargin(lease time.Duration) time.Duration { return lease / 5 }

// A job's outcome is decided once: by its handler ending, its timeout, a lost lease or the
// stop's grace ending. Whoever decides first settles it; the others do nothing, so that a
// delivery is never acked after it was released, nor nacked twice.
const (
	jobRunning int32 = iota
	jobFinished
	jobTimedOut
	jobReleased
	jobLost
)

// job is one delivery in a handler's hands.
type job[T any] struct {
	d      Delivery[T]
	ctx    context.Context
	cancel context.CancelFunc
	state  int32
	// leaseEnds is when the lease surely still holds, by this process's clock (counted
	// from before the request that set it). Guarded by the Worker's mu.
	leaseEnds time.Time
	// leaseTimer cancels the job as lost once only the margin of its lease is left; each
	// renewal moves it. Guarded by the Worker's mu.
	leaseTimer *time.Timer
}

func (j *job[T]) decide(state int32) bool {
	return atomic.CompareAndSwapInt32(&j.state, jobRunning, state)
}

func (j *job[T]) running() bool { return atomic.LoadInt32(&j.state) == jobRunning }

// newJob makes the job of d with its handler's context: cancelled by the job's outcome,
// and by the handler timeout (the message's own, else the Worker's).
func (w *Worker[T]) newJob(base context.Context, d Delivery[T], claimedAt time.Time) (*job[T], time.Duration) {
	j := &job[T]{d: d, leaseEnds: claimedAt.Add(w.opts.Lease)}
	j.leaseTimer = time.AfterFunc(w.untilMargin(j), func() { w.lose(j) })
	timeout := d.HandlerTimeout
	if timeout == 0 {
		timeout = w.opts.HandlerTimeout
	}
	if timeout > 0 {
		j.ctx, j.cancel = context.WithTimeout(base, timeout)
	} else {
		j.ctx, j.cancel = context.WithCancel(base)
	}
	return j, timeout
}

// run runs the handler of j and settles it by how it ended.
func (w *Worker[T]) run(base context.Context, j *job[T], timeout time.Duration) {
	defer func() {
		j.cancel()
		w.mu.Lock()
		j.leaseTimer.Stop()
		delete(w.jobs, j)
		w.mu.Unlock()
		select {
		case w.slot <- struct{}{}:
		default:
		}
		w.handlers.Done()
	}()
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() {
			if j.decide(jobTimedOut) {
				// Counted while it nacks, so that a stop waits for the nack. The job still
				// counts here (its handler has not returned), so Add is safe.
				w.handlers.Add(1)
				defer w.handlers.Done()
				// The handler's context ends by its own deadline (DeadlineExceeded).
				w.fail(base, j.d, &HandlerTimeoutError{After: timeout})
			}
		})
		defer timer.Stop()
	}
	started := time.Now()
	err := w.call(j)
	if err != nil && timeout > 0 && errors.Is(j.ctx.Err(), context.DeadlineExceeded) {
		// Failed as its timeout ended it (its context's error, most likely): the same
		// failure as when the timer decides first.
		err = &HandlerTimeoutError{After: timeout}
	}
	if !j.decide(jobFinished) {
		w.opts.Logger.Printf("delayq worker: %s: message %s: handler ended after its delivery was %s; its result is dropped",
			j.d.Queue, j.d.ID, outcomeName(atomic.LoadInt32(&j.state)))
		return
	}
	if err != nil {
		w.fail(base, j.d, err)
		return
	}
	w.succeed(base, j.d, time.Since(started))
}

func outcomeName(state int32) string {
	switch state {
	case jobTimedOut:
		return "nacked after its timeout"
	case jobReleased:
		return "released at the stop's grace"
	case jobLost:
		return "lost with its lease"
	}
	return "settled"
}

// call runs the handler, turning a panic into an error with the panicking goroutine's stack.
func (w *Worker[T]) call(j *job[T]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return w.handler(j.ctx, j.d)
}

// succeed acks d: with the next receive when the receive loop waits for this slot (one
// request for both), else at once.
func (w *Worker[T]) succeed(base context.Context, d Delivery[T], took time.Duration) {
	w.mu.Lock()
	carry := w.queue != "" && w.waitingForSlot && !w.stopping
	if carry {
		w.carried = append(w.carried, d.Receipt)
	}
	w.mu.Unlock()
	if !carry {
		ctx, cancel := context.WithTimeout(base, settleTimeout)
		err := w.c.Ack(ctx, d.Queue, d.Receipt)
		cancel()
		if err != nil {
			w.report(fmt.Errorf("delayq worker: %s: ack of %s failed (it will be delivered again): %w", d.Queue, d.ID, err))
			return
		}
	}
	if w.opts.OnCompleted != nil {
		w.opts.OnCompleted(d, took)
	}
}

// fail logs the failure with its stack, nacks d with its FailureText, and calls OnFailed.
func (w *Worker[T]) fail(base context.Context, d Delivery[T], cause error) {
	text := FailureText(cause)
	w.opts.Logger.Printf("delayq worker: %s: message %s (attempt %d) failed: %s", d.Queue, d.ID, d.Attempt, text)
	opts := NackOptions{Error: text}
	var permanent *PermanentError
	var later *RetryLaterError
	switch {
	case errors.As(cause, &permanent):
		opts.Dead = true
	case errors.As(cause, &later):
		opts.RetryAfter, opts.RetryNow = later.After, later.After == 0
	default:
		opts.RetryAfter = w.opts.RetryAfter
	}
	ctx, cancel := context.WithTimeout(base, settleTimeout)
	_, err := w.c.Nack(ctx, d.Queue, d.Receipt, opts)
	cancel()
	if err != nil {
		w.report(fmt.Errorf("delayq worker: %s: nack of %s failed (it will be delivered again after its lease): %w", d.Queue, d.ID, err))
	}
	if w.opts.OnFailed != nil {
		w.opts.OnFailed(d, cause)
	}
}

// refusePayloads nacks as dead each delivery whose payload did not decode into T: no
// retry can fix it, and a handler cannot be given it.
func (w *Worker[T]) refusePayloads(base context.Context, bad *PayloadError) {
	for _, pe := range append([]*PayloadError{bad}, bad.More...) {
		one := *pe
		one.More = nil
		d := Delivery[T]{Queue: pe.Queue, Receipt: pe.Receipt, ID: pe.ID, Attempt: pe.Attempt, Raw: pe.Raw}
		w.fail(base, d, Permanent(&one))
	}
}

// heartbeat extends the leases of the running handlers every HeartbeatEvery until stop.
func (w *Worker[T]) heartbeat(base context.Context, stop, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(w.opts.HeartbeatEvery)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			w.extendAll(base)
		}
	}
}

func (w *Worker[T]) extendAll(base context.Context) {
	byQueue := map[string][]*job[T]{}
	w.mu.Lock()
	for j := range w.jobs {
		if j.running() {
			byQueue[j.d.Queue] = append(byQueue[j.d.Queue], j)
		}
	}
	w.mu.Unlock()
	for queue, jobs := range byQueue {
		for len(jobs) > 0 {
			n := len(jobs)
			if n > extendChunk {
				n = extendChunk
			}
			w.extend(base, queue, jobs[:n])
			jobs = jobs[n:]
		}
	}
}

// extend renews the leases of jobs of one queue; a job whose lease is lost is cancelled.
func (w *Worker[T]) extend(base context.Context, queue string, jobs []*job[T]) {
	receipts := make([]string, len(jobs))
	for i, j := range jobs {
		receipts[i] = j.d.Receipt
	}
	sentAt := time.Now()
	timeout := w.opts.HeartbeatEvery
	if timeout < time.Second {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(base, timeout)
	results, err := w.c.ExtendMany(ctx, queue, receipts, w.opts.Lease)
	cancel()
	if err != nil {
		// Each job's lease timer cancels it if no later extend gets through in time.
		w.report(fmt.Errorf("delayq worker: %s: extending %d leases failed: %w", queue, len(jobs), err))
		return
	}
	ok := map[string]bool{}
	for _, r := range results {
		ok[r.Receipt] = r.OK
	}
	for _, j := range jobs {
		if ok[j.d.Receipt] {
			w.mu.Lock()
			j.leaseEnds = sentAt.Add(w.opts.Lease)
			j.leaseTimer.Reset(w.untilMargin(j))
			w.mu.Unlock()
		} else {
			w.lose(j)
		}
	}
}

// untilMargin is how long until only the margin of j's lease is left (leaseEnds read under
// the Worker's mu, or before j is shared).
func (w *Worker[T]) untilMargin(j *job[T]) time.Duration {
	return time.Until(j.leaseEnds.Add(-leaseMargin(w.opts.Lease)))
}

func (w *Worker[T]) lose(j *job[T]) {
	if j.decide(jobLost) {
		j.cancel()
		w.report(fmt.Errorf("delayq worker: %s: message %s: its handler's result will not count: %w", j.d.Queue, j.d.ID, ErrLeaseLost))
	}
}

// renew extends the leases of deliveries before their handlers start; it answers those
// still leased (the others are Redis's again).
func (w *Worker[T]) renew(base context.Context, deliveries []Delivery[T]) []Delivery[T] {
	kept := deliveries[:0:0]
	for queue, group := range byQueue(deliveries) {
		ctx, cancel := context.WithTimeout(base, settleTimeout)
		results, err := w.c.ExtendMany(ctx, queue, receipts(group), w.opts.Lease)
		cancel()
		if err != nil {
			w.report(fmt.Errorf("delayq worker: %s: renewing %d late deliveries failed: %w", queue, len(group), err))
			continue
		}
		for i, r := range results {
			if r.OK && i < len(group) {
				kept = append(kept, group[i])
			}
		}
	}
	return kept
}

// release hands deliveries back, ready again at once.
func (w *Worker[T]) release(base context.Context, deliveries []Delivery[T]) {
	for queue, group := range byQueue(deliveries) {
		ctx, cancel := context.WithTimeout(base, settleTimeout)
		_, err := w.c.ReleaseMany(ctx, queue, receipts(group))
		cancel()
		if err != nil {
			w.report(fmt.Errorf("delayq worker: %s: releasing %d deliveries failed (they return when their leases end): %w", queue, len(group), err))
		}
	}
}

// ackOnTheirOwn acks receipts of the Worker's queue in one request.
func (w *Worker[T]) ackOnTheirOwn(base context.Context, acks []string) {
	if len(acks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(base, settleTimeout)
	defer cancel()
	// One acked already (by a request whose answer was lost) answers "not ok": fine.
	if _, err := w.c.AckMany(ctx, w.queue, acks); err != nil {
		w.report(fmt.Errorf("delayq worker: %s: acking %d deliveries failed (they will be delivered again): %w", w.queue, len(acks), err))
	}
}

func (w *Worker[T]) report(err error) {
	if w.opts.OnError != nil {
		w.opts.OnError(err)
		return
	}
	w.opts.Logger.Printf("%v", err)
}

func byQueue[T any](deliveries []Delivery[T]) map[string][]Delivery[T] {
	out := map[string][]Delivery[T]{}
	for _, d := range deliveries {
		out[d.Queue] = append(out[d.Queue], d)
	}
	return out
}

func receipts[T any](deliveries []Delivery[T]) []string {
	out := make([]string, len(deliveries))
	for i, d := range deliveries {
		out[i] = d.Receipt
	}
	return out
}
