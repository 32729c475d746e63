package delayq

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxErrorText is the most a Worker sends as a failed attempt's error: the server keeps the
// newest error of a message up to 4 KiB (older ones of its history up to 512 bytes).
const MaxErrorText = 4096

// PermanentError, returned by a handler (make one with Permanent), makes the message a
// dead letter now, whatever attempts it has left: a failure no retry can fix.
type PermanentError struct {
	// Err is the failure.
	Err error
}

// Permanent marks err as a permanent failure (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error is the wrapped error's text.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap gives the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryLaterError, returned by a handler (make one with RetryLater), retries the message
// after After instead of by its backoff.
type RetryLaterError struct {
	// Err is the failure.
	Err error
	// After is when to retry (0: at once).
	After time.Duration
}

// RetryLater marks err as a failure to retry after d (nil stays nil).
func RetryLater(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryLaterError{Err: err, After: d}
}

// Error is the wrapped error's text.
func (e *RetryLaterError) Error() string { return e.Err.Error() }

// Unwrap gives the wrapped error.
func (e *RetryLaterError) Unwrap() error { return e.Err }

// HandlerTimeoutError is the failure of a handler that ran past its timeout (the message's
// HandlerTimeout, else the Worker's). Its context was cancelled; whatever it returns later
// is dropped.
type HandlerTimeoutError struct {
	// After is the timeout that passed.
	After time.Duration
}

// Error says how long the handler had.
func (e *HandlerTimeoutError) Error() string {
	return fmt.Sprintf("handler timed out after %v", e.After)
}

// WithStack records the caller's stack in err (nil stays nil), so that a Worker's error
// text, its log and the message's error history show where the failure came from. Go
// errors carry no stack of their own; a panic's stack is recorded without it. Formatted
// with %+v it prints its message, then the stack.
func WithStack(err error) error {
	if err == nil {
		return nil
	}
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	return &stackError{err: err, pcs: pcs[:n]}
}

type stackError struct {
	err error
	pcs []uintptr
}

// Error is the wrapped error's text.
func (e *stackError) Error() string { return e.err.Error() }

// Unwrap gives the wrapped error.
func (e *stackError) Unwrap() error { return e.err }

// Format prints the stack after the message for %+v, as github.com/pkg/errors does, so
// that FailureText finds it the same way in both.
func (e *stackError) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('+') {
		io.WriteString(f, e.err.Error())
		frames := runtime.CallersFrames(e.pcs)
		for {
			fr, more := frames.Next()
			fmt.Fprintf(f, "\n%s\n\t%s:%d", fr.Function, fr.File, fr.Line)
			if !more {
				break
			}
		}
		return
	}
	io.WriteString(f, e.Error())
}

// panicError is a handler's panic, with the stack of the goroutine that panicked.
type panicError struct {
	value any
	stack []byte
}

// Error is the panic's value as text.
func (e *panicError) Error() string { return fmt.Sprint(e.value) }

// Format prints the stack after the value for %+v.
func (e *panicError) Format(f fmt.State, verb rune) {
	io.WriteString(f, e.Error())
	if verb == 'v' && f.Flag('+') {
		io.WriteString(f, "\n"+string(e.stack))
	}
}

// Unwrap gives the panic's value when it is an error.
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}

// FailureText is the error text a Worker sends with a nack and logs: the first line
// "<ErrorType>: <message>", the lines after it the stack when the error has one (WithStack,
// a panic, or any error whose %+v adds to its message), cut to MaxErrorText bytes in all.
// ErrorType is the error's Go type without its '*' (fmt's %w wrappers and this package's
// markers are looked through), or "panic".
func FailureText(err error) string {
	if err == nil {
		return ""
	}
	text := errorType(err) + ": " + strings.ReplaceAll(err.Error(), "\n", " ")
	if stack := errorStack(err); stack != "" {
		text += "\n" + stack
	}
	return truncate(text, MaxErrorText)
}

// errorType names the first error of the chain that is not a wrapper.
func errorType(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e.(type) {
		case *panicError:
			return "panic"
		case *stackError, *PermanentError, *RetryLaterError:
			continue
		}
		name := fmt.Sprintf("%T", e)
		if name == "*fmt.wrapError" || name == "*fmt.wrapErrors" {
			continue
		}
		return strings.TrimPrefix(name, "*")
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
}

// errorStack is the stack of the first error of the chain that prints more with %+v than
// its message.
func errorStack(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		msg := e.Error()
		if full := fmt.Sprintf("%+v", e); full != msg {
			return strings.TrimLeft(strings.TrimPrefix(full, msg), "\n")
		}
	}
	return ""
}

// truncate cuts s to at most n bytes, at a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
