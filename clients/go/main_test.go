package delayq_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
	"github.com/delayq/delayq/clients/go/internal/testserver"
)

// shared is the server most tests use (pushes to loopback allowed, for S7); a test that
// needs other flags (tokens, a small body limit) starts its own. Each test uses queues of
// its own, so tests never see each other's messages.
var (
	shared     *testserver.Server
	sharedOnce sync.Once
	sharedErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the shared delayq serve:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// server answers the shared server, started by the first test that needs it (so that the
// unit tests run without one).
func server(t *testing.T) *testserver.Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = testserver.StartServer("--push-allow", "127.0.0.1") })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// client is a client of the shared server.
func client(t *testing.T) *delayq.Client {
	return delayq.NewClient(server(t).URL)
}

var queueSeq int64

// queueName is a queue name no other test uses.
func queueName(t *testing.T) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano()%1e9, atomic.AddInt64(&queueSeq, 1))
}

// testContext is a context that ends when the test does, or after a minute: no call of a
// test can hang it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls check until it answers true, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() (bool, error)) {
	t.Helper()
	testserver.WaitFor(t, timeout, what, check)
}

// capturedLog is a delayq.Logger that keeps what is logged, for tests to read.
type capturedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *capturedLog) Printf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

func (l *capturedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// runWorker runs w in the background; the test's cleanup stops it (if the test did not)
// and fails if Run returned an error.
func runWorker[T any](t *testing.T, w *delayq.Worker[T]) {
	t.Helper()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Stop(ctx)
		if err := <-ran; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
}
