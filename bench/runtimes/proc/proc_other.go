//go:build !unix

package proc

import (
	"os"
	"os/exec"
)

func setGroup(*exec.Cmd) {}

func signalGroup(c *exec.Cmd, _ bool) { c.Process.Kill() }

func liveHWM(int) (int64, bool) { return 0, false }

func exitedMaxRSS(*os.ProcessState) (int64, bool) { return 0, false }
