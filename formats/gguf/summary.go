package gguf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Summary is what `mtpconv inspect` says about a GGUF file, ours or
// anyone's: the architecture and its block count, the MTP (nextn) layers
// declared and found, the tensor types, whether the file is an MTP-only
// sidecar (no trunk blocks).
type Summary struct {
	File           string         `json:"file"`
	Bytes          int64          `json:"bytes"`
	Version        uint32         `json:"gguf_version"`
	Architecture   string         `json:"architecture"`
	Name           string         `json:"name,omitempty"`
	FileType       string         `json:"file_type,omitempty"`
	BlockCount     int64          `json:"block_count"`
	NextnLayers    int64          `json:"nextn_predict_layers"`
	MTPBlocks      []int64        `json:"mtp_blocks"`            // blocks holding nextn.* tensors
	MTPHead        bool           `json:"mtp_head"`              // an MTP head is present (nextn layers declared and their tensors found)
	MTPOnly        bool           `json:"mtp_only"`              // no trunk block: an MTP sidecar, loaded with -md next to a trunk
	BlockDraft     bool           `json:"block_draft,omitempty"` // llama.cpp's dflash architecture: a block drafter (DFlash, DSpark), every block the draft's
	SplitFiles     int            `json:"split_files,omitempty"` // a split set (File its first file): every file's tensors and bytes counted
	Tensors        int            `json:"tensors"`
	TensorTypes    map[string]int `json:"tensor_types"`
	Keys           int            `json:"metadata_keys"`
	TokenizerModel string         `json:"tokenizer_model,omitempty"`
	Tokens         int            `json:"tokens"`
	Problems       []string       `json:"problems"`
	// AddHead is the command that adds an MTP head to a file without one
	// (set by the caller that knows which architectures can have one).
	AddHead string `json:"add_head_command,omitempty"`
}

// Open reads the header of a GGUF file; see OpenContext.
func Open(path string) (*File, int64, error) { return OpenContext(context.Background(), path) }

// OpenContext reads the header of a local GGUF file (ReadContext) and
// returns it with the file's size. Anything but a regular file is refused
// before it is opened (a FIFO would block the open forever); symbolic links
// are followed. Errors name the file.
func OpenContext(ctx context.Context, path string) (*File, int64, error) {
	g, size, _, err := openHeader(ctx, path, false)
	return g, size, err
}

// openHeader reads the header of a local GGUF file, and with fingerprint the
// sha256 of its header bytes, from one open of the file.
func openHeader(ctx context.Context, path string, fingerprint bool) (*File, int64, string, error) {
	f, fi, err := st.OpenRegular(path)
	if err != nil {
		return nil, 0, "", err
	}
	defer f.Close()
	g, err := ReadContext(ctx, f, fi.Size())
	if err != nil {
		return nil, 0, "", fmt.Errorf("%s: %w", path, err)
	}
	if !fingerprint {
		return g, fi.Size(), "", nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, g.DataOffset)); err != nil {
		return nil, 0, "", fmt.Errorf("%s: %w", path, err)
	}
	return g, fi.Size(), hex.EncodeToString(h.Sum(nil)), nil
}

// Summarize describes a parsed file.
func Summarize(name string, size int64, f *File) *Summary {
	s := &Summary{File: name, Bytes: size, Version: f.Version, TensorTypes: map[string]int{}, Problems: []string{}, MTPBlocks: []int64{}}
	s.Architecture = f.String("general.architecture")
	s.Name = f.String("general.name")
	a := s.Architecture
	s.BlockCount, _ = f.Uint(a + ".block_count")
	s.NextnLayers, _ = f.Uint(a + ".nextn_predict_layers")
	if ft, ok := f.Uint("general.file_type"); ok {
		s.FileType = FileType(ft).String()
	}
	s.Keys = len(f.KV)
	s.TokenizerModel = f.String("tokenizer.ggml.model")
	if v, ok := f.Lookup("tokenizer.ggml.tokens"); ok {
		s.Tokens = v.Len()
	}
	s.Tensors = len(f.Tensors)
	mtp := map[int64]bool{}
	blocks := map[int64]bool{}
	drafter := false // top-level nextn.* tensors: a separate drafter model (gemma4-assistant's nextn.pre_projection)
	for _, t := range f.Tensors {
		if strings.HasPrefix(t.Name, "nextn.") {
			drafter = true
		}
		s.TensorTypes[t.Type.String()]++
		if rest, ok := strings.CutPrefix(t.Name, "blk."); ok {
			if i := strings.IndexByte(rest, '.'); i > 0 {
				if b, err := strconv.ParseInt(rest[:i], 10, 64); err == nil {
					blocks[b] = true
					if strings.HasPrefix(rest[i+1:], "nextn.") {
						mtp[b] = true
					}
				}
			}
		}
	}
	// A dflash file is a block drafter: every block is the draft's, and it
	// declares no nextn layers (llama.cpp's DFlash / DSpark drafts).
	s.BlockDraft = a == "dflash"
	heads := s.NextnLayers // the blocks after the trunk's
	if s.BlockDraft {
		heads = s.BlockCount
	}
	if drafter && s.NextnLayers == s.BlockCount || s.BlockDraft {
		for b := range blocks { // every block is the drafter's
			mtp[b] = true
		}
	}
	for b := range mtp {
		s.MTPBlocks = append(s.MTPBlocks, b)
	}
	sort.Slice(s.MTPBlocks, func(i, j int) bool { return s.MTPBlocks[i] < s.MTPBlocks[j] })
	s.MTPHead = heads > 0 && len(s.MTPBlocks) > 0
	trunk := false
	for b := range blocks {
		if b < s.BlockCount-heads {
			trunk = true
		}
	}
	s.MTPOnly = s.MTPHead && !trunk
	if s.NextnLayers > s.BlockCount {
		s.Problems = append(s.Problems, fmt.Sprintf("%s.nextn_predict_layers is %d, more than its %d blocks (%s.block_count)", a, s.NextnLayers, s.BlockCount, a))
	} else if n := int64(len(s.MTPBlocks)); n > 0 && n < s.NextnLayers {
		s.Problems = append(s.Problems, fmt.Sprintf("%s.nextn_predict_layers is %d but only %d blocks hold nextn tensors (%v): the other %d of the last %d blocks are trunk blocks", a, s.NextnLayers, n, s.MTPBlocks, s.NextnLayers-n, s.NextnLayers))
	}
	if s.NextnLayers > 0 && len(s.MTPBlocks) == 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%s.nextn_predict_layers is %d but no blk.*.nextn.* tensor is present", a, s.NextnLayers))
	}
	if len(s.MTPBlocks) > 0 && heads == 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("nextn tensors in blocks %v but %s.nextn_predict_layers is not set", s.MTPBlocks, a))
	}
	for _, b := range s.MTPBlocks {
		if b < s.BlockCount-heads || b >= s.BlockCount {
			s.Problems = append(s.Problems, fmt.Sprintf("nextn tensors in block %d, outside the last %d of %d blocks", b, heads, s.BlockCount))
		}
	}
	if s.Architecture == "" {
		s.Problems = append(s.Problems, "general.architecture is missing")
	}
	return s
}

// WriteText prints the summary for people.
func (s *Summary) WriteText(w io.Writer) {
	if s.SplitFiles > 0 {
		fmt.Fprintf(w, "gguf:          %s, split set of %d files (GGUF v%d, %d bytes in all)\n", s.File, s.SplitFiles, s.Version, s.Bytes)
	} else {
		fmt.Fprintf(w, "gguf:          %s (GGUF v%d, %d bytes)\n", s.File, s.Version, s.Bytes)
	}
	fmt.Fprintf(w, "architecture:  %s", s.Architecture)
	if s.Name != "" {
		fmt.Fprintf(w, " (%s)", s.Name)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "blocks:        %d, of which MTP (nextn) %d\n", s.BlockCount, s.NextnLayers)
	switch {
	case s.BlockDraft && s.MTPOnly:
		fmt.Fprintf(w, "mtp head:      yes, a block draft (blocks %v; load with -md next to its target's GGUF, --spec-type draft-dspark with a Markov head, else draft-dflash)\n", s.MTPBlocks)
	case s.MTPOnly:
		fmt.Fprintf(w, "mtp head:      yes, MTP-only sidecar (blocks %v; load with -md next to a trunk GGUF, --spec-type draft-mtp)\n", s.MTPBlocks)
	case s.MTPHead:
		fmt.Fprintf(w, "mtp head:      yes, with the trunk (blocks %v)\n", s.MTPBlocks)
	case s.AddHead != "":
		fmt.Fprintf(w, "mtp head:      no; to add one (a new file, this one untouched):\n  %s\n", s.AddHead)
	default:
		fmt.Fprintln(w, "mtp head:      no")
	}
	if s.FileType != "" {
		fmt.Fprintf(w, "file type:     %s\n", s.FileType)
	}
	var types []string
	for t := range s.TensorTypes {
		types = append(types, t)
	}
	sort.Strings(types)
	fmt.Fprintf(w, "tensors:       %d\n", s.Tensors)
	for _, t := range types {
		fmt.Fprintf(w, "  %-6s %d\n", t, s.TensorTypes[t])
	}
	if s.TokenizerModel != "" {
		fmt.Fprintf(w, "tokenizer:     %s, %d tokens\n", s.TokenizerModel, s.Tokens)
	}
	fmt.Fprintf(w, "metadata:      %d keys\n", s.Keys)
	for _, p := range s.Problems {
		fmt.Fprintf(w, "problem:       %s\n", p)
	}
}

// OpenFingerprint reads the header of a GGUF file and fingerprints it: its
// size and the sha256 of its header bytes (everything before the data).
func OpenFingerprint(path string) (*File, int64, string, error) {
	return openHeader(context.Background(), path, true)
}
