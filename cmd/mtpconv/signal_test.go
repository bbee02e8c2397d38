//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/internal/testfs"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// TestSignalStopsLongCommands starts the real command on a fixture, slowed
// down by the read-delay hook so that it would run for many seconds, and
// interrupts it once it is reading: it must exit 130 within a second.
func TestSignalStopsLongCommands(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	out := filepath.Join(t.TempDir(), "out")
	exportTo(t, fixtures.Qwen36, out, "--target", "mlx", "--head-precision", "int4")
	cases := []struct {
		name string
		args []string
		sig  syscall.Signal
	}{
		{"verify --src SIGINT", []string{"verify", "--src", src, out}, syscall.SIGINT},
		{"verify --src SIGTERM", []string{"verify", "--src", src, out}, syscall.SIGTERM},
		{"inspect --hash SIGINT", []string{"inspect", "--hash", src}, syscall.SIGINT},
		{"inspect --hash SIGTERM", []string{"inspect", "--hash", "--json", src}, syscall.SIGTERM},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], c.args...)
			cmd.Env = append(os.Environ(), "MTPCONV_AS_MAIN=1", readDelayEnv+"=50ms")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// Wait until the command is in its read loop.
			lines := bufio.NewScanner(stderr)
			var rest strings.Builder
			ready, eof := make(chan bool, 1), make(chan struct{})
			go func() {
				defer close(eof)
				announced := false
				for lines.Scan() {
					if !announced && strings.Contains(lines.Text(), "test hook: reading slowly") {
						announced = true
						ready <- true
					} else {
						rest.WriteString(lines.Text() + "\n")
					}
				}
				if !announced {
					ready <- false
				}
			}()
			select {
			case ok := <-ready:
				if !ok {
					t.Fatal("the command ended before reading")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the command never started reading")
			}
			time.Sleep(100 * time.Millisecond) // well inside the loop
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-eof: // the process is gone (or closed stderr)
			case <-time.After(5 * time.Second):
				t.Fatalf("still running 5 s after %v", c.sig)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("exit %v, want code %d; stderr %s", err, exitInterrupted, rest.String())
			}
			if !strings.Contains(rest.String(), "interrupted") {
				t.Errorf("stderr %q does not say it was interrupted", rest.String())
			}
		})
	}
}

// TestSignalExitCodeEveryCommand runs each long command with a context
// already cancelled, as a signal leaves it: each exits 130.
func TestSignalExitCodeEveryCommand(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	out := filepath.Join(t.TempDir(), "out")
	exportTo(t, fixtures.Qwen36, out, "--target", "mlx")
	cases := []struct {
		name string
		args []string
	}{
		{"export", []string{"export", "--src", src, "--target", "mlx", "--out", filepath.Join(t.TempDir(), "o"), "--quiet"}},
		{"verify", []string{"verify", out}},
		{"verify --src", []string{"verify", "--src", src, out}},
		{"inspect --hash", []string{"inspect", "--hash", src}},
	}
	for _, c := range cases {
		args := c.args
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var o, e strings.Builder
			if code := run(ctx, append([]string{"mtpconv"}, args...), &o, &e); code != exitInterrupted {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitInterrupted, e.String())
			}
			if !strings.Contains(e.String(), "interrupted") {
				t.Errorf("stderr %q", e.String())
			}
		})
	}
}

// fixtureWithFIFO links a fixture's files into a new folder, with a FIFO in
// place of the named one.
func fixtureWithFIFO(t *testing.T, fixture, fifo string) string {
	t.Helper()
	dst := t.TempDir()
	testfs.LinkDir(t, fixtures.Ensure(t, fixture), dst, fifo)
	testfs.Mkfifo(t, filepath.Join(dst, fifo))
	return dst
}

// runWithin runs the CLI in-process and fails the test if it blocks.
func runWithin(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	type res struct {
		code     int
		out, err string
	}
	done := make(chan res, 1)
	go func() {
		code, out, err := runCLI(t, args...)
		done <- res{code, out, err}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(d):
		t.Fatalf("%v blocked for %v", args, d)
		return 0, "", ""
	}
}

func TestInspectVerifyFIFOInputsFailFast(t *testing.T) {
	const shard = "model-00002-of-00003.safetensors"
	out := filepath.Join(t.TempDir(), "out")
	exportTo(t, fixtures.Qwen36, out, "--target", "mlx")
	cases := []struct {
		name string
		fifo string
		args func(src string) []string
	}{
		{"inspect, config.json", "config.json", func(src string) []string { return []string{"inspect", src} }},
		{"inspect, shard", shard, func(src string) []string { return []string{"inspect", src} }},
		{"inspect --hash, shard", shard, func(src string) []string { return []string{"inspect", "--hash", src} }},
		{"verify --src, config.json", "config.json", func(src string) []string { return []string{"verify", "--src", src, out} }},
		{"verify --src, shard", shard, func(src string) []string { return []string{"verify", "--src", src, out} }},
		{"export, config.json", "config.json", func(src string) []string {
			return []string{"export", "--src", src, "--target", "mlx", "--out", filepath.Join(t.TempDir(), "o")}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := fixtureWithFIFO(t, fixtures.Qwen36, c.fifo)
			start := time.Now()
			code, _, stderr := runWithin(t, 5*time.Second, c.args(src)...)
			if code != exitFailure || !strings.Contains(stderr, c.fifo+" is not a regular file: it is a named pipe (FIFO)") {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestVerifySaveRefusesUnsafeManifest(t *testing.T) {
	base := filepath.Join(t.TempDir(), "out")
	exportTo(t, fixtures.Qwen36, base, "--target", "mlx")
	cases := []struct {
		name  string
		entry func(t *testing.T, dir string) string
	}{
		{"dot-dot", func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(filepath.Dir(dir), "shadow"), []byte("root:x:0:0\n"), 0o600)
			return "../shadow"
		}},
		{"absolute", func(t *testing.T, dir string) string { return "/etc/hostname" }},
		{"symlink to /dev/zero", func(t *testing.T, dir string) string {
			os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
			return "zero"
		}},
		{"FIFO", func(t *testing.T, dir string) string {
			testfs.Mkfifo(t, filepath.Join(dir, "pipe"))
			return "pipe"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "o")
			os.Mkdir(dir, 0o755)
			for name, b := range readDir(t, base) {
				os.WriteFile(filepath.Join(dir, name), b, 0o644)
			}
			// An earlier, passing report must not survive to the card either.
			if code, _, stderr := runCLI(t, "verify", "--save", dir); code != 0 {
				t.Fatal(stderr)
			}
			name := c.entry(t, dir)
			m, err := manifests.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			m.Files = append(m.Files, manifests.File{Name: name, Size: 1, SHA256: "x"})
			m.Write(dir)
			code, stdout, stderr := runWithin(t, 10*time.Second, "verify", "--save", dir)
			if code != exitFailure || !strings.Contains(stdout, name) || !strings.Contains(stderr, "not saving") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if _, err := os.Lstat(filepath.Join(dir, manifests.ReportFile)); err == nil {
				t.Fatal("a report was saved")
			}
			code, stdout, _ = runWithin(t, 10*time.Second, "verify", "--json", dir)
			var r manifests.Report
			if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != exitFailure || !r.Unsafe() || strings.Contains(stdout, "sha256 ") {
				t.Fatalf("exit %d, report %s", code, stdout)
			}
			if code, _, stderr := runCLI(t, "card", dir); code != 0 {
				t.Fatal(stderr)
			}
			if card, _ := os.ReadFile(filepath.Join(dir, "README.md")); !strings.Contains(string(card), "Not yet run") {
				t.Error("the card shows a verification result")
			}
		})
	}
}

// TestVerifySaveReplacesSymlinks: the report and the card are written as new
// files, never through a symbolic link planted in OUT.
func TestVerifySaveReplacesSymlinks(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "out")
	exportTo(t, fixtures.Qwen36, dir, "--target", "mlx")
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, filepath.Join(dir, manifests.ReportFile))
	if code, _, stderr := runCLI(t, "verify", "--save", dir); code != 0 {
		t.Fatal(stderr)
	}
	os.Remove(filepath.Join(dir, "README.md"))
	os.Symlink(victim, filepath.Join(dir, "README.md"))
	if code, _, stderr := runCLI(t, "card", dir); code != 0 {
		t.Fatal(stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("wrote through a symlink: %q", b)
	}
	for _, name := range []string{manifests.ReportFile, "README.md"} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v", name, fi, err)
		}
	}
}
