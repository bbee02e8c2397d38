package bench

import (
	"bufio"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/bench/report"
)

// Hardware is the machine as far as bench can tell: the OS, the CPU's model
// name and count and the memory (from /proc on Linux). A GPU is the runtime's
// to report (its log names the devices it offloads to); bench does not guess.
func Hardware() report.Hardware {
	h := report.Hardware{OS: goruntime.GOOS, Arch: goruntime.GOARCH, CPUs: goruntime.NumCPU()}
	h.CPU = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64); err == nil {
		h.MemoryBytes = kb << 10
	}
	return h
}

// procField is the value of the first "key: value" line of a /proc file, or "".
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
