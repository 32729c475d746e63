package delayq

// Unit tests of how options are encoded as the API's JSON: durations as integer
// milliseconds, times as Unix milliseconds, payloads as JSON or base64 bytes.

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSendOptionEncoding(t *testing.T) {
	at := time.Date(2030, 1, 1, 10, 0, 0, 500e6, time.FixedZone("+05:45", 5*3600+45*60))
	for _, tc := range []struct {
		what    string
		payload any
		opts    []SendOption
		want    string
	}{
		{"a struct as JSON", struct {
			Order int `json:"order"`
		}{1}, nil, `{"payload":{"order":1}}`},
		{"bytes as base64", []byte{0, 1, 2}, nil, `{"payload_base64":"AAEC"}`},
		{"raw JSON as it is", json.RawMessage(`[1, 2]`), nil, `{"payload":[1,2]}`},
		{"null", nil, nil, `{"payload":null}`},
		{"a delay in ms", 1, []SendOption{Delay(15 * time.Minute)}, `{"delay":900000,"payload":1}`},
		{"a sub-ms rest rounds up", 1, []SendOption{Delay(1500 * time.Microsecond)}, `{"delay":2,"payload":1}`},
		{"1 ns is 1 ms, never 0", 1, []SendOption{Delay(1)}, `{"delay":1,"payload":1}`},
		{"a time in Unix ms", 1, []SendOption{DeliverAt(at)}, `{"deliver_at":1893471300500,"payload":1}`},
		{"every other option", "x", []SendOption{
			ID("close-1"), MaxAttempts(3), Priority(9), Group("g"), TTL(time.Second), HandlerTimeout(90 * time.Second),
			OnDuplicate(DuplicateDebounce), MaxWait(time.Minute), IfInFlight(InFlightRefuse), Replicas(1, 2*time.Second),
			PushURL("https://h.example/x"), PushHeaders(map[string]string{"x-tenant": "7"}), Traceparent("00-a-b-01"),
		}, `{"group":"g","handler_timeout":90000,"id":"close-1","if_in_flight":"refuse","max_attempts":3,` +
			`"max_wait":60000,"on_duplicate":"debounce","payload":"x","priority":9,"push":{"headers":{"x-tenant":"7"},` +
			`"url":"https://h.example/x"},"replicas":{"count":1,"timeout":2000},"traceparent":"00-a-b-01","ttl":1000}`},
		{"fixed backoff", 1, []SendOption{Backoff(FixedBackoff(200 * time.Millisecond))}, `{"backoff":{"fixed":{"delay":200}},"payload":1}`},
		{"exponential backoff", 1, []SendOption{Backoff(ExponentialBackoff(time.Second, 10*time.Minute, 3).WithJitter(10))},
			`{"backoff":{"exponential":{"base":1000,"cap":600000,"factor":3,"jitter_percent":10}},"payload":1}`},
		{"linear backoff", 1, []SendOption{Backoff(LinearBackoff(30*time.Second, 10*time.Minute))},
			`{"backoff":{"linear":{"base":30000,"cap":600000}},"payload":1}`},
		{"list backoff", 1, []SendOption{Backoff(ListBackoff(30*time.Second, 2*time.Minute))},
			`{"backoff":{"list":{"delays":[30000,120000]}},"payload":1}`},
	} {
		body, _, err := sendBody(tc.payload, tc.opts)
		if err != nil {
			t.Errorf("%s: %v", tc.what, err)
			continue
		}
		if got := jsonOf(t, body); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.what, got, tc.want)
		}
	}
}

func TestSendOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		what string
		opts []SendOption
		arg  string
	}{
		{"a negative delay", []SendOption{Delay(-time.Millisecond)}, "delay"},
		{"the zero time", []SendOption{DeliverAt(time.Time{})}, "deliver_at"},
		{"a time before 1970", []SendOption{DeliverAt(time.Unix(-10, 0))}, "deliver_at"},
		{"delay and deliver_at", []SendOption{Delay(time.Second), DeliverAt(time.Now())}, "delay"},
		{"ttl and expires_at", []SendOption{TTL(time.Second), ExpiresAt(time.Now())}, "ttl"},
		{"a negative backoff", []SendOption{Backoff(ListBackoff(time.Second, -time.Second))}, "backoff delays"},
	} {
		_, _, err := sendBody(1, tc.opts)
		var argErr *ArgumentError
		if !errors.As(err, &argErr) || argErr.Arg != tc.arg {
			t.Errorf("%s: %v, want an *ArgumentError for %s", tc.what, err, tc.arg)
		}
	}
	if _, _, err := sendBody(make(chan int), nil); err == nil {
		t.Error("a payload JSON cannot encode was taken")
	}
}

func TestSafeToRepeat(t *testing.T) {
	for _, tc := range []struct {
		opts []SendOption
		want bool
	}{
		{nil, false},
		{[]SendOption{ID("a")}, true},
		{[]SendOption{ID("a"), OnDuplicate(DuplicateKeep)}, true},
		{[]SendOption{ID("a"), OnDuplicate(DuplicateReplace)}, false},
	} {
		_, s, err := sendBody(1, tc.opts)
		if err != nil || s.safeToRepeat() != tc.want {
			t.Errorf("%d options: safeToRepeat = %v, %v; want %v", len(tc.opts), s.safeToRepeat(), err, tc.want)
		}
	}
}

func TestQueueSettingEncoding(t *testing.T) {
	s := &settingsBody{body: map[string]any{}}
	for _, set := range []QueueSetting{
		SetIdempotencyWindow(time.Hour), SetRateLimit(100, 10), ClearGroupRateLimit(), SetGroupConcurrency(1),
		SetDefaultTTL(5 * time.Minute), SetOnExpire(ExpireDrop), ClearMaxDelay(), SetRetainCompleted(7*24*time.Hour, 1000),
		SetEvents(0),
	} {
		set(s)
	}
	want := `{"default_ttl":300000,"events":{},"group_concurrency":1,"group_rate_limit":null,"idempotency_window":3600000,` +
		`"max_delay":null,"on_expire":"drop","rate_limit":{"per_second":100,"burst":10},"retain_completed":{"keep_for":604800000,"max":1000}}`
	if got := jsonOf(t, s.body); s.err != nil || got != want {
		t.Fatalf("settings:\n got %s (%v)\nwant %s", got, s.err, want)
	}
	s = &settingsBody{body: map[string]any{}}
	SetIdempotencyWindow(-time.Second)(s)
	if s.err == nil {
		t.Fatal("a negative idempotency window was taken")
	}
}

func TestReceiveOptionEncoding(t *testing.T) {
	body, err := ReceiveOptions{Max: 10, Lease: 30 * time.Second, Wait: 20 * time.Second}.body()
	if err != nil || jsonOf(t, body) != `{"lease":30000,"max":10,"wait":20000}` {
		t.Fatalf("receive body = %s, %v", jsonOf(t, body), err)
	}
	// Zero values are left out: the server's defaults apply.
	if body, _ := (ReceiveOptions{}).body(); jsonOf(t, body) != `{}` {
		t.Fatalf("empty receive body = %s", jsonOf(t, body))
	}
}

func TestPayloadDecoding(t *testing.T) {
	asJSON := RawPayload{JSON: json.RawMessage(`{"order":1}`)}
	asBytes := RawPayload{Bytes: []byte(`{"order":2}`), IsBytes: true}
	type order struct{ Order int }
	if o, err := decodeAs[order](asJSON); err != nil || o.Order != 1 {
		t.Errorf("JSON into a struct: %+v, %v", o, err)
	}
	if o, err := decodeAs[order](asBytes); err != nil || o.Order != 2 {
		t.Errorf("bytes holding JSON into a struct: %+v, %v", o, err)
	}
	if b, err := decodeAs[[]byte](asBytes); err != nil || string(b) != `{"order":2}` {
		t.Errorf("bytes into []byte: %q, %v", b, err)
	}
	if b, err := decodeAs[[]byte](asJSON); err != nil || string(b) != `{"order":1}` {
		t.Errorf("JSON into []byte (its text): %q, %v", b, err)
	}
	if raw, err := decodeAs[json.RawMessage](asJSON); err != nil || string(raw) != `{"order":1}` {
		t.Errorf("JSON into json.RawMessage: %q, %v", raw, err)
	}
	if _, err := decodeAs[int](asJSON); err == nil {
		t.Error("an object decoded into an int")
	}
	wire := []wireDelivery{
		{ID: "ok", Receipt: "r1", wirePayload: wirePayload{Payload: json.RawMessage(`3`)}},
		{ID: "bad", Receipt: "r2", wirePayload: wirePayload{Payload: json.RawMessage(`"x"`)}},
		{ID: "bad2", Receipt: "r3", wirePayload: wirePayload{Payload: json.RawMessage(`[]`)}},
	}
	got, err := decodeDeliveries[int](wire)
	var pe *PayloadError
	if len(got) != 1 || got[0].Payload != 3 || !errors.As(err, &pe) || pe.ID != "bad" || len(pe.More) != 1 || pe.More[0].Receipt != "r3" {
		t.Fatalf("decodeDeliveries = %+v, %v; want ok decoded and bad, bad2 in a *PayloadError", got, err)
	}
}

func TestMillisecondTimes(t *testing.T) {
	var m struct {
		A msTime     `json:"a"`
		B msTime     `json:"b"`
		C msDuration `json:"c"`
		D msDuration `json:"d"`
	}
	if err := json.Unmarshal([]byte(`{"a":1893469500500,"b":null,"c":1500}`), &m); err != nil {
		t.Fatal(err)
	}
	if !m.A.Equal(time.UnixMilli(1893469500500)) || !m.B.IsZero() || time.Duration(m.C) != 1500*time.Millisecond || m.D != 0 {
		t.Fatalf("decoded %+v", m)
	}
}
