package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/mtpconv/mtpconv/bench/report"
	"github.com/mtpconv/mtpconv/manifests"
)

// ReportFile is the bench report --card writes into an mtpconv output folder.
const ReportFile = "mtpconv-bench.json"

// cardBefore is the card heading the MTP performance section goes before, when the card has none yet.
const cardBefore = "## Verification"

// WriteCard records a bench report in an mtpconv output folder: ReportFile
// (its size and sha256 in the manifest's files, so `verify` re-hashes it; in a
// folder the head was added into, also among the files mtpconv owns) and, in
// an export's own folder, the card's "MTP performance" section, written or
// replaced in place. A folder the head was added into (--into) keeps its
// README.md: that card is the export mtpconv added to. It returns the files it wrote.
func WriteCard(dir string, reportJSON []byte, r *report.Report) ([]string, error) {
	m, recorded, err := cardFolder(dir)
	if err != nil {
		return nil, err
	}
	var card []byte
	if m.Into == nil {
		card, err = manifests.ReadRegularFile(filepath.Join(dir, manifests.CardFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	sum := manifests.SHA256(reportJSON)
	if err := manifests.WriteReplacing(filepath.Join(dir, ReportFile), reportJSON); err != nil {
		return nil, err
	}
	wrote := []string{ReportFile}
	f := manifests.File{Name: ReportFile, Size: int64(len(reportJSON)), SHA256: sum}
	if recorded >= 0 {
		m.Files[recorded] = f
	} else {
		m.Files = append(m.Files, f)
	}
	if m.Into != nil && !slices.Contains(m.Into.OwnedFiles, ReportFile) {
		m.Into.OwnedFiles = append(m.Into.OwnedFiles, ReportFile)
	}
	mb, err := m.Encode()
	if err != nil {
		return wrote, err
	}
	if err := manifests.WriteReplacing(filepath.Join(dir, manifests.FileName), mb); err != nil {
		return wrote, err
	}
	wrote = append(wrote, manifests.FileName)
	if card != nil {
		out := report.ReplaceSection(card, r.CardSection(ReportFile, sum), cardBefore)
		if !bytes.Equal(out, card) {
			if err := manifests.WriteReplacing(filepath.Join(dir, manifests.CardFile), out); err != nil {
				return wrote, err
			}
		}
		wrote = append(wrote, manifests.CardFile)
	}
	return wrote, nil
}

// CarryCardSection keeps the MTP performance section of an old card in the
// card rendered anew from the manifest (`mtpconv card`): the measurement is
// not the manifest's to know. Only while m still records the report the
// section names: a section whose report is gone is dropped.
func CarryCardSection(m *manifests.Manifest, old, fresh []byte) []byte {
	sec := report.Section(old, report.CardHeading)
	if sec == "" || !slices.ContainsFunc(m.Files, func(f manifests.File) bool { return f.Name == ReportFile }) {
		return fresh
	}
	return report.ReplaceSection(fresh, sec, cardBefore)
}

// CheckCard refuses, before anything is measured, a --card folder WriteCard would refuse.
func CheckCard(dir string) error {
	_, _, err := cardFolder(dir)
	return err
}

// cardFolder loads the folder's manifest and finds ReportFile among its files (-1: not recorded),
// refusing a folder mtpconv did not write and a ReportFile it did not write.
func cardFolder(dir string) (*manifests.Manifest, int, error) {
	m, err := manifests.Load(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("--card %s: not an mtpconv output folder: %w", dir, err)
	}
	recorded := slices.IndexFunc(m.Files, func(f manifests.File) bool { return f.Name == ReportFile })
	if _, err := os.Lstat(filepath.Join(dir, ReportFile)); err == nil && recorded < 0 {
		return nil, 0, fmt.Errorf("--card %s: %s is there and mtpconv's manifest does not record it: a file mtpconv did not write is never replaced", dir, ReportFile)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, 0, err
	}
	return m, recorded, nil
}
