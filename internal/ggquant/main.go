// Command ggquant quantizes raw little-endian float32 rows with mtpconv's
// ggml kernels, for the interop test that compares them with libggml's:
//
//	go run ./internal/ggquant TYPE ROWLEN IN.f32 OUT
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
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: ggquant TYPE ROWLEN IN.f32 OUT")
		os.Exit(2)
	}
	rowLen, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ggquant:", err)
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[3])
	if err == nil {
		vals := make([]float32, len(raw)/4)
		for i := range vals {
			vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		var out []byte
		if out, err = quant.QuantizeGGML(os.Args[1], vals, rowLen, nil, nil); err == nil {
			err = os.WriteFile(os.Args[4], out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ggquant:", err)
		os.Exit(1)
	}
}
