package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// linkFixture makes dir a copy of a fixture whose files are symlinks, so a
// test that deletes it never harms the fixture; the files named in copies
// are real copies (to be changed in place).
func linkFixture(t *testing.T, fixture, dir string, copies ...string) {
	t.Helper()
	src := fixtures.Ensure(t, fixture)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())
		if slices.Contains(copies, e.Name()) {
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.Symlink(from, to); err != nil {
			t.Fatal(err)
		}
	}
}

// tree describes every path under root: folders, symlink targets and file contents.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[p] = "-> " + target
		case d.IsDir():
			out[p] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = manifests.SHA256(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fakeOutput(t *testing.T, dir string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, manifests.FileName), []byte(`{"tool":{"name":"mtpconv","version":"0"}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("card"), 0o644)
}

// An --out that is, holds or lies in the source, or is a file, or (with
// --force) a folder that is not an mtpconv output, is refused and nothing
// under the test's root changes.
func TestExportRefusesOutThatWouldDestroyData(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name  string
		src   func(root string) string // --src; default the linked fixture root/models/src
		out   func(root string) string
		prep  func(t *testing.T, root string)
		force bool
		want  string
	}{
		{name: "out is the source", out: func(r string) string { return filepath.Join(r, "models", "src") }, force: true, want: "is the source folder"},
		{name: "out is the source without force", out: func(r string) string { return filepath.Join(r, "models", "src") }, want: "is the source folder"},
		{name: "out is the source, relative", out: func(r string) string {
			rel, _ := filepath.Rel(mustGetwd(t), filepath.Join(r, "models", "x", "..", "src"))
			return rel
		}, force: true, want: "is the source folder"},
		{name: "out is the parent of the source", out: func(r string) string { return filepath.Join(r, "models") }, force: true, want: "contains the source folder"},
		{name: "out is an ancestor of the source", out: func(r string) string { return r }, force: true, want: "contains the source folder"},
		{name: "out is a shard of the source", prep: func(t *testing.T, r string) {
			shard := filepath.Join(r, "models", "src", "model-00003-of-00003.safetensors")
			b, err := os.ReadFile(shard)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(shard)
			os.WriteFile(shard, b, 0o644)
		}, out: func(r string) string { return filepath.Join(r, "models", "src", "model-00003-of-00003.safetensors") }, force: true, want: "lies inside the source folder"},
		{name: "out is a symlinked shard of the source", out: func(r string) string { return filepath.Join(r, "models", "src", "model-00001-of-00003.safetensors") }, force: true, want: "is an existing file"},
		{name: "out is a new folder inside the source", out: func(r string) string { return filepath.Join(r, "models", "src", "sub") }, want: "lies inside the source folder"},
		{name: "out is a symlink to the source", prep: func(t *testing.T, r string) {
			os.Symlink(filepath.Join(r, "models", "src"), filepath.Join(r, "link"))
		}, out: func(r string) string { return filepath.Join(r, "link") }, force: true, want: "is the source folder"},
		{name: "out goes through a symlinked parent", prep: func(t *testing.T, r string) {
			os.Symlink(filepath.Join(r, "models"), filepath.Join(r, "alias"))
		}, out: func(r string) string { return filepath.Join(r, "alias") }, force: true, want: "contains the source folder"},
		{name: "out is an existing file", prep: func(t *testing.T, r string) {
			os.WriteFile(filepath.Join(r, "file.txt"), []byte("mine"), 0o644)
		}, out: func(r string) string { return filepath.Join(r, "file.txt") }, force: true, want: "is an existing file"},
		{name: "out is a folder that is not an mtpconv output", prep: func(t *testing.T, r string) {
			os.MkdirAll(filepath.Join(r, "other"), 0o755)
			os.WriteFile(filepath.Join(r, "other", "keep"), []byte("mine"), 0o644)
		}, out: func(r string) string { return filepath.Join(r, "other") }, force: true, want: "is not an mtpconv output"},
		{name: "out is an output the source links into", prep: func(t *testing.T, r string) {
			fakeOutput(t, filepath.Join(r, "old"))
			os.Symlink(filepath.Join(r, "old", "README.md"), filepath.Join(r, "models", "src", "README.md"))
		}, out: func(r string) string { return filepath.Join(r, "old") }, force: true, want: "which the source file"},
		// ORG/NAME from the Hugging Face cache: the source folder is the snapshot.
		{name: "hf cache: out is the snapshot", src: func(r string) string { return hfCache(t, r, fixtures.Qwen36, commit) },
			out: func(r string) string {
				return filepath.Join(r, "hub", "models--org--tiny", "snapshots", commit)
			}, force: true, want: "is the source folder"},
		{name: "hf cache: out is the repo folder", src: func(r string) string { return hfCache(t, r, fixtures.Qwen36, commit) },
			out: func(r string) string { return filepath.Join(r, "hub", "models--org--tiny") }, force: true, want: "contains the source folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			linkFixture(t, fixtures.Qwen36, filepath.Join(root, "models", "src"))
			os.WriteFile(filepath.Join(root, "models", "notes.txt"), []byte("unrelated"), 0o644)
			src := filepath.Join(root, "models", "src")
			if c.src != nil {
				src = c.src(root)
			}
			if c.prep != nil {
				c.prep(t, root)
			}
			before := tree(t, root)
			args := []string{"export", "--src", src, "--target", "mlx", "--out", c.out(root), "--quiet"}
			if c.force {
				args = append(args, "--force")
			}
			code, _, stderr := runCLI(t, args...)
			if code != exitFailure || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitFailure, c.want)
			}
			sameStrings(t, before, tree(t, root))
		})
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// hfCache lays out root/hub as a Hugging Face cache holding org/tiny at
// commit (refs/main), its snapshot files linked to the fixture, and points
// HF_HUB_CACHE at it. It returns the --src id.
func hfCache(t *testing.T, root, fixture, commit string) string {
	cacheSnapshot(t, filepath.Join(root, "hub"), "org/tiny", commit, fixtures.Ensure(t, fixture))
	t.Setenv("HF_HUB_CACHE", filepath.Join(root, "hub"))
	return "org/tiny"
}

// startHeld starts an export as a separate process that stops after writing
// the file hold (the test hook), and returns once it got there.
func startHeld(t *testing.T, out, hold string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"export", "--out", out, "--quiet"}, args...)...)
	cmd.Env = append(os.Environ(), "MTPCONV_AS_MAIN=1", holdAfterEnv+"="+hold)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	marker := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".partial", ".mtpconv-done", hold+".json")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("export never reached the hold point: %s", stderr.String())
		}
	}
}

func kill(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// A second export to an --out being written fails at once and leaves the
// first one's work alone; the lock dies with its process.
func TestConcurrentExportsToOneOut(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen35)
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	common := []string{"--src", src, "--target", "mlx", "--head-precision", "int4"}
	first := startHeld(t, out, "model.safetensors", common...)
	partial := filepath.Join(parent, ".out.partial")
	held := tree(t, partial)
	cases := []struct {
		name string
		args []string
	}{
		{"plain", nil},
		{"force", []string{"--force"}},
		{"resume", []string{"--resume"}},
		{"other options", []string{"--head-precision", "int8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{"export", "--out", out, "--quiet"}, common...), c.args...)
			start := time.Now()
			code, _, stderr := runCLI(t, args...)
			if code != exitFailure || !strings.Contains(stderr, "another export is writing to "+out) {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the second export waited %v", d)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatal("an output folder appeared while the first export runs")
			}
			now := tree(t, partial)
			if len(now) != len(held) {
				t.Fatalf("the first export's partial folder changed: %d paths, was %d", len(now), len(held))
			}
			for p, v := range held {
				if now[p] != v {
					t.Errorf("%s changed under the first export", p)
				}
			}
		})
	}
	kill(first)
	lock := filepath.Join(parent, ".out.lock")
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the killed run left no lock file to test with: %v", err)
	}
	// The stale lock file has no holder: the next export runs, and removes it.
	if code, _, stderr := runCLI(t, append([]string{"export", "--out", out, "--quiet"}, common...)...); code != 0 {
		t.Fatalf("after the kill: exit %d: %s", code, stderr)
	}
	if left, _ := os.ReadDir(parent); len(left) != 1 || left[0].Name() != "out" {
		t.Errorf("left %v", left)
	}
}

// flipSigns negates every bf16 value of a source tensor in place (the
// header stays the same).
func flipSigns(t *testing.T, dir, tensor string) {
	t.Helper()
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	ti := ck.Tensors[tensor]
	if ti == nil || ti.DType != st.BF16 {
		t.Fatalf("%s: not a bf16 tensor of the source", tensor)
	}
	b, err := ck.ReadTensor(ti, nil)
	shard := filepath.Join(dir, ti.Shard.Name)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(b); i += 2 {
		b[i] ^= 0x80
	}
	rewriteTensor(t, shard, tensor, b)
}

// shardOf names the source shard that holds a tensor.
func shardOf(t *testing.T, fixture, tensor string) string {
	t.Helper()
	ck, err := st.Open(source.Dir(fixtures.Ensure(t, fixture)))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Tensors[tensor] == nil {
		t.Fatalf("%s is not in %s", tensor, fixture)
	}
	return ck.Tensors[tensor].Shard.Name
}

// --resume reuses a finished file only if the source bytes it was made from
// are unchanged; the output always equals a fresh export of the source as
// it is now.
func TestResumeRechecksSourceBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		fixture string
		args    []string
		hold    string
		change  string   // source tensor negated after the kill
		reused  []string // must be reused
		redone  []string // finished before the kill, must be written again
	}{
		{"unchanged source", fixtures.Qwen35, []string{"--target", "mlx", "--head-precision", "int4"}, "model.safetensors", "",
			[]string{"model.safetensors"}, nil},
		{"changed tensor of the finished file", fixtures.Qwen35, []string{"--target", "mlx", "--head-precision", "int4"}, "model.safetensors", "mtp.norm.weight",
			nil, []string{"model.safetensors"}},
		{"openvino: changed lm_head", fixtures.Qwen36, []string{"--target", "openvino"}, "openvino_mtp_lm_head.bin", "lm_head.weight",
			nil, []string{"openvino_mtp_lm_head.bin"}},
		{"openvino: change outside the finished file", fixtures.Qwen36, []string{"--target", "openvino"}, "openvino_mtp_lm_head.bin", "mtp.norm.weight",
			[]string{"openvino_mtp_lm_head.bin"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			var copies []string
			if c.change != "" {
				copies = append(copies, shardOf(t, c.fixture, c.change))
			}
			linkFixture(t, c.fixture, src, copies...)
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			args := append([]string{"--src", src}, c.args...)
			kill(startHeld(t, out, c.hold, args...))
			partial := filepath.Join(parent, ".out.partial")
			old := map[string][]byte{}
			for _, f := range c.redone {
				old[f], _ = os.ReadFile(filepath.Join(partial, f))
			}
			if c.change != "" {
				flipSigns(t, src, c.change)
			}
			want := filepath.Join(t.TempDir(), "want")
			if code, _, stderr := runCLI(t, append([]string{"export", "--out", want, "--quiet"}, args...)...); code != 0 {
				t.Fatalf("fresh export: exit %d: %s", code, stderr)
			}
			// What a user reads: the "resumed:" line names the files reused.
			code, stdout, stderr := runCLI(t, append([]string{"export", "--out", out, "--resume"}, args...)...)
			if code != 0 {
				t.Fatalf("resume: exit %d: %s", code, stderr)
			}
			var sum exportSummary
			for _, l := range strings.Split(stdout, "\n") {
				if _, files, ok := strings.Cut(l, "every input byte proven unchanged: "); ok && strings.HasPrefix(l, "resumed: reused ") {
					sum.ReusedFiles = strings.Split(files, ", ")
				}
			}
			if len(sum.ReusedFiles) == 0 && !strings.Contains(stdout, "resumed: no file of the interrupted run could be reused") {
				t.Errorf("the resume does not say what it reused:\n%s", stdout)
			}
			for _, l := range strings.Split(stderr, "\n") {
				if n, ok := strings.CutPrefix(l, "note: "); ok {
					sum.Notes = append(sum.Notes, n)
				}
			}
			for _, f := range c.reused {
				if !slices.Contains(sum.ReusedFiles, f) {
					t.Errorf("%s was not reused: reused %v, notes %v", f, sum.ReusedFiles, sum.Notes)
				}
			}
			for _, f := range c.redone {
				if slices.Contains(sum.ReusedFiles, f) {
					t.Errorf("%s was reused though its source changed", f)
				}
				note := fmt.Sprintf("%s: not reused from the interrupted run, written again: the source bytes of", f)
				if !slices.ContainsFunc(sum.Notes, func(n string) bool { return strings.Contains(n, note) }) {
					t.Errorf("no note says %s was written again: %v", f, sum.Notes)
				}
			}
			a := readDir(t, want)
			sameFiles(t, a, readDir(t, out))
			for f, o := range old {
				if bytes.Equal(o, a[f]) {
					t.Errorf("%s: changing %s does not change it; the test proves nothing", f, c.change)
				}
			}
		})
	}
}

// An --out with ".." after a folder that does not exist is refused before
// any work (the system could not follow it at the final rename); one after
// an existing folder is followed. (Not filepath.Join: it would clean them.)
func TestExportRefusesDotDotAfterMissingFolder(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	root := t.TempDir()
	for _, out := range []string{root + "/missing/../b", root + "/a/missing/../../b"} {
		code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--out", out)
		if code != exitFailure || !strings.Contains(stderr, "cannot be followed") || strings.Contains(stderr, "wrote ") {
			t.Errorf("%s: exit %d: %s", out, code, stderr)
		}
	}
	if left, _ := os.ReadDir(root); len(left) != 0 {
		t.Errorf("left %v", left)
	}
	os.Mkdir(filepath.Join(root, "here"), 0o755)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--quiet", "--out", root+"/here/../b"); code != 0 {
		t.Errorf("through an existing folder: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "b", manifests.FileName)); err != nil {
		t.Error(err)
	}
}

// SIGINT once every chunk is done (the export held after its last tensor
// file) still stops it: exit 130, and nothing is left beside the output.
func TestInterruptAfterLastChunk(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	parent := t.TempDir()
	cmd := startHeld(t, filepath.Join(parent, "out"), "model.safetensors", "--src", src, "--target", "mlx")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want %d", err, exitInterrupted)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}
