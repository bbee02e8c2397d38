// Command ggquant quantizes raw little-endian float32 rows with mtpconv's
// ggml kernels, or with -d dequantizes rows of blocks into float32, for the
// interop tests that compare them with libggml's:
//
//	go run ./internal/ggquant [-d] TYPE ROWLEN IN OUT
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/mtpconv/mtpconv/quant"
)

func main() {
	args := os.Args[1:]
	dequant := len(args) == 5 && args[0] == "-d"
	if dequant {
		args = args[1:]
	}
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: ggquant [-d] TYPE ROWLEN IN OUT")
		os.Exit(2)
	}
	rowLen, err := strconv.Atoi(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ggquant:", err)
		os.Exit(2)
	}
	raw, err := os.ReadFile(args[2])
	if err == nil {
		var out []byte
		if dequant {
			out, err = dequantize(args[0], rowLen, raw)
		} else {
			vals := make([]float32, len(raw)/4)
			for i := range vals {
				vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			out, err = quant.QuantizeGGML(args[0], vals, rowLen, nil, nil)
		}
		if err == nil {
			err = os.WriteFile(args[3], out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ggquant:", err)
		os.Exit(1)
	}
}

// dequantize decodes rows of blocks into little-endian float32.
func dequantize(typ string, rowLen int, blocks []byte) ([]byte, error) {
	qk, bs, err := quant.GGMLDecodeBlock(typ)
	if err != nil {
		return nil, err
	}
	vals := make([]float32, len(blocks)/bs*qk)
	if err := quant.DequantizeGGML(typ, blocks, vals); err != nil {
		return nil, err
	}
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out, nil
}
