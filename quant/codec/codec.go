// Package codec is one codec per quantization mode: its name, its
// parameters and their validation, the entries it stores, its encoder,
// verify's check of stored rows against the source, its words on model
// cards and its non-finite policy. The planner, the executor, verify and the
// card ask a mode's codec; none of them switches on the mode. The numeric
// kernels stay in quant.
package codec

import (
	"fmt"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// Mode names a quantization scheme, as plans and manifests record it.
type Mode string

// The quantization modes.
const (
	ModeMLXAffine Mode = "mlx_affine" // MLX affine: codes, scales and biases
	ModeNNCF      Mode = "nncf"       // NNCF weight compression: codes, f16 scales, zero points when asymmetric
	// MLX's microscaling modes: packed E2M1 (fp4) or E4M3 (fp8) codes and one
	// U8 scale per group (E8M0 for mx, E4M3 for nv), no biases.
	ModeMLXMXFP4 Mode = "mlx_mxfp4"
	ModeMLXMXFP8 Mode = "mlx_mxfp8"
	ModeMLXNVFP4 Mode = "mlx_nvfp4"
	ModeGGML     Mode = "ggml" // ggml block quantization (llama.cpp's Q8_0, Q4_K, ...), one entry of blocks
)

// Params are a quantization's parameters, as plans and manifests record them.
type Params struct {
	Bits     int
	Group    int    // group size; nncf: <= 0 per output channel
	Sym      bool   // nncf
	Rounding string // MLX: "gpu" or "cpu"
	GGMLType string // ggml: the block type (Q8_0, Q4_K, ...)
}

// Codec is everything one quantization mode means.
type Codec interface {
	// Validate refuses parameters the mode cannot encode rows of rowLen values with.
	Validate(p Params, rowLen int64) error
	// SegmentRows refuses a run of rows that cannot be written as its own
	// pieces (NNCF's nibble-packed zero points need whole bytes).
	SegmentRows(p Params, rowLen, rows int64) error
	// Entries are the stored entries of the weight name of shape (rows of its
	// last dimension) whose unquantized dtype is dt, in layout order.
	Entries(name string, shape []int64, dt st.DType, p Params) []st.Entry
	// Encoder quantizes rows of values already cast to dt.
	Encoder(name string, rowLen int64, dt st.DType, p Params) (Encoder, error)
	// Check compares stored rows with the source rows cast as exported.
	Check(c Chunk, read Reader) (Result, error)
	// Dequantize decodes stored rows [c.OutRow, c.OutRow+c.Rows) into
	// float32 (c.Want unused): what the consumer computes with, for the
	// head-health checks.
	Dequantize(c Chunk, read Reader) ([]float32, error)
	// Words say on a card how a tensor is stored (dt its float dtype).
	Words(p Params, dt string) string
	// NonFinite says why a NaN or an infinity stops the encoding.
	NonFinite() string
}

// Encoder turns rows of cast values into the pieces of the stored entries.
// The pieces live in bufs until its next call.
type Encoder interface {
	Encode(vals []float32, rows int64, qe *quant.ErrStats, bufs *Bufs) []Piece
}

// Piece is bytes for one stored entry covering some rows, which start at
// byte outRow*Num/Den of the entry (Den is 2 for nibble-packed values).
type Piece struct {
	Name     string
	Data     []byte
	Num, Den int64
}

// Offset is where the piece of rows starting at outRow goes in its entry.
func (p Piece) Offset(outRow int64) int64 {
	if p.Den == 0 {
		return outRow * p.Num
	}
	return outRow * p.Num / p.Den
}

// Bufs are one worker's encoding buffers.
type Bufs struct {
	packed, sEnc, bEnc, codesPacked, zpsPacked []byte
	codes, zps                                 []uint8
	s, b                                       []float32
}

// Chunk is rows [OutRow, OutRow+Rows) of a stored tensor and Want, the
// source's values for them cast as the export cast them.
type Chunk struct {
	Name   string
	RowLen int64
	DType  st.DType // the tensor's float dtype
	P      Params
	Want   []float32
	Rows   int64
	OutRow int64
}

// Reader reads n bytes at off of a stored entry.
type Reader func(entry string, off, n int64) ([]byte, error)

// Result is what Check found in a chunk: stored bytes that differ from the
// source encoded again (exact codecs), or values that dequantize further
// than one step from it (Beyond, Worst; bounded codecs).
type Result struct {
	Differs bool
	Beyond  int
	Worst   float64
	// Again says how the source was encoded again, for a difference.
	Again string
	// RecordsError: Worst is comparable with the manifest's recorded maximum error.
	RecordsError bool
}

var codecs = map[Mode]Codec{
	ModeMLXAffine: mlxAffine{},
	ModeMLXMXFP4:  mlxFP{name: ModeMLXMXFP4, mode: quant.MXFP4},
	ModeMLXMXFP8:  mlxFP{name: ModeMLXMXFP8, mode: quant.MXFP8},
	ModeMLXNVFP4:  mlxFP{name: ModeMLXNVFP4, mode: quant.NVFP4},
	ModeNNCF:      nncf{},
	ModeGGML:      ggml{},
}

// For is the codec of a mode.
func For(m Mode) (Codec, error) {
	if c, ok := codecs[m]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("quantization mode %q is not one this build knows", m)
}

// MLXModeName is the name MLX gives a quantization mode (mx.quantize's mode,
// config.json's "mode"), "" for a mode that is not MLX's.
func (m Mode) MLXModeName() string {
	if m == ModeMLXAffine {
		return "affine"
	}
	if c, ok := codecs[m].(mlxFP); ok {
		return c.mode.String()
	}
	return ""
}

// base is a weight's name without ".weight", the stem of its scales' names.
func base(name string) string { return strings.TrimSuffix(name, ".weight") }

// lead is shape without its last dimension, then last.
func lead(shape []int64, last ...int64) []int64 {
	return append(append([]int64{}, shape[:len(shape)-1]...), last...)
}

func growBytes(s []byte, n int64) []byte {
	if int64(cap(s)) < n {
		return make([]byte, n)
	}
	return s[:n]
}

// readF32 reads n values of dtype dt at element off of an entry.
func readF32(read Reader, entry string, dt st.DType, off, n int64) ([]float32, error) {
	size, err := dt.Size()
	if err != nil {
		return nil, err
	}
	b, err := read(entry, off*size, n*size)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	return out, quant.DecodeF32(string(dt), b, out)
}

// noSegmentRule is SegmentRows for codecs that write any run of rows.
type noSegmentRule struct{}

func (noSegmentRule) SegmentRows(Params, int64, int64) error { return nil }

// quantizedNonFinite is the policy of codecs that encode the cast values.
type quantizedNonFinite struct{}

func (quantizedNonFinite) NonFinite() string { return "a NaN or an infinity cannot be quantized" }
