package proc

import (
	"os"
	"strconv"
	"strings"
)

// GroupPeakRSS is the sum of the peak resident memory (VmHWM) of every live
// process in the process's group, for a server that runs its work in child
// processes (vLLM's engine runs in one: the weights and the KV cache live
// there). Each process's own peak: shared pages count once per process and
// peaks that did not coincide are added, so it bounds the group's peak from
// above. ok=false once no process of the group is left to read.
func (p *Process) GroupPeakRSS() (int64, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	pgid := strconv.Itoa(p.PID())
	var sum int64
	found := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp …: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(stat[i+1:])); len(f) < 3 || f[2] != pgid {
			continue
		}
		if b, ok := liveHWM(pid); ok {
			sum += b
			found = true
		}
	}
	return sum, found
}
