package delayq

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a pushed request and of a webhook call (docs/push.md, docs/events.md).
const (
	HeaderSignature = "Delayq-Signature"
	HeaderQueue     = "Delayq-Queue"
	HeaderMessageID = "Delayq-Message-Id"
	HeaderAttempt   = "Delayq-Attempt"
	HeaderDueMs     = "Delayq-Due-Ms"
	HeaderEvent     = "Delayq-Event"
	HeaderEventID   = "Delayq-Event-Id"
)

// DefaultTolerance is how far a signature's time may be from the receiver's clock: older
// (or newer) requests are refused as replays.
const DefaultTolerance = 5 * time.Minute

// Why a signature does not verify. VerifyPush and VerifyWebhook wrap one of these, so
// errors.Is tells which; any of them means: refuse the request (answer 401 or 403).
var (
	// ErrSignatureMissing: a header is missing or does not parse.
	ErrSignatureMissing = errors.New("delayq: signature or signed header missing or malformed")
	// ErrSignatureExpired: its time is further from now than the tolerance.
	ErrSignatureExpired = errors.New("delayq: signature time outside the tolerance")
	// ErrSignatureMismatch: no signature matches the request under any of the keys.
	ErrSignatureMismatch = errors.New("delayq: signature does not match")
)

// VerifyPush checks a pushed request's Delayq-Signature: nil when it has a v2 made with one
// of keys over exactly this body and its Delayq-Queue, Delayq-Message-Id and Delayq-Attempt
// headers, at a time within tolerance of now (tolerance 0: DefaultTolerance; the zero now:
// time.Now()). v2 is HMAC-SHA256 of "<t>\n<queue>\n<id>\n<attempt>\n<body>", so a captured
// request cannot be replayed as another attempt, message or queue; the deprecated v1 (over
// the body alone) is never accepted. body is the bytes as received: parse it only after.
// A receiver should also refuse a message id and attempt it has seen within the tolerance.
func VerifyPush(keys []string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	queue, id, attempt := header.Get(HeaderQueue), header.Get(HeaderMessageID), header.Get(HeaderAttempt)
	if queue == "" || id == "" || attempt == "" {
		return fmt.Errorf("%w: %s, %s and %s are required", ErrSignatureMissing, HeaderQueue, HeaderMessageID, HeaderAttempt)
	}
	n, err := strconv.ParseUint(attempt, 10, 32)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not a number", ErrSignatureMissing, HeaderAttempt, attempt)
	}
	// The attempt as the server signs it: a number ("2", never "02").
	return verify(keys, header, "v2", []string{queue, id, strconv.FormatUint(n, 10)}, body, now, tolerance)
}

// VerifyWebhook checks a webhook call's Delayq-Signature: nil when it has a w1 made with
// one of keys over exactly this body and its Delayq-Queue and Delayq-Event-Id headers, at
// a time within tolerance of now (as VerifyPush). w1 is HMAC-SHA256 of
// "<t>\n<queue>\n<event id>\n<body>". A receiver should also drop an event id it has
// handled (keep them 15 minutes: 10 of retries and 5 of clock tolerance).
func VerifyWebhook(keys []string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	queue, event := header.Get(HeaderQueue), header.Get(HeaderEventID)
	if queue == "" || event == "" {
		return fmt.Errorf("%w: %s and %s are required", ErrSignatureMissing, HeaderQueue, HeaderEventID)
	}
	return verify(keys, header, "w1", []string{queue, event}, body, now, tolerance)
}

func verify(keys []string, header http.Header, scheme string, fields []string, body []byte, now time.Time, tolerance time.Duration) error {
	t, candidates, err := parseSignature(header.Get(HeaderSignature), scheme)
	if err != nil {
		return err
	}
	if now.IsZero() {
		now = time.Now()
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	skew := now.Sub(time.Unix(t, 0))
	if skew > tolerance || -skew > tolerance {
		return fmt.Errorf("%w: t=%d is %v from now", ErrSignatureExpired, t, skew.Round(time.Second))
	}
	matched := false
	// Every key against every candidate, without stopping early, each compared in constant
	// time: how long this takes says nothing about which came close.
	for _, key := range keys {
		expected := mac(key, t, fields, body)
		for _, c := range candidates {
			if hmac.Equal(expected, c) {
				matched = true
			}
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	return nil
}

// parseSignature reads "t=<unix s>,v1=<hex>,v2=<hex>,..." and answers t and the decoded
// values of the scheme asked for.
func parseSignature(value, scheme string) (int64, [][]byte, error) {
	var t int64 = -1
	var candidates [][]byte
	for _, part := range strings.Split(value, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, nil, fmt.Errorf("%w: t=%q", ErrSignatureMissing, v)
			}
			t = n
		case scheme:
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				candidates = append(candidates, b)
			}
		}
	}
	if t < 0 || len(candidates) == 0 {
		return 0, nil, fmt.Errorf("%w: %s needs t and a %s", ErrSignatureMissing, HeaderSignature, scheme)
	}
	return t, candidates, nil
}

// mac is HMAC-SHA256 under key of "<t>\n<field>\n...\n<body>".
func mac(key string, t int64, fields []string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(strconv.FormatInt(t, 10)))
	for _, f := range fields {
		h.Write([]byte{'\n'})
		h.Write([]byte(f))
	}
	h.Write([]byte{'\n'})
	h.Write(body)
	return h.Sum(nil)
}

// SignPush makes the Delayq-Signature value the server sends with a push (a v1 and a v2 per
// key), for testing a receiver without a server.
func SignPush(keys []string, t time.Time, queue, id string, attempt int, body []byte) string {
	ts := t.Unix()
	var b strings.Builder
	b.WriteString("t=" + strconv.FormatInt(ts, 10))
	for _, key := range keys {
		v1 := hmac.New(sha256.New, []byte(key))
		v1.Write([]byte(strconv.FormatInt(ts, 10) + "."))
		v1.Write(body)
		v2 := mac(key, ts, []string{queue, id, strconv.Itoa(attempt)}, body)
		b.WriteString(",v1=" + hex.EncodeToString(v1.Sum(nil)) + ",v2=" + hex.EncodeToString(v2))
	}
	return b.String()
}

// SignWebhook makes a Delayq-Signature value with a w1 per key, as a webhook call carries
// it (the server adds a v1 and a v2, which a webhook receiver does not need), for testing
// a receiver without a server.
func SignWebhook(keys []string, t time.Time, queue, eventID string, body []byte) string {
	ts := t.Unix()
	var b strings.Builder
	b.WriteString("t=" + strconv.FormatInt(ts, 10))
	for _, key := range keys {
		b.WriteString(",w1=" + hex.EncodeToString(mac(key, ts, []string{queue, eventID}, body)))
	}
	return b.String()
}
