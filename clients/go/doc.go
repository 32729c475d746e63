// Package delayq is the Go client of delayq, a reliable delayed-message queue on Redis,
// over its HTTP API (v1; tested against delayq server 0.1.x).
//
// It covers sending (one message, a batch, an upsert, a group), receiving with a long
// poll, ack, nack, extend and release, acks carried on the next receive, a Worker with
// concurrency, lease heartbeats and a graceful stop, the verification of pushed requests
// (signature v2) and of webhook calls (w1), and queue administration: settings, dead
// letters, push targets, recurring schedules, per-group settings, the event feed (Events,
// FollowEvents) and event webhooks.
//
// Conventions, the same on every call:
//
//   - Every call takes a context.Context first: cancelling it cancels the request (a long
//     poll in flight included).
//   - Payloads are generic: Send[T] encodes any T as JSON, except []byte, which is sent as
//     bytes (payload_base64) and delivered back as bytes; Receive[T] decodes into T.
//   - Durations are time.Duration and times time.Time. They go to the API as integer
//     milliseconds (a sub-millisecond rest rounds up, so a duration is never shortened to
//     "none"); a negative duration is refused before any request with an *ArgumentError.
//   - Errors the server answers are *APIError values carrying the API's stable code:
//     errors.As(err, &apiErr) gives the status, code and message, and errors.Is(err,
//     delayq.ErrLeaseLost) tests one code.
package delayq

// Version is this client's version.
const Version = "1.0.0"
