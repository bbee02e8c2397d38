package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// IndexFile is the name of a sharded checkpoint's index.
const IndexFile = "model.safetensors.index.json"

// SingleFile is the name of an unsharded checkpoint's only file.
const SingleFile = "model.safetensors"

// File is what the reader needs of a checkpoint file: random access plus
// its size. A File that also has a method OSFile() *os.File is a local file,
// whose page cache the reader manages (see StreamUncached).
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// Opener gives the files of a checkpoint by name; package convert/source
// holds the implementations (a local folder, the Hub by range).
type Opener interface {
	// Name describes the checkpoint in messages.
	Name() string
	// Open opens a file of the checkpoint; a missing file gives an error
	// satisfying errors.Is(err, fs.ErrNotExist).
	Open(name string) (File, error)
}

// ErrNotRegular is what OpenRegular refuses: a FIFO, device, socket or folder.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError is OpenRegular's refusal of a path; it satisfies
// errors.Is(err, ErrNotRegular).
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file: it is %s", e.Path, e.What())
}

// What names the kind of file, such as "a named pipe (FIFO)".
func (e *NotRegularError) What() string {
	m := e.Mode
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	}
	return "a " + m.Type().String()
}

// Is makes errors.Is(err, ErrNotRegular) hold.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// OpenRegular opens a local file for reading if it is a regular file. A
// FIFO or a device would block the open or the reads forever (or never
// end), so the path is checked before it is opened, it is opened
// non-blocking (a FIFO swapped in after the check cannot block the open
// either), and the open file is checked again. Symbolic links are followed.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &NotRegularError{path, fi.Mode()}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &NotRegularError{path, fi.Mode()}
		}
		return nil, nil, err
	}
	return f, fi, nil
}

// CheckLocalName refuses a file name that is empty, absolute, holds a
// backslash or a ".." component, or otherwise leaves the checkpoint folder.
// (A ".." after a symlinked folder would leave it even when the name looks
// local once cleaned.)
// CheckLocalName refuses a file name that is absolute or leaves the checkpoint folder.
func CheckLocalName(name string) error {
	if name == "" || strings.Contains(name, `\`) || strings.HasPrefix(name, "/") || !filepath.IsLocal(filepath.FromSlash(name)) ||
		slices.Contains(strings.Split(name, "/"), "..") {
		return fmt.Errorf("file name %q leaves the checkpoint folder", name)
	}
	return nil
}

// ReadSmallFile reads a whole (small) file of a checkpoint, such as
// config.json, refusing it when it is over limit bytes.
func ReadSmallFile(src Opener, name string, limit int64) ([]byte, error) {
	f, err := src.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readWhole(f, f.Size(), limit, name)
}

// ReadRegularFile reads a whole small local file (a config.json, a
// manifest, a record) from a folder the user gave: anything but a regular
// file is refused before it is opened (see OpenRegular), and so is a file
// over limit bytes, before anything is allocated for it.
func ReadRegularFile(path string, limit int64) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readWhole(f, fi.Size(), limit, path)
}

// readWhole reads the size bytes of a file named name, at most limit.
func readWhole(f io.ReaderAt, size, limit int64, name string) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit", name, size, limit)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && len(buf) == 0) {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return buf, nil
}

// Tensor is a tensor of a checkpoint and the shard that holds it.
type Tensor struct {
	TensorInfo
	Shard *Shard
	// dropAfterRead: the bytes were not in the page cache; reading them
	// gives their pages back (see StreamUncached).
	dropAfterRead bool
}

// Shard is one safetensors file of a checkpoint.
type Shard struct {
	Name   string
	Header *Header
	file   File
}

// Checkpoint is the inventory of a (possibly sharded) safetensors checkpoint:
// every tensor's name, dtype, shape and byte range, and no tensor data.
type Checkpoint struct {
	Source  Opener
	Sharded bool
	Shards  []*Shard // sorted by name
	Tensors map[string]*Tensor
	Names   []string // sorted
}

// Open reads the index (if any) and every shard header of the checkpoint in src.
func Open(src Opener) (*Checkpoint, error) {
	ck := &Checkpoint{Source: src, Tensors: map[string]*Tensor{}}
	ok := false
	defer func() {
		if !ok {
			ck.Close()
		}
	}()
	raw, err := ReadSmallFile(src, IndexFile, MaxHeaderSize)
	switch {
	case err == nil:
		ck.Sharded = true
		if err := ck.openSharded(raw); err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := ck.openShard(SingleFile); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s: no %s and no %s", src.Name(), IndexFile, SingleFile)
			}
			return nil, err
		}
		for _, t := range ck.Shards[0].Header.Tensors {
			ck.Tensors[t.Name] = &Tensor{TensorInfo: t, Shard: ck.Shards[0]}
		}
	default:
		return nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	for name := range ck.Tensors {
		ck.Names = append(ck.Names, name)
	}
	sort.Strings(ck.Names)
	ok = true
	return ck, nil
}

// Index is the parsed model.safetensors.index.json.
type Index struct {
	WeightMap map[string]string
	TotalSize int64 // 0 when absent
}

// ParseIndex validates an index: a weight_map from tensor names to shard
// file names that stay inside the checkpoint folder, with no duplicate names.
func ParseIndex(raw []byte) (*Index, error) {
	members, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", IndexFile, err)
	}
	idx := &Index{}
	var haveMap bool
	for _, m := range members {
		switch m.key {
		case "weight_map":
			entries, err := decodeObject(m.value)
			if err != nil {
				return nil, fmt.Errorf("%s: weight_map: %w", IndexFile, err)
			}
			idx.WeightMap = make(map[string]string, len(entries))
			for _, e := range entries {
				var file string
				if err := json.Unmarshal(e.value, &file); err != nil {
					return nil, fmt.Errorf("%s: tensor %q: shard name is not a string", IndexFile, e.key)
				}
				if err := CheckLocalName(file); err != nil {
					return nil, fmt.Errorf("%s: tensor %q: %w", IndexFile, e.key, err)
				}
				idx.WeightMap[e.key] = file
			}
			haveMap = true
		case "metadata":
			var md struct {
				TotalSize json.Number `json:"total_size"`
			}
			dec := json.NewDecoder(bytes.NewReader(m.value))
			dec.UseNumber()
			if err := dec.Decode(&md); err != nil {
				return nil, fmt.Errorf("%s: metadata: %w", IndexFile, err)
			}
			if md.TotalSize != "" {
				n, err := md.TotalSize.Int64()
				if err != nil || n < 0 {
					if f, ferr := md.TotalSize.Float64(); ferr == nil && f >= 0 && f < 1<<62 && f == float64(int64(f)) {
						n, err = int64(f), nil
					} else {
						return nil, fmt.Errorf("%s: metadata.total_size %s is not a byte count", IndexFile, md.TotalSize)
					}
				}
				idx.TotalSize = n
			}
		}
	}
	if !haveMap {
		return nil, fmt.Errorf("%s has no weight_map", IndexFile)
	}
	return idx, nil
}

func (ck *Checkpoint) openSharded(raw []byte) error {
	idx, err := ParseIndex(raw)
	if err != nil {
		return err
	}
	files := map[string]bool{}
	for _, f := range idx.WeightMap {
		files[f] = true
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		if err := ck.openShard(f); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s names shard %s, which is missing", IndexFile, f)
			}
			return err
		}
	}
	// Every tensor of every shard must be listed, once, under its own shard.
	for _, sh := range ck.Shards {
		for _, t := range sh.Header.Tensors {
			if prev, dup := ck.Tensors[t.Name]; dup {
				return fmt.Errorf("tensor %q is in both %s and %s", t.Name, prev.Shard.Name, sh.Name)
			}
			want, listed := idx.WeightMap[t.Name]
			if !listed {
				return fmt.Errorf("%s: tensor %q is not listed in %s", sh.Name, t.Name, IndexFile)
			}
			if want != sh.Name {
				return fmt.Errorf("%s: tensor %q is listed in %s under %s", sh.Name, t.Name, IndexFile, want)
			}
			ck.Tensors[t.Name] = &Tensor{TensorInfo: t, Shard: sh}
		}
	}
	for name, file := range idx.WeightMap {
		if _, ok := ck.Tensors[name]; !ok {
			return fmt.Errorf("%s: tensor %q is listed in %s but absent from the shard", file, name, IndexFile)
		}
	}
	return nil
}

func (ck *Checkpoint) openShard(name string) error {
	f, err := ck.Source.Open(name)
	if err != nil {
		return err
	}
	h, err := ReadHeader(f, f.Size(), name)
	if err != nil {
		f.Close()
		return err
	}
	ck.Shards = append(ck.Shards, &Shard{Name: name, Header: h, file: f})
	return nil
}

// ReadTensor reads a tensor's bytes into buf (grown as needed) and returns them.
func (ck *Checkpoint) ReadTensor(t *Tensor, buf []byte) ([]byte, error) {
	return ck.ReadRange(t, 0, t.Bytes(), buf)
}

// ReadRange reads n bytes of a tensor's data starting at byte off of that
// tensor, so large tensors can be streamed in chunks.
func (ck *Checkpoint) ReadRange(t *Tensor, off, n int64, buf []byte) ([]byte, error) {
	if off < 0 || n < 0 || off > t.Bytes() || n > t.Bytes()-off {
		return nil, fmt.Errorf("%s: tensor %q: range [%d, %d) outside its %d bytes", t.Shard.Name, t.Name, off, off+n, t.Bytes())
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := t.Shard.file.ReadAt(buf, t.Begin+off); err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %w", t.Shard.Name, t.Name, err)
	}
	if t.dropAfterRead {
		if f, ok := localFile(t.Shard.file); ok {
			// Large folios that straddle the previous read's end are only
			// dropped by a range that holds them whole: reach back a little.
			back := min(off, dropLag)
			dropCached(f, t.Begin+off-back, n+back)
		}
	}
	return buf, nil
}

// StreamUncached marks the named tensors whose bytes are mostly not in the
// page cache, so that reading them gives their pages back: a conversion
// reads each byte once, and leaves the cache as it found it instead of
// filling it with gigabytes (which on the machine we measure on also made
// every later page allocation, the output's included, far more expensive).
// Tensors already cached stay cached for the next run. Only local files
// take part; it returns how many tensors were marked.
func (ck *Checkpoint) StreamUncached(names []string) int {
	marked := 0
	for _, name := range names {
		t, ok := ck.Tensors[name]
		if !ok || t.Bytes() == 0 {
			continue
		}
		f, ok := localFile(t.Shard.file)
		if !ok {
			continue
		}
		if frac, ok := cachedFraction(f, t.Begin, t.Bytes()); ok && frac < 0.5 {
			t.dropAfterRead = true
			marked++
		}
	}
	return marked
}

// dropLag is how far behind a read its pages are dropped from (at least a large folio).
const dropLag = 16 << 20

// localFile is the operating-system file behind f, if it is a local one.
func localFile(f File) (*os.File, bool) {
	if of, ok := f.(interface{ OSFile() *os.File }); ok {
		return of.OSFile(), true
	}
	return nil, false
}

// Close closes every shard.
func (ck *Checkpoint) Close() error {
	var first error
	for _, s := range ck.Shards {
		if s.file != nil {
			if err := s.file.Close(); err != nil && first == nil {
				first = err
			}
			s.file = nil
		}
	}
	return first
}

// HeaderBytes returns the shard's 8-byte length prefix and JSON header, as stored.
func (s *Shard) HeaderBytes() ([]byte, error) {
	if s.file == nil {
		return nil, fmt.Errorf("%s: shard is closed", s.Name)
	}
	b := make([]byte, s.Header.DataStart)
	if _, err := s.file.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return b, nil
}

// AddMemoryTensor adds a tensor held in memory, not in any shard of the
// checkpoint (a tensor derived from the config, see package
// convert/computed), so that every reader of source tensors reads it as it
// reads the stored ones. Its shard is named shard in messages. A name the
// checkpoint already has is refused.
func (ck *Checkpoint) AddMemoryTensor(name, shard string, dtype DType, shape []int64, data []byte) error {
	if _, ok := ck.Tensors[name]; ok {
		return fmt.Errorf("tensor %s is already in the checkpoint", name)
	}
	info := TensorInfo{Name: name, DType: dtype, Shape: slices.Clone(shape), End: int64(len(data))}
	if size, err := dtype.Size(); err != nil || info.Elements()*size != int64(len(data)) {
		return fmt.Errorf("tensor %s: %d bytes are not %s %v", name, len(data), dtype, shape)
	}
	h := &Header{File: shard, FileSize: int64(len(data)), Tensors: []TensorInfo{info}}
	ck.Tensors[name] = &Tensor{TensorInfo: info, Shard: &Shard{Name: shard, Header: h, file: memFile{bytes.NewReader(data)}}}
	return nil
}

// memFile is a tensor's bytes in memory as a File.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }
