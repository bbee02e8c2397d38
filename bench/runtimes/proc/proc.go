// Package proc runs a runtime's serving process for bench: started in its own
// process group, its output kept (a log file and the last lines, for errors),
// stopped by its process group within a bound, a free loopback port to serve
// on, a bounded wait for health, and the peak memory of the process where the
// OS tells it. Nothing here is found or killed by name.
package proc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// LastLinesKept is how many lines of output an error carries.
const LastLinesKept = 20

// StopGrace is how long Stop waits after SIGTERM before SIGKILL.
const StopGrace = 10 * time.Second

// Process is one started serving process.
type Process struct {
	Name string // what the errors call it ("llama-server")

	cmd  *exec.Cmd
	out  *tail
	log  *os.File
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // Wait's error, set before done closes

	stopOnce sync.Once
	stopErr  error
	peak     int64 // the last VmHWM read while alive, bytes
}

// Start starts path with args (and env added to the environment) in a new process
// group, its stdout and stderr appended to logPath ("" = kept in memory only).
func Start(name, path string, args, env []string, logPath string) (*Process, error) {
	return start(name, path, args, env, logPath, nil, nil)
}

// StartPiped is Start for a process that speaks on its stdin and stdout (a JSON-lines driver): its stderr
// goes to the log and the last lines as in Start; in and out are the process's stdin and stdout. They are
// os.Pipe ends, not exec's StdoutPipe, which Wait (called at once here) would close before the last line is read.
func StartPiped(name, path string, args, env []string, logPath string) (p *Process, in io.WriteCloser, out io.ReadCloser, err error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	p, err = start(name, path, args, env, logPath, stdinR, stdoutW)
	stdinR.Close() // the child's ends: the child holds its own copies
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, nil, nil, err
	}
	return p, stdinW, stdoutR, nil
}

// start starts the process; stdin and stdout, when not nil, are given to it (else no input, and stdout goes
// where stderr goes).
func start(name, path string, args, env []string, logPath string, stdin, stdout *os.File) (*Process, error) {
	p := &Process{Name: name, out: &tail{}, done: make(chan struct{})}
	var w io.Writer = p.out
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("%s log: %w", name, err)
		}
		p.log = f
		w = io.MultiWriter(p.out, f)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = w, w
	p.cmd.Stdin = nil
	if stdin != nil {
		p.cmd.Stdin = stdin
	}
	if stdout != nil {
		p.cmd.Stdout = stdout
	}
	setGroup(p.cmd)
	if err := p.cmd.Start(); err != nil {
		p.closeLog()
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.closeLog()
		close(p.done)
	}()
	return p, nil
}

func (p *Process) closeLog() {
	if p.log != nil {
		p.log.Close()
	}
}

// PID is the process id (and its process group id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// LastLines is the end of the process's output.
func (p *Process) LastLines() string { return p.out.String() }

// Exited says whether the process has exited, and if so an error that says how, with its last lines.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return p.exitError()
	default:
		return nil
	}
}

func (p *Process) exitError() error {
	how := "exited"
	if p.err != nil {
		how = p.err.Error()
	}
	return &ExitError{Name: p.Name, How: how, Last: p.LastLines()}
}

// ExitError is a serving process that stopped by itself.
type ExitError struct {
	Name, How, Last string
}

func (e *ExitError) Error() string {
	s := e.Name + " stopped (" + e.How + ")"
	if e.Last != "" {
		s += "; its last lines:\n" + indent(e.Last)
	}
	return s
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ")
}

// Stop stops the process group: SIGTERM, then SIGKILL after grace, and waits
// until the process is reaped. Calling it again returns the first result.
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		p.PeakRSS() // read VmHWM while the process still lives
		select {
		case <-p.done:
			return
		default:
		}
		signalGroup(p.cmd, false)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
		signalGroup(p.cmd, true)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.stopErr = fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID())
		}
	})
	return p.stopErr
}

// PeakRSS is the process's peak resident memory: VmHWM while it lives (Linux),
// the kernel's rusage maximum once it has exited; ok=false where the OS does not tell.
func (p *Process) PeakRSS() (int64, bool) {
	select {
	case <-p.done:
		if b, ok := exitedMaxRSS(p.cmd.ProcessState); ok && b > p.peak {
			return b, true
		}
	default:
		if b, ok := liveHWM(p.PID()); ok {
			p.peak = max(p.peak, b)
		}
	}
	return p.peak, p.peak > 0
}

// FreePort is a TCP port free on the loopback interface just now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Serve starts a server (Start) and waits until healthURL answers
// (WaitHealthy); a server that never gets healthy is stopped before the
// error returns, so a failed start leaves no process behind.
func Serve(ctx context.Context, name, path string, args, env []string, logPath, healthURL string, timeout time.Duration) (*Process, error) {
	p, err := Start(name, path, args, env, logPath)
	if err != nil {
		return nil, err
	}
	if err := WaitHealthy(ctx, p, healthURL, timeout); err != nil {
		p.Stop(StopGrace)
		return nil, err
	}
	return p, nil
}

// WaitHealthy polls url until it answers 200, the process exits (an ExitError),
// ctx ends or timeout passes (an error with the process's last lines).
func WaitHealthy(ctx context.Context, p *Process, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if err := p.Exited(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not healthy at %s within %s; its last lines:\n%s", p.Name, url, timeout, indent(p.LastLines()))
		}
		select {
		case <-p.done:
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Explain turns a failed request into the process's exit, when that is why it failed.
func (p *Process) Explain(err error) error {
	if err == nil {
		return nil
	}
	select {
	case <-p.done:
		return fmt.Errorf("%w (request: %v)", p.exitError(), err)
	case <-time.After(200 * time.Millisecond): // a dying process may not be reaped yet
		if e := p.Exited(); e != nil {
			return e
		}
	}
	return err
}

// tail keeps the last LastLinesKept lines written to it.
type tail struct {
	mu    sync.Mutex
	lines [][]byte
	part  []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.part = append(t.part, b...)
			break
		}
		t.lines = append(t.lines, append(t.part, b[:i]...))
		t.part = nil
		b = b[i+1:]
		if len(t.lines) > LastLinesKept {
			t.lines = t.lines[len(t.lines)-LastLinesKept:]
		}
	}
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := append([][]byte{}, t.lines...)
	if len(t.part) > 0 {
		all = append(all, t.part)
	}
	return string(bytes.Join(all, []byte("\n")))
}
