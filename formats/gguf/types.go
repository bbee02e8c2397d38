package gguf

import (
	"fmt"
	"math"
)

// GGMLType is a tensor's storage type, numbered as ggml numbers them.
type GGMLType uint32

// The ggml types this package knows the block layout of.
const (
	F32  GGMLType = 0
	F16  GGMLType = 1
	Q4_0 GGMLType = 2
	Q4_1 GGMLType = 3
	Q5_0 GGMLType = 6
	Q5_1 GGMLType = 7
	Q8_0 GGMLType = 8
	Q8_1 GGMLType = 9
	Q2_K GGMLType = 10
	Q3_K GGMLType = 11
	Q4_K GGMLType = 12
	Q5_K GGMLType = 13
	Q6_K GGMLType = 14
	Q8_K GGMLType = 15
	BF16 GGMLType = 30
	// MXFP4 is OCP MX fp4 as ggml stores it: per 32 values an E8M0 scale
	// byte, then 16 bytes of E2M1 codes (value j low, j + 16 high).
	MXFP4 GGMLType = 39
)

type typeInfo struct {
	name        string
	block, size int64 // values per block, bytes per block
}

var ggmlTypes = map[GGMLType]typeInfo{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20}, Q5_0: {"Q5_0", 32, 22}, Q5_1: {"Q5_1", 32, 24},
	Q8_0: {"Q8_0", 32, 34}, Q8_1: {"Q8_1", 32, 36},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144}, Q5_K: {"Q5_K", 256, 176},
	Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292},
	MXFP4: {"MXFP4", 32, 17},
}

func (t GGMLType) String() string {
	if i, ok := ggmlTypes[t]; ok {
		return i.name
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// Known reports whether the type's block layout is known.
func (t GGMLType) Known() bool { _, ok := ggmlTypes[t]; return ok }

// BlockSize is the number of values in one block of the type.
func (t GGMLType) BlockSize() int64 { return ggmlTypes[t].block }

// Quantized reports a block-quantized type.
func (t GGMLType) Quantized() bool { return t.Known() && ggmlTypes[t].block > 1 }

// RowBytes is the stored size of n values (n a multiple of the block size).
func (t GGMLType) RowBytes(n int64) (int64, error) {
	i, ok := ggmlTypes[t]
	if !ok {
		return 0, fmt.Errorf("ggml type %d is not known", uint32(t))
	}
	if n%i.block != 0 {
		return 0, fmt.Errorf("%d values are not whole %s blocks of %d", n, i.name, i.block)
	}
	if n < 0 || n/i.block > math.MaxInt64/i.size {
		return 0, fmt.Errorf("%d values of %s: the byte count overflows", n, i.name)
	}
	return n / i.block * i.size, nil
}

// ParseType reads a type name (F32, F16, BF16, Q8_0, ...).
func ParseType(s string) (GGMLType, bool) {
	for t, i := range ggmlTypes {
		if i.name == s {
			return t, true
		}
	}
	return 0, false
}

// FileType is llama.cpp's llama_ftype, the general.file_type of a file:
// the type most of its weights have.
type FileType uint32

// The file types llama-quantize writes that mtpconv knows.
const (
	FileAllF32 FileType = 0
	FileF16    FileType = 1
	FileQ4_0   FileType = 2
	FileQ4_1   FileType = 3
	FileQ8_0   FileType = 7
	FileQ5_0   FileType = 8
	FileQ5_1   FileType = 9
	FileQ2_K   FileType = 10
	FileQ3_K_S FileType = 11
	FileQ3_K_M FileType = 12
	FileQ3_K_L FileType = 13
	FileQ4_K_S FileType = 14
	FileQ4_K_M FileType = 15
	FileQ5_K_S FileType = 16
	FileQ5_K_M FileType = 17
	FileQ6_K   FileType = 18
	FileBF16   FileType = 32
	// FileMXFP4MOE: the routed experts MXFP4, the rest as written
	// (DeepSeek-V4's sidecar, whatever --outtype).
	FileMXFP4MOE FileType = 38
)

var fileTypeNames = map[FileType]string{
	FileAllF32: "F32", FileF16: "F16", FileQ4_0: "Q4_0", FileQ4_1: "Q4_1", FileQ8_0: "Q8_0", FileQ5_0: "Q5_0",
	FileQ5_1: "Q5_1", FileQ2_K: "Q2_K", FileQ3_K_S: "Q3_K_S", FileQ3_K_M: "Q3_K_M", FileQ3_K_L: "Q3_K_L",
	FileQ4_K_S: "Q4_K_S", FileQ4_K_M: "Q4_K_M", FileQ5_K_S: "Q5_K_S", FileQ5_K_M: "Q5_K_M", FileQ6_K: "Q6_K", FileBF16: "BF16",
	// llama.h's other file types (mtpconv writes none of them).
	19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S",
	27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
	39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}

// BelowFourBits says whether llama-quantize gives most weights of a file
// of this type fewer than 4 bits (Q2_K, Q3_K_*, the IQ1-IQ3 types, TQ*, Q1_0, Q2_0).
func (f FileType) BelowFourBits() bool {
	switch f {
	case FileQ2_K, FileQ3_K_S, FileQ3_K_M, FileQ3_K_L, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29, 31, 36, 37, 40, 41:
		return true
	}
	return false
}

func (f FileType) String() string {
	if n, ok := fileTypeNames[f]; ok {
		return n
	}
	return fmt.Sprintf("ftype%d", uint32(f))
}
