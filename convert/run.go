package convert

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// RunOptions tune execution; they never change the output bytes.
type RunOptions struct {
	Jobs       int                           // parallel tensors; 0 means GOMAXPROCS
	ChunkElems int64                         // elements per processing chunk; 0 means 4 Mi
	OnFile     func(name string, size int64) // called when an output file is complete
}

// TensorStats is what executing one output tensor measured.
type TensorStats struct {
	Name         string  `json:"name"`
	F16Overflows int64   `json:"f16_overflows"`
	QuantMaxAbs  float64 `json:"quant_max_abs_error,omitempty"`
	QuantRMS     float64 `json:"quant_rms_error,omitempty"`
}

// Result summarises a run.
type Result struct {
	Tensors   []TensorStats
	BytesRead int64
	BytesOut  int64
	FilesOut  []string
}

// Run executes a plan: reads the source rows, applies the transforms, and
// writes every file of the plan into dir, which must exist. Each tensor is
// written at its precomputed offset, so tensors run in parallel and the
// bytes do not depend on the number of jobs.
func Run(ctx context.Context, p *Plan, ck *st.Checkpoint, dir string, opt RunOptions) (*Result, error) {
	if err := p.Validate(ck); err != nil {
		return nil, err
	}
	if opt.Jobs <= 0 {
		opt.Jobs = runtime.GOMAXPROCS(0)
	}
	if opt.ChunkElems <= 0 {
		opt.ChunkElems = 4 << 20
	}
	res := &Result{}
	stats := make(map[*OutTensor]*TensorStats)
	var mu sync.Mutex
	for _, file := range p.TensorFiles {
		entries, owners := p.FileEntries(file)
		hdr, sizes, err := st.EncodeHeader(entries, p.Metadata)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		if _, err := f.WriteAt(hdr, 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		// Offsets of each entry; a tensor's entries are found by name.
		offsets := map[string]int64{}
		off := int64(len(hdr))
		for i, e := range entries {
			offsets[e.Name] = off
			off += sizes[i]
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(opt.Jobs)
		done := map[*OutTensor]bool{}
		for _, t := range owners {
			if done[t] {
				continue
			}
			done[t] = true
			t := t
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				s, n, err := execTensor(gctx, ck, t, f, offsets, opt.ChunkElems)
				if err != nil {
					return fmt.Errorf("%s: tensor %s: %w", file, t.Name, err)
				}
				mu.Lock()
				stats[t] = s
				res.BytesRead += n
				mu.Unlock()
				return nil
			})
		}
		err = g.Wait()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		res.BytesOut += off
		res.FilesOut = append(res.FilesOut, file)
		if opt.OnFile != nil {
			opt.OnFile(file, off)
		}
	}
	for _, of := range p.Files {
		data := of.Contents
		if data == nil {
			var err error
			data, err = st.ReadSmallFile(ck.Source, of.CopyFrom, 1<<30)
			if err != nil {
				return nil, fmt.Errorf("copying %s: %w", of.CopyFrom, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, of.Name), data, 0o644); err != nil {
			return nil, err
		}
		res.BytesOut += int64(len(data))
		res.FilesOut = append(res.FilesOut, of.Name)
		if opt.OnFile != nil {
			opt.OnFile(of.Name, int64(len(data)))
		}
	}
	for i := range p.Tensors {
		if s := stats[&p.Tensors[i]]; s != nil {
			res.Tensors = append(res.Tensors, *s)
		}
	}
	return res, nil
}

// execTensor streams one output tensor in row chunks.
func execTensor(ctx context.Context, ck *st.Checkpoint, t *OutTensor, f *os.File, offsets map[string]int64, chunkElems int64) (*TensorStats, int64, error) {
	stats := &TensorStats{Name: t.Name}
	chunkRows := max(1, chunkElems/t.RowLen)
	outSize, _ := t.DType.Size()
	plusOne := t.Has(TNormPlusOne)
	var qp quant.MLXAffineParams
	var base string
	if t.Quant != nil {
		r, err := quant.ParseMLXRounding(t.Quant.Rounding)
		if err != nil {
			return nil, 0, err
		}
		qp = quant.MLXAffineParams{Bits: t.Quant.Bits, GroupSize: t.Quant.GroupSize, Rounding: r}
		base = t.Name[:len(t.Name)-len(".weight")]
	}
	var (
		raw, enc, packed []byte
		vals, scales     []float32
		biases, deq      []float32
		sqErr            float64
		nElems           int64
		bytesRead        int64
	)
	outRow := int64(0)
	for _, seg := range t.Segments {
		src := ck.Tensors[seg.Source]
		inSize, _ := src.DType.Size()
		for r := int64(0); r < seg.Rows; r += chunkRows {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			n := min(chunkRows, seg.Rows-r)
			elems := n * t.RowLen
			var err error
			raw, err = ck.ReadRange(src, (seg.Row+r)*t.RowLen*inSize, elems*inSize, raw)
			if err != nil {
				return nil, 0, err
			}
			bytesRead += int64(len(raw))
			vals = grow(vals, elems)
			if err := quant.DecodeF32(string(src.DType), raw, vals); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", seg.Source, err)
			}
			if plusOne {
				for i := range vals {
					vals[i] += 1
				}
			}
			// Cast: round to the output dtype once; quantization sees the cast values.
			enc = growBytes(enc, elems*outSize)
			of, err := quant.EncodeF32(string(t.DType), vals, enc)
			if err != nil {
				return nil, 0, err
			}
			stats.F16Overflows += int64(of)
			if t.Quant == nil {
				if _, err := f.WriteAt(enc, offsets[t.Name]+outRow*t.RowLen*outSize); err != nil {
					return nil, 0, err
				}
				outRow += n
				continue
			}
			if err := quant.DecodeF32(string(t.DType), enc, vals); err != nil {
				return nil, 0, err
			}
			packed, scales, biases = quant.QuantizeMLXAffine(vals, int(t.RowLen), qp, packed[:0], scales[:0], biases[:0])
			groups := t.RowLen / int64(qp.GroupSize)
			sEnc := make([]byte, int64(len(scales))*outSize)
			bEnc := make([]byte, int64(len(biases))*outSize)
			quant.EncodeF32(string(t.DType), scales, sEnc)
			quant.EncodeF32(string(t.DType), biases, bEnc)
			// Measure the error with the stored (rounded) scales and biases.
			quant.DecodeF32(string(t.DType), sEnc, scales)
			quant.DecodeF32(string(t.DType), bEnc, biases)
			deq = grow(deq, t.RowLen)
			rowBytes := int64(qp.PackedWords(int(t.RowLen)) * 4)
			for i := int64(0); i < n; i++ {
				quant.DequantizeMLXAffine(packed[i*rowBytes:(i+1)*rowBytes], int(t.RowLen), qp, scales[i*groups:], biases[i*groups:], deq)
				for j, v := range deq {
					d := math.Abs(float64(v - vals[i*t.RowLen+int64(j)]))
					stats.QuantMaxAbs = max(stats.QuantMaxAbs, d)
					sqErr += d * d
				}
			}
			nElems += elems
			writes := []struct {
				name string
				data []byte
				unit int64
			}{{t.Name, packed, rowBytes}, {base + ".scales", sEnc, groups * outSize}, {base + ".biases", bEnc, groups * outSize}}
			for _, w := range writes {
				if _, err := f.WriteAt(w.data, offsets[w.name]+outRow*w.unit); err != nil {
					return nil, 0, err
				}
			}
			outRow += n
		}
	}
	if nElems > 0 {
		stats.QuantRMS = math.Sqrt(sqErr / float64(nElems))
	}
	return stats, bytesRead, nil
}

func grow(s []float32, n int64) []float32 {
	if int64(cap(s)) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func growBytes(s []byte, n int64) []byte {
	if int64(cap(s)) < n {
		return make([]byte, n)
	}
	return s[:n]
}
