package delayq

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// millis is d as the API takes it: whole milliseconds. A sub-millisecond rest rounds up, so
// that a duration is never shortened (and 500 µs never becomes 0, which the API reads as
// "none" for some settings). A negative duration is refused: no setting takes one.
func millis(arg string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, &ArgumentError{Arg: arg, Problem: fmt.Sprintf("%v is negative: give 0 or more", d)}
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms, nil
}

// unixMillis is t as the API takes it: milliseconds since the Unix epoch. The zero time is
// refused, as it is almost always a time left unset by mistake.
func unixMillis(arg string, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, &ArgumentError{Arg: arg, Problem: "the zero time.Time: give a time (time.Now().Add(d), say)"}
	}
	ms := t.UnixMilli()
	if ms < 0 {
		return 0, &ArgumentError{Arg: arg, Problem: fmt.Sprintf("%v is before 1970", t)}
	}
	return ms, nil
}

// msTime reads a time the API gives as Unix milliseconds (null or absent: the zero time).
type msTime struct{ time.Time }

// UnmarshalJSON reads Unix milliseconds, or null.
func (m *msTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	m.Time = time.UnixMilli(ms)
	return nil
}

// msDuration reads a duration the API gives as milliseconds (null or absent: 0).
type msDuration time.Duration

// UnmarshalJSON reads milliseconds, or null.
func (m *msDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*m = msDuration(time.Duration(ms) * time.Millisecond)
	return nil
}

// RawPayload is a payload as the API answers it: JSON (sent as a Go value) or bytes (sent
// as a []byte). A final record of a completed message has neither.
type RawPayload struct {
	// JSON is the payload's JSON text, for a JSON payload.
	JSON json.RawMessage
	// Bytes is the payload, for a bytes payload.
	Bytes []byte
	// IsBytes tells a bytes payload (even an empty one) from a JSON one.
	IsBytes bool
}

// Decode decodes the payload into v: a JSON payload as JSON; a bytes payload into a *[]byte
// as it is, else as JSON text.
func (p RawPayload) Decode(v any) error {
	if b, ok := v.(*[]byte); ok {
		if p.IsBytes {
			*b = append([]byte(nil), p.Bytes...)
		} else {
			*b = append([]byte(nil), p.JSON...)
		}
		return nil
	}
	data := []byte(p.JSON)
	if p.IsBytes {
		data = p.Bytes
	}
	if len(data) == 0 {
		return fmt.Errorf("no payload to decode")
	}
	return json.Unmarshal(data, v)
}

// decodeAs decodes p into a new T (see RawPayload.Decode).
func decodeAs[T any](p RawPayload) (T, error) {
	var v T
	err := p.Decode(&v)
	return v, err
}

// wirePayload is how the API answers a payload: `payload` (JSON) or `payload_base64`.
type wirePayload struct {
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 *string         `json:"payload_base64"`
}

func (w wirePayload) raw() (RawPayload, error) {
	if w.PayloadBase64 != nil {
		b, err := base64.StdEncoding.DecodeString(*w.PayloadBase64)
		if err != nil {
			return RawPayload{}, fmt.Errorf("delayq: payload_base64: %w", err)
		}
		return RawPayload{Bytes: b, IsBytes: true}, nil
	}
	return RawPayload{JSON: w.Payload}, nil
}

// putPayload sets the payload of a send or nack body: a []byte as payload_base64 (bytes,
// delivered back as bytes), anything else as JSON (encoded here, so that a value JSON cannot
// encode fails before any request).
func putPayload(body map[string]any, payload any) error {
	if b, ok := payload.([]byte); ok {
		body["payload_base64"] = base64.StdEncoding.EncodeToString(b)
		return nil
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return &ArgumentError{Arg: "payload", Problem: "cannot be encoded as JSON: " + err.Error()}
	}
	body["payload"] = json.RawMessage(data)
	return nil
}
