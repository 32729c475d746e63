package delayq

import (
	"context"
	"net/url"
	"strconv"
)

// Groups (docs/groups.md; role admin, since group names are tenants' names): list a
// queue's groups, read one, and give one group settings of its own in place of the queue's
// (SetGroupConcurrency, SetGroupRateLimit): concurrency, weight, rate limit, pause.

// GroupSummary is a group in a list: its name and its messages, pending and in flight.
type GroupSummary struct {
	// Name is the group's name.
	Name string `json:"name"`
	// Messages counts its messages, pending and in flight.
	Messages int64 `json:"messages"`
}

// GroupPage is one page of a queue's groups, most messages first.
type GroupPage struct {
	// Total counts the queue's groups with messages.
	Total int64 `json:"total"`
	// Groups are this page's.
	Groups []GroupSummary `json:"groups"`
}

// GroupInfo is one group: what it holds, and its settings (GetGroup, ConfigureGroup).
type GroupInfo struct {
	// Name is the group's name.
	Name string
	// Delayed, Ready and InFlight count its messages in each state.
	Delayed, Ready, InFlight int64
	// Paused: its messages wait while the rest of the queue flows.
	Paused bool
	// Concurrency bounds its messages in flight: its own limit, else the queue's
	// group concurrency (0: no limit).
	Concurrency int
	// OwnConcurrency is its own limit (0: it has none, and the queue's applies).
	OwnConcurrency int
	// Weight is the messages it gives per turn of the rotation.
	Weight int
	// RateLimit bounds its deliveries a second: its own limit, else the queue's group
	// rate limit (nil: none).
	RateLimit *RateLimit
	// OwnRateLimit is its own rate limit (nil: it has none, and the queue's applies).
	OwnRateLimit *RateLimit
}

type wireGroup struct {
	Name           string     `json:"name"`
	Delayed        int64      `json:"delayed"`
	Ready          int64      `json:"ready"`
	InFlight       int64      `json:"in_flight"`
	Paused         bool       `json:"paused"`
	Concurrency    *int       `json:"concurrency"`
	OwnConcurrency *int       `json:"own_concurrency"`
	Weight         int        `json:"weight"`
	RateLimit      *RateLimit `json:"rate_limit"`
	OwnRateLimit   *RateLimit `json:"own_rate_limit"`
}

func (w wireGroup) public() GroupInfo {
	g := GroupInfo{
		Name: w.Name, Delayed: w.Delayed, Ready: w.Ready, InFlight: w.InFlight, Paused: w.Paused,
		Weight: w.Weight, RateLimit: w.RateLimit, OwnRateLimit: w.OwnRateLimit,
	}
	if w.Concurrency != nil {
		g.Concurrency = *w.Concurrency
	}
	if w.OwnConcurrency != nil {
		g.OwnConcurrency = *w.OwnConcurrency
	}
	return g
}

// ListGroups reads a page of the queue's groups with messages, most messages first (offset
// at most 10,000; limit 0: the server's default, 100; at most 1,000).
func (c *Client) ListGroups(ctx context.Context, queue string, offset, limit int) (GroupPage, error) {
	q := url.Values{}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out GroupPage
	_, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/groups", params: []string{queue}, query: q, idempotent: true,
	}, &out)
	return out, err
}

// GetGroup reads one group (a group with no messages and no settings of its own reads as
// all zeros, weight 1).
func (c *Client) GetGroup(ctx context.Context, queue, group string) (GroupInfo, error) {
	var out wireGroup
	_, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/groups/{group}", params: []string{queue, group}, idempotent: true,
	}, &out)
	return out.public(), err
}

// GroupSetting is one setting of ConfigureGroup: GroupConcurrency(2), GroupPaused(true), ...
// Settings left out stay as they are.
type GroupSetting func(*groupSettings)

// groupSettings collects a ConfigureGroup's settings as the API's JSON fields.
type groupSettings struct{ body map[string]any }

// GroupConcurrency allows at most n of the group's messages in flight (1 to 1,000,000), in
// place of the queue's SetGroupConcurrency.
func GroupConcurrency(n int) GroupSetting {
	return func(s *groupSettings) { s.body["concurrency"] = n }
}

// GroupConcurrencyFromQueue drops the group's own concurrency: the queue's applies again.
func GroupConcurrencyFromQueue() GroupSetting {
	return func(s *groupSettings) { s.body["concurrency"] = nil }
}

// GroupWeight makes the group give w messages per turn of the rotation (1 to 1,000; the
// default 1), kept across claims: a weight of 3 gets three turns' worth even from claims
// of one.
func GroupWeight(w int) GroupSetting {
	return func(s *groupSettings) { s.body["weight"] = w }
}

// GroupRateLimit allows the group at most perSecond deliveries a second, burst at once
// after a quiet spell (0: the server's default, 1), in place of the queue's
// SetGroupRateLimit.
func GroupRateLimit(perSecond, burst int) GroupSetting {
	return func(s *groupSettings) { s.body["rate_limit"] = RateLimit{PerSecond: perSecond, Burst: burst} }
}

// GroupRateLimitFromQueue drops the group's own rate limit: the queue's applies again.
func GroupRateLimitFromQueue() GroupSetting {
	return func(s *groupSettings) { s.body["rate_limit"] = nil }
}

// GroupPaused pauses the group (true: its messages wait, those in flight settle as usual,
// and the rest of the queue flows) or resumes it (false).
func GroupPaused(paused bool) GroupSetting {
	return func(s *groupSettings) { s.body["paused"] = paused }
}

// ConfigureGroup changes the group's own settings, all or none, and answers the group. Safe
// to repeat, so retried.
func (c *Client) ConfigureGroup(ctx context.Context, queue, group string, settings ...GroupSetting) (GroupInfo, error) {
	s := &groupSettings{body: map[string]any{}}
	for _, set := range settings {
		set(s)
	}
	var out wireGroup
	_, err := c.do(ctx, request{
		route: "PATCH /v1/queues/{queue}/groups/{group}", params: []string{queue, group},
		body: s.body, idempotent: true,
	}, &out)
	return out.public(), err
}

// PauseGroup makes the group's messages wait while the rest of the queue flows (those in
// flight settle as usual); answers the group.
func (c *Client) PauseGroup(ctx context.Context, queue, group string) (GroupInfo, error) {
	return c.ConfigureGroup(ctx, queue, group, GroupPaused(true))
}

// ResumeGroup delivers the group's messages again; answers the group.
func (c *Client) ResumeGroup(ctx context.Context, queue, group string) (GroupInfo, error) {
	return c.ConfigureGroup(ctx, queue, group, GroupPaused(false))
}
