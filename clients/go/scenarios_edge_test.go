package delayq_test

// The shared scenarios of clients/SCENARIOS.md about the edges: S7 (push verify) and S8
// (bad input errors).

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
	"github.com/delayq/delayq/clients/go/internal/testserver"
)

type pushed struct {
	header http.Header
	body   []byte
}

func TestS7_PushVerify(t *testing.T) {
	ctx, c, q := testContext(t), client(t), queueName(t)
	got := make(chan pushed, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- pushed{r.Header.Clone(), body}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()

	target, err := c.SetPushTarget(ctx, q, delayq.PushTargetSettings{URL: receiver.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeletePushTarget(ctx, q)
	if len(target.SigningKeys) == 0 {
		t.Fatalf("push target %+v has no signing key", target)
	}
	if _, err := delayq.Send(ctx, c, q, order{Order: 1234}, delayq.ID("close-1234")); err != nil {
		t.Fatal(err)
	}
	var p pushed
	select {
	case p = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("no push within 15 s")
	}

	keys := target.SigningKeys
	if err := delayq.VerifyPush(keys, p.header, p.body, time.Now(), 0); err != nil {
		t.Fatalf("the server's own signature does not verify: %v (headers %v)", err, p.header)
	}
	changed := func(name, value string) http.Header {
		h := p.header.Clone()
		h.Set(name, value)
		return h
	}
	signedAt, _ := time.Parse(time.RFC3339, "2000-01-01T00:00:00Z")
	for _, tc := range []struct {
		what   string
		keys   []string
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"a changed body", keys, p.header, append(append([]byte{}, p.body...), ' '), time.Now(), delayq.ErrSignatureMismatch},
		{"a changed queue", keys, changed("Delayq-Queue", q+"x"), p.body, time.Now(), delayq.ErrSignatureMismatch},
		{"a changed id", keys, changed("Delayq-Message-Id", "close-1235"), p.body, time.Now(), delayq.ErrSignatureMismatch},
		{"a changed attempt", keys, changed("Delayq-Attempt", "2"), p.body, time.Now(), delayq.ErrSignatureMismatch},
		{"another key", []string{"another-key-0123456789"}, p.header, p.body, time.Now(), delayq.ErrSignatureMismatch},
		// Its t seen from more than 5 minutes later.
		{"a t more than 5 minutes old", keys, p.header, p.body, time.Now().Add(5*time.Minute + 2*time.Second), delayq.ErrSignatureExpired},
		{"no signature", keys, changed("Delayq-Signature", ""), p.body, time.Now(), delayq.ErrSignatureMissing},
		{"a clock far off", keys, p.header, p.body, signedAt, delayq.ErrSignatureExpired},
	} {
		if err := delayq.VerifyPush(tc.keys, tc.header, tc.body, tc.now, 5*time.Minute); !errors.Is(err, tc.want) {
			t.Errorf("%s: VerifyPush = %v, want %v", tc.what, err, tc.want)
		}
	}
}

// countingTransport counts the requests a client makes.
type countingTransport struct{ n int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	atomic.AddInt64(&c.n, 1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestS8_BadInputErrors(t *testing.T) {
	ctx := testContext(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("admin:s8-admin-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, "--tokens-file", tokens, "--max-body-bytes", "4096")
	counter := &countingTransport{}
	c := delayq.NewClient(srv.URL, delayq.WithToken("s8-admin-token-0123456789"),
		delayq.WithHTTPClient(&http.Client{Transport: counter}))
	q := queueName(t)

	// wantCode checks that err is the client's typed error carrying one of the codes.
	wantCode := func(what string, err error, status int, codes ...delayq.ErrorCode) {
		t.Helper()
		var apiErr *delayq.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("%s: %v, want an *APIError", what, err)
			return
		}
		for _, code := range codes {
			if errors.Is(err, code) && apiErr.Status == status && apiErr.Message != "" {
				return
			}
		}
		t.Errorf("%s: %d %s (%q), want %d and one of %v", what, apiErr.Status, apiErr.Code, apiErr.Message, status, codes)
	}

	_, err := delayq.Send(ctx, c, "bad queue!", 1)
	wantCode("a bad queue name", err, 400, delayq.ErrInvalidQueueName)
	_, err = delayq.Send(ctx, c, q, 1, delayq.ID("bad id!"))
	wantCode("a bad id", err, 400, delayq.ErrInvalidID)
	_, err = delayq.Send(ctx, c, q, strings.Repeat("x", 8192))
	wantCode("a payload over --max-body-bytes", err, 413, delayq.ErrPayloadTooLarge, delayq.ErrBodyTooLarge)
	err = c.Ack(ctx, q, "000000000000000000000000eno-such-message")
	wantCode("an unknown receipt", err, 409, delayq.ErrLeaseLost)
	err = c.Ack(ctx, q, "not-a-receipt")
	wantCode("a receipt delayq never made", err, 400, delayq.ErrInvalidReceipt)
	_, err = delayq.Send(ctx, delayq.NewClient(srv.URL, delayq.WithToken("wrong-token-0123456789")), q, 1)
	wantCode("a wrong token", err, 401, delayq.ErrUnauthorized)

	// SCENARIOS.md's "ambiguous bare-number duration" cannot arise in Go: every duration
	// this client takes is a time.Duration, a type with its unit, so there is no bare
	// number whose unit the client would have to guess (delayq.Delay(200) compiles, but it
	// is 200 ns by the type's own definition, and is sent as 1 ms, rounded up). What the
	// client does refuse itself, before any request, with a message naming the fix, is a
	// duration no setting takes (a negative one) and a time left unset.
	before := atomic.LoadInt64(&counter.n)
	_, err = delayq.Send(ctx, c, q, 1, delayq.Delay(-time.Second))
	var argErr *delayq.ArgumentError
	if !errors.As(err, &argErr) || argErr.Arg != "delay" || !strings.Contains(argErr.Problem, "give 0 or more") {
		t.Errorf("a negative delay: %v, want an *ArgumentError naming delay and the fix", err)
	}
	_, err = delayq.Send(ctx, c, q, 1, delayq.DeliverAt(time.Time{}))
	if !errors.As(err, &argErr) || argErr.Arg != "deliver_at" || !strings.Contains(argErr.Problem, "give a time") {
		t.Errorf("a zero time: %v, want an *ArgumentError naming deliver_at and the fix", err)
	}
	_, err = delayq.Receive[int](ctx, c, q, delayq.ReceiveOptions{Wait: -time.Second})
	if !errors.As(err, &argErr) {
		t.Errorf("a negative wait: %v, want an *ArgumentError", err)
	}
	if after := atomic.LoadInt64(&counter.n); after != before {
		t.Errorf("the client made %d requests for arguments it refuses itself", after-before)
	}
}
