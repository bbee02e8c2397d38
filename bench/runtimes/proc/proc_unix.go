//go:build unix

package proc

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

func setGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(c.SysProcAttr)
}

// signalGroup signals the process group the process leads (its pid is the group id).
func signalGroup(c *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-c.Process.Pid, sig)
}

// liveHWM reads VmHWM from /proc/PID/status (Linux only).
func liveHWM(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest) // "1234 kB"
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb * 1024, true
				}
			}
		}
	}
	return 0, false
}

// exitedMaxRSS is the kernel's maximum resident set of an exited process (kB on Linux, bytes on Darwin).
func exitedMaxRSS(s *os.ProcessState) (int64, bool) {
	if s == nil {
		return 0, false
	}
	ru, ok := s.SysUsage().(*syscall.Rusage)
	if !ok || ru.Maxrss <= 0 {
		return 0, false
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss), true
	}
	return int64(ru.Maxrss) * 1024, true
}
