package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

var repoID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Resolve turns a --src value into a source: an existing folder, hf://ORG/NAME[@rev]
// (remote), or ORG/NAME[@rev] found in the local Hugging Face cache. Its
// errors start with src, not with a flag: the caller names the flag (or the
// argument) src came from.
func Resolve(src string, remote RemoteOptions) (Source, error) {
	if rest, ok := strings.CutPrefix(src, "hf://"); ok {
		repo, rev := splitRev(rest)
		if !repoID.MatchString(repo) {
			return nil, fmt.Errorf("%s: %q is not a Hub repo id ORG/NAME", src, repo)
		}
		return OpenRemote(repo, rev, remote)
	}
	if fi, err := os.Stat(src); err == nil {
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s is a file, not a checkpoint folder", src)
		}
		return Dir(src), nil
	}
	repo, rev := splitRev(src)
	if !repoID.MatchString(repo) || looksLikeFile(src) {
		return nil, fmt.Errorf("%s: no such file or folder", src)
	}
	dir, err := CacheSnapshot(repo, rev)
	if err != nil {
		if Offline() {
			return nil, fmt.Errorf("%s: no such file or folder, and not in the Hugging Face cache (%v); HF_HUB_OFFLINE is set, so the Hub is not asked", src, err)
		}
		return nil, fmt.Errorf("%s: no such file or folder, and not in the Hugging Face cache (%v); use hf://%s to read it from the Hub", src, err, src)
	}
	return Dir(dir), nil
}

// looksLikeFile is a missing path named as a file (x.gguf, x.safetensors),
// which no one means as a Hub repo id.
func looksLikeFile(src string) bool {
	ext := strings.ToLower(filepath.Ext(src))
	return ext == ".gguf" || ext == ".safetensors" || ext == ".json"
}

func splitRev(s string) (repo, rev string) {
	repo, rev, _ = strings.Cut(s, "@")
	if rev == "" {
		rev = "main"
	}
	return repo, rev
}

// CacheDir is the Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub,
// else ~/.cache/huggingface/hub.
func CacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// maxRefSize bounds a refs file of the cache (a commit hash and a newline).
const maxRefSize = 4 << 10

// CacheSnapshot finds models--ORG--NAME/snapshots/COMMIT for a revision: a
// commit hash as is, or a branch or tag through refs/REV.
func CacheSnapshot(repo, rev string) (string, error) {
	base := filepath.Join(CacheDir(), "models--"+strings.ReplaceAll(repo, "/", "--"))
	commit := rev
	if !commitHash.MatchString(rev) {
		if strings.Contains(rev, "..") {
			return "", fmt.Errorf("revision %q is not a branch, tag or commit", rev)
		}
		b, err := st.ReadRegularFile(filepath.Join(base, "refs", rev), maxRefSize)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s has no refs/%s", base, rev)
		}
		if err != nil {
			return "", err
		}
		commit = strings.TrimSpace(string(b))
		if !commitHash.MatchString(commit) {
			return "", fmt.Errorf("%s/refs/%s does not hold a commit hash", base, rev)
		}
	}
	dir := filepath.Join(base, "snapshots", commit)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", errors.New(dir + " is missing")
	}
	return dir, nil
}

// cacheRepo reads the repo id and commit from the path of a Hugging Face
// cache snapshot folder, wherever the cache lives.
func cacheRepo(dir string) (HubRepo, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return HubRepo{}, false
	}
	commit := filepath.Base(abs)
	snapshots := filepath.Dir(abs)
	name, ok := strings.CutPrefix(filepath.Base(filepath.Dir(snapshots)), "models--")
	if !ok || filepath.Base(snapshots) != "snapshots" || !commitHash.MatchString(commit) {
		return HubRepo{}, false
	}
	id := strings.Replace(name, "--", "/", 1)
	if !repoID.MatchString(id) || strings.Contains(id, "..") {
		return HubRepo{}, false
	}
	return HubRepo{ID: id, Revision: commit}, true
}
