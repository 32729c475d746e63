package delayq

import (
	"fmt"
	"time"
)

// ErrorCode is one of the API's stable error codes ("lease_lost", "not_found", ...).
// It is an error itself so that errors.Is(err, delayq.ErrLeaseLost) tests whether err is an
// *APIError with that code.
type ErrorCode string

// Error makes an ErrorCode usable as an errors.Is target.
func (c ErrorCode) Error() string { return "delayq: " + string(c) }

// The codes the server answers (docs/http-api.md has when each is used). A newer server
// may answer others: an *APIError carries whatever code it got.
const (
	ErrMalformedJSON        ErrorCode = "malformed_json"
	ErrBadBody              ErrorCode = "bad_body"
	ErrInvalidQuery         ErrorCode = "invalid_query"
	ErrInvalidPath          ErrorCode = "invalid_path"
	ErrInvalidQueueName     ErrorCode = "invalid_queue_name"
	ErrInvalidID            ErrorCode = "invalid_id"
	ErrInvalidGroup         ErrorCode = "invalid_group"
	ErrInvalidReceipt       ErrorCode = "invalid_receipt"
	ErrInvalidDuration      ErrorCode = "invalid_duration"
	ErrInvalidTime          ErrorCode = "invalid_time"
	ErrInvalidPayload       ErrorCode = "invalid_payload"
	ErrInvalidOption        ErrorCode = "invalid_option"
	ErrInvalidSchedule      ErrorCode = "invalid_schedule"
	ErrInvalidCursor        ErrorCode = "invalid_cursor"
	ErrInvalidPushTarget    ErrorCode = "invalid_push_target"
	ErrPushTargetRefused    ErrorCode = "push_target_refused"
	ErrPushURLNotAllowed    ErrorCode = "push_url_not_allowed"
	ErrInvalidWebhook       ErrorCode = "invalid_webhook"
	ErrWebhookRefused       ErrorCode = "webhook_refused"
	ErrOverLimit            ErrorCode = "over_limit"
	ErrEmptyBatch           ErrorCode = "empty_batch"
	ErrUnauthorized         ErrorCode = "unauthorized"
	ErrForbidden            ErrorCode = "forbidden"
	ErrHostNotAllowed       ErrorCode = "host_not_allowed"
	ErrNotFound             ErrorCode = "not_found"
	ErrNoRoute              ErrorCode = "no_route"
	ErrMethodNotAllowed     ErrorCode = "method_not_allowed"
	ErrBodyTimeout          ErrorCode = "body_timeout"
	ErrLeaseLost            ErrorCode = "lease_lost"
	ErrQueueNotEmpty        ErrorCode = "queue_not_empty"
	ErrWrongState           ErrorCode = "wrong_state"
	ErrOlderDataFormat      ErrorCode = "older_data_format"
	ErrBodyTooLarge         ErrorCode = "body_too_large"
	ErrBatchTooLarge        ErrorCode = "batch_too_large"
	ErrPayloadTooLarge      ErrorCode = "payload_too_large"
	ErrUnsupportedMediaType ErrorCode = "unsupported_media_type"
	ErrInternal             ErrorCode = "internal"
	ErrUnavailable          ErrorCode = "unavailable"
	ErrRedisFull            ErrorCode = "redis_full"
	ErrNotReplicated        ErrorCode = "not_replicated"
	ErrNewerDataFormat      ErrorCode = "newer_data_format"
	ErrNoEncryptionKey      ErrorCode = "no_encryption_key"
	ErrEncryptionChanged    ErrorCode = "encryption_changed"
	ErrServerBusy           ErrorCode = "server_busy"
)

// APIError is an error answer of the server: `{"error": {"code", "message"}}` with its
// HTTP status. Test it with errors.As, or one code with errors.Is(err, delayq.ErrNotFound).
type APIError struct {
	// Status is the HTTP status (400, 404, 409, ...).
	Status int
	// Code is the API's stable code; for an answer that was not the API's JSON (a proxy's
	// page), "http_<status>".
	Code ErrorCode
	// Message says what went wrong, for people.
	Message string
	// Request is the route that failed, "METHOD /path/{param}".
	Request string
	// RetryAfter is the answer's Retry-After, if it had one (a 503 may).
	RetryAfter time.Duration
}

// Error gives the route, status, code and message.
func (e *APIError) Error() string {
	return fmt.Sprintf("delayq: %s: %d %s: %s", e.Request, e.Status, e.Code, e.Message)
}

// Is reports whether target is this error's ErrorCode, for errors.Is(err, delayq.ErrNotFound).
func (e *APIError) Is(target error) bool {
	code, ok := target.(ErrorCode)
	return ok && code == e.Code
}

// ArgumentError is an argument the client refuses before making any request (a negative
// duration, a zero time, both of two options that exclude each other).
type ArgumentError struct {
	// Arg names the argument or option.
	Arg string
	// Problem says what is wrong with it and how to fix it.
	Problem string
}

// Error names the argument and the problem.
func (e *ArgumentError) Error() string { return "delayq: " + e.Arg + ": " + e.Problem }

// TransportError is a request that got no answer: the connection failed, the call's timeout
// passed, or its context was cancelled. Err is the cause (errors.Is(err, context.Canceled)
// and errors.Is(err, context.DeadlineExceeded) see through it).
type TransportError struct {
	// Request is the route, "METHOD /path/{param}".
	Request string
	// Err is what went wrong.
	Err error
}

// Error gives the route and the cause.
func (e *TransportError) Error() string { return "delayq: " + e.Request + ": " + e.Err.Error() }

// Unwrap gives the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// PayloadError is a delivery whose payload could not be decoded into the type asked for.
// The delivery is still leased to the caller: nack (with Dead, for a payload that can never
// decode) or release it by its Receipt. A Worker nacks such a delivery as dead.
type PayloadError struct {
	// Queue, ID and Receipt name the delivery.
	Queue, ID, Receipt string
	// Attempt is the delivery's attempt.
	Attempt int
	// Raw is its payload as the server sent it.
	Raw RawPayload
	// Err is the decoding error.
	Err error
	// More counts other deliveries of the same answer that failed too (each still leased).
	More []*PayloadError
}

// Error names the message and the decoding error.
func (e *PayloadError) Error() string {
	text := fmt.Sprintf("delayq: payload of %s/%s: %v", e.Queue, e.ID, e.Err)
	if len(e.More) > 0 {
		text += fmt.Sprintf(" (and %d more)", len(e.More))
	}
	return text
}

// Unwrap gives the decoding error.
func (e *PayloadError) Unwrap() error { return e.Err }
