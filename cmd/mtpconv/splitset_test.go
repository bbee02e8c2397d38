package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

func u16(v uint16) gg.Value { return gg.Value{Type: gg.TypeUint16, V: v} }

// splitGGUF writes the GGUF at path as a split set of files of at most
// maxTensors tensors each, laid out as llama-gguf-split --split writes one
// (every key in the first file, then split.no, split.count and
// split.tensors.count; the other files only these three), and returns the
// members' paths. The interop suite checks sets made by llama-gguf-split itself.
func splitGGUF(t *testing.T, path, prefix string, maxTensors int) []string {
	t.Helper()
	f, data := ggufTensors(t, path)
	n := (len(f.Tensors) + maxTensors - 1) / maxTensors
	var paths []string
	for i := range n {
		var kvs []gg.KV
		if i == 0 {
			kvs = append(kvs, f.KV...)
		}
		kvs = append(kvs, gg.Pair(gg.KeySplitNo, u16(uint16(i))), gg.Pair(gg.KeySplitCount, u16(uint16(n))),
			gg.Pair(gg.KeySplitTensorsCount, gg.I32(int32(len(f.Tensors)))))
		part := slices.Clone(f.Tensors[i*maxTensors : min((i+1)*maxTensors, len(f.Tensors))])
		p := gg.SplitPath(prefix, i, n)
		writeGGUF(t, p, kvs, part, data)
		paths = append(paths, p)
	}
	return paths
}

// mergedSet reads a split set as llama-gguf-split --merge joins it: the
// first file's metadata (split.* left out here), every file's tensors in
// order; it checks every file's split keys against the set.
func mergedSet(t *testing.T, paths []string) (*gg.File, map[string][]byte) {
	t.Helper()
	var merged *gg.File
	all := map[string][]byte{}
	var tensors []gg.TensorInfo
	for _, p := range paths {
		f, data := ggufTensors(t, p)
		if merged == nil {
			merged = f
		}
		tensors = append(tensors, f.Tensors...)
		for n, b := range data {
			all[n] = b
		}
	}
	for i, p := range paths {
		f, _, _ := gg.Open(p)
		no, _ := f.Uint(gg.KeySplitNo)
		count, _ := f.Uint(gg.KeySplitCount)
		total, _ := f.Uint(gg.KeySplitTensorsCount)
		if no != int64(i) || count != int64(len(paths)) || total != int64(len(tensors)) {
			t.Errorf("%s: split.no %d, split.count %d, split.tensors.count %d; want %d, %d, %d", p, no, count, total, i, len(paths), len(tensors))
		}
	}
	out := *merged
	out.KV = slices.DeleteFunc(slices.Clone(merged.KV), func(kv gg.KV) bool { return gg.IsSplitKey(kv.Key) })
	out.Tensors = tensors
	return &out, all
}

// describeTensors is a file's tensors in order: name, type, dims and bytes.
func describeTensors(f *gg.File, data map[string][]byte) []string {
	var out []string
	for _, ti := range f.Tensors {
		out = append(out, fmt.Sprintf("%s %s %v %x", ti.Name, ti.Type, ti.Dims, data[ti.Name]))
	}
	return out
}

// --graft into a split set, given its first file or another member, writes
// a whole new set in --out, named as the trunk's files, whose merge is the
// graft of the merged trunk (tensor for tensor in its order, key for key
// but split.*): every trunk tensor keeps its bytes in the file that held
// it, split.* agree in every file; verify passes; a split set as --src
// gives the sidecar the bundled file gives; the trunk's files are only read.
func TestGGUFGraftSplitSet(t *testing.T) {
	t.Parallel()
	for _, src := range []string{ggufSource(t), fixtures.Ensure(t, fixtures.GLM45)} {
		graftSplitSet(t, src)
	}
}

// graftSplitSet checks the split set graft of src's trunk (GLM's head comes
// before output_norm in the converter's order: into a middle file).
func graftSplitSet(t *testing.T, src string) {
	trunk := graftTrunk(t, src)
	bundled, _ := graft(t, src, trunk)
	bf, bdata := ggufTensors(t, bundled)
	tf, _ := ggufTensors(t, trunk)
	wholeSide := filepath.Join(t.TempDir(), "side")
	if code, _, stderr := runCLI(t, "export", "--src", bundled, "--target", "gguf", "--out", wholeSide, "--quiet"); code != 0 {
		t.Fatal(stderr)
	}
	wantSide, _ := os.ReadFile(filepath.Join(wholeSide, "mtp-Tiny-BF16.gguf"))
	for _, c := range []struct {
		maxTensors int
		given      int // the member passed to --graft
	}{{40, 0}, {25, 2}, {len(tf.Tensors) - 1, 1}} {
		name := fmt.Sprintf("%d tensors a file, member %d given", c.maxTensors, c.given+1)
		dir := t.TempDir()
		members := splitGGUF(t, trunk, filepath.Join(dir, "Tiny-BF16"), c.maxTensors)
		var before [][]byte
		for _, p := range members {
			b, _ := os.ReadFile(p)
			before = append(before, b)
		}
		out := filepath.Join(t.TempDir(), "g")
		code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--graft", members[c.given], "--out", out)
		if code != 0 {
			t.Fatalf("%s: %d %s", name, code, stderr)
		}
		var ours []string
		for _, p := range members {
			ours = append(ours, filepath.Join(out, filepath.Base(p)))
		}
		got, _ := filepath.Glob(filepath.Join(out, "*.gguf"))
		if !slices.Equal(got, ours) {
			t.Errorf("%s: files %v, want %v", name, got, ours)
		}
		// Every trunk tensor in the file that held it, its bytes and type unchanged.
		for i, p := range members {
			mf, mdata := ggufTensors(t, p)
			of, odata := ggufTensors(t, ours[i])
			trunkKept(t, name+": "+filepath.Base(p)+": ", mf, mdata, of, odata)
			if b, _ := os.ReadFile(p); !bytes.Equal(b, before[i]) {
				t.Errorf("%s: the trunk file %s changed", name, p)
			}
		}
		mf, mdata := mergedSet(t, ours)
		if g, w := describeTensors(mf, mdata), describeTensors(bf, bdata); !slices.Equal(g, w) {
			t.Errorf("%s: the merged set's tensors differ from the bundled graft's:\n%s\nwant\n%s", name, strings.Join(g, "\n")[:min(2000, len(strings.Join(g, "\n")))], strings.Join(w, "\n")[:2000])
		}
		if fmt.Sprint(mf.KV) != fmt.Sprint(bf.KV) {
			t.Errorf("%s: the merged set's metadata\n%v\nthe bundled graft's\n%v", name, mf.KV, bf.KV)
		}
		if code, stdout, _ := runCLI(t, "verify", out, "--src", src); code != 0 || !strings.Contains(stdout, "recomputed from the source: OK") {
			t.Errorf("%s: verify --src: %d %s", name, code, stdout)
		}
		// inspect of any file of a set describes the set: the trunk's gets
		// the graft command, ours has its head, no problem.
		var sum gg.Summary
		_, js, _ := runCLI(t, "inspect", "--json", members[len(members)-1])
		if err := json.Unmarshal([]byte(js), &sum); err != nil || sum.SplitFiles != len(members) || sum.Tensors != len(tf.Tensors) ||
			sum.MTPHead || !strings.Contains(sum.AddHead, "--graft "+members[len(members)-1]+" --out Tiny-BF16-mtp") {
			t.Errorf("%s: inspect of the trunk's last file: %+v %v", name, sum, err)
		}
		_, js, _ = runCLI(t, "inspect", "--json", ours[len(ours)-1])
		if err := json.Unmarshal([]byte(js), &sum); err != nil || sum.SplitFiles != len(members) || !sum.MTPHead || len(sum.Problems) != 0 ||
			sum.Tensors != len(bf.Tensors) || sum.File != filepath.Base(ours[0]) {
			t.Errorf("%s: inspect of our last file: %+v %v", name, sum, err)
		}
		// --force replaces the head a set holds: grafting onto our set gives it again.
		again := filepath.Join(t.TempDir(), "again")
		if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--graft", ours[0], "--out", again); code != 1 || !strings.Contains(stderr, "already holds an MTP head") {
			t.Errorf("%s: graft onto a grafted set: exit %d: %s", name, code, stderr)
		}
		if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--graft", ours[0], "--out", again, "--force", "--quiet"); code != 0 {
			t.Errorf("%s: --force onto the grafted set: exit %d: %s", name, code, stderr)
		}
		for _, p := range ours {
			a, _ := os.ReadFile(p)
			b, _ := os.ReadFile(filepath.Join(again, filepath.Base(p)))
			if len(b) == 0 || !bytes.Equal(a, b) {
				t.Errorf("%s: --force onto the grafted set does not give %s again", name, filepath.Base(p))
			}
		}
		// The set as --src: the sidecar of the bundled file.
		side := filepath.Join(t.TempDir(), "side")
		if code, _, stderr := runCLI(t, "export", "--src", ours[len(ours)-1], "--target", "gguf", "--out", side, "--quiet"); code != 0 {
			t.Fatalf("%s: split the set: %s", name, stderr)
		}
		if b, err := os.ReadFile(filepath.Join(side, "mtp-Tiny-BF16.gguf")); err != nil || !bytes.Equal(b, wantSide) {
			t.Errorf("%s: the set's sidecar differs from the bundled file's (%v)", name, err)
		}
		if code, stdout, _ := runCLI(t, "verify", side); code != 0 || !strings.Contains(stdout, "OK") {
			t.Errorf("%s: verify the set's sidecar: %d %s", name, code, stdout)
		}
	}
}

// A split set that is not one is refused, naming the file, and nothing is
// written: a file missing, a file of another set (its tensors overlap), a
// split.count that disagrees, a file there twice (a link), a
// split.tensors.count that disagrees, a member not named as llama.cpp finds
// it; as --graft and as --src.
func TestGGUFSplitSetRefusals(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	trunk := graftTrunk(t, src)
	set := func(edit func(dir string, members []string)) []string {
		dir := t.TempDir()
		members := splitGGUF(t, trunk, filepath.Join(dir, "Tiny-BF16"), 25) // 4 files
		edit(dir, members)
		return members
	}
	rewrite := func(path, key string, v gg.Value) {
		f, data := ggufTensors(t, path)
		for i := range f.KV {
			if f.KV[i].Key == key {
				f.KV[i].Value = v
			}
		}
		writeGGUF(t, path, f.KV, f.Tensors, data)
	}
	for _, c := range []struct {
		name  string
		edit  func(dir string, members []string)
		given int
		want  string
	}{
		{"missing", func(dir string, m []string) { os.Remove(m[2]) }, 0, "file 3 of 4, " + "DIR/Tiny-BF16-00003-of-00004.gguf, is missing"},
		{"another set", func(dir string, m []string) {
			other := splitGGUF(t, trunk, filepath.Join(t.TempDir(), "Tiny-BF16"), 20) // 4 files too, other boundaries
			b, _ := os.ReadFile(other[1])
			os.WriteFile(m[1], b, 0o644)
		}, 0, "is in DIR/Tiny-BF16-00001-of-00004.gguf and in DIR/Tiny-BF16-00002-of-00004.gguf (a file of another set?)"},
		{"split.count", func(dir string, m []string) { rewrite(m[3], gg.KeySplitCount, u16(5)) }, 1, "DIR/Tiny-BF16-00004-of-00004.gguf: split.count is 5, Tiny-BF16-00002-of-00004.gguf says 4"},
		{"twice", func(dir string, m []string) { os.Remove(m[2]); os.Symlink(m[1], m[2]) }, 0, "DIR/Tiny-BF16-00002-of-00004.gguf and DIR/Tiny-BF16-00003-of-00004.gguf are the same file"},
		{"split.tensors.count", func(dir string, m []string) { rewrite(m[2], gg.KeySplitTensorsCount, gg.I32(77)) }, 0, "DIR/Tiny-BF16-00003-of-00004.gguf: split.tensors.count is 77"},
		{"split.no", func(dir string, m []string) { rewrite(m[2], gg.KeySplitNo, u16(1)) }, 0, "DIR/Tiny-BF16-00003-of-00004.gguf: split.no is 1, but its name makes it file 3"},
		{"renamed", func(dir string, m []string) { os.Rename(m[0], filepath.Join(dir, "Tiny-BF16-1.gguf")) }, -1, "Tiny-BF16-1.gguf: split.no 0 of split.count 4, but the file is not named PREFIX-00001-of-00004.gguf"},
	} {
		members := set(c.edit)
		dir := filepath.Dir(members[0])
		given := filepath.Join(dir, "Tiny-BF16-1.gguf")
		if c.given >= 0 {
			given = members[c.given]
		}
		want := strings.ReplaceAll(c.want, "DIR", dir)
		for _, args := range [][]string{{"--src", src, "--graft", given}, {"--src", given}} {
			o := filepath.Join(t.TempDir(), "o")
			code, _, stderr := runCLI(t, append([]string{"export", "--target", "gguf", "--out", o}, args...)...)
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("%s %v: exit %d: %s\nwant %s", c.name, args[:2], code, stderr, want)
			}
			if _, err := os.Stat(o); err == nil {
				t.Errorf("%s %v: output written", c.name, args[:2])
			}
		}
		if c.given >= 0 {
			_, js, _ := runCLI(t, "inspect", "--json", given)
			var sum gg.Summary
			if err := json.Unmarshal([]byte(js), &sum); err != nil || !slices.ContainsFunc(sum.Problems, func(p string) bool { return strings.Contains(p, want) }) {
				t.Errorf("%s: inspect: %+v %v", c.name, sum, err)
			}
		}
	}
}

// A graft into a split set resumed after one trunk file's tensor data
// changed under an unchanged header writes that file again (the others
// proven and reused), and the set is the fresh graft of the trunk as it is.
func TestGraftSplitSetResume(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	members := splitGGUF(t, graftTrunk(t, src), filepath.Join(t.TempDir(), "Tiny-BF16"), 25)
	held := filepath.Base(members[1])
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"--src", src, "--target", "gguf", "--graft", members[0]}
	kill(startHeld(t, out, held, args...))
	f, _ := ggufTensors(t, members[1])
	raw, _ := os.ReadFile(members[1])
	raw[f.DataOffset+f.Tensors[len(f.Tensors)/2].Offset+3] ^= 0x40
	if err := os.WriteFile(members[1], raw, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, append([]string{"export", "--out", out, "--resume", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	var sum exportSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(sum.ReusedFiles, held) || !slices.ContainsFunc(sum.Notes, func(n string) bool { return strings.Contains(n, held+": not reused") }) {
		t.Errorf("%s reused after its trunk file changed: reused %v, notes %v", held, sum.ReusedFiles, sum.Notes)
	}
	want := filepath.Join(t.TempDir(), "want")
	if code, _, stderr := runCLI(t, append([]string{"export", "--out", want, "--quiet"}, args...)...); code != 0 {
		t.Fatalf("fresh graft: exit %d: %s", code, stderr)
	}
	for _, m := range members {
		a, _ := os.ReadFile(filepath.Join(out, filepath.Base(m)))
		b, _ := os.ReadFile(filepath.Join(want, filepath.Base(m)))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the resumed set differs from a fresh graft", filepath.Base(m))
		}
	}
}
