//go:build unix

package proc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// alive says whether pid runs (a zombie waiting for its new parent to reap it does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return runtime.GOOS != "linux"
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) == 0 || f[0] != "Z"
}

// The group is stopped, not just the leader: a grandchild the shell started dies too.
func TestStopStopsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	p, err := Start("sh", "/bin/sh", []string{"-c", "sleep 300 & echo $! > " + pidFile + "; wait"}, nil, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var child int
	for i := 0; i < 100 && child == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("the shell never wrote its child's pid")
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the process was reaped")
	}
	for i := 0; i < 50 && alive(child); i++ { // the grandchild is reaped by init, a moment later
		time.Sleep(20 * time.Millisecond)
	}
	if alive(child) {
		syscall.Kill(child, syscall.SIGKILL)
		t.Fatalf("grandchild %d survived Stop", child)
	}
}

// A process that ignores SIGTERM is killed after the grace.
func TestStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	p, err := Start("stubborn", "/bin/sh", []string{"-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.LastLines(), "ready") {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if alive(p.PID()) {
		t.Fatalf("pid %d alive after Stop", p.PID())
	}
}

func TestWaitHealthyReportsTheDeathWithLastLines(t *testing.T) {
	t.Parallel()
	script := "for i in $(seq 1 30); do echo line $i; done; echo 'error: model has no MTP layers' >&2; exit 3"
	p, err := Start("server", "/bin/sh", []string{"-c", script}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	err = WaitHealthy(context.Background(), p, fmt.Sprintf("http://127.0.0.1:%d/health", port), 30*time.Second)
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("got %v, want an ExitError", err)
	}
	msg := err.Error()
	for _, want := range []string{"server stopped (exit status 3)", "error: model has no MTP layers", "line 30"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 5\n") || strings.Count(msg, "\n") > LastLinesKept+1 {
		t.Errorf("error carries more than the last %d lines:\n%s", LastLinesKept, msg)
	}
}

func TestWaitHealthy(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 { // loading
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p, err := Start("sleeper", "/bin/sh", []string{"-c", "echo up; sleep 300"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	if err := WaitHealthy(context.Background(), p, srv.URL, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n < 3 {
		t.Errorf("healthy after %d polls, want 3", n)
	}
	// A server that never gets healthy: the bound holds and the error says so.
	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer never.Close()
	err = WaitHealthy(context.Background(), p, never.URL, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "was not healthy") || !strings.Contains(err.Error(), "up") {
		t.Errorf("got %v", err)
	}
}

func TestPeakRSS(t *testing.T) {
	t.Parallel()
	p, err := Start("sleeper", "/bin/sh", []string{"-c", "echo up; sleep 300"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.LastLines(), "up") {
		time.Sleep(10 * time.Millisecond)
	}
	live, ok := p.PeakRSS()
	if runtime.GOOS == "linux" && (!ok || live <= 0) {
		t.Errorf("live PeakRSS = %d, %v", live, ok)
	}
	p.Stop(time.Second)
	after, ok := p.PeakRSS()
	if !ok || after <= 0 || after < live {
		t.Errorf("PeakRSS after exit = %d, %v (live %d)", after, ok, live)
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	var tl tail
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&tl, "l%d\n", i)
	}
	tl.Write([]byte("partial"))
	got := strings.Split(tl.String(), "\n")
	if len(got) != LastLinesKept+1 || got[0] != "l6" || got[len(got)-1] != "partial" {
		t.Errorf("tail = %q", got)
	}
}
