package manifests_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"

	_ "github.com/mtpconv/mtpconv/convert/families" // the fixtures' families
	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
)

// export runs the export library on the checkpoint in src (MLX target, the
// given head precision) into out, manifest included, as the CLI does.
func exportTo(t *testing.T, src, out, head string) {
	t.Helper()
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	_, err = export.Export(context.Background(), export.Request{
		Model: m, Target: "mlx", Options: targets.Options{HeadPrecision: head}, Dest: export.Out(out), NoCard: true, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
}

// exported is an export of a fixture made once per test binary and copied
// for each test that changes it.
var exported = map[string]string{}

func baseOutput(t *testing.T, fixture, head string) string {
	t.Helper()
	key := fixture + "/" + head
	if dir, ok := exported[key]; ok {
		return dir
	}
	dir, err := os.MkdirTemp("", "mtpconv-verify-test-")
	if err != nil {
		t.Fatal(err)
	}
	exportTo(t, fixtures.Ensure(t, fixture), filepath.Join(dir, "out"), head)
	exported[key] = filepath.Join(dir, "out")
	return exported[key]
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range exported {
		os.RemoveAll(filepath.Dir(dir))
	}
	os.Exit(code)
}

// copyDir copies the regular files of a folder into a new temporary one.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// verify runs Verify with a deadline, failing the test if it does not return
// in time (a FIFO or device read would never end).
func verify(t *testing.T, dir string, src *st.Checkpoint) *manifests.Report {
	t.Helper()
	type result struct {
		r   *manifests.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := manifests.Verify(context.Background(), dir, src)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("verify: %v", res.err)
		}
		return res.r
	case <-time.After(2 * time.Minute):
		t.Fatal("verify did not return within 2 minutes")
		return nil
	}
}

func openSource(t *testing.T, dir string) *st.Checkpoint {
	t.Helper()
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func kinds(r *manifests.Report) []string {
	var k []string
	for _, p := range r.Problems {
		k = append(k, p.Kind)
	}
	return k
}

func editManifest(t *testing.T, dir string, edit func(m *manifests.Manifest)) {
	t.Helper()
	m, err := manifests.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
}

// rehash records in the manifest the size and sha256 of every file and the
// CRC-32C of every stored tensor as they now are, as an exporter that hashed
// its own wrong bytes would: only recomputing from the source can then tell.
func rehash(t *testing.T, dir string) {
	t.Helper()
	editManifest(t, dir, func(m *manifests.Manifest) {
		for i := range m.Files {
			f := &m.Files[i]
			size, sum, err := manifests.HashFile(filepath.Join(dir, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			f.Size, f.SHA256 = size, sum
		}
		for i := range m.Tensors {
			tn := &m.Tensors[i]
			h := readHeader(t, filepath.Join(dir, tn.File))
			b, _ := os.ReadFile(filepath.Join(dir, tn.File))
			for j := range tn.Entries {
				e := &tn.Entries[j]
				if info, ok := h.Lookup(e.Name); ok {
					th := manifests.NewTensorHash()
					th.Write(b[info.Begin:info.End])
					e.CRC32C = manifests.TensorSum(th)
				}
			}
		}
	})
}

func readHeader(t *testing.T, path string) *st.Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	h, err := st.ReadHeader(f, fi.Size(), filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// tensorBytes returns a copy of a stored tensor's bytes.
func tensorBytes(t *testing.T, path, name string) []byte {
	t.Helper()
	info, ok := readHeader(t, path).Lookup(name)
	if !ok {
		t.Fatalf("%s: no tensor %s", path, name)
	}
	b, _ := os.ReadFile(path)
	return slices.Clone(b[info.Begin:info.End])
}

// writeTensor replaces the bytes of a stored tensor in place.
func writeTensor(t *testing.T, path, name string, data []byte) {
	t.Helper()
	info, ok := readHeader(t, path).Lookup(name)
	if !ok || info.Bytes() != int64(len(data)) {
		t.Fatalf("%s: tensor %s: %v, %d bytes for %d", path, name, ok, len(data), info.Bytes())
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, info.Begin); err != nil {
		t.Fatal(err)
	}
}

// addTensor rewrites a safetensors file with one more tensor.
func addTensor(t *testing.T, path, name string) {
	t.Helper()
	h := readHeader(t, path)
	b, _ := os.ReadFile(path)
	var entries []st.Entry
	for _, ti := range h.Tensors {
		entries = append(entries, st.Entry{Name: ti.Name, DType: ti.DType, Shape: ti.Shape})
	}
	entries = append(entries, st.Entry{Name: name, DType: st.BF16, Shape: []int64{4}})
	var buf bytes.Buffer
	w, err := st.NewWriter(&buf, entries, h.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range h.Tensors {
		w.Write(b[ti.Begin:ti.End])
	}
	w.Write(make([]byte, 8))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shiftedNorm is a source norm weight cast to BF16 after adding add.
func shiftedNorm(t *testing.T, src *st.Checkpoint, name string, add float32) []byte {
	t.Helper()
	raw, err := src.ReadTensor(src.Tensors[name], nil)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(raw)/2)
	quant.DecodeF32("BF16", raw, v)
	for i := range v {
		v[i] += add
	}
	out := make([]byte, len(raw))
	quant.EncodeF32("BF16", v, out)
	return out
}

func TestVerifyCleanOutputs(t *testing.T) {
	for _, head := range []string{"bf16", "f16", "int4"} {
		t.Run(head, func(t *testing.T) {
			src := openSource(t, fixtures.Ensure(t, fixtures.Qwen36))
			r := verify(t, baseOutput(t, fixtures.Qwen36, head), src)
			if !r.OK || r.Recomputed != 20 || r.Files != 2 {
				t.Fatalf("clean output: %+v", r)
			}
		})
	}
}

func TestVerifyTamperedOutputs(t *testing.T) {
	const file = "model.safetensors"
	const experts = "layers.0.mlp.switch_mlp.down_proj.weight"
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string, src *st.Checkpoint)
		src    bool     // recompute from the source too
		want   []string // the problem kinds, in order
		tensor string   // the tensor the last problem names
	}{
		{"flipped byte", func(t *testing.T, dir string, _ *st.Checkpoint) {
			b := tensorBytes(t, filepath.Join(dir, file), "fc.weight")
			b[100] ^= 0x01
			writeTensor(t, filepath.Join(dir, file), "fc.weight", b)
		}, false, []string{"file_hash", "tensor_hash"}, "fc.weight"},
		{"flipped byte, rehashed", func(t *testing.T, dir string, _ *st.Checkpoint) {
			b := tensorBytes(t, filepath.Join(dir, file), "fc.weight")
			b[100] ^= 0x01
			writeTensor(t, filepath.Join(dir, file), "fc.weight", b)
			rehash(t, dir)
		}, true, []string{"values_differ"}, "fc.weight"},
		{"swapped expert slices", func(t *testing.T, dir string, _ *st.Checkpoint) {
			b := tensorBytes(t, filepath.Join(dir, file), experts)
			n := len(b) / 256 // one expert's [128, 128] slice
			a := slices.Clone(b[:n])
			copy(b[:n], b[n:2*n])
			copy(b[n:2*n], a)
			writeTensor(t, filepath.Join(dir, file), experts, b)
		}, false, []string{"file_hash", "tensor_hash"}, experts},
		{"swapped expert slices, rehashed", func(t *testing.T, dir string, _ *st.Checkpoint) {
			b := tensorBytes(t, filepath.Join(dir, file), experts)
			n := len(b) / 256
			a := slices.Clone(b[:n])
			copy(b[:n], b[n:2*n])
			copy(b[n:2*n], a)
			writeTensor(t, filepath.Join(dir, file), experts, b)
			rehash(t, dir)
		}, true, []string{"values_differ"}, experts},
		{"norm without +1", func(t *testing.T, dir string, src *st.Checkpoint) {
			writeTensor(t, filepath.Join(dir, file), "norm.weight", shiftedNorm(t, src, "mtp.norm.weight", 0))
			rehash(t, dir)
		}, true, []string{"norm_missing_plus_one"}, "norm.weight"},
		{"norm with +1 twice", func(t *testing.T, dir string, src *st.Checkpoint) {
			writeTensor(t, filepath.Join(dir, file), "norm.weight", shiftedNorm(t, src, "mtp.norm.weight", 2))
			rehash(t, dir)
		}, true, []string{"norm_double_plus_one"}, "norm.weight"},
		{"norm without +1, not rehashed", func(t *testing.T, dir string, src *st.Checkpoint) {
			writeTensor(t, filepath.Join(dir, file), "norm.weight", shiftedNorm(t, src, "mtp.norm.weight", 0))
		}, true, []string{"file_hash", "tensor_hash", "norm_missing_plus_one"}, "norm.weight"},
		{"extra tensor in the file", func(t *testing.T, dir string, _ *st.Checkpoint) {
			addTensor(t, filepath.Join(dir, file), "layers.0.extra.weight")
			rehash(t, dir)
		}, true, []string{"tensor_extra"}, "layers.0.extra.weight"},
		{"extra tensor in the manifest", func(t *testing.T, dir string, _ *st.Checkpoint) {
			editManifest(t, dir, func(m *manifests.Manifest) {
				e := m.Tensors[0].Entries[0]
				e.Name = "layers.0.extra.weight"
				m.Tensors[0].Entries = append(m.Tensors[0].Entries, e)
			})
		}, false, []string{"tensor_missing"}, "layers.0.extra.weight"},
		{"missing config file", func(t *testing.T, dir string, _ *st.Checkpoint) {
			os.Remove(filepath.Join(dir, "config.json"))
		}, true, []string{"file_missing"}, ""},
		{"missing tensor file", func(t *testing.T, dir string, _ *st.Checkpoint) {
			os.Remove(filepath.Join(dir, file))
		}, true, []string{"file_missing"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ck := openSource(t, fixtures.Ensure(t, fixtures.Qwen36))
			dir := copyDir(t, baseOutput(t, fixtures.Qwen36, "bf16"))
			c.tamper(t, dir, ck)
			var src *st.Checkpoint
			if c.src {
				src = ck
			}
			r := verify(t, dir, src)
			if r.OK || !slices.Equal(kinds(r), c.want) {
				t.Fatalf("problems %v, want %v: %+v", kinds(r), c.want, r.Problems)
			}
			if last := r.Problems[len(r.Problems)-1]; last.Tensor != c.tensor {
				t.Errorf("problem %+v names tensor %q, want %q", last, last.Tensor, c.tensor)
			}
		})
	}
}

// TestVerifyRefusesFilesOutsideOut: a manifest may name any path; verify
// must read none outside OUT, nor anything but regular files, and name the
// entry it refused.
func TestVerifyRefusesFilesOutsideOut(t *testing.T) {
	const tensorFile = "model.safetensors"
	// secret is a file outside OUT with a manifest entry that matches it, so
	// a verify that read it would pass it (and publish its hash).
	secret := func(t *testing.T, dir string) (string, manifests.File) {
		p := filepath.Join(filepath.Dir(dir), "secret")
		os.WriteFile(p, []byte("root:x:0:0\n"), 0o600)
		size, sum, _ := manifests.HashFile(p)
		return p, manifests.File{Size: size, SHA256: sum}
	}
	addFile := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			_, f := secret(t, dir)
			f.Name = name
			editManifest(t, dir, func(m *manifests.Manifest) { m.Files = append(m.Files, f) })
		}
	}
	cases := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		file   string // the name the problem must carry
		kind   string
		others []string // further problem kinds
	}{
		{"dot-dot", addFile("../secret"), "../secret", manifests.KindFileOutside, nil},
		{"dot-dot inside a name", addFile("sub/../../secret"), "sub/../../secret", manifests.KindFileOutside, nil},
		{"dot-dot that cleans to a local name", addFile("sub/../config.json"), "sub/../config.json", manifests.KindFileOutside, nil},
		{"absolute", func(t *testing.T, dir string) {
			p, f := secret(t, dir)
			f.Name = p
			editManifest(t, dir, func(m *manifests.Manifest) { m.Files = append(m.Files, f) })
		}, "", manifests.KindFileOutside, nil},
		{"backslash", addFile(`..\secret`), `..\secret`, manifests.KindFileOutside, nil},
		{"symlink out of OUT", func(t *testing.T, dir string) {
			p, f := secret(t, dir)
			os.Symlink(p, filepath.Join(dir, "link"))
			f.Name = "link"
			editManifest(t, dir, func(m *manifests.Manifest) { m.Files = append(m.Files, f) })
		}, "link", manifests.KindFileOutside, nil},
		{"symlink to /dev/zero", func(t *testing.T, dir string) {
			os.Symlink("/dev/zero", filepath.Join(dir, "zero"))
			editManifest(t, dir, func(m *manifests.Manifest) { m.Files = append(m.Files, manifests.File{Name: "zero"}) })
		}, "zero", manifests.KindFileOutside, nil},
		{"folder symlinked out of OUT", func(t *testing.T, dir string) {
			p, f := secret(t, dir)
			os.Symlink(filepath.Dir(p), filepath.Join(dir, "up"))
			f.Name = "up/secret"
			editManifest(t, dir, func(m *manifests.Manifest) { m.Files = append(m.Files, f) })
		}, "up/secret", manifests.KindFileOutside, nil},
		{"a folder", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			editManifest(t, dir, func(m *manifests.Manifest) { m.Files = append(m.Files, manifests.File{Name: "sub"}) })
		}, "sub", manifests.KindFileNotRegular, nil},
		{"tensor file outside", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, tensorFile), filepath.Join(filepath.Dir(dir), tensorFile))
			editManifest(t, dir, func(m *manifests.Manifest) {
				for i := range m.Tensors {
					m.Tensors[i].File = "../" + tensorFile
				}
			})
		}, "../" + tensorFile, manifests.KindFileOutside, []string{"file_missing"}},
		{"tensor file symlinked out", func(t *testing.T, dir string) {
			outside := filepath.Join(filepath.Dir(dir), tensorFile)
			os.Rename(filepath.Join(dir, tensorFile), outside)
			os.Symlink(outside, filepath.Join(dir, tensorFile))
		}, tensorFile, manifests.KindFileOutside, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, baseOutput(t, fixtures.Qwen36, "bf16"))
			c.setup(t, dir)
			r := verify(t, dir, nil)
			var found *manifests.Problem
			var rest []string
			for i, p := range r.Problems {
				if p.Kind == c.kind && found == nil {
					found = &r.Problems[i]
				} else {
					rest = append(rest, p.Kind)
				}
			}
			if found == nil || !slices.Equal(rest, c.others) || r.OK || !r.Unsafe() {
				t.Fatalf("problems %+v; want one %s and %v", r.Problems, c.kind, c.others)
			}
			name := c.file
			if name == "" { // the absolute case: the path of the secret
				name = filepath.Join(filepath.Dir(dir), "secret")
			}
			if found.File != name || !strings.Contains(found.Message, name) && !strings.Contains(found.Message, strconv.Quote(name)) {
				t.Errorf("problem %+v does not name %q", found, name)
			}
			for _, p := range r.Problems {
				if strings.Contains(p.Message, "sha256") {
					t.Errorf("a refused file was hashed: %+v", p)
				}
			}
		})
	}
}

func TestVerifyFollowsSymlinksInsideOut(t *testing.T) {
	dir := copyDir(t, baseOutput(t, fixtures.Qwen36, "bf16"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Rename(filepath.Join(dir, "config.json"), filepath.Join(dir, "sub", "config.json"))
	os.Symlink(filepath.Join("sub", "config.json"), filepath.Join(dir, "config.json"))
	if r := verify(t, dir, nil); !r.OK || r.Unsafe() {
		t.Fatalf("a symlink inside OUT was refused: %+v", r.Problems)
	}
}

// copyFixture copies a fixture, writing -0.0 over some values of the named
// source tensors (in place: the shard headers do not change).
func copyFixture(t *testing.T, fixture string, names ...string) string {
	t.Helper()
	src := fixtures.Ensure(t, fixture)
	dst := t.TempDir()
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	ck := openSource(t, dst)
	for _, name := range names {
		ti := ck.Tensors[name]
		if ti.DType != st.BF16 {
			t.Fatalf("%s is %s", name, ti.DType)
		}
		b, _ := ck.ReadTensor(ti, nil)
		for i := 0; i < len(b); i += 2 * 7 {
			binary.LittleEndian.PutUint16(b[i:], 0x8000) // BF16 -0.0
		}
		writeTensor(t, filepath.Join(dst, ti.Shard.Name), name, b)
	}
	return dst
}

func TestVerifyNegativeZero(t *testing.T) {
	for _, head := range []string{"bf16", "f16"} {
		t.Run(head, func(t *testing.T) {
			src := copyFixture(t, fixtures.Qwen36, "mtp.fc.weight", "mtp.layers.0.mlp.experts.down_proj", "mtp.norm.weight")
			out := filepath.Join(t.TempDir(), "out")
			exportTo(t, src, out, head)
			// The export keeps -0.0 (as a copy and as the f16 cast) ...
			b := tensorBytes(t, filepath.Join(out, "model.safetensors"), "fc.weight")
			if bits := binary.LittleEndian.Uint16(b); bits != 0x8000 {
				t.Fatalf("the export wrote %#04x for -0.0", bits)
			}
			// ... and verify must not turn it into +0.
			if r := verify(t, out, openSource(t, src)); !r.OK || r.Recomputed != 20 {
				t.Fatalf("a correct export with -0.0 fails: %+v", r.Problems)
			}
		})
	}
}

func TestVerifySourceMismatchSkipsRecompute(t *testing.T) {
	cases := []struct {
		name       string
		source     func(t *testing.T) string
		tensor     string // "" for the fingerprint
		recomputed int
	}{
		{"another checkpoint", func(t *testing.T) string { return fixtures.Ensure(t, fixtures.Qwen35) }, "", 0},
		{"another config", func(t *testing.T) string {
			dir := copyFixture(t, fixtures.Qwen36)
			os.WriteFile(filepath.Join(dir, "config.json"), append(mustRead(t, filepath.Join(dir, "config.json")), ' '), 0o644)
			return dir
		}, "", 0},
		{"changed tensor bytes", func(t *testing.T) string {
			return copyFixture(t, fixtures.Qwen36, "mtp.norm.weight")
		}, "norm.weight", 19},
		{"changed expert bytes", func(t *testing.T) string {
			return copyFixture(t, fixtures.Qwen36, "mtp.layers.0.mlp.experts.down_proj")
		}, "layers.0.mlp.switch_mlp.down_proj.weight", 19},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := verify(t, baseOutput(t, fixtures.Qwen36, "bf16"), openSource(t, c.source(t)))
			if !slices.Equal(kinds(r), []string{"source_mismatch"}) || r.Problems[0].Tensor != c.tensor || r.Recomputed != c.recomputed {
				t.Fatalf("problems %+v, %d recomputed; want one source_mismatch naming %q and %d recomputed", r.Problems, r.Recomputed, c.tensor, c.recomputed)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyStopsWhenCancelled(t *testing.T) {
	src := openSource(t, fixtures.Ensure(t, fixtures.Qwen36))
	out := baseOutput(t, fixtures.Qwen36, "int4")
	for _, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		if after == 0 {
			cancel()
		} else {
			time.AfterFunc(after, cancel)
		}
		start := time.Now()
		_, err := manifests.Verify(ctx, out, src)
		cancel()
		// A run that beats the cancellation is fine; one that ignores it is not.
		if err == nil && after == 0 || err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %v: %v", after, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("cancelled after %v: took %v", after, d)
		}
	}
}

func TestHashFileStopsWhenCancelled(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, make([]byte, 3<<20), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := manifests.HashFileContext(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	size, sum, err := manifests.HashFile(p)
	want := manifests.SHA256(make([]byte, 3<<20))
	if err != nil || size != 3<<20 || sum != want {
		t.Fatalf("%d %s %v", size, sum, err)
	}
}

// countingSource counts the reads of its files and cancels a context at the
// read numbered cancelAt.
type countingSource struct {
	st.Opener
	reads    *atomic.Int64
	cancelAt int64
	cancel   context.CancelFunc
}

func (s countingSource) Open(name string) (st.File, error) {
	f, err := s.Opener.Open(name)
	if err != nil {
		return nil, err
	}
	return countingFile{f, s}, nil
}

type countingFile struct {
	st.File
	s countingSource
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	if f.s.reads.Add(1) == f.s.cancelAt {
		f.s.cancel()
	}
	return f.File.ReadAt(p, off)
}

// TestVerifyStopsWithinAChunk cancels the context in the middle of the
// recomputation of a large tensor: no source chunk may be read after that.
func TestVerifyStopsWithinAChunk(t *testing.T) {
	out := baseOutput(t, fixtures.Qwen36, "bf16")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reads atomic.Int64
	src := countingSource{source.Dir(fixtures.Ensure(t, fixtures.Qwen36)), &reads, math.MaxInt64, cancel}
	ck, err := st.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	// The run's reads: config.json, the shard headers, then the chunks; the
	// switch_mlp tensors take 32 chunks or more each.
	reads.Store(0)
	if r, err := manifests.Verify(context.Background(), out, ck); err != nil || !r.OK {
		t.Fatalf("%v %+v", err, r)
	}
	total := reads.Load()
	src.cancelAt = total / 2
	ck2, err := st.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck2.Close()
	reads.Store(0)
	_, err = manifests.Verify(ctx, out, ck2)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if n := reads.Load(); n != src.cancelAt {
		t.Errorf("%d reads after the cancellation (of %d in a whole run)", n-src.cancelAt, total)
	}
}

// MLX's microscaling modes are recomputed bit for bit: a clean export
// verifies, and one code changed (hashes rewritten to match) does not.
func TestVerifyMicroscalingModes(t *testing.T) {
	const file = "model.safetensors"
	for _, mode := range []string{"mxfp4", "mxfp8", "nvfp4"} {
		t.Run(mode, func(t *testing.T) {
			ck := openSource(t, fixtures.Ensure(t, fixtures.Qwen36))
			dir := copyDir(t, baseOutput(t, fixtures.Qwen36, mode))
			if r := verify(t, dir, ck); !r.OK || r.Recomputed == 0 {
				t.Fatalf("clean %s export: %+v", mode, r.Problems)
			}
			b := tensorBytes(t, filepath.Join(dir, file), "fc.weight")
			b[7] ^= 0x10
			writeTensor(t, filepath.Join(dir, file), "fc.weight", b)
			rehash(t, dir)
			r := verify(t, dir, ck)
			if r.OK || !slices.Equal(kinds(r), []string{"values_differ"}) || r.Problems[0].Tensor != "fc.weight" {
				t.Errorf("tampered %s export: %+v", mode, r.Problems)
			}
		})
	}
}
