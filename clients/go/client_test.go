package delayq_test

// The produce, consume and admin calls against the real server, beyond the scenarios.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func TestBytesBatchAndSettling(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	sent, err := delayq.SendBatch(ctx, c, q, []delayq.BatchItem[[]byte]{
		delayq.Item([]byte{0, 1, 2}, delayq.ID("b0")),
		delayq.Item([]byte("hello"), delayq.ID("b1"), delayq.Priority(9)),
		delayq.Item([]byte{}, delayq.ID("b2"), delayq.Priority(0)),
	})
	if err != nil || len(sent) != 3 || sent[1].ID != "b1" {
		t.Fatalf("batch = %+v, %v", sent, err)
	}
	got, err := delayq.Receive[[]byte](ctx, c, q, delayq.ReceiveOptions{Max: 3, Lease: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("receive = %+v, %v", got, err)
	}
	// Highest priority first; bytes come back as bytes.
	if got[0].ID != "b1" || string(got[0].Payload) != "hello" || !got[0].Raw.IsBytes {
		t.Fatalf("first = %+v, want b1 hello as bytes", got[0])
	}
	byID := map[string]delayq.Delivery[[]byte]{}
	for _, d := range got {
		byID[d.ID] = d
	}
	if string(byID["b0"].Payload) != "\x00\x01\x02" || len(byID["b2"].Payload) != 0 {
		t.Fatalf("payloads %q %q", byID["b0"].Payload, byID["b2"].Payload)
	}

	deadline, err := c.Extend(ctx, q, byID["b0"].Receipt, 2*time.Minute)
	if err != nil || time.Until(deadline) < 90*time.Second {
		t.Fatalf("extend = %v, %v; want about 2 minutes from now", deadline, err)
	}
	released, err := c.ReleaseMany(ctx, q, []string{byID["b0"].Receipt})
	if err != nil || len(released) != 1 || !released[0].OK {
		t.Fatalf("release = %+v, %v", released, err)
	}
	if err := c.Release(ctx, q, byID["b2"].Receipt); err != nil {
		t.Fatal(err)
	}
	acked, err := c.AckMany(ctx, q, []string{byID["b1"].Receipt})
	if err != nil || len(acked) != 1 || !acked[0].OK {
		t.Fatalf("ack = %+v, %v; want ok", acked, err)
	}
	if acked, err = c.AckMany(ctx, q, []string{byID["b1"].Receipt}); err != nil || len(acked) != 1 || acked[0].OK {
		t.Fatalf("a second ack = %+v, %v; want not ok", acked, err)
	}
	if err := c.Ack(ctx, q, byID["b1"].Receipt); !errors.Is(err, delayq.ErrLeaseLost) {
		t.Fatalf("a repeated ack: %v, want ErrLeaseLost", err)
	}
	// Released: ready at once, the attempt not counted.
	acks, again, err := delayq.AckAndReceive[[]byte](ctx, c, q, nil, delayq.ReceiveOptions{Max: 5})
	if err != nil || len(again) != 2 || again[0].Attempt != 1 || len(acks) != 0 {
		t.Fatalf("after release = %+v, %+v, %v", again, acks, err)
	}
	results, next, err := delayq.AckAndReceive[[]byte](ctx, c, q, []string{again[0].Receipt, again[1].Receipt}, delayq.ReceiveOptions{})
	if err != nil || len(results) != 2 || !results[0].OK || !results[1].OK || len(next) != 0 {
		t.Fatalf("ack and receive = %+v, %+v, %v", results, next, err)
	}
}

func TestReceiveManyAndPayloadErrors(t *testing.T) {
	ctx, c := testContext(t), client(t)
	a, b := queueName(t), queueName(t)
	delayq.Send(ctx, c, b, 2)
	delayq.Send(ctx, c, a, "not a number")
	got, err := delayq.ReceiveMany[int](ctx, c, delayq.MultiReceiveOptions{
		Weights: map[string]int{a: 1, b: 1}, ReceiveOptions: delayq.ReceiveOptions{Max: 2, Wait: time.Second},
	})
	var pe *delayq.PayloadError
	if !errors.As(err, &pe) || pe.Queue != a || len(got) != 1 || got[0].Queue != b || got[0].Payload != 2 {
		t.Fatalf("ReceiveMany = %+v, %v; want b's 2 and a *PayloadError for a's text", got, err)
	}
	// The undecodable one is still leased to the caller, who settles it.
	if _, err := c.Nack(ctx, a, pe.Receipt, delayq.NackOptions{Error: delayq.FailureText(pe), Dead: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(ctx, b, got[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if _, err := delayq.ReceiveMany[int](ctx, c, delayq.MultiReceiveOptions{}); err == nil {
		t.Fatal("a receive of no queue was sent")
	}
}

func TestCancelRescheduleList(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	for i := 0; i < 5; i++ {
		delayq.Send(ctx, c, q, map[string]int{"n": i}, delayq.ID(fmt.Sprintf("m%d", i)), delayq.Delay(time.Hour))
	}
	if state, err := c.Cancel(ctx, q, "m0"); err != nil || state != "delayed" {
		t.Fatalf("cancel = %q, %v", state, err)
	}
	if _, err := c.Cancel(ctx, q, "m0"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("cancel again: %v", err)
	}
	many, err := c.CancelMany(ctx, q, []string{"m1", "nope"})
	if err != nil || many.Cancelled != 1 || many.Results[0].Outcome != "cancelled" || many.Results[1].Outcome != "not_found" {
		t.Fatalf("cancel many = %+v, %v", many, err)
	}
	at := time.Now().Add(10 * time.Minute).Truncate(time.Millisecond)
	if due, err := c.RescheduleAt(ctx, q, "m2", at); err != nil || !due.Equal(at) {
		t.Fatalf("reschedule at = %v, %v; want %v", due, err, at)
	}
	if due, err := c.Reschedule(ctx, q, "m3", 0); err != nil || time.Until(due) > time.Second {
		t.Fatalf("reschedule now = %v, %v", due, err)
	}
	// m3 is ready now: in flight, it cannot be cancelled.
	got, _ := delayq.Receive[map[string]int](ctx, c, q, delayq.ReceiveOptions{Wait: 2 * time.Second})
	if len(got) != 1 || got[0].ID != "m3" {
		t.Fatalf("receive = %+v", got)
	}
	if _, err := c.Cancel(ctx, q, "m3"); !errors.Is(err, delayq.ErrWrongState) {
		t.Fatalf("cancel in flight: %v, want ErrWrongState", err)
	}
	// Two delayed (m2, m4), a page at a time.
	var ids []string
	cursor := ""
	for pages := 0; pages < 5; pages++ {
		page, err := c.ListMessages(ctx, q, delayq.ListOptions{State: "delayed", Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			ids = append(ids, m.ID)
			if m.PayloadKind != "json" || m.PayloadPreview == "" {
				t.Errorf("summary %+v", m)
			}
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if fmt.Sprint(ids) != "[m2 m4]" {
		t.Fatalf("delayed, in due order: %v", ids)
	}
	if _, err := c.ListMessages(ctx, q, delayq.ListOptions{}); err == nil {
		t.Fatal("a list without a state was sent")
	}
}

func TestAdmin(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := c.Ready(ctx); err != nil || info.Kind == "" || info.Version == "" {
		t.Fatalf("ready = %+v, %v", info, err)
	}
	if s, err := c.CreateQueue(ctx, q, 2); err != nil || s.Partitions != 2 {
		t.Fatalf("create = %+v, %v", s, err)
	}
	s, err := c.Configure(ctx, q, delayq.SetIdempotencyWindow(time.Hour), delayq.SetRateLimit(100, 10),
		delayq.SetGroupConcurrency(2), delayq.SetRetainCompleted(time.Hour, 100), delayq.SetEvents(1000))
	if err != nil || s.IdempotencyWindow != time.Hour || s.RateLimit == nil || s.RateLimit.PerSecond != 100 ||
		s.GroupConcurrency != 2 || s.RetainCompleted == nil || s.RetainCompleted.KeepFor != time.Hour || s.EventsMax != 1000 {
		t.Fatalf("configure = %+v, %v", s, err)
	}
	if s, err = c.Configure(ctx, q, delayq.ClearRateLimit(), delayq.ClearGroupConcurrency()); err != nil || s.RateLimit != nil || s.GroupConcurrency != 0 {
		t.Fatalf("clear = %+v, %v", s, err)
	}
	if s, err := c.Pause(ctx, q); err != nil || !s.Paused {
		t.Fatalf("pause = %+v, %v", s, err)
	}
	delayq.Send(ctx, c, q, 1, delayq.ID("p"))
	if got, err := delayq.Receive[int](ctx, c, q, delayq.ReceiveOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("a paused queue gave %+v, %v", got, err)
	}
	if s, err := c.Resume(ctx, q); err != nil || s.Paused || s.Ready != 1 {
		t.Fatalf("resume = %+v, %v", s, err)
	}
	queues, err := c.Queues(ctx)
	found := false
	for _, s := range queues {
		found = found || s.Name == q
	}
	if err != nil || !found {
		t.Fatalf("queues = %v, %v; want %s among them", queues, err, q)
	}

	// Dead letters, all at once.
	for _, id := range []string{"d1", "d2"} {
		delayq.Send(ctx, c, q, 1, delayq.ID(id), delayq.MaxAttempts(1))
	}
	for {
		got, _ := delayq.Receive[int](ctx, c, q, delayq.ReceiveOptions{Max: 10})
		if len(got) == 0 {
			break
		}
		for _, d := range got {
			if d.ID == "p" {
				c.Ack(ctx, q, d.Receipt)
			} else {
				c.Nack(ctx, q, d.Receipt, delayq.NackOptions{Error: "x"})
			}
		}
	}
	if n, err := c.RequeueAllDead(ctx, q); err != nil || n != 2 {
		t.Fatalf("requeue all = %d, %v", n, err)
	}
	if m, err := c.Get(ctx, q, "p"); err != nil || m.State != "completed" || m.Outcome != "acked" {
		t.Fatalf("an acked message of a queue that retains: %+v, %v", m, err)
	}

	// Push target: none, set, read, removed.
	if _, err := c.PushTarget(ctx, q); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("no push target: %v", err)
	}
	key := "a-signing-key-0123456789"
	target, err := c.SetPushTarget(ctx, q, delayq.PushTargetSettings{
		URL: "http://127.0.0.1:9/hook", Timeout: 5 * time.Second, Concurrency: 2, SigningKeys: []string{key},
		Headers: map[string]string{"x-app": "test"},
	})
	if err != nil || target.Timeout != 5*time.Second || target.SigningKeys[0] != key || target.Concurrency != 2 {
		t.Fatalf("set push target = %+v, %v", target, err)
	}
	if got, err := c.PushTarget(ctx, q); err != nil || got.URL != "http://127.0.0.1:9/hook" || got.Headers["x-app"] != "test" {
		t.Fatalf("push target = %+v, %v", got, err)
	}
	if err := c.DeletePushTarget(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPushTarget(ctx, q, delayq.PushTargetSettings{URL: "http://10.1.2.3/x"}); !errors.Is(err, delayq.ErrPushTargetRefused) {
		t.Fatalf("a private address: %v, want ErrPushTargetRefused", err)
	}

	// A queue holding messages is kept unless forced.
	if _, err := c.DeleteQueue(ctx, q, false); !errors.Is(err, delayq.ErrQueueNotEmpty) {
		t.Fatalf("delete of a queue holding messages: %v, want ErrQueueNotEmpty", err)
	}
	if del, err := c.DeleteQueue(ctx, q, true); err != nil || del.Queue != q || del.Messages != 2 {
		t.Fatalf("forced delete = %+v, %v", del, err)
	}
	if _, err := c.DeleteQueue(ctx, q, false); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("delete of a queue never used: %v", err)
	}

	// A route the client leaves out, through Raw.
	var processes struct {
		Processes []map[string]any `json:"processes"`
	}
	if err := c.Raw(ctx, "GET", "/v1/processes", nil, &processes); err != nil || len(processes.Processes) == 0 {
		t.Fatalf("raw /v1/processes = %+v, %v", processes, err)
	}
	if _, err := c.Stats(context.Background(), "bad name!"); !errors.Is(err, delayq.ErrInvalidQueueName) {
		t.Fatalf("stats of a bad name: %v", err)
	}
}
