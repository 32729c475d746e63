package delayq

import (
	"context"
	"strconv"
	"time"
)

// Recurring schedules (docs/schedules.md; role admin): a schedule sends one message per
// tick of a cron expression or an interval, each an ordinary message of the queue with the
// caller id "sched:<name>:<tick ms>", sent by the scheduler every delayq server runs.

// MissedTicks says which ticks fire that were missed (no scheduler ran, or the schedule was
// paused): MissedSkip, MissedOnce or MissedAll(n).
type MissedTicks string

const (
	// MissedSkip fires none of them (the default).
	MissedSkip MissedTicks = "skip"
	// MissedOnce fires the latest one.
	MissedOnce MissedTicks = "once"
)

// MissedAll fires the latest n of the missed ticks.
func MissedAll(n int) MissedTicks { return MissedTicks("all:" + strconv.Itoa(n)) }

// OverlapPolicy says whether a tick fires while the message of the last one is pending.
type OverlapPolicy string

const (
	// OverlapAllow fires every tick (the default).
	OverlapAllow OverlapPolicy = "allow"
	// OverlapSkip fires no tick while the message of the last tick sent is still pending or
	// in flight (a report that runs longer than its period does not pile up; the ticks
	// skipped are not sent later).
	OverlapSkip OverlapPolicy = "skip"
)

// ScheduleSpec is when a schedule fires and what each tick's message is (PutSchedule). Give
// Cron or Every, not both. Zero fields take the server's defaults.
type ScheduleSpec struct {
	// Cron is a crontab line ("30 9 * * MON-FRI", at second 0), the same with a seconds
	// field first ("0 30 9 * * MON-FRI", "*/10 * * * * *"), or a nickname ("@daily").
	Cron string
	// TimeZone is the IANA time zone Cron is read in, daylight saving changes included
	// (default "UTC"). Only with Cron.
	TimeZone string
	// Every is a fixed period (1 s to 366 days) in place of Cron, on a grid from the Unix
	// epoch: 10*time.Minute fires at :00, :10, :20...
	Every time.Duration
	// Missed says which missed ticks fire (default MissedSkip).
	Missed MissedTicks
	// Overlap says whether a tick fires while the last one's message is pending (default
	// OverlapAllow).
	Overlap OverlapPolicy
	// Jitter makes each tick's message due up to this long after its tick (1 ms to 24 h),
	// by an offset every scheduler reckons the same: schedules that share a time spread.
	Jitter time.Duration
	// Priority is each message's priority, 0 (lowest) to 9 (nil: the default, 5).
	Priority *int
	// MaxAttempts is each message's deliveries before it becomes a dead letter (0: the
	// default, 5).
	MaxAttempts int
	// Backoff is each message's retry policy (the zero value: the default).
	Backoff BackoffPolicy
	// HandlerTimeout is how long a worker may spend on each message (0: none).
	HandlerTimeout time.Duration
}

// body is the spec as the API's JSON, with the payload put in; an argument the client
// refuses is an *ArgumentError.
func (s ScheduleSpec) body(payload any) (map[string]any, error) {
	if (s.Cron == "") == (s.Every == 0) {
		return nil, &ArgumentError{Arg: "ScheduleSpec", Problem: "give Cron or Every, exactly one of them"}
	}
	if s.TimeZone != "" && s.Cron == "" {
		return nil, &ArgumentError{Arg: "TimeZone", Problem: "goes with Cron, not with Every"}
	}
	body := map[string]any{}
	if s.Cron != "" {
		body["cron"] = s.Cron
	}
	if s.TimeZone != "" {
		body["time_zone"] = s.TimeZone
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"every", s.Every}, {"jitter", s.Jitter}, {"handler_timeout", s.HandlerTimeout}} {
		ms, err := millis(d.key, d.d)
		if err != nil {
			return nil, err
		}
		if ms > 0 {
			body[d.key] = ms
		}
	}
	if s.Missed != "" {
		body["missed"] = string(s.Missed)
	}
	if s.Overlap != "" {
		body["overlap"] = string(s.Overlap)
	}
	if s.Priority != nil {
		body["priority"] = *s.Priority
	}
	if s.MaxAttempts != 0 {
		body["max_attempts"] = s.MaxAttempts
	}
	if s.Backoff.err != nil {
		return nil, s.Backoff.err
	}
	if s.Backoff.kind != "" {
		body["backoff"] = s.Backoff
	}
	if err := putPayload(body, payload); err != nil {
		return nil, err
	}
	return body, nil
}

// Schedule is a schedule as the server keeps it, with its next ticks.
type Schedule struct {
	// Name is the schedule's name.
	Name string
	// Cron and TimeZone say when it fires, for a cron schedule.
	Cron, TimeZone string
	// Every is its period, for an interval schedule (0 for a cron one).
	Every time.Duration
	// Missed says which missed ticks fire ("skip", "once", "all:<n>").
	Missed MissedTicks
	// Overlap is "allow" or "skip".
	Overlap OverlapPolicy
	// Paused: no tick fires until it is resumed.
	Paused bool
	// Priority and MaxAttempts are those of each tick's message.
	Priority, MaxAttempts int
	// Jitter is how long after its tick each message may be due (0: none).
	Jitter time.Duration
	// HandlerTimeout is each message's handler timeout (0: none).
	HandlerTimeout time.Duration
	// Payload is each tick's payload (decode it with Payload.Decode).
	Payload RawPayload
	// Created is when it was created or last replaced (the Redis server's clock).
	Created time.Time
	// LastTick is the last tick sent as a message (zero: none yet).
	LastTick time.Time
	// NextTicks are its next five ticks; while paused, those it would fire once resumed.
	NextTicks []time.Time
}

type wireSchedule struct {
	wirePayload
	Name           string     `json:"name"`
	Cron           string     `json:"cron"`
	TimeZone       string     `json:"time_zone"`
	Every          msDuration `json:"every_ms"`
	Missed         string     `json:"missed"`
	Overlap        string     `json:"overlap"`
	Paused         bool       `json:"paused"`
	Priority       int        `json:"priority"`
	MaxAttempts    int        `json:"max_attempts"`
	Jitter         msDuration `json:"jitter_ms"`
	HandlerTimeout msDuration `json:"handler_timeout_ms"`
	Created        msTime     `json:"created_ms"`
	LastTick       msTime     `json:"last_tick_ms"`
	NextTicks      []int64    `json:"next_ticks_ms"`
}

func (w wireSchedule) public() (*Schedule, error) {
	raw, err := w.raw()
	if err != nil {
		return nil, err
	}
	s := &Schedule{
		Name: w.Name, Cron: w.Cron, TimeZone: w.TimeZone, Every: time.Duration(w.Every),
		Missed: MissedTicks(w.Missed), Overlap: OverlapPolicy(w.Overlap), Paused: w.Paused,
		Priority: w.Priority, MaxAttempts: w.MaxAttempts, Jitter: time.Duration(w.Jitter),
		HandlerTimeout: time.Duration(w.HandlerTimeout), Payload: raw, Created: w.Created.Time,
		LastTick: w.LastTick.Time, NextTicks: make([]time.Time, len(w.NextTicks)),
	}
	for i, ms := range w.NextTicks {
		s.NextTicks[i] = time.UnixMilli(ms)
	}
	return s, nil
}

// PutSchedule creates the schedule name of queue, or replaces it (it goes on from its last
// tick; a paused one stays paused). Each tick's payload is payload: JSON, or bytes when it
// is a []byte. Safe to repeat, so retried.
func PutSchedule[T any](ctx context.Context, c *Client, queue, name string, payload T, spec ScheduleSpec) (*Schedule, error) {
	body, err := spec.body(any(payload))
	if err != nil {
		return nil, err
	}
	return c.schedule(ctx, request{
		route: "PUT /v1/queues/{queue}/schedules/{name}", params: []string{queue, name},
		body: body, idempotent: true,
	})
}

// schedule makes a request that answers one schedule.
func (c *Client) schedule(ctx context.Context, r request) (*Schedule, error) {
	var out wireSchedule
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.public()
}

// GetSchedule reads one schedule (ErrNotFound if there is none).
func (c *Client) GetSchedule(ctx context.Context, queue, name string) (*Schedule, error) {
	return c.schedule(ctx, request{
		route: "GET /v1/queues/{queue}/schedules/{name}", params: []string{queue, name}, idempotent: true,
	})
}

// ListSchedules reads every schedule of the queue, by name.
func (c *Client) ListSchedules(ctx context.Context, queue string) ([]Schedule, error) {
	var out struct {
		Schedules []wireSchedule `json:"schedules"`
	}
	if _, err := c.do(ctx, request{
		route: "GET /v1/queues/{queue}/schedules", params: []string{queue}, idempotent: true,
	}, &out); err != nil {
		return nil, err
	}
	list := make([]Schedule, len(out.Schedules))
	for i, w := range out.Schedules {
		s, err := w.public()
		if err != nil {
			return nil, err
		}
		list[i] = *s
	}
	return list, nil
}

// DeleteSchedule deletes a schedule; a tick sent ahead and not yet due is cancelled with
// it. ErrNotFound if there is none. Not retried: a repeat would answer ErrNotFound.
func (c *Client) DeleteSchedule(ctx context.Context, queue, name string) error {
	_, err := c.do(ctx, request{
		route: "DELETE /v1/queues/{queue}/schedules/{name}", params: []string{queue, name},
	}, nil)
	return err
}

// PauseSchedule stops the schedule's ticks from firing until ResumeSchedule; answers it.
func (c *Client) PauseSchedule(ctx context.Context, queue, name string) (*Schedule, error) {
	return c.setSchedulePaused(ctx, queue, name, true)
}

// ResumeSchedule makes the schedule's ticks fire again; its Missed policy says which of the
// ticks it skipped while paused fire now (BackfillSchedule sends the others).
func (c *Client) ResumeSchedule(ctx context.Context, queue, name string) (*Schedule, error) {
	return c.setSchedulePaused(ctx, queue, name, false)
}

func (c *Client) setSchedulePaused(ctx context.Context, queue, name string, paused bool) (*Schedule, error) {
	// Setting a flag: a repeat changes nothing.
	return c.schedule(ctx, request{
		route: "PATCH /v1/queues/{queue}/schedules/{name}", params: []string{queue, name},
		body: map[string]any{"paused": paused}, idempotent: true,
	})
}

// Backfill is what BackfillSchedule did.
type Backfill struct {
	// Sent counts the ticks of the range sent now.
	Sent int `json:"sent"`
	// AlreadySent counts those sent before (nothing written for them).
	AlreadySent int `json:"already_sent"`
}

// BackfillSchedule sends each tick of the schedule from from to to (both included; to at
// most now, from after the schedule's creation) that was never sent (missed while no
// scheduler ran, skipped by its Missed policy, or while paused), due at once: at most 1,000
// ticks a call. A repeat sends nothing more, so it is retried.
func (c *Client) BackfillSchedule(ctx context.Context, queue, name string, from, to time.Time) (Backfill, error) {
	fromMs, err := unixMillis("from", from)
	if err != nil {
		return Backfill{}, err
	}
	toMs, err := unixMillis("to", to)
	if err != nil {
		return Backfill{}, err
	}
	var out Backfill
	_, err = c.do(ctx, request{
		route: "POST /v1/queues/{queue}/schedules/{name}/backfill", params: []string{queue, name},
		body: map[string]any{"from": fromMs, "to": toMs}, idempotent: true,
	}, &out)
	return out, err
}
