package delayq_test

// Unit tests of the client's requests and its handling of answers, against a fake server
// (httptest): URL escaping, headers, bodies, retries, error decoding, cancellation.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

// fake records the requests it gets and answers each with the next of answers (the last
// one repeats).
type fake struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	answers  []func(w http.ResponseWriter)
}

func newFake(t *testing.T, answers ...func(w http.ResponseWriter)) (*fake, *delayq.Client) {
	f := &fake{answers: answers}
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return f, delayq.NewClient(s.URL+"/", delayq.WithToken("tok"),
		delayq.WithRetryPolicy(delayq.RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}))
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, string(body))
	answer := f.answers[len(f.answers)-1]
	if n < len(f.answers) {
		answer = f.answers[n]
	}
	f.mu.Unlock()
	answer(w)
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func status(code int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func TestRequestShape(t *testing.T) {
	f, c := newFake(t, status(200, `{"id":"a/b:c@d","state":"ready","due_ms":1000,"attempts":0,"max_attempts":5,"priority":5,"errors":[],"payload_base64":"AAE="}`))
	m, err := c.Get(context.Background(), "orders", "a/b:c@d")
	if err != nil {
		t.Fatal(err)
	}
	r := f.requests[0]
	if r.Method != "GET" || r.URL.EscapedPath() != "/v1/queues/orders/messages/a%2Fb:c@d" {
		t.Errorf("request %s %s: an id with '/' must stay one path segment", r.Method, r.URL.EscapedPath())
	}
	if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("User-Agent") != "delayq-go/"+delayq.Version {
		t.Errorf("headers %v", r.Header)
	}
	if !m.Payload.IsBytes || string(m.Payload.Bytes) != "\x00\x01" || !m.Due.Equal(time.UnixMilli(1000)) {
		t.Errorf("message %+v", m)
	}
}

func TestNackAndReceiveBodies(t *testing.T) {
	f, c := newFake(t, status(200, `{"outcome":"retry"}`))
	ctx := context.Background()
	c.Nack(ctx, "q", "r1", delayq.NackOptions{Error: "boom", RetryNow: true})
	c.Nack(ctx, "q", "r2", delayq.NackOptions{RetryAfter: 1500 * time.Millisecond, Payload: []byte("hi"), ExtraAttempts: 2})
	c.Nack(ctx, "q", "r3", delayq.NackOptions{Dead: true, Payload: map[string]int{"a": 1}})
	f2, c2 := newFake(t, status(200, `{"deliveries":[],"acked":[{"receipt":"r9","ok":false}]}`))
	acked, _, err := delayq.AckAndReceive[int](ctx, c2, "q", []string{"r9"}, delayq.ReceiveOptions{Max: 4, Wait: 2 * time.Second})
	if err != nil || len(acked) != 1 || acked[0].OK {
		t.Fatalf("acked = %+v, %v", acked, err)
	}
	c2.ExtendMany(ctx, "q", []string{"r1", "r2"}, 45*time.Second)
	want := []string{
		`{"error":"boom","receipt":"r1","retry_after":0}`,
		`{"extra_attempts":2,"payload_base64":"aGk=","receipt":"r2","retry_after":1500}`,
		`{"dead":true,"payload":{"a":1},"receipt":"r3"}`,
		`{"acks":["r9"],"max":4,"wait":2000}`,
		`{"lease":45000,"receipts":["r1","r2"]}`,
	}
	got := append(append([]string{}, f.bodies...), f2.bodies...)
	for i := range want {
		if i >= len(got) || !sameJSON(got[i], want[i]) {
			t.Errorf("body %d = %v, want %s", i, got, want[i])
		}
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestRetries(t *testing.T) {
	ctx := context.Background()
	unavailable := status(503, `{"error":{"code":"unavailable","message":"redis did not answer"}}`)

	// An idempotent call is retried on 503 until it succeeds.
	f, c := newFake(t, unavailable, unavailable, status(200, `{"name":"q"}`))
	if s, err := c.Stats(ctx, "q"); err != nil || s.Name != "q" || f.count() != 3 {
		t.Errorf("stats after two 503s: %+v, %v, %d requests; want success on the third", s, err, f.count())
	}
	// ... at most MaxRetries times.
	f, c = newFake(t, unavailable)
	_, err := c.Stats(ctx, "q")
	if !errors.Is(err, delayq.ErrUnavailable) || f.count() != 3 {
		t.Errorf("stats always 503: %v after %d requests; want ErrUnavailable after 3", err, f.count())
	}
	// An ack is never repeated (a second ack would answer lease_lost).
	f, c = newFake(t, unavailable, status(204, ``))
	if err := c.Ack(ctx, "q", "r"); !errors.Is(err, delayq.ErrUnavailable) || f.count() != 1 {
		t.Errorf("ack: %v after %d requests; want ErrUnavailable after 1", err, f.count())
	}
	// A send is repeated only when it has a caller id that keeps a duplicate.
	f, c = newFake(t, unavailable, status(201, `{"id":"x","duplicate":false}`))
	if _, err := delayq.Send(ctx, c, "q", 1); err == nil || f.count() != 1 {
		t.Errorf("a send without an id: %v after %d requests; want no retry", err, f.count())
	}
	f, c = newFake(t, unavailable, status(201, `{"id":"x","duplicate":false}`))
	if _, err := delayq.Send(ctx, c, "q", 1, delayq.ID("x")); err != nil || f.count() != 2 {
		t.Errorf("a send with an id: %v after %d requests; want success on the retry", err, f.count())
	}
	// not_replicated says the write happened: a repeat cannot fix it.
	f, c = newFake(t, status(503, `{"error":{"code":"not_replicated","message":"1 of 2"}}`))
	if _, err := delayq.Send(ctx, c, "q", 1, delayq.ID("x")); !errors.Is(err, delayq.ErrNotReplicated) || f.count() != 1 {
		t.Errorf("not_replicated: %v after %d requests; want no retry", err, f.count())
	}
	// A connection that fails is retried for an idempotent call.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	c = delayq.NewClient(url, delayq.WithRetryPolicy(delayq.RetryPolicy{MaxRetries: 1, BaseDelay: time.Millisecond}))
	var te *delayq.TransportError
	if _, err := c.Stats(ctx, "q"); !errors.As(err, &te) || te.Request != "GET /v1/queues/{queue}" {
		t.Errorf("a refused connection: %v, want a *TransportError naming the route", err)
	}
}

func TestErrorAnswers(t *testing.T) {
	ctx := context.Background()
	_, c := newFake(t, status(409, `{"error":{"code":"wrong_state","message":"message m is in flight"}}`))
	_, err := c.Cancel(ctx, "q", "m")
	var apiErr *delayq.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Code != delayq.ErrWrongState ||
		apiErr.Message != "message m is in flight" || apiErr.Request != "DELETE /v1/queues/{queue}/messages/{id}" {
		t.Fatalf("%#v", err)
	}
	if !errors.Is(err, delayq.ErrWrongState) || errors.Is(err, delayq.ErrLeaseLost) {
		t.Fatal("errors.Is must match the code, and only it")
	}
	// An answer that is not the API's (a proxy's page) keeps its status and text.
	_, c = newFake(t, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(502)
		io.WriteString(w, "<html>bad gateway</html>")
	})
	_, err = c.Cancel(ctx, "q", "m")
	if !errors.As(err, &apiErr) || apiErr.Code != "http_502" || apiErr.Message != "<html>bad gateway</html>" || apiErr.RetryAfter != 7*time.Second {
		t.Fatalf("%#v", err)
	}
}

func TestLongPollCancelled(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	_, c := newFake(t, func(w http.ResponseWriter) { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := delayq.Receive[int](ctx, c, "q", delayq.ReceiveOptions{Wait: 20 * time.Second})
	var te *delayq.TransportError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &te) {
		t.Fatalf("a cancelled long poll: %v, want context.Canceled in a *TransportError", err)
	}
}

// A server that answers 413 before reading the body may close the connection after its
// answer without "Connection: close"; the next request must not be sent on it.
func TestRequestAfterA413(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 1024 {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			body := `{"error":{"code":"body_too_large","message":"over 1024 bytes"}}`
			buf.WriteString("HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(body)) + "\r\n\r\n" + body)
			buf.Flush()
			// It closes a moment later, while the client could be sending on it.
			time.Sleep(20 * time.Millisecond)
			conn.Close()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer s.Close()
	c := delayq.NewClient(s.URL)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := delayq.Send(ctx, c, "q", strings.Repeat("x", 2048)); !errors.Is(err, delayq.ErrBodyTooLarge) {
			t.Fatalf("send %d: %v", i, err)
		}
		if err := c.Ack(ctx, "q", "r"); err != nil {
			t.Fatalf("the ack after 413 number %d: %v", i, err)
		}
	}
}
