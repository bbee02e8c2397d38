package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The group's peak is the sum of its processes' own: the leader and the
// child it started (in its group), and nothing once the group has stopped.
func TestGroupPeakRSS(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child")
	p, err := Start("sh", "/bin/sh", []string{"-c", "sleep 300 & echo $! > " + pidFile + "; echo up; wait"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	for !strings.Contains(p.LastLines(), "up") {
		time.Sleep(10 * time.Millisecond)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	leader, ok1 := liveHWM(p.PID())
	kid, ok2 := liveHWM(child)
	got, ok := p.GroupPeakRSS()
	if !ok1 || !ok2 || !ok || got != leader+kid {
		t.Errorf("GroupPeakRSS = %d, %v; the leader's %d (%v) and the child's %d (%v)", got, ok, leader, ok1, kid, ok2)
	}
	p.Stop(time.Second)
	if got, ok := p.GroupPeakRSS(); ok {
		t.Errorf("after Stop: GroupPeakRSS = %d, true", got)
	}
}
