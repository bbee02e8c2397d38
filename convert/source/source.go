// Package source is where a checkpoint lives: a local folder (Dir), a
// Hugging Face cache entry (ORG/NAME[@rev], found with no network), or a Hub
// repo read over HTTPS by byte range (hf://ORG/NAME[@rev], Remote). Resolve
// turns a --src value into one of them. Every source gives the checkpoint's
// files by name; formats/safetensors reads the format from them.
package source

import st "github.com/mtpconv/mtpconv/formats/safetensors"

// File is an open file of a source: random access plus its size (the file
// abstraction the safetensors reader needs).
type File = st.File

// Source gives access to the files of a checkpoint by name, whether they
// sit in a local folder or behind a remote byte-range reader. Every Source
// is an st.Opener, so safetensors.Open reads a checkpoint from it.
type Source interface {
	// Name describes the source in messages.
	Name() string
	// Open opens a file of the checkpoint; a missing file gives an error
	// satisfying errors.Is(err, fs.ErrNotExist). Names that leave the
	// checkpoint folder are refused (st.CheckLocalName).
	Open(name string) (File, error)
}

var (
	_ Source    = Dir("")
	_ Source    = (*Remote)(nil)
	_ st.Opener = Source(nil)
)

// HubRepo is the Hub repo a source holds: its id ORG/NAME and the commit.
type HubRepo struct {
	ID       string
	Revision string // the commit; "" when not known
}

// RepoOf tells which Hub repo a source holds, when the source itself says:
// a hf:// source, or a Hugging Face cache snapshot folder
// (models--ORG--NAME/snapshots/COMMIT). Any other folder says nothing.
func RepoOf(src Source) (HubRepo, bool) {
	switch s := src.(type) {
	case *Remote:
		return HubRepo{ID: s.repo, Revision: s.commit}, true
	case Dir:
		return cacheRepo(string(s))
	}
	return HubRepo{}, false
}
