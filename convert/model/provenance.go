package model

import (
	"cmp"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// hubID is what the Hub accepts as a repo id: ORG/NAME.
var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// IsHubID reports whether s is a Hub repo id (ORG/NAME).
func IsHubID(s string) bool { return hubID.MatchString(s) && !strings.Contains(s, "..") }

// Origin is what the model files say the source model is: never a path,
// so that the same checkpoint gives the same bytes whether it is read from
// any folder, the Hugging Face cache or hf:// (the manifest keeps where it
// was read from).
type Origin struct {
	Repo     string // the Hub repo id ORG/NAME; "" when not known
	Revision string // the repo's commit, when the source knows it: the manifest and card record it, the model files do not
	Folder   string // the source folder's base name (a hf:// source: the repo's name)
}

// Name names the source model in model files: its repo id, else the
// folder's base name.
func (o Origin) Name() string {
	if o.Repo != "" {
		return o.Repo
	}
	return o.Folder
}

// ShortName is Name without the organisation, for file names.
func (o Origin) ShortName() string {
	if _, name, ok := strings.Cut(o.Repo, "/"); ok {
		return name
	}
	return o.Folder
}

// Origin is what the source model is. Its repo id is, in this order: the one
// the user named (BaseModel, --base-model), the one the source says (hf://,
// a Hugging Face cache snapshot), or one the folder's own README.md front
// matter names whose NAME is the folder's name (a `base_model` entry or a
// `license_link` into the Hub: Qwen's READMEs link their own repo's
// LICENSE). A README's base_model alone does not identify the folder: it
// names the model the folder's was made from (Qwen's FP8 releases name the
// bf16 one).
func (m *Model) Origin() Origin {
	return m.origin(func() []byte { card, _ := ReadCard(m.Checkpoint.Source); return card })
}

// origin is Origin with the source's model card given (read only for a
// folder, which names no repo itself).
func (m *Model) origin(card func() []byte) Origin {
	src := m.Checkpoint.Source
	var o Origin
	if r, ok := source.RepoOf(src); ok {
		o = Origin{Repo: r.ID, Revision: r.Revision, Folder: path.Base(r.ID)}
	} else {
		o.Folder = folderName(src.Name())
		o.Repo = readmeRepo(card(), o.Folder)
	}
	if IsHubID(m.BaseModel) && m.BaseModel != o.Repo {
		o.Repo, o.Revision = m.BaseModel, ""
	}
	return o
}

// folderName is the base name of a folder given in any form (".", "a/b/");
// "model" when it has none (the root).
func folderName(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	switch name := filepath.Base(dir); name {
	case ".", "..", string(filepath.Separator), "":
		return "model"
	default:
		return name
	}
}

// readmeRepo is a Hub id the source's model card's front matter names
// whose NAME is the folder's name, or "".
func readmeRepo(card []byte, folder string) string {
	ids := []string{FrontMatter(card, "base_model")}
	if rest, ok := strings.CutPrefix(FrontMatter(card, "license_link"), "https://huggingface.co/"); ok {
		if parts := strings.SplitN(rest, "/", 3); len(parts) >= 2 {
			ids = append(ids, parts[0]+"/"+parts[1])
		}
	}
	for _, id := range ids {
		if IsHubID(id) && strings.EqualFold(path.Base(id), folder) {
			return id
		}
	}
	return ""
}

// Provenance is what the source says it is, its model card read once: the
// origin, and the license an output carries.
type Provenance struct {
	Origin Origin
	// License is the license the user gave, else the card's ("other" when it
	// names none). LicenseName and LicenseLink are the card's license_name
	// and license_link (the Hub's keys for a license "other" and its text),
	// given only when License is the card's; "" each when absent.
	License, LicenseName, LicenseLink string
}

// Provenance describes the source's origin and license, reading its model
// card (README.md) once. license is the user's (--license), "" for the
// card's. A link the card gives relative to its repo (license_link:
// LICENSE) names a file our output does not hold: it becomes the source
// repo's URL of that file, when the repo is known, or is dropped. A license
// "other" without a link, whose source holds a LICENSE file, links that
// file in the source repo.
func (m *Model) Provenance(license string) Provenance {
	card, _ := ReadCard(m.Checkpoint.Source) // none, or unreadable: no front matter
	p := Provenance{Origin: m.origin(func() []byte { return card })}
	own := cmp.Or(FrontMatter(card, "license"), "other")
	p.License = cmp.Or(license, own)
	if p.License != own {
		return p
	}
	name, link := FrontMatter(card, "license_name"), FrontMatter(card, "license_link")
	if link == "" && own == "other" {
		for _, f := range []string{"LICENSE", "LICENSE.md", "LICENSE.txt"} {
			if r, err := m.Checkpoint.Source.Open(f); err == nil {
				r.Close()
				link = f
				break
			}
		}
	}
	switch o := p.Origin; {
	case link == "" || strings.HasPrefix(link, "https://") || strings.HasPrefix(link, "http://"):
	case o.Repo == "":
		link = ""
	default:
		link = "https://huggingface.co/" + o.Repo + "/blob/" + cmp.Or(o.Revision, "main") + "/" + strings.TrimPrefix(link, "./")
	}
	p.LicenseName, p.LicenseLink = name, link
	return p
}

// ReadCard reads a folder's model card (README.md, at most 4 MiB), for
// FrontMatter.
func ReadCard(src st.Opener) ([]byte, error) { return st.ReadSmallFile(src, "README.md", 4<<20) }

// FrontMatter is the value of key in a model card's YAML front matter, as
// the Hub writes it ("key: value", or "key:" then a list whose first item
// is taken); "" when absent.
func FrontMatter(card []byte, key string) string {
	lines := strings.Split(string(card), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return ""
	}
	for i, l := range lines[1:] {
		if strings.TrimSpace(l) == "---" {
			break
		}
		v, ok := strings.CutPrefix(l, key+":")
		if !ok {
			continue
		}
		if v = strings.TrimSpace(v); v == "" && i+2 < len(lines) {
			v, _ = strings.CutPrefix(strings.TrimSpace(lines[i+2]), "- ")
		}
		return strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return ""
}
