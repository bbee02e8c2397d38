package gguf

// Split sets: one model stored as PREFIX-0000N-of-0000M.gguf, as
// llama-gguf-split --split and gguf-py (convert_hf_to_gguf.py
// --split-max-tensors / --split-max-size) write it. The first file holds
// every metadata key; each file holds split.no (0-based, u16), split.count
// (u16) and split.tensors.count (i32, the whole set's). llama.cpp loads the
// set by its first file and finds the others by name (llama_split_path:
// "%s-%05d-of-%05d.gguf"), each tensor from the file that holds it.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// The split keys, as llama.cpp names them (LLM_KV_SPLIT_*).
const (
	KeySplitNo           = "split.no"
	KeySplitCount        = "split.count"
	KeySplitTensorsCount = "split.tensors.count"
)

// IsSplitKey reports a key only a split set's files carry.
func IsSplitKey(key string) bool {
	return key == KeySplitNo || key == KeySplitCount || key == KeySplitTensorsCount
}

var splitName = regexp.MustCompile(`^(.+)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// SplitName parses a member's file name: its prefix (the path without
// "-0000N-of-0000M.gguf"), its 0-based number and the set's count.
func SplitName(path string) (prefix string, no, count int, ok bool) {
	m := splitName.FindStringSubmatch(path)
	if m == nil {
		return "", 0, 0, false
	}
	n, _ := strconv.Atoi(m[2])
	c, _ := strconv.Atoi(m[3])
	if n < 1 || n > c {
		return "", 0, 0, false
	}
	return m[1], n - 1, c, true
}

// SplitPath is the path of member no (0-based) of a set of count files.
func SplitPath(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no+1, count)
}

// IsSplit reports a file that declares itself one of several.
func IsSplit(f *File) bool {
	n, _ := f.Uint(KeySplitCount)
	return n > 1
}

// Member is one file of a split set: its path, header, size and the sha256
// of its header bytes.
type Member struct {
	Path   string
	File   *File
	Size   int64
	SHA256 string
}

// Set is a whole split set, its members in order.
type Set struct {
	Prefix  string
	Members []Member
}

// Name is the set's name: the prefix's base name.
func (s *Set) Name() string { return filepath.Base(s.Prefix) }

// Size is the bytes of every file.
func (s *Set) Size() int64 {
	var n int64
	for _, m := range s.Members {
		n += m.Size
	}
	return n
}

// Merged is the set as one header, for what reads a model's description:
// the first file's metadata and every member's tensors in member order
// (their offsets are each member's own).
func (s *Set) Merged() *File {
	f := *s.Members[0].File
	f.Tensors = nil
	for _, m := range s.Members {
		f.Tensors = append(f.Tensors, m.File.Tensors...)
	}
	return &f
}

// OpenSet reads every member of the split set path belongs to (any member
// may be given) and checks that they make one set: each file is where its
// split.no says, every split.count and split.tensors.count agree, no file
// is there twice (a link), no tensor is in two members, and the members
// hold split.tensors.count tensors together. Errors name the file.
func OpenSet(path string) (*Set, error) {
	f, _, _, err := OpenFingerprint(path)
	if err != nil {
		return nil, err
	}
	no, okNo := f.Uint(KeySplitNo)
	count, okCount := f.Uint(KeySplitCount)
	if !okCount || count < 2 {
		return nil, fmt.Errorf("%s: %s is not above 1: not a member of a split set", path, KeySplitCount)
	}
	if !okNo || no < 0 || no >= count {
		return nil, fmt.Errorf("%s: %s is %d of %s %d", path, KeySplitNo, no, KeySplitCount, count)
	}
	prefix, nameNo, nameCount, ok := SplitName(path)
	if !ok || nameNo != int(no) || nameCount != int(count) {
		return nil, fmt.Errorf("%s: %s %d of %s %d, but the file is not named %s (llama.cpp finds a set's files by that name)",
			path, KeySplitNo, no, KeySplitCount, count, filepath.Base(SplitPath("PREFIX", int(no), int(count))))
	}
	s := &Set{Prefix: prefix}
	var stats []os.FileInfo
	var total int64
	for i := range int(count) {
		p := SplitPath(prefix, i, int(count))
		mf, size, sum, err := OpenFingerprint(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("split set %s: file %d of %d, %s, is missing", filepath.Base(path), i+1, count, p)
			}
			return nil, fmt.Errorf("split set %s: %w", filepath.Base(path), err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		for j, prev := range stats {
			if os.SameFile(prev, fi) {
				return nil, fmt.Errorf("split set %s: %s and %s are the same file", filepath.Base(path), s.Members[j].Path, p)
			}
		}
		stats = append(stats, fi)
		if n, ok := mf.Uint(KeySplitNo); !ok || n != int64(i) {
			return nil, fmt.Errorf("%s: %s is %d, but its name makes it file %d of the set (a file of another set?)", p, KeySplitNo, n, i+1)
		}
		if n, _ := mf.Uint(KeySplitCount); n != count {
			return nil, fmt.Errorf("%s: %s is %d, %s says %d (a file of another set?)", p, KeySplitCount, n, filepath.Base(path), count)
		}
		s.Members = append(s.Members, Member{Path: p, File: mf, Size: size, SHA256: sum})
		total += int64(len(mf.Tensors))
	}
	first := s.Members[0]
	want, ok := first.File.Uint(KeySplitTensorsCount)
	if !ok {
		return nil, fmt.Errorf("%s: %s is missing", first.Path, KeySplitTensorsCount)
	}
	seen := map[string]string{}
	for _, m := range s.Members {
		if n, ok := m.File.Uint(KeySplitTensorsCount); ok && n != want {
			return nil, fmt.Errorf("%s: %s is %d, %s says %d (a file of another set?)", m.Path, KeySplitTensorsCount, n, first.Path, want)
		}
		if a, b := m.File.String("general.architecture"), first.File.String("general.architecture"); a != "" && a != b {
			return nil, fmt.Errorf("%s: general.architecture is %q, %s says %q (a file of another set?)", m.Path, a, first.Path, b)
		}
		for _, t := range m.File.Tensors {
			if other, dup := seen[t.Name]; dup {
				return nil, fmt.Errorf("split set %s: tensor %s is in %s and in %s (a file of another set?)", filepath.Base(path), t.Name, other, m.Path)
			}
			seen[t.Name] = m.Path
		}
	}
	if total != want {
		return nil, fmt.Errorf("split set %s: its %d files hold %d tensors, %s says %d (a file of another set?)", filepath.Base(path), count, total, KeySplitTensorsCount, want)
	}
	return s, nil
}

// SplitKV is a member's metadata with split.tensors.count set to n, in its
// place and of its type.
func SplitKV(kvs []KV, n int64) ([]KV, error) {
	out := make([]KV, len(kvs))
	copy(out, kvs)
	for i, kv := range out {
		if kv.Key != KeySplitTensorsCount {
			continue
		}
		v, err := intOfType(kv.Value, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out[i].Value = v
	}
	return out, nil
}

// intOfType is n in the integer type of v.
func intOfType(v Value, n int64) (Value, error) {
	var x any
	switch v.V.(type) {
	case int32:
		x = int32(n)
	case uint32:
		x = uint32(n)
	case uint16:
		x = uint16(n)
	case int16:
		x = int16(n)
	case uint64:
		x = uint64(n)
	case int64:
		x = n
	default:
		return Value{}, fmt.Errorf("%v is not an integer", v.V)
	}
	out := Value{Type: v.Type, V: x}
	if back, _ := out.Int(); back != n {
		return Value{}, fmt.Errorf("%d does not fit a %s", n, v.Type)
	}
	return out, nil
}
