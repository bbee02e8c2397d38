package manifests

// What the manifest of a folder says about whose files are whose, read by
// the export that adds into a folder (convert/export) and by the targets
// whose output there depends on the folder's files (their PlanInto): the
// owner of a folder, the originals kept of the files mtpconv replaced, and
// the bytes an update starts from.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// IntoOriginals is the folder, inside an --into folder, that keeps the prior
// bytes of the folder's own files mtpconv replaced (move them back, and
// remove the files mtpconv owns, to undo).
const IntoOriginals = "mtpconv-original"

// Owner is whose a folder is, as its manifest says.
type Owner int

const (
	OwnerNone    Owner = iota // no manifest
	OwnerForeign              // a manifest mtpconv did not write (or cannot read)
	OwnerExport               // an mtpconv output: every file of it is ours
	OwnerInto                 // a folder mtpconv added into: only the recorded files are ours
)

// FolderOwner reads dir's manifest, leniently (any schema version), and
// returns, for a folder added into, what it records.
func FolderOwner(dir string) (Owner, *Into) {
	b, err := ReadRegularFile(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(filepath.Join(dir, FileName)); errors.Is(lerr, fs.ErrNotExist) {
			return OwnerNone, nil
		}
	}
	if err != nil {
		return OwnerForeign, nil
	}
	var m struct {
		Tool struct {
			Name string `json:"name"`
		} `json:"tool"`
		Into *Into `json:"into"`
	}
	switch {
	case json.Unmarshal(b, &m) != nil || m.Tool.Name != "mtpconv":
		return OwnerForeign, nil
	case m.Into != nil:
		return OwnerInto, m.Into
	}
	return OwnerExport, nil
}

// LoadInto is the manifest of an earlier export into dir, nil when there
// is none (or it is not mtpconv's, which the addition refuses).
func LoadInto(dir string) (*Manifest, error) {
	if kind, _ := FolderOwner(dir); kind != OwnerInto {
		return nil, nil
	}
	m, err := Load(dir)
	if err != nil {
		return nil, fmt.Errorf("--into %s: %w", dir, err)
	}
	return m, nil
}

// IntoRecord is the Into record of a manifest, nil for none (or no manifest).
func (m *Manifest) IntoRecord() *Into {
	if m == nil {
		return nil
	}
	return m.Into
}

// IntoBase reads what an update of the folder's file name starts from: the
// bytes the folder had before mtpconv first replaced that file, that is the
// copy an earlier --into kept (the file must then still be as mtpconv wrote
// it: an edit made since is not silently dropped), or else the file itself.
// Files are read only when regular and at most limit bytes. sum is the
// sha256 of the file as it is now.
func IntoBase(dir, name string, limit int64) (base []byte, sum string, err error) {
	cur, err := st.ReadSmallFile(source.Dir(dir), name, limit)
	if err != nil {
		return nil, "", fmt.Errorf("--into %s: %w", dir, err)
	}
	sum = SHA256(cur)
	prior, err := LoadInto(dir)
	if err != nil {
		return nil, "", err
	}
	u, ours, err := replacedByUs(dir, prior, name, sum)
	if err != nil || !ours {
		return cur, sum, err
	}
	orig, err := st.ReadSmallFile(source.Dir(dir), u.Original.Name, limit)
	if err != nil {
		return nil, "", fmt.Errorf("--into %s: the copy of the original %s: %w", dir, name, err)
	}
	if SHA256(orig) != u.Original.SHA256 {
		return nil, "", fmt.Errorf("--into %s: %s is not the original %s mtpconv kept (its sha256 differs from the record)", dir, u.Original.Name, name)
	}
	return orig, sum, nil
}

// replacedByUs tells whether the folder's file name, whose sha256 is now
// sum, was replaced by an earlier --into and still holds what mtpconv wrote
// there (its original is then u.Original). A file never replaced, or that
// holds its original bytes again (a run stopped before replacing it, or the
// original put back), is the folder's own. Any other bytes are an edit
// made since, refused rather than dropped: there is one original to keep.
func replacedByUs(dir string, prior *Manifest, name, sum string) (u Updated, ours bool, err error) {
	u, ok := prior.IntoRecord().UpdatedFile(name)
	if !ok || sum == u.Original.SHA256 {
		return u, false, nil
	}
	if u.Interim != "" && sum == u.Interim {
		return u, true, nil // a run stopped between its first and last step
	}
	if wrote, _ := FindFile(prior.Files, name); wrote.SHA256 != sum {
		return u, false, fmt.Errorf("--into %s: %s changed since mtpconv updated it (sha256 %s, recorded %s); put back the version mtpconv wrote or the original in %s/ first", dir, name, sum, wrote.SHA256, IntoOriginals)
	}
	return u, true, nil
}

// IntoOwned reports whether an earlier --into recorded file name of dir as
// written by mtpconv.
func IntoOwned(dir, name string) (bool, error) {
	prior, err := LoadInto(dir)
	if err != nil || prior.IntoRecord() == nil {
		return false, err
	}
	return slices.Contains(prior.Into.OwnedFiles, name), nil
}

// FindFile is the record of file name among files.
func FindFile(files []File, name string) (File, bool) {
	for _, f := range files {
		if f.Name == name {
			return f, true
		}
	}
	return File{}, false
}
