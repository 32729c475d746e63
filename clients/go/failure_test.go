package delayq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	delayq "github.com/delayq/delayq/clients/go"
)

type quotaError struct{ left int }

func (e quotaError) Error() string { return fmt.Sprintf("quota exhausted (%d left)", e.left) }

func failDeep() error { return delayq.WithStack(quotaError{0}) }

func TestFailureText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("boom"), "errors.errorString: boom"},
		{quotaError{3}, "delayq_test.quotaError: quota exhausted (3 left)"},
		// fmt's %w wrapper is looked through for the type; the message is the whole text.
		{fmt.Errorf("charging: %w", quotaError{1}), "delayq_test.quotaError: charging: quota exhausted (1 left)"},
		{delayq.Permanent(quotaError{2}), "delayq_test.quotaError: quota exhausted (2 left)"},
		{errors.New("two\nlines"), "errors.errorString: two lines"},
	} {
		if got := delayq.FailureText(tc.err); got != tc.want {
			t.Errorf("FailureText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}

	// WithStack: the first line, then the stack from where it was made.
	text := delayq.FailureText(fmt.Errorf("order 7: %w", failDeep()))
	lines := strings.Split(text, "\n")
	if lines[0] != "delayq_test.quotaError: order 7: quota exhausted (0 left)" || !strings.HasSuffix(lines[1], "go_test.failDeep") {
		t.Fatalf("with a stack:\n%s", text)
	}

	// Cut to 4 KiB, at a character boundary.
	long := delayq.FailureText(errors.New(strings.Repeat("é", 3000)))
	if len(long) > delayq.MaxErrorText || len(long) < delayq.MaxErrorText-1 || !utf8.ValidString(long) {
		t.Fatalf("a long error text is %d bytes (valid UTF-8: %v)", len(long), utf8.ValidString(long))
	}
}
