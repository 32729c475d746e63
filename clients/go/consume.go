package delayq

import (
	"context"
	"time"
)

// ReceiveOptions are the options of a receive.
type ReceiveOptions struct {
	// Max is the most messages to take (default 1; at most the server's --max-batch).
	Max int
	// Lease is how long each is leased (default: the server's, 30 s).
	Lease time.Duration
	// Wait long-polls: how long to wait for a message to come due when none is (default 0:
	// answer at once; at most the server's --max-wait, 30 s by default). Cancelling the
	// context ends the wait.
	Wait time.Duration
}

func (o ReceiveOptions) body() (map[string]any, error) {
	body := map[string]any{}
	if o.Max > 0 {
		body["max"] = o.Max
	}
	for _, f := range []struct {
		key string
		d   time.Duration
	}{{"lease", o.Lease}, {"wait", o.Wait}} {
		ms, err := millis(f.key, f.d)
		if err != nil {
			return nil, err
		}
		if ms > 0 {
			body[f.key] = ms
		}
	}
	return body, nil
}

type receiveAnswer struct {
	Deliveries []wireDelivery `json:"deliveries"`
	Acked      []wireSettled  `json:"acked"`
}

// Receive takes up to opts.Max due messages of queue, each leased for opts.Lease, waiting
// up to opts.Wait for one to come due. Deliveries whose payload does not decode into T are
// left out and named in a *PayloadError, returned with the others (they are still leased).
func Receive[T any](ctx context.Context, c *Client, queue string, opts ReceiveOptions) ([]Delivery[T], error) {
	_, deliveries, err := AckAndReceive[T](ctx, c, queue, nil, opts)
	return deliveries, err
}

// AckAndReceive acks receipts (deliveries of queue this consumer finished) and receives as
// Receive does, in one request: the acks go with the receive's claim, in one call to Redis,
// and never wait for its long poll. acked says per receipt, in order, whether it was acked
// (OK false: its lease was lost, or it was acked before). With no receipts it is Receive.
func AckAndReceive[T any](ctx context.Context, c *Client, queue string, receipts []string, opts ReceiveOptions) (acked []Settled, deliveries []Delivery[T], err error) {
	body, err := opts.body()
	if err != nil {
		return nil, nil, err
	}
	if len(receipts) > 0 {
		// An empty list is refused by the server (empty_batch): sent only when there are some.
		body["acks"] = receipts
	}
	var out receiveAnswer
	if _, err := c.do(ctx, request{
		route: "POST /v1/queues/{queue}/receive", params: []string{queue}, body: body, hold: opts.Wait,
	}, &out); err != nil {
		return nil, nil, err
	}
	deliveries, err = decodeDeliveries[T](out.Deliveries)
	return settledList(out.Acked), deliveries, err
}

// MultiReceiveOptions are the options of ReceiveMany: Queues (strict order, the first
// highest) or Weights (queues served in proportion), and the options of one receive.
type MultiReceiveOptions struct {
	// Queues in strict priority order, the first highest (or give Weights).
	Queues []string
	// Weights serves queues in proportion to their weights, 1 to 1000 (or give Queues).
	Weights map[string]int
	ReceiveOptions
}

// ReceiveMany receives from several queues at once, waiting on all of them. Each delivery
// says its Queue: settle it there. It carries no acks (a receipt does not name its queue).
func ReceiveMany[T any](ctx context.Context, c *Client, opts MultiReceiveOptions) ([]Delivery[T], error) {
	if (len(opts.Queues) == 0) == (len(opts.Weights) == 0) {
		return nil, &ArgumentError{Arg: "Queues", Problem: "give Queues (strict order) or Weights, one of them"}
	}
	body, err := opts.ReceiveOptions.body()
	if err != nil {
		return nil, err
	}
	if len(opts.Queues) > 0 {
		body["queues"] = opts.Queues
	} else {
		body["weights"] = opts.Weights
	}
	var out receiveAnswer
	if _, err := c.do(ctx, request{route: "POST /v1/receive", body: body, hold: opts.Wait}, &out); err != nil {
		return nil, err
	}
	return decodeDeliveries[T](out.Deliveries)
}

// Ack settles a delivery as done: the message is gone (or kept as completed). A lease that
// was lost (or an ack repeated) is an *APIError with ErrLeaseLost: the message will be, or
// was, delivered again.
func (c *Client) Ack(ctx context.Context, queue, receipt string) error {
	_, err := c.do(ctx, request{
		route: "POST /v1/queues/{queue}/ack", params: []string{queue}, body: map[string]any{"receipt": receipt},
	}, nil)
	return err
}

// AckMany acks several deliveries of queue in one request, a result each, in order.
func (c *Client) AckMany(ctx context.Context, queue string, receipts []string) ([]Settled, error) {
	return c.settleMany(ctx, "POST /v1/queues/{queue}/ack", queue, map[string]any{"receipts": receipts}, false)
}

// Release hands a delivery back: ready again at once, the attempt not counted.
func (c *Client) Release(ctx context.Context, queue, receipt string) error {
	_, err := c.do(ctx, request{
		route: "POST /v1/queues/{queue}/release", params: []string{queue}, body: map[string]any{"receipt": receipt},
	}, nil)
	return err
}

// ReleaseMany releases several deliveries of queue in one request, a result each.
func (c *Client) ReleaseMany(ctx context.Context, queue string, receipts []string) ([]Settled, error) {
	return c.settleMany(ctx, "POST /v1/queues/{queue}/release", queue, map[string]any{"receipts": receipts}, false)
}

// Extend moves a delivery's lease to end lease from now (0: the server's default, 30 s),
// and answers the new deadline; ErrLeaseLost if it was lost.
func (c *Client) Extend(ctx context.Context, queue, receipt string, lease time.Duration) (time.Time, error) {
	body := map[string]any{"receipt": receipt}
	if err := putLease(body, lease); err != nil {
		return time.Time{}, err
	}
	var out struct {
		LeaseDeadline msTime `json:"lease_deadline_ms"`
	}
	// Extending again only moves the deadline from now: safe to repeat.
	_, err := c.do(ctx, request{
		route: "POST /v1/queues/{queue}/extend", params: []string{queue}, body: body, idempotent: true,
	}, &out)
	return out.LeaseDeadline.Time, err
}

// ExtendMany extends several leases of queue in one request, a result each.
func (c *Client) ExtendMany(ctx context.Context, queue string, receipts []string, lease time.Duration) ([]Settled, error) {
	body := map[string]any{"receipts": receipts}
	if err := putLease(body, lease); err != nil {
		return nil, err
	}
	return c.settleMany(ctx, "POST /v1/queues/{queue}/extend", queue, body, true)
}

func putLease(body map[string]any, lease time.Duration) error {
	ms, err := millis("lease", lease)
	if err == nil && ms > 0 {
		body["lease"] = ms
	}
	return err
}

// settleMany is the many-receipts form of ack, release and extend. route is one of the
// three, named by the calling method, which is where the route coverage test looks.
func (c *Client) settleMany(ctx context.Context, route, queue string, body map[string]any, idempotent bool) ([]Settled, error) {
	var out struct {
		Results []wireSettled `json:"results"`
	}
	if _, err := c.do(ctx, request{route: route, params: []string{queue}, body: body, idempotent: idempotent}, &out); err != nil {
		return nil, err
	}
	return settledList(out.Results), nil
}

// NackOptions say how a failed delivery goes on.
type NackOptions struct {
	// Error is what went wrong, kept in the message's error history.
	Error string
	// RetryAfter retries it after this long instead of by its backoff (0: by its backoff,
	// unless RetryNow).
	RetryAfter time.Duration
	// RetryNow retries it at once (retry_after 0).
	RetryNow bool
	// Dead makes it a dead letter now, whatever attempts it has left.
	Dead bool
	// Payload replaces the payload of the next attempts (nil: kept). A []byte is bytes.
	Payload any
	// ExtraAttempts is added to the attempts it may have (negative: fewer).
	ExtraAttempts int
}

// NackOutcome is what a nack did: "retry", "dead", "expired" (its retry would start after
// its deadline) or "superseded" (a newer message took its id while it was in flight).
type NackOutcome string

// Nack settles a delivery as failed: retried by its backoff (or as opts say), or a dead
// letter after its last attempt (or now, with Dead). ErrLeaseLost if its lease was lost.
func (c *Client) Nack(ctx context.Context, queue, receipt string, opts NackOptions) (NackOutcome, error) {
	body := map[string]any{"receipt": receipt}
	if opts.Error != "" {
		body["error"] = opts.Error
	}
	if opts.RetryNow {
		body["retry_after"] = 0
	} else if opts.RetryAfter != 0 {
		ms, err := millis("RetryAfter", opts.RetryAfter)
		if err != nil {
			return "", err
		}
		body["retry_after"] = ms
	}
	if opts.Dead {
		body["dead"] = true
	}
	if opts.Payload != nil {
		if err := putPayload(body, opts.Payload); err != nil {
			return "", err
		}
	}
	if opts.ExtraAttempts != 0 {
		body["extra_attempts"] = opts.ExtraAttempts
	}
	var out struct {
		Outcome NackOutcome `json:"outcome"`
	}
	_, err := c.do(ctx, request{route: "POST /v1/queues/{queue}/nack", params: []string{queue}, body: body}, &out)
	return out.Outcome, err
}
