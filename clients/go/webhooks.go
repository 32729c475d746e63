package delayq

import "context"

// A queue's event webhooks (docs/events.md, "Webhooks"; role admin): URLs every server
// calls with the queue's events of the kinds each names, at least once, signed with the
// queue's webhook keys (check a call with VerifyWebhook). Setting webhooks turns the
// queue's events on.

// Webhook is one URL and the kinds of events it is called with.
type Webhook struct {
	// URL is http:// or https://. One on a loopback, private or link-local address is
	// refused (ErrWebhookRefused) unless the server allows it (--push-allow).
	URL string `json:"url"`
	// Kinds are the kinds of events it is sent (none: every kind).
	Kinds []EventKind `json:"kinds,omitempty"`
}

// Webhooks is a queue's webhooks as the server keeps them.
type Webhooks struct {
	// Webhooks are its URLs, each with its kinds.
	Webhooks []Webhook `json:"webhooks"`
	// SigningKeys sign the calls: give them to VerifyWebhook.
	SigningKeys []string `json:"signing_keys"`
	// EventsMax is about how many events each partition keeps: a webhook further behind
	// misses some (0: not known).
	EventsMax int64 `json:"events_max"`
}

// SetWebhooks sets the queue's webhooks (at most 10) in place of those it has, and answers
// them with their signing keys. signingKeys (16-256 characters each: the current one first
// and, during a rotation, the old one) sign the calls; nil keeps the queue's webhook keys,
// or makes a new random one. Safe to repeat, so retried.
func (c *Client) SetWebhooks(ctx context.Context, queue string, webhooks []Webhook, signingKeys []string) (*Webhooks, error) {
	if webhooks == nil {
		webhooks = []Webhook{}
	}
	body := map[string]any{"webhooks": webhooks}
	if signingKeys != nil {
		body["signing_keys"] = signingKeys
	}
	var out Webhooks
	if _, err := c.do(ctx, request{
		route: "PUT /v1/queues/{queue}/webhooks", params: []string{queue}, body: body, idempotent: true,
	}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWebhooks reads the queue's webhooks and their signing keys (ErrNotFound when it has
// none).
func (c *Client) GetWebhooks(ctx context.Context, queue string) (*Webhooks, error) {
	var out Webhooks
	if _, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/webhooks", params: []string{queue}, idempotent: true,
	}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteWebhooks removes every webhook of the queue (its events stay; ErrNotFound when it
// had none). Not retried: a repeat would answer ErrNotFound.
func (c *Client) DeleteWebhooks(ctx context.Context, queue string) error {
	_, err := c.do(ctx, request{route: "DELETE /v1/queues/{queue}/webhooks", params: []string{queue}}, nil)
	return err
}
