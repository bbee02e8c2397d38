package source

import (
	"os"
	"path/filepath"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Dir is a checkpoint in a local folder.
type Dir string

// Name is the folder path.
func (d Dir) Name() string { return string(d) }

// Open opens a file of the folder; names that leave the folder are refused,
// and so is anything but a regular file (a FIFO or device would block or
// never end; see st.OpenRegular).
func (d Dir) Open(name string) (File, error) {
	if err := st.CheckLocalName(name); err != nil {
		return nil, err
	}
	f, fi, err := st.OpenRegular(filepath.Join(string(d), filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	return osFile{f, fi.Size()}, nil
}

// osFile is a local file; OSFile lets the safetensors reader manage its page
// cache (st.Checkpoint.StreamUncached).
type osFile struct {
	*os.File
	size int64
}

func (f osFile) Size() int64      { return f.size }
func (f osFile) OSFile() *os.File { return f.File }
