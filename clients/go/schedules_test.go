package delayq_test

// Schedules against a real server: an `every` schedule's next ticks and a tick delivered,
// pause (no tick fires), backfill of the ticks the pause skipped, resume, delete; a cron
// schedule in a time zone with a bytes payload; what the client and the server refuse.

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin, whatever the machine's zoneinfo

	delayq "github.com/delayq/delayq/clients/go"
)

type report struct {
	Report string `json:"report"`
}

// tickOf answers the tick a schedule's message id ("sched:<name>:<tick ms>") names.
func tickOf(t *testing.T, name, id string) time.Time {
	t.Helper()
	ms, err := strconv.ParseInt(strings.TrimPrefix(id, "sched:"+name+":"), 10, 64)
	if !strings.HasPrefix(id, "sched:"+name+":") || err != nil {
		t.Fatalf("message id %q is not one of schedule %s's ticks", id, name)
	}
	return time.UnixMilli(ms)
}

// ticksIn counts the whole seconds from from to to, both included: the ticks of an every-1-s
// schedule in that range.
func ticksIn(from, to time.Time) int {
	first := (from.UnixMilli() + 999) / 1000
	last := to.UnixMilli() / 1000
	return int(last - first + 1)
}

func TestScheduleEveryPauseBackfillResumeDelete(t *testing.T) {
	t.Parallel() // it waits for ticks: let it overlap the other waiting tests
	ctx, c, q := testContext(t), client(t), queueName(t)
	const name = "every-second"
	seven := 7

	put := time.Now()
	s, err := delayq.PutSchedule(ctx, c, q, name, report{Report: "sales"}, delayq.ScheduleSpec{
		Every: time.Second, Missed: delayq.MissedAll(3), Overlap: delayq.OverlapAllow,
		Jitter: 20 * time.Millisecond, Priority: &seven, MaxAttempts: 3,
		Backoff: delayq.FixedBackoff(100 * time.Millisecond), HandlerTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != name || s.Every != time.Second || s.Cron != "" || s.Missed != "all:3" || s.Overlap != delayq.OverlapAllow ||
		s.Jitter != 20*time.Millisecond || s.Priority != 7 || s.MaxAttempts != 3 || s.HandlerTimeout != 2*time.Second || s.Paused {
		t.Fatalf("put answered %+v", s)
	}
	if s.Created.Before(put.Add(-time.Second)) || s.Created.After(time.Now().Add(time.Second)) {
		t.Errorf("created %v, put at %v", s.Created, put)
	}
	var payload report
	if err := s.Payload.Decode(&payload); err != nil || payload.Report != "sales" {
		t.Errorf("payload %+v (%v), want sales", payload, err)
	}
	// The next five ticks: whole seconds, one second apart, from about now.
	if len(s.NextTicks) != 5 {
		t.Fatalf("next ticks %v, want 5", s.NextTicks)
	}
	for i, tick := range s.NextTicks {
		if tick.UnixMilli()%1000 != 0 || (i > 0 && tick.Sub(s.NextTicks[i-1]) != time.Second) {
			t.Fatalf("next ticks %v: not whole seconds one second apart", s.NextTicks)
		}
	}
	if s.NextTicks[0].Before(put.Add(-time.Second)) || s.NextTicks[0].After(time.Now().Add(2*time.Second)) {
		t.Fatalf("the first next tick %v is not about now (%v)", s.NextTicks[0], put)
	}

	// A tick is delivered: a message of the queue with the schedule's payload and options.
	var got []delayq.Delivery[report]
	waitFor(t, 10*time.Second, "a tick of the schedule delivered", func() (bool, error) {
		got, err = delayq.Receive[report](ctx, c, q, delayq.ReceiveOptions{Wait: time.Second})
		return len(got) > 0, err
	})
	d := got[0]
	tick := tickOf(t, name, d.ID)
	if d.Payload.Report != "sales" || d.Priority != 7 || d.HandlerTimeout != 2*time.Second {
		t.Errorf("tick delivered as %+v, want the schedule's payload, priority 7, handler timeout 2 s", d)
	}
	if d.Due.Before(tick) || d.Due.After(tick.Add(20*time.Millisecond)) {
		t.Errorf("tick %v due at %v: not within its 20 ms jitter", tick, d.Due)
	}
	if err := c.Ack(ctx, q, d.Receipt); err != nil {
		t.Fatal(err)
	}
	g, err := c.GetSchedule(ctx, q, name)
	if err != nil {
		t.Fatal(err)
	}
	if g.LastTick.Before(tick) {
		t.Errorf("last tick %v, before the tick delivered %v", g.LastTick, tick)
	}
	list, err := c.ListSchedules(ctx, q)
	if err != nil || len(list) != 1 || list[0].Name != name || list[0].Every != time.Second {
		t.Fatalf("list = %+v, %v; want the one schedule", list, err)
	}

	// Paused: no tick fires. Four ticks' time later the last tick sent is still one the
	// scheduler had sent ahead (a second at most) before the pause.
	p, err := c.PauseSchedule(ctx, q, name)
	if err != nil || !p.Paused {
		t.Fatalf("pause = %+v, %v", p, err)
	}
	pausedAt := time.Now()
	time.Sleep(time.Until(pausedAt.Add(4200 * time.Millisecond))) // time for ticks to be skipped
	g, err = c.GetSchedule(ctx, q, name)
	if err != nil || !g.Paused {
		t.Fatalf("get while paused = %+v, %v", g, err)
	}
	if g.LastTick.After(pausedAt.Add(2500 * time.Millisecond)) {
		t.Fatalf("last tick %v: ticks fired while paused (since %v)", g.LastTick, pausedAt)
	}
	if list, err := c.ListSchedules(ctx, q); err != nil || len(list) != 1 || !list[0].Paused {
		t.Fatalf("list while paused = %+v, %v", list, err)
	}

	// Backfill sends the ticks of the pause that were never sent, due at once; a repeat
	// sends nothing more.
	to := time.Now()
	want := ticksIn(pausedAt, to)
	b, err := c.BackfillSchedule(ctx, q, name, pausedAt, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backfill of the %d ticks from %v to %v: %+v", want, pausedAt, to, b)
	if b.Sent < 1 || b.Sent+b.AlreadySent != want {
		t.Fatalf("backfill = %+v, want %d ticks in all, at least one sent now", b, want)
	}
	for ms := (pausedAt.UnixMilli() + 999) / 1000 * 1000; ms <= to.UnixMilli(); ms += 1000 {
		if m, err := c.Get(ctx, q, fmt.Sprintf("sched:%s:%d", name, ms)); err != nil || m.State != "ready" {
			t.Errorf("tick %d after the backfill: %+v, %v; want a ready message", ms, m, err)
		}
	}
	again, err := c.BackfillSchedule(ctx, q, name, pausedAt, to)
	if err != nil || again.Sent != 0 || again.AlreadySent != want {
		t.Fatalf("second backfill = %+v, %v; want 0 sent, %d already", again, err, want)
	}

	// Resumed: ticks fire again.
	r, err := c.ResumeSchedule(ctx, q, name)
	if err != nil || r.Paused {
		t.Fatalf("resume = %+v, %v", r, err)
	}
	resumedAt := time.Now()
	waitFor(t, 10*time.Second, "a tick after the resume", func() (bool, error) {
		g, err := c.GetSchedule(ctx, q, name)
		return err == nil && !g.LastTick.Before(resumedAt), err
	})

	// Deleted: gone, and a second delete finds nothing.
	if err := c.DeleteSchedule(ctx, q, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSchedule(ctx, q, name); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if err := c.DeleteSchedule(ctx, q, name); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if list, err := c.ListSchedules(ctx, q); err != nil || len(list) != 0 {
		t.Fatalf("list after delete = %+v, %v; want none", list, err)
	}
}

func TestScheduleCronTimeZoneBytes(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s, err := delayq.PutSchedule(ctx, c, q, "weekday-0930", []byte{0, 1, 2}, delayq.ScheduleSpec{
		Cron: "0 30 9 * * MON-FRI", TimeZone: "Europe/Berlin", Missed: delayq.MissedOnce, Overlap: delayq.OverlapSkip,
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cron != "0 30 9 * * MON-FRI" || s.TimeZone != "Europe/Berlin" || s.Every != 0 || s.Missed != delayq.MissedOnce ||
		s.Overlap != delayq.OverlapSkip || s.Priority != 5 || s.MaxAttempts != 5 || s.Jitter != 0 || !s.LastTick.IsZero() {
		t.Fatalf("put answered %+v", s)
	}
	if !s.Payload.IsBytes || !bytes.Equal(s.Payload.Bytes, []byte{0, 1, 2}) {
		t.Errorf("payload %+v, want the bytes 0 1 2", s.Payload)
	}
	// Each next tick is a weekday at 09:30:00 in Berlin, whatever the offset that day.
	if len(s.NextTicks) != 5 || !s.NextTicks[0].After(time.Now()) {
		t.Fatalf("next ticks %v", s.NextTicks)
	}
	for i, tick := range s.NextTicks {
		local := tick.In(berlin)
		if local.Hour() != 9 || local.Minute() != 30 || local.Second() != 0 || local.Weekday() == time.Saturday ||
			local.Weekday() == time.Sunday || (i > 0 && !tick.After(s.NextTicks[i-1])) {
			t.Fatalf("next ticks in Berlin: %v", local)
		}
	}
	// Put again: replaced, by name.
	if _, err := delayq.PutSchedule(ctx, c, q, "weekday-0930", report{Report: "stock"}, delayq.ScheduleSpec{
		Cron: "@daily",
	}); err != nil {
		t.Fatal(err)
	}
	g, err := c.GetSchedule(ctx, q, "weekday-0930")
	var payload report
	if err != nil || g.Cron != "@daily" || g.Payload.IsBytes || g.Payload.Decode(&payload) != nil || payload.Report != "stock" {
		t.Fatalf("after the second put: %+v, %v", g, err)
	}

	// What the client refuses before any request, and what the server refuses.
	var argErr *delayq.ArgumentError
	for what, spec := range map[string]delayq.ScheduleSpec{
		"neither cron nor every":   {},
		"both cron and every":      {Cron: "@daily", Every: time.Minute},
		"a time zone with every":   {Every: time.Minute, TimeZone: "Europe/Berlin"},
		"a negative every":         {Every: -time.Minute},
		"a negative jitter":        {Cron: "@daily", Jitter: -time.Second},
		"a negative backoff delay": {Cron: "@daily", Backoff: delayq.FixedBackoff(-time.Second)},
	} {
		if _, err := delayq.PutSchedule(ctx, c, q, "refused", 1, spec); !errors.As(err, &argErr) {
			t.Errorf("%s: %v, want an *ArgumentError", what, err)
		}
	}
	if _, err := c.BackfillSchedule(ctx, q, "weekday-0930", time.Time{}, time.Now()); !errors.As(err, &argErr) {
		t.Errorf("a backfill from the zero time: %v, want an *ArgumentError", err)
	}
	_, err = delayq.PutSchedule(ctx, c, q, "refused", 1, delayq.ScheduleSpec{Cron: "@daily", TimeZone: "Mars/Olympus_Mons"})
	if !errors.Is(err, delayq.ErrInvalidSchedule) {
		t.Errorf("an unknown time zone: %v, want ErrInvalidSchedule", err)
	}
	_, err = c.BackfillSchedule(ctx, q, "weekday-0930", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	if !errors.Is(err, delayq.ErrInvalidSchedule) {
		t.Errorf("a backfill into the future: %v, want ErrInvalidSchedule", err)
	}
	if _, err := c.GetSchedule(ctx, q, "no-such-schedule"); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("an unknown schedule: %v, want ErrNotFound", err)
	}
}
