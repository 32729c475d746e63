package main

// Runs the service as a process against a real server: it closes the unpaid orders, never
// a paid one, and stops cleanly on SIGTERM.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
	"github.com/delayq/delayq/clients/go/internal/testserver"
)

// TestMain runs the service itself when the test re-executes its own binary as the
// service's process (so that no separate build is needed).
func TestMain(m *testing.M) {
	if os.Getenv("DELAYQ_EXAMPLE_SERVICE") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestServiceClosesUnpaidOrdersAndStopsOnSIGTERM(t *testing.T) {
	srv := testserver.Start(t)
	queue := fmt.Sprintf("orders-%d", time.Now().UnixNano()%1e9)
	cmd := exec.Command(os.Args[0], "-url", srv.URL, "-queue", queue, "-orders", "6", "-close-after", "300ms")
	cmd.Env = append(os.Environ(), "DELAYQ_EXAMPLE_SERVICE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var mu sync.Mutex
	var lines []string
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			mu.Lock()
			lines = append(lines, scanner.Text())
			mu.Unlock()
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}

	testserver.WaitFor(t, 20*time.Second, "3 orders closed and 3 paid", func() (bool, error) {
		out := output()
		return strings.Count(out, " closed: unpaid when due") == 3 && strings.Count(out, " paid") == 3, nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the service exited with %v\nstdout:\n%s\nstderr:\n%s", err, output(), stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the service did not stop within 15 s of SIGTERM\n%s", output())
	}

	out := output()
	for i := 1; i <= 6; i++ {
		closed := strings.Contains(out, fmt.Sprintf("-%d closed:", i))
		if paid := i%2 == 0; paid == closed {
			t.Errorf("order %d: closed %v, paid %v; want exactly the unpaid ones closed\n%s", i, closed, paid, out)
		}
	}
	if last := out[strings.LastIndex(out, "\n")+1:]; last != "stopped: 6 placed, 3 paid, 3 closed" {
		t.Errorf("last line %q\n%s", last, out)
	}
	stats, err := delayq.NewClient(srv.URL).Stats(context.Background(), queue)
	if err != nil || stats.Delayed+stats.Ready+stats.InFlight+stats.Dead != 0 {
		t.Fatalf("the queue after the service: %+v, %v; want every message cancelled or acked", stats, err)
	}
}
