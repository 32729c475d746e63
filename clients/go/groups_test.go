package delayq_test

// Groups against a real server: the list, one group's counts and settings, its own
// settings in place of the queue's and back, and a paused group's messages kept back while
// the rest of the queue flows.

import (
	"errors"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func TestGroupsListConfigurePauseResume(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	for i := 0; i < 3; i++ {
		if _, err := delayq.Send(ctx, c, q, i, delayq.Group("tenant:a")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := delayq.Send(ctx, c, q, 9, delayq.Group("tenant:b")); err != nil {
		t.Fatal(err)
	}

	// The list: most messages first, a page at a time.
	page, err := c.ListGroups(ctx, q, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []delayq.GroupSummary{{Name: "tenant:a", Messages: 3}, {Name: "tenant:b", Messages: 1}}
	if page.Total != 2 || len(page.Groups) != 2 || page.Groups[0] != want[0] || page.Groups[1] != want[1] {
		t.Fatalf("groups = %+v, want %+v of 2", page, want)
	}
	page, err = c.ListGroups(ctx, q, 1, 1)
	if err != nil || page.Total != 2 || len(page.Groups) != 1 || page.Groups[0] != want[1] {
		t.Fatalf("the page at offset 1 of 1: %+v, %v; want only %+v", page, err, want[1])
	}

	// One group, with no settings of its own.
	g, err := c.GetGroup(ctx, q, "tenant:a")
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "tenant:a" || g.Ready != 3 || g.Delayed != 0 || g.InFlight != 0 || g.Paused || g.Weight != 1 ||
		g.Concurrency != 0 || g.OwnConcurrency != 0 || g.RateLimit != nil || g.OwnRateLimit != nil {
		t.Fatalf("group = %+v", g)
	}

	// Settings of its own, in place of the queue's.
	g, err = c.ConfigureGroup(ctx, q, "tenant:a", delayq.GroupConcurrency(2), delayq.GroupWeight(3), delayq.GroupRateLimit(50, 5))
	if err != nil {
		t.Fatal(err)
	}
	limit := delayq.RateLimit{PerSecond: 50, Burst: 5}
	if g.Concurrency != 2 || g.OwnConcurrency != 2 || g.Weight != 3 || g.RateLimit == nil || *g.RateLimit != limit ||
		g.OwnRateLimit == nil || *g.OwnRateLimit != limit {
		t.Fatalf("configured group = %+v", g)
	}
	if again, err := c.GetGroup(ctx, q, "tenant:a"); err != nil || again.OwnConcurrency != 2 || again.Weight != 3 {
		t.Fatalf("read back = %+v, %v", again, err)
	}

	// Back to the queue's: its group concurrency applies again; the weight stays.
	if _, err := c.Configure(ctx, q, delayq.SetGroupConcurrency(4)); err != nil {
		t.Fatal(err)
	}
	g, err = c.ConfigureGroup(ctx, q, "tenant:a", delayq.GroupConcurrencyFromQueue(), delayq.GroupRateLimitFromQueue())
	if err != nil {
		t.Fatal(err)
	}
	if g.Concurrency != 4 || g.OwnConcurrency != 0 || g.RateLimit != nil || g.OwnRateLimit != nil || g.Weight != 3 {
		t.Fatalf("group with the queue's settings = %+v, want concurrency 4 (the queue's), weight 3", g)
	}

	// Paused: its messages wait while the other group's flow.
	if g, err = c.PauseGroup(ctx, q, "tenant:a"); err != nil || !g.Paused {
		t.Fatalf("pause = %+v, %v", g, err)
	}
	got, err := delayq.Receive[int](ctx, c, q, delayq.ReceiveOptions{Max: 10, Wait: time.Second})
	if err != nil || len(got) != 1 || got[0].Group != "tenant:b" {
		t.Fatalf("received %+v, %v while tenant:a is paused; want tenant:b's one message", got, err)
	}
	if err := c.Ack(ctx, q, got[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if more, err := delayq.Receive[int](ctx, c, q, delayq.ReceiveOptions{Max: 10, Wait: 300 * time.Millisecond}); err != nil || len(more) != 0 {
		t.Fatalf("received %+v, %v from the paused group", more, err)
	}

	// Resumed: its messages are delivered.
	if g, err = c.ResumeGroup(ctx, q, "tenant:a"); err != nil || g.Paused {
		t.Fatalf("resume = %+v, %v", g, err)
	}
	var delivered []delayq.Delivery[int]
	waitFor(t, 10*time.Second, "tenant:a's three messages after the resume", func() (bool, error) {
		got, err := delayq.Receive[int](ctx, c, q, delayq.ReceiveOptions{Max: 10, Wait: time.Second})
		delivered = append(delivered, got...)
		return len(delivered) >= 3, err
	})
	for _, d := range delivered {
		if d.Group != "tenant:a" {
			t.Errorf("delivered %+v, want tenant:a's", d)
		}
	}

	// Refused by the server: a concurrency out of its range.
	_, err = c.ConfigureGroup(ctx, q, "tenant:a", delayq.GroupConcurrency(0))
	var apiErr *delayq.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !errors.Is(err, delayq.ErrInvalidOption) {
		t.Fatalf("concurrency 0: %v, want a 400 ErrInvalidOption", err)
	}
}
