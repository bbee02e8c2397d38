// Package safetensors reads and writes the safetensors format. It knows byte
// layouts only, never models: readers parse headers into an inventory without
// touching tensor data, and tensor bytes are read later by byte range through
// an io.ReaderAt (a File, opened by name through an Opener), so a local file
// and a remote one look the same. Where the files come from (a folder, the
// Hugging Face cache, the Hub) is package convert/source's business.
package safetensors

import "fmt"

// DType is a safetensors element type, spelled as in the header.
type DType string

// The element types of the safetensors format.
const (
	BOOL   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	// F8E8M0 is an unsigned power-of-two exponent (bias 127): the
	// microscaling block scales of FP4/FP8 releases (DeepSeek-V4's ue8m0).
	F8E8M0 DType = "F8_E8M0"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
)

var dtypeSizes = map[DType]int64{
	BOOL: 1, U8: 1, I8: 1, F8E5M2: 1, F8E4M3: 1, F8E8M0: 1,
	I16: 2, U16: 2, F16: 2, BF16: 2,
	I32: 4, U32: 4, F32: 4,
	F64: 8, I64: 8, U64: 8,
}

// Size is the number of bytes of one element.
func (d DType) Size() (int64, error) {
	s, ok := dtypeSizes[d]
	if !ok {
		return 0, fmt.Errorf("unknown dtype %q", string(d))
	}
	return s, nil
}

// IsFloat8 reports whether d is one of the 8-bit float formats that FP8
// releases use; such tensors come with block scales and must be dequantised,
// never read as if they were bf16.
func (d DType) IsFloat8() bool { return d == F8E4M3 || d == F8E5M2 }

// IsSignedInt reports whether d is a signed integer type (an index buffer's).
func (d DType) IsSignedInt() bool { return d == I8 || d == I16 || d == I32 || d == I64 }
