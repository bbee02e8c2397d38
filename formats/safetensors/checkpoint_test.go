package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeShard writes a safetensors file of U8 tensors, tensor i filled with byte i+1.
func writeShard(t *testing.T, path string, names ...string) {
	t.Helper()
	var entries []Entry
	for _, n := range names {
		entries = append(entries, Entry{n, U8, []int64{3}})
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		w.Write(bytes.Repeat([]byte{byte(i + 1)}, 3))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// folder opens the files of a test folder. (The real sources live in
// convert/source, which imports this package.)
type folder string

func (d folder) Name() string { return string(d) }

func (d folder) Open(name string) (File, error) {
	f, err := os.Open(filepath.Join(string(d), name))
	if err != nil {
		return nil, err
	}
	end, err := f.Seek(0, io.SeekEnd)
	return localTestFile{f, end}, err
}

type localTestFile struct {
	*os.File
	size int64
}

func (f localTestFile) Size() int64      { return f.size }
func (f localTestFile) OSFile() *os.File { return f.File }

func writeIndex(t *testing.T, dir string, m map[string]string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 9}, "weight_map": m})
	if err := os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenSharded(t *testing.T) {
	dir := t.TempDir()
	a := "model.safetensors-00001-of-00002.safetensors"
	b := "model.safetensors-00002-of-00002.safetensors"
	writeShard(t, filepath.Join(dir, a), "x", "y")
	writeShard(t, filepath.Join(dir, b), "mtp.z")
	writeIndex(t, dir, map[string]string{"x": a, "y": a, "mtp.z": b})
	ck, err := Open(folder(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if strings.Join(ck.Names, ",") != "mtp.z,x,y" || len(ck.Shards) != 2 || !ck.Sharded {
		t.Fatalf("inventory: %v, %d shards", ck.Names, len(ck.Shards))
	}
	y := ck.Tensors["y"]
	data, err := ck.ReadTensor(y, nil)
	if err != nil || !bytes.Equal(data, []byte{2, 2, 2}) {
		t.Fatalf("read y = %v, %v", data, err)
	}
	part, err := ck.ReadRange(y, 1, 2, make([]byte, 0, 1))
	if err != nil || len(part) != 2 {
		t.Fatalf("read range = %v, %v", part, err)
	}
	if _, err := ck.ReadRange(y, 2, 2, nil); err == nil {
		t.Fatal("range past the tensor accepted")
	}
}

func TestOpenSingle(t *testing.T) {
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, SingleFile), "a")
	ck, err := Open(folder(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Names) != 1 || ck.Sharded {
		t.Fatalf("names %v", ck.Names)
	}
}

func TestOpenHostile(t *testing.T) {
	const a, b = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"no files", func(t *testing.T, dir string) {}, "no model.safetensors.index.json and no model.safetensors"},
		{"index invalid json", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map": {`), 0o644)
		}, "model.safetensors.index.json is not valid JSON"},
		{"index without weight_map", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"metadata": {}}`), 0o644)
		}, "has no weight_map"},
		{"index duplicate tensor", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map": {"x": "`+a+`", "x": "`+b+`"}}`), 0o644)
		}, `key "x" appears twice`},
		{"missing shard", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, a), "x")
			writeIndex(t, dir, map[string]string{"x": a, "y": b})
		}, "names shard " + b + ", which is missing"},
		{"shard leaves folder", func(t *testing.T, dir string) {
			writeIndex(t, dir, map[string]string{"x": "../x.safetensors"})
		}, `tensor "x": file name "../x.safetensors" leaves the checkpoint folder`},
		{"absolute shard path", func(t *testing.T, dir string) {
			writeIndex(t, dir, map[string]string{"x": "/etc/passwd"})
		}, `file name "/etc/passwd" leaves the checkpoint folder`},
		{"same tensor in two shards", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, a), "x")
			writeShard(t, filepath.Join(dir, b), "x", "y")
			writeIndex(t, dir, map[string]string{"x": a, "y": b})
		}, `tensor "x" is in both ` + a + " and " + b},
		{"listed but absent", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, a), "x")
			writeIndex(t, dir, map[string]string{"x": a, "mtp.fc.weight": a})
		}, a + `: tensor "mtp.fc.weight" is listed in model.safetensors.index.json but absent from the shard`},
		{"in shard but unlisted", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, a), "x", "z")
			writeIndex(t, dir, map[string]string{"x": a})
		}, a + `: tensor "z" is not listed`},
		{"corrupt shard header", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, a), rawFile(`{"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,3]}}`, 3), 0o644)
			writeIndex(t, dir, map[string]string{"x": a})
		}, a + `: tensor "x": data_offsets [0, 3] hold 3 bytes`},
		{"total_size not a number", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"metadata": {"total_size": "big"}, "weight_map": {}}`), 0o644)
		}, "metadata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			ck, err := Open(folder(dir))
			if err == nil {
				ck.Close()
				t.Fatal("accepted hostile checkpoint")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want %q", err, c.want)
			}
		})
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":10},"weight_map":{"a":"model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../b"}}`))
	f.Add([]byte(`{"metadata":{"total_size":1e3},"weight_map":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		idx, err := ParseIndex(raw)
		if err != nil {
			return
		}
		for name, file := range idx.WeightMap {
			if CheckLocalName(file) != nil {
				t.Fatalf("accepted shard name %q for %q", file, name)
			}
		}
		if idx.TotalSize < 0 {
			t.Fatalf("negative total size")
		}
	})
}

// TestReadRegularFileBounded: a file over the limit is refused by its size,
// before anything is allocated for it (a 1 GiB config.json was read whole).
func TestReadRegularFileBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(`{"a": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegularFile(p, 8); err != nil || string(b) != `{"a": 1}` {
		t.Fatalf("%q %v", b, err)
	}
	os.Truncate(p, 1<<30) // sparse
	allocs := testing.AllocsPerRun(2, func() {
		if _, err := ReadRegularFile(p, 16<<20); err == nil || !strings.Contains(err.Error(), "config.json is 1073741824 bytes, over the 16777216-byte limit") {
			t.Fatalf("error %v", err)
		}
	})
	if allocs > 20 {
		t.Errorf("%.0f allocations", allocs)
	}
	if _, err := ReadRegularFile(filepath.Dir(p), 1<<20); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a folder: %v", err)
	}
}
