// Package testserver starts and stops a real `delayq serve` for the tests: a free loopback
// port, a fresh data directory (its embedded redis-server listens only on a unix socket
// there, never on 6379), up once its own log says it serves on that port and /healthz
// answers there (so a port someone else took cannot pass for ours), stopped with SIGTERM
// (it then stops its Redis) and SIGKILL only if it does not stop in time.
//
// The binary is $DELAYQ_BIN, else the workspace's target/release/delayq.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one running `delayq serve`.
type Server struct {
	// URL is its base URL, http://127.0.0.1:<port>.
	URL string
	// Dir is its temporary directory (data directory and log).
	Dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// Binary is the server binary the tests run.
func Binary() string {
	if bin := os.Getenv("DELAYQ_BIN"); bin != "" {
		return bin
	}
	_, here, _, _ := runtime.Caller(0)
	// clients/go/internal/testserver/server.go -> the workspace root, four levels up.
	return filepath.Join(filepath.Dir(here), "..", "..", "..", "..", "target", "release", "delayq")
}

// Start starts a server with args added to `serve` (e.g. "--push-allow", "127.0.0.1") and
// stops it when the test ends.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := StartServer(args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("stopping delayq serve: %v", err)
		}
	})
	return s
}

// StartServer starts a server (for TestMain, which has no testing.TB); Stop it.
func StartServer(args ...string) (*Server, error) {
	bin := Binary()
	// The lead may be rebuilding the binary: wait a little for it to be there again.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		if _, err := os.Stat(bin); err == nil {
			break
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("no delayq binary at %s (build it, or set DELAYQ_BIN): %v", bin, err)
		}
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		s, err := start(bin, args)
		if err == nil {
			return s, nil
		}
		lastErr = err
		// A port taken between choosing it and the bind: try another.
		if !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	return nil, lastErr
}

func start(bin string, args []string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "delayq-go-test-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "http://127.0.0.1:" + strconv.Itoa(port), Dir: dir,
		exited: make(chan struct{}), logPath: filepath.Join(dir, "server.log"),
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	all := append([]string{
		"serve", "--listen", "127.0.0.1:" + strconv.Itoa(port), "--data-dir", filepath.Join(dir, "data"),
		"--redis-maxmemory", "256mb",
	}, args...)
	s.cmd = exec.Command(bin, all...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.Env = cleanEnv()
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	logFile.Close()
	go func() { s.cmd.Wait(); close(s.exited) }()
	if err := s.waitUp(20 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// cleanEnv is this process's environment without the variables that would point the
// server elsewhere (DELAYQ_REDIS_URL, DELAYQ_TOKENS, ...) or make it export spans.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELAYQ_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// Never the ports of a Redis or a delayq someone runs by hand.
		if port != 6379 && port != 7400 {
			return port, nil
		}
	}
}

func (s *Server) waitUp(timeout time.Duration) error {
	banner := "serving on " + s.URL
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		select {
		case <-s.exited:
			return fmt.Errorf("delayq serve exited: %s", s.Log())
		default:
		}
		if !strings.Contains(s.Log(), banner) {
			continue
		}
		if resp, err := client.Get(s.URL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("delayq serve did not come up on %s within %v:\n%s", s.URL, timeout, s.Log())
}

// Log is what the server printed so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// Stop stops the server with SIGTERM, SIGKILL after 15 s, and removes its directory.
func (s *Server) Stop() error {
	defer os.RemoveAll(s.Dir)
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return errors.New("delayq serve did not stop within 15 s of SIGTERM: killed")
	}
}

// WaitFor polls check until it answers true, and fails the test after timeout naming what
// it waited for (with check's last error, if any).
func WaitFor(tb testing.TB, timeout time.Duration, what string, check func() (bool, error)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s (last error: %v)", timeout, what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
