package delayq

import (
	"context"
	"net/url"
	"strconv"
)

// Queues lists every queue with its counts (role admin).
func (c *Client) Queues(ctx context.Context) ([]QueueStats, error) {
	var out struct {
		Queues []wireStats `json:"queues"`
	}
	if _, err := c.do(ctx, request{route: "GET /v1/queues", idempotent: true}, &out); err != nil {
		return nil, err
	}
	stats := make([]QueueStats, len(out.Queues))
	for i, q := range out.Queues {
		stats[i] = q.public()
	}
	return stats, nil
}

// Stats reads one queue's counts and settings (all zero for a queue never used).
func (c *Client) Stats(ctx context.Context, queue string) (QueueStats, error) {
	return c.stats(ctx, request{route: "GET /v1/queues/{queue}", params: []string{queue}, idempotent: true})
}

// stats makes a request that answers a queue's stats.
func (c *Client) stats(ctx context.Context, r request) (QueueStats, error) {
	var out wireStats
	_, err := c.do(ctx, r, &out)
	return out.public(), err
}

// CreateQueue creates a queue spread over partitions (1 to 256, fixed for its life; the
// same count again is fine, another is a 400). A queue used without it has 1 partition.
func (c *Client) CreateQueue(ctx context.Context, queue string, partitions int) (QueueStats, error) {
	return c.stats(ctx, request{
		route: "PUT /v1/queues/{queue}", params: []string{queue},
		body: map[string]any{"partitions": partitions}, idempotent: true,
	})
}

// Configure changes a queue's settings, all or none, and answers its stats.
func (c *Client) Configure(ctx context.Context, queue string, settings ...QueueSetting) (QueueStats, error) {
	s := &settingsBody{body: map[string]any{}}
	for _, set := range settings {
		set(s)
	}
	if s.err != nil {
		return QueueStats{}, s.err
	}
	return c.stats(ctx, request{route: "PATCH /v1/queues/{queue}", params: []string{queue}, body: s.body, idempotent: true})
}

// DeleteQueue deletes a queue: its settings, schedules, events, history, push target and
// webhooks. While it holds messages it is refused with ErrQueueNotEmpty (nothing deleted
// of them) unless force, which deletes those too; ErrNotFound for a queue never used.
// Not retried: a repeat would answer ErrNotFound.
func (c *Client) DeleteQueue(ctx context.Context, queue string, force bool) (QueueDeleted, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	var out QueueDeleted
	_, err := c.do(ctx, request{route: "DELETE /v1/queues/{queue}", params: []string{queue}, query: q}, &out)
	return out, err
}

// Pause stops giving the queue's messages to every consumer (sends are still taken, and
// messages in flight settle as usual); answers the stats.
func (c *Client) Pause(ctx context.Context, queue string) (QueueStats, error) {
	// Setting a flag: a repeat changes nothing.
	return c.stats(ctx, request{route: "POST /v1/queues/{queue}/pause", params: []string{queue}, idempotent: true})
}

// Resume gives the queue's messages to consumers again, waking waiting receives at once.
func (c *Client) Resume(ctx context.Context, queue string) (QueueStats, error) {
	return c.stats(ctx, request{route: "POST /v1/queues/{queue}/resume", params: []string{queue}, idempotent: true})
}

// DeadLetters reads a page of the queue's dead letters, oldest death first (limit 0: the
// server's default).
func (c *Client) DeadLetters(ctx context.Context, queue string, offset, limit int) (DeadLetterPage, error) {
	q := url.Values{}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Total       int64      `json:"total"`
		DeadLetters []wireDead `json:"dead_letters"`
	}
	if _, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/dead", params: []string{queue}, query: q, idempotent: true,
	}, &out); err != nil {
		return DeadLetterPage{}, err
	}
	page := DeadLetterPage{Total: out.Total, DeadLetters: make([]DeadLetter, len(out.DeadLetters))}
	for i, d := range out.DeadLetters {
		raw, err := d.raw()
		if err != nil {
			return DeadLetterPage{}, err
		}
		page.DeadLetters[i] = DeadLetter{
			ID: d.ID, DiedAt: d.DiedAt.Time, Attempts: d.Attempts, MaxAttempts: d.MaxAttempts,
			Priority: d.Priority, LastError: d.LastError, Errors: failedAttempts(d.Errors), Payload: raw,
		}
	}
	return page, nil
}

// RequeueDead puts one dead letter back to ready, its attempts reset (ErrNotFound if it is
// not a dead letter).
func (c *Client) RequeueDead(ctx context.Context, queue, id string) (int, error) {
	return c.count(ctx, request{route: "POST /v1/queues/{queue}/requeue", params: []string{queue}, body: map[string]any{"id": id}})
}

// RequeueAllDead puts every dead letter of the queue back to ready; answers how many.
func (c *Client) RequeueAllDead(ctx context.Context, queue string) (int, error) {
	return c.count(ctx, request{route: "POST /v1/queues/{queue}/requeue", params: []string{queue}, body: map[string]any{"all": true}})
}

// PurgeDead deletes one dead letter (ErrNotFound if it is not one).
func (c *Client) PurgeDead(ctx context.Context, queue, id string) (int, error) {
	return c.count(ctx, request{route: "POST /v1/queues/{queue}/purge", params: []string{queue}, body: map[string]any{"id": id}})
}

// PurgeAllDead deletes every dead letter of the queue; answers how many.
func (c *Client) PurgeAllDead(ctx context.Context, queue string) (int, error) {
	return c.count(ctx, request{route: "POST /v1/queues/{queue}/purge", params: []string{queue}, body: map[string]any{"all": true}})
}

func (c *Client) count(ctx context.Context, r request) (int, error) {
	var out struct {
		Count int `json:"count"`
	}
	_, err := c.do(ctx, r, &out)
	return out.Count, err
}

// SetPushTarget makes every server push the queue's messages to t.URL, signed (its pull
// consumers get none meanwhile). The answer holds the signing keys for VerifyPush. An
// address on a loopback, private or link-local network is refused (ErrPushTargetRefused)
// unless the server allows it (--push-allow).
func (c *Client) SetPushTarget(ctx context.Context, queue string, t PushTargetSettings) (*PushTarget, error) {
	body := map[string]any{"url": t.URL}
	if t.Method != "" {
		body["method"] = t.Method
	}
	if t.Headers != nil {
		body["headers"] = t.Headers
	}
	if t.Timeout != 0 {
		ms, err := millis("Timeout", t.Timeout)
		if err != nil {
			return nil, err
		}
		body["timeout"] = ms
	}
	if t.Concurrency > 0 {
		body["concurrency"] = t.Concurrency
	}
	if t.SigningKeys != nil {
		body["signing_keys"] = t.SigningKeys
	}
	if t.DeadStatuses != nil {
		body["dead_statuses"] = t.DeadStatuses
	}
	if t.FailureCallback != "" {
		body["failure_callback"] = t.FailureCallback
	}
	if t.FollowRedirects {
		body["follow_redirects"] = true
	}
	if t.RateLimit != nil {
		body["rate_limit"] = t.RateLimit
	}
	if t.AllowMessageURLs != nil {
		body["allow_message_urls"] = t.AllowMessageURLs
	}
	var out wirePushTarget
	if _, err := c.do(ctx, request{
		route: "PUT /v1/queues/{queue}/push", params: []string{queue}, body: body, idempotent: true,
	}, &out); err != nil {
		return nil, err
	}
	return out.public(), nil
}

// PushTarget reads the queue's push target (ErrNotFound when it has none).
func (c *Client) PushTarget(ctx context.Context, queue string) (*PushTarget, error) {
	var out wirePushTarget
	if _, err := c.do(ctx, request{route: "GET /v1/queues/{queue}/push", params: []string{queue}, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.public(), nil
}

// DeletePushTarget gives the queue back to pull consumers (ErrNotFound when it had no
// target).
func (c *Client) DeletePushTarget(ctx context.Context, queue string) error {
	_, err := c.do(ctx, request{route: "DELETE /v1/queues/{queue}/push", params: []string{queue}}, nil)
	return err
}

// Health answers nil when the server process is up (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, request{route: "GET /healthz", idempotent: true}, nil)
	return err
}

// Ready answers the Redis server delayq uses when it answers (GET /readyz), else an
// *APIError with ErrUnavailable.
func (c *Client) Ready(ctx context.Context) (ServerInfo, error) {
	var out struct {
		Server ServerInfo `json:"server"`
	}
	_, err := c.do(ctx, request{route: "GET /readyz", idempotent: true}, &out)
	return out.Server, err
}

// OpenAPI reads the server's OpenAPI 3.1 document: the authoritative list of its routes.
func (c *Client) OpenAPI(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	_, err := c.do(ctx, request{route: "GET /openapi.json", idempotent: true}, &out)
	return out, err
}

// Raw calls any route, such as one this client leaves out (see LeftOut): method and path
// as sent (escape its parameters with url.PathEscape), body sent as JSON when not nil, and
// a 2xx answer's JSON decoded into out when out is not nil. Errors are as for every call.
// It is never retried.
func (c *Client) Raw(ctx context.Context, method, path string, body, out any) error {
	_, err := c.do(ctx, request{route: method + " " + path, body: body}, out)
	return err
}
