package delayq_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

// The known answer the server's signer is pinned to (push/signature.rs; docs/run-sessions.sh
// checks docs/push.md's Python against it): key "key", t=1, orders/close-1234/2, body "body".
const (
	knownV1 = "91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5"
	knownV2 = "80755dc13779b3023f019d27621185b6d160d67896fd5fa599eed19b4dfc5dd0"
	// w1 of key "key", t=1, queue orders, event id 1795654349126-0, body "body", made
	// with Python's hmac (docs/events.md's recipe), not with this package.
	knownW1 = "f9a8a9d42757caba9ad66a91076026e643a9f1864de063867d0213d2726057fa"
)

var t1 = time.Unix(1, 0)

func pushHeader(signature string) http.Header {
	h := http.Header{}
	h.Set("Delayq-Signature", signature)
	h.Set("Delayq-Queue", "orders")
	h.Set("Delayq-Message-Id", "close-1234")
	h.Set("Delayq-Attempt", "2")
	return h
}

func TestSignPushKnownAnswer(t *testing.T) {
	got := delayq.SignPush([]string{"key"}, t1, "orders", "close-1234", 2, []byte("body"))
	if want := "t=1,v1=" + knownV1 + ",v2=" + knownV2; got != want {
		t.Fatalf("SignPush = %s\nwant        %s", got, want)
	}
}

func TestVerifyPush(t *testing.T) {
	header := pushHeader("t=1,v1=" + knownV1 + ",v2=" + knownV2)
	body := []byte("body")
	if err := delayq.VerifyPush([]string{"key"}, header, body, t1, 0); err != nil {
		t.Fatalf("the server's signature: %v", err)
	}
	// During a rotation the receiver knows both keys, in either order.
	if err := delayq.VerifyPush([]string{"new-key-0123456789", "key"}, header, body, t1, 0); err != nil {
		t.Fatalf("with two keys: %v", err)
	}
	// A signature of two keys (the server signs with each) verifies under either.
	both := pushHeader(delayq.SignPush([]string{"new-key-0123456789", "key"}, t1, "orders", "close-1234", 2, body))
	if err := delayq.VerifyPush([]string{"key"}, both, body, t1, 0); err != nil {
		t.Fatalf("the old key of a rotation: %v", err)
	}
	set := func(name, value string) http.Header {
		h := header.Clone()
		h.Set(name, value)
		return h
	}
	for _, tc := range []struct {
		what   string
		keys   []string
		header http.Header
		body   string
		now    time.Time
		want   error
	}{
		{"a changed body", []string{"key"}, header, "bodY", t1, delayq.ErrSignatureMismatch},
		{"another key", []string{"other"}, header, "body", t1, delayq.ErrSignatureMismatch},
		{"no keys", nil, header, "body", t1, delayq.ErrSignatureMismatch},
		{"another attempt", []string{"key"}, set("Delayq-Attempt", "3"), "body", t1, delayq.ErrSignatureMismatch},
		{"another message", []string{"key"}, set("Delayq-Message-Id", "close-1235"), "body", t1, delayq.ErrSignatureMismatch},
		{"another queue", []string{"key"}, set("Delayq-Queue", "invoices"), "body", t1, delayq.ErrSignatureMismatch},
		{"t=1 seen today", []string{"key"}, header, "body", time.Now(), delayq.ErrSignatureExpired},
		{"t=1 seen 301 s later", []string{"key"}, header, "body", time.Unix(302, 0), delayq.ErrSignatureExpired},
		{"only the deprecated v1", []string{"key"}, set("Delayq-Signature", "t=1,v1="+knownV1), "body", t1, delayq.ErrSignatureMissing},
		{"a v1 passed off as v2", []string{"key"}, set("Delayq-Signature", "t=1,v2="+knownV1), "body", t1, delayq.ErrSignatureMismatch},
		{"no signature", []string{"key"}, set("Delayq-Signature", ""), "body", t1, delayq.ErrSignatureMissing},
		{"no t", []string{"key"}, set("Delayq-Signature", "v2="+knownV2), "body", t1, delayq.ErrSignatureMissing},
		{"a bad t", []string{"key"}, set("Delayq-Signature", "t=x,v2="+knownV2), "body", t1, delayq.ErrSignatureMissing},
		{"no attempt", []string{"key"}, set("Delayq-Attempt", ""), "body", t1, delayq.ErrSignatureMissing},
		{"an attempt that is not a number", []string{"key"}, set("Delayq-Attempt", "two"), "body", t1, delayq.ErrSignatureMissing},
	} {
		err := delayq.VerifyPush(tc.keys, tc.header, []byte(tc.body), tc.now, 0)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, err, tc.want)
		}
	}
	// 300 s is within the default tolerance of 5 minutes; a tolerance given is used.
	if err := delayq.VerifyPush([]string{"key"}, header, body, time.Unix(301, 0), 0); err != nil {
		t.Errorf("300 s late, default tolerance: %v", err)
	}
	if err := delayq.VerifyPush([]string{"key"}, header, body, time.Unix(12, 0), 10*time.Second); !errors.Is(err, delayq.ErrSignatureExpired) {
		t.Errorf("11 s late, 10 s tolerance: %v", err)
	}
}

func TestVerifyWebhook(t *testing.T) {
	h := http.Header{}
	h.Set("Delayq-Queue", "orders")
	h.Set("Delayq-Event-Id", "1795654349126-0")
	h.Set("Delayq-Signature", "t=1,v1=aa,v2=bb,w1="+knownW1)
	body := []byte("body")
	if err := delayq.VerifyWebhook([]string{"key"}, h, body, t1, 0); err != nil {
		t.Fatalf("the known w1: %v", err)
	}
	if got := delayq.SignWebhook([]string{"key"}, t1, "orders", "1795654349126-0", body); got != "t=1,w1="+knownW1 {
		t.Fatalf("SignWebhook = %s", got)
	}
	other := h.Clone()
	other.Set("Delayq-Event-Id", "1795654349126-1")
	if err := delayq.VerifyWebhook([]string{"key"}, other, body, t1, 0); !errors.Is(err, delayq.ErrSignatureMismatch) {
		t.Errorf("another event id: %v", err)
	}
	if err := delayq.VerifyWebhook([]string{"key"}, h, []byte("bodY"), t1, 0); !errors.Is(err, delayq.ErrSignatureMismatch) {
		t.Errorf("a changed body: %v", err)
	}
	if err := delayq.VerifyWebhook([]string{"key"}, h, body, time.Now(), 0); !errors.Is(err, delayq.ErrSignatureExpired) {
		t.Errorf("t=1 seen today: %v", err)
	}
	// A push's signature (v2 only) is not a webhook's.
	push := pushHeader("t=1,v2=" + knownV2)
	push.Set("Delayq-Event-Id", "x")
	if err := delayq.VerifyWebhook([]string{"key"}, push, body, t1, 0); !errors.Is(err, delayq.ErrSignatureMissing) {
		t.Errorf("a push signature as a webhook's: %v", err)
	}
	noEvent := h.Clone()
	noEvent.Del("Delayq-Event-Id")
	if err := delayq.VerifyWebhook([]string{"key"}, noEvent, body, t1, 0); err == nil || !strings.Contains(err.Error(), "Delayq-Event-Id") {
		t.Errorf("no event id: %v", err)
	}
}
