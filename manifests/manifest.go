// Package manifests holds the provenance of an export: the manifest schema
// written next to every output, hashing, verification of an output folder
// against its manifest (and its source), and the model card rendered from it.
// It does not know how tensors were computed; it knows the recorded
// transforms well enough to recompute and check them.
package manifests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// FileName is the manifest's name inside an output folder.
const FileName = "mtpconv-manifest.json"

// SchemaVersion changes whenever the manifest's meaning changes.
// Version 2: tensors (stored entries and source tensors) carry a CRC-32C
// instead of a sha256; files, config and shard headers keep their sha256.
// Version 3: float tensors record how many NaN and infinite values they
// store (nonfinite, absent when none). Version 2 manifests are still read;
// verify cannot check their counts.
const SchemaVersion = 3

// oldestSchema is the oldest manifest version this tool reads.
const oldestSchema = 2

// Manifest records what an export wrote and where it came from.
type Manifest struct {
	Schema    int               `json:"schema_version"`
	Tool      Tool              `json:"tool"`
	CreatedAt string            `json:"created_at,omitempty"` // only when asked for; otherwise runs are byte-identical
	Source    Source            `json:"source"`
	Target    string            `json:"target"`
	Options   map[string]string `json:"options"`
	Model     Model             `json:"model"`
	Tensors   []Tensor          `json:"tensors"`
	Files     []File            `json:"files"`
	BytesRead int64             `json:"source_bytes_read"`
	// Into is set when the files were added into a folder another tool
	// wrote (export --into): the folder is not an mtpconv output.
	Into *Into `json:"into,omitempty"`
}

// Into records an export added into a folder mtpconv does not own: which of
// its files mtpconv owns, which of the folder's own files it replaced (a
// copy of their prior bytes is one of the owned files, so removing the head
// can restore them), and the folder's files it builds on and left alone,
// with their hashes, so verify can tell they are unchanged.
type Into struct {
	// OwnedFiles are the only files of the folder mtpconv wrote and may
	// replace or delete, this manifest included.
	OwnedFiles []string  `json:"owned_files"`
	Updated    []Updated `json:"updated,omitempty"` // the folder's files mtpconv replaced
	Kept       []File    `json:"kept,omitempty"`    // the folder's files the output builds on (the trunk's weights), unchanged
	// Superseded are the files of an earlier addition this one replaces,
	// as that one wrote them: a run stopped before replacing them leaves
	// them in place, still mtpconv's.
	Superseded []File `json:"superseded,omitempty"`
}

// Owns reports whether the folder's file name is one mtpconv wrote. In an
// export's own folder every file is; in a folder added into, only the
// recorded ones.
func (m *Manifest) Owns(name string) bool {
	return m.Into == nil || slices.Contains(m.Into.OwnedFiles, name)
}

// Updated is one of the folder's files that mtpconv replaced: Files holds
// what it wrote, Original the bytes the folder had, kept under Original.Name.
type Updated struct {
	Name     string `json:"name"`
	Original File   `json:"original"`
	// Interim is the sha256 of what the file held between the first and
	// the last step of the addition (plan.IntoUpdate.Interim), when that
	// differs from both: a run stopped there left it, and one run again
	// starts from the original.
	Interim string `json:"interim_sha256,omitempty"`
}

// UpdatedFile returns the record of a replaced file, if name is one.
func (in *Into) UpdatedFile(name string) (Updated, bool) {
	if in != nil {
		for _, u := range in.Updated {
			if u.Name == name {
				return u, true
			}
		}
	}
	return Updated{}, false
}

// Tool names the producer.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Source fingerprints the checkpoint an export read.
type Source struct {
	Name         string         `json:"name"`               // where the source was read from: a path or hf://ORG/NAME@COMMIT
	Repo         string         `json:"repo,omitempty"`     // its Hub repo id, when known
	Revision     string         `json:"revision,omitempty"` // the repo's commit, when the source knows it
	ConfigSHA256 string         `json:"config_sha256"`
	Shards       []Shard        `json:"shards"`
	TotalBytes   int64          `json:"total_bytes"`
	BytesFetched int64          `json:"bytes_fetched,omitempty"` // remote sources: bytes received over HTTP
	Tensors      []SourceTensor `json:"tensors_read"`            // every source tensor read whole, with the CRC-32C of its bytes
}

// Shard is one source file: its size and the sha256 of its header.
type Shard struct {
	Name         string `json:"name"`
	Size         int64  `json:"size"`
	HeaderSHA256 string `json:"header_sha256"`
}

// SourceTensor is the checksum of one source tensor's bytes.
type SourceTensor struct {
	Name   string `json:"name"`
	CRC32C string `json:"crc32c"`
}

// Model is what the outputs are, for people and model cards.
type Model struct {
	Name           string `json:"name,omitempty"` // the source model as the model files name it: its Hub id, else its folder's name
	Family         string `json:"family"`
	ModelType      string `json:"model_type"`
	BaseModel      string `json:"base_model"`
	License        string `json:"license"`
	LicenseName    string `json:"license_name,omitempty"` // the Hub's license_name (license other) and license_link, as the source's card gives them
	LicenseLink    string `json:"license_link,omitempty"`
	RepoID         string `json:"repo_id,omitempty"` // the Hub id the output is published as (--repo-id), for the card's snippets
	HiddenSize     int    `json:"hidden_size"`
	NumExperts     int    `json:"num_experts"`
	ExpertsPerTok  int    `json:"experts_per_tok"`
	MTPDepth       int    `json:"mtp_depth"`
	NormConvention string `json:"norm_convention"`
}

// Segment is a run of rows of a source tensor viewed as [rows, row_len]
// (with, for an FP8 weight, its block scales): the plan's own segment.
type Segment = rows.Segment

// TransformName names one step applied to an output tensor, in the order applied.
type TransformName string

// The transforms an export records.
const (
	TNormPlusOne    TransformName = "norm_plus_one"   // zero-centred RMSNorm weight w stored as 1+w (f32 add, one rounding)
	TConv1dRelayout TransformName = "conv1d_relayout" // [C,1,K] -> [C,K,1]; the bytes are the same
	TSplitGateUp    TransformName = "split_gate_up"   // fused experts.gate_up_proj [E,2I,H] -> gate (first half) or up
	TStackExperts   TransformName = "stack_experts"   // per-expert [out,in] tensors -> [E,out,in]
	TCast           TransformName = "cast"            // to the output float dtype, round to nearest even
	TNarrowInt      TransformName = "narrow_int"      // a signed integer buffer to a narrower signed integer dtype, every value checked in range
	TQuantize       TransformName = "quantize"
	TDequantFP8     TransformName = "dequantize_fp8"   // F8_E4M3 code × its block's scale (a second source), in float32
	TTranspose      TransformName = "transpose"        // each segment's [rows, row_len] block stored transposed, [row_len, rows]
	TDequantFP4     TransformName = "dequantize_fp4"   // E2M1 code × its block's E8M0 scale (a second source), in float32
	TRepackMXFP4    TransformName = "repack_mxfp4"     // E2M1 codes and E8M0 scales moved unchanged into ggml MXFP4 blocks (no value changes)
	TConcatColumns  TransformName = "concat_columns"   // each row the same row of several sources side by side (segment then)
	TMoveMXFP4      TransformName = "move_mxfp4"       // E2M1 codes and E8M0 scales stored unchanged as MLX mxfp4's words and scales
	TDequantMXFP8   TransformName = "dequantize_mxfp8" // E4M3 code × its block's E8M0 scale (a second source), in float32
	TMoveMXFP8      TransformName = "move_mxfp8"       // E4M3 codes stored unchanged as MLX mxfp8's words, their E8M0 scales as its scales (a block scale repeated over each group it covers)
)

// QuantMode names a quantization scheme; its codec (quant/codec) is
// everything the mode means.
type QuantMode = codec.Mode

// Transform is one step applied to an output tensor; quantize carries its parameters.
type Transform struct {
	Name     TransformName `json:"name"`
	Mode     QuantMode     `json:"mode,omitempty"`
	Bits     int           `json:"bits,omitempty"`
	Group    int           `json:"group,omitempty"`
	Sym      bool          `json:"sym,omitempty"`
	Rounding string        `json:"rounding,omitempty"`
	DType    string        `json:"dtype,omitempty"`     // for cast
	GGMLType string        `json:"ggml_type,omitempty"` // ggml quantization: the block type
}

// Params are a quantize transform's parameters as its codec takes them.
func (t Transform) Params() codec.Params {
	return codec.Params{Bits: t.Bits, Group: t.Group, Sym: t.Sym, Rounding: t.Rounding, GGMLType: t.GGMLType}
}

// Entry is one stored tensor of an output file. Tensor checksums are CRC-32C:
// a file's sha256 already proves its bytes, and verify --src recomputes every
// tensor from the source; per-tensor checksums only say which tensor
// changed, and a sha256 per tensor cost more than the conversion itself
// (CRC-32C runs at about 28 GB/s here, sha256 at 1.7 GB/s).
type Entry struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	CRC32C string  `json:"crc32c"`
	Offset int64   `json:"offset,omitempty"` // files without a header (OpenVINO .bin): where the bytes start
	Size   int64   `json:"size,omitempty"`   // files without a header: how many bytes
}

// QuantError is the quantization error against the cast source values.
type QuantError struct {
	MaxAbs float64 `json:"max_abs"`
	RMS    float64 `json:"rms"`
	// RelRMS is the RMS error over the RMS of the values: 0 exact, 1 every
	// value stored as zero.
	RelRMS float64 `json:"rel_rms"`
	// Parts: the concat projection's embedding and hidden halves on their own.
	Parts []health.PartError `json:"parts,omitempty"`
}

// Tensor is one output tensor: where it came from, what was done, what was written.
type Tensor struct {
	Name      string    `json:"name"`
	Component string    `json:"component,omitempty"` // trunk, head or lm_head
	File      string    `json:"file"`
	Sources   []string  `json:"sources"`
	Segments  []Segment `json:"segments"`
	RowLen    int64     `json:"row_len"`
	// StoredRowLen is the length of the stored rows when it is not RowLen (a
	// transposed tensor's rows are its segments' columns): quantization
	// groups run along them.
	StoredRowLen int64       `json:"stored_row_len,omitempty"`
	Transforms   []Transform `json:"transforms"`
	Shape        []int64     `json:"shape"`
	DType        string      `json:"dtype"`
	Entries      []Entry     `json:"entries"`
	SourceCRC32C string      `json:"source_crc32c"` // of every source byte read for it, in segment order
	QuantError   *QuantError `json:"quant_error,omitempty"`
	F16Overflows int64       `json:"f16_overflows,omitempty"`
	// NonFinite counts the NaN and infinite values the tensor stores: NaN and
	// infinities of the source, kept by a float output, plus its f16
	// overflows. Quantized tensors never hold any (the export refuses them).
	NonFinite int64 `json:"nonfinite,omitempty"`
	// NegativeScales counts the negative FP8 block scales (weight_scale_inv)
	// of an FP8 source's rows: their blocks are dequantized with their sign
	// flipped, as the source says, which no release means to do.
	NegativeScales int64 `json:"negative_scales,omitempty"`
}

// StoredRows converts n rows of RowLen to the stored rows they fill, and
// gives the stored row length, refusing a record whose rows do not add up.
func (t *Tensor) StoredRows(n int64) (rows, rowLen int64, err error) {
	rowLen = t.RowLen
	if t.StoredRowLen != 0 {
		rowLen = t.StoredRowLen
	}
	if rowLen <= 0 || n*t.RowLen%rowLen != 0 {
		return 0, 0, fmt.Errorf("%s: %d rows of %d do not fill stored rows of %d", t.Name, n, t.RowLen, rowLen)
	}
	return n * t.RowLen / rowLen, rowLen, nil
}

// Has reports whether the tensor carries the named transform.
func (t *Tensor) Has(name TransformName) (Transform, bool) {
	for _, x := range t.Transforms {
		if x.Name == name {
			return x, true
		}
	}
	return Transform{}, false
}

// StoredQuant is how the tensor is stored quantized: by mtpconv's
// quantizer (TQuantize), or moved as the release stores it in that format
// (TMoveMXFP4, TMoveMXFP8: moved true); ok false for a float tensor.
func (t *Tensor) StoredQuant() (q Transform, moved, ok bool) {
	if q, ok := t.Has(TQuantize); ok {
		return q, false, true
	}
	for _, m := range []TransformName{TMoveMXFP4, TMoveMXFP8} {
		if q, ok := t.Has(m); ok {
			return q, true, true
		}
	}
	return Transform{}, false, false
}

// File is one output file.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Encode renders the manifest deterministically (indented, trailing newline).
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.checkFinite(); err != nil {
		return nil, fmt.Errorf("%s: %w", FileName, err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes the manifest into dir.
func (m *Manifest) Write(dir string) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, FileName), b, 0o644)
}

// Load reads the manifest of an output folder.
func Load(dir string) (*Manifest, error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, errors.New("this is a file, not a folder")
	}
	b, err := ReadRegularFile(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, notFound("no such folder")
		}
		return nil, notFound("not an mtpconv output (it has no " + FileName + ")")
	}
	if err != nil {
		return nil, err
	}
	m := &Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%s: %w", FileName, err)
	}
	if m.Schema < oldestSchema || m.Schema > SchemaVersion {
		return nil, fmt.Errorf("%s: schema version %d, this tool reads %d to %d", FileName, m.Schema, oldestSchema, SchemaVersion)
	}
	return m, nil
}

// notFound is a plain sentence that still satisfies errors.Is(err, fs.ErrNotExist).
type notFound string

func (e notFound) Error() string        { return string(e) }
func (e notFound) Is(target error) bool { return target == fs.ErrNotExist }

// MaxFileSize bounds what is read of a manifest, a report or a record of
// an interrupted run: far above what any export writes, and a file planted
// in the folder cannot make a read take gigabytes.
const MaxFileSize = 64 << 20

// ReadRegularFile reads a whole manifest, report or record (see
// st.ReadRegularFile: a regular file of at most MaxFileSize bytes).
func ReadRegularFile(path string) ([]byte, error) { return st.ReadRegularFile(path, MaxFileSize) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewTensorHash starts a tensor checksum (CRC-32C).
func NewTensorHash() hash.Hash32 { return crc32.New(castagnoli) }

// TensorSum renders a tensor checksum as 8 hex digits.
func TensorSum(h hash.Hash32) string { return fmt.Sprintf("%08x", h.Sum32()) }

// SHA256 is the hex sha256 of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// HashFile returns the size and hex sha256 of a file.
func HashFile(path string) (int64, string, error) {
	return HashFileContext(context.Background(), path)
}

// HashFileContext returns the size and hex sha256 of a regular file (see
// st.OpenRegular), stopping early with ctx's error when ctx is done.
func HashFileContext(ctx context.Context, path string) (int64, string, error) {
	f, _, err := st.OpenRegular(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, hashChunk)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, "", err
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, "", err
		}
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// hashChunk is how many bytes are read between two looks at the context.
const hashChunk = 1 << 20
