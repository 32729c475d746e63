package delayq_test

// The README's Go code is example_test.go's, verbatim, and works against a real server.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
	"github.com/delayq/delayq/clients/go/internal/testserver"
)

func TestReadmeCodeIsExampleTestCode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	source, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 4 {
		t.Fatalf("the README has %d Go blocks", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(string(source), b[1]) {
			t.Errorf("this README block is not in example_test.go, so nothing compiles it:\n%s", b[1])
		}
	}
}

func TestReadmeCodeWorks(t *testing.T) {
	// A server of its own: the README uses the queue "orders".
	srv := testserver.Start(t)
	ctx := testContext(t)
	c := delayq.NewClient(srv.URL)

	printed := stdout(t, func() {
		if err := quickStart(ctx, srv.URL); err != nil {
			t.Errorf("quick start: %v", err)
		}
	})
	if !strings.HasPrefix(printed, "sent close-1234 due at ") || !strings.Contains(printed, "\nclose order 1234 attempt 1\n") {
		t.Fatalf("the quick start printed %q", printed)
	}
	if _, err := c.Get(ctx, "orders", "close-1234"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("after the quick start close-1234 is not acked: %v", err)
	}

	// The worker closes order 7, and stops when its context ends.
	if _, err := delayq.Send(ctx, c, "orders", Order{ID: 7}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- closeUnpaidOrders(runCtx, c) }()
	waitFor(t, 10*time.Second, "order 7 closed and acked", func() (bool, error) {
		_, closed := closedOrders.Load(7)
		s, err := c.Stats(ctx, "orders")
		return closed && s.Ready+s.InFlight == 0, err
	})
	stop()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the README's worker did not stop")
	}

	// charge: retried later with its stack, then a dead letter.
	text := delayq.FailureText(charge(ctx, delayq.Delivery[Order]{Attempt: 1, Payload: Order{ID: 1234}}))
	if !strings.HasPrefix(text, "delayq_test.CardDeclinedError: card declined for order 1234\n") || !strings.Contains(text, "go_test.charge") {
		t.Errorf("charge's failure text:\n%s", text)
	}
	var permanent *delayq.PermanentError
	if err := charge(ctx, delayq.Delivery[Order]{Attempt: 3}); !errors.As(err, &permanent) {
		t.Errorf("the third attempt: %v, want a permanent failure", err)
	}

	// cancelClose: cancelled, then nothing to cancel, then in flight.
	delayq.Send(ctx, c, "orders", Order{ID: 99}, delayq.ID("close-99"), delayq.Delay(time.Hour))
	if err := cancelClose(ctx, c, 99); err != nil {
		t.Fatal(err)
	}
	if err := cancelClose(ctx, c, 99); err != nil {
		t.Fatal(err)
	}
	delayq.Send(ctx, c, "orders", Order{ID: 98}, delayq.ID("close-98"))
	if got, _ := delayq.Receive[Order](ctx, c, "orders", delayq.ReceiveOptions{Wait: time.Second}); len(got) != 1 {
		t.Fatalf("received %v", got)
	}
	if err := cancelClose(ctx, c, 98); err == nil || !strings.Contains(err.Error(), "being closed") {
		t.Fatalf("cancel in flight: %v", err)
	}

	// dailyReports: the schedule put (its next run printed, a weekday at 09:30 in Berlin),
	// then an ack followed. The follower starts from now, at a moment not known here: ack
	// report messages until it prints one.
	lines, restore := stdoutLines(t)
	reportsCtx, stopReports := context.WithCancel(ctx)
	reportsDone := make(chan error, 1)
	go func() { reportsDone <- dailyReports(reportsCtx, c) }()
	line, _ := nextLine(lines, 10*time.Second)
	next, err := time.Parse(time.RFC3339, strings.TrimPrefix(line, "next report at "))
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if local := next.In(berlin); err != nil || local.Hour() != 9 || local.Minute() != 30 || local.Weekday() == time.Sunday || local.Weekday() == time.Saturday {
		restore()
		t.Fatalf("dailyReports printed %q (%v)", line, err)
	}
	followed := ""
	for i := 0; followed == "" && i < 30; i++ {
		sendReceiveAck(t, c, "reports", fmt.Sprintf("report-%d", i))
		if line, ok := nextLine(lines, 300*time.Millisecond); ok {
			followed = line
		}
	}
	stopReports()
	err = <-reportsDone
	restore()
	if err != nil || !regexp.MustCompile(`^report report-\d+ done at \d{4}-`).MatchString(followed) {
		t.Fatalf("dailyReports followed %q, returned %v", followed, err)
	}
	if s, err := c.GetSchedule(ctx, "reports", "daily-sales"); err != nil || s.Missed != delayq.MissedOnce {
		t.Fatalf("the README's schedule: %+v, %v", s, err)
	}

	// pushReceiver: 200 for a request the server signed, 401 for another.
	keys := []string{"a-signing-key-0123456789"}
	h := pushReceiver(keys)
	for _, tc := range []struct {
		body string
		want int
	}{{`{"id":1}`, 200}, {`{"id":2}`, 401}} {
		r := httptest.NewRequest("POST", "/hook", strings.NewReader(tc.body))
		r.Header.Set("Delayq-Signature", delayq.SignPush(keys, time.Now(), "orders", "close-1", 1, []byte(`{"id":1}`)))
		r.Header.Set("Delayq-Queue", "orders")
		r.Header.Set("Delayq-Message-Id", "close-1")
		r.Header.Set("Delayq-Attempt", "1")
		rec := httptest.NewRecorder()
		stdout(t, func() { h.ServeHTTP(rec, r) })
		if rec.Code != tc.want {
			t.Errorf("push of %s: %d, want %d", tc.body, rec.Code, tc.want)
		}
	}
}

// stdoutLines sends what is printed to os.Stdout, line by line, until restore (for code
// that prints while it runs); the test's end restores it too.
func stdoutLines(t *testing.T) (lines <-chan string, restore func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	ch := make(chan string, 1000)
	go func() {
		scanner := bufio.NewScanner(r)
		for scanner.Scan() {
			ch <- scanner.Text()
		}
		close(ch)
	}()
	var once sync.Once
	restore = func() { once.Do(func() { os.Stdout = saved; w.Close() }) }
	t.Cleanup(restore)
	return ch, restore
}

// nextLine answers the next line printed, or false after timeout.
func nextLine(lines <-chan string, timeout time.Duration) (string, bool) {
	select {
	case line, ok := <-lines:
		return line, ok
	case <-time.After(timeout):
		return "", false
	}
}

// stdout runs f and answers what it printed to os.Stdout (the README's code prints).
func stdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	f()
	w.Close()
	return <-read
}
