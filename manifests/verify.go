package manifests

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// ReportFile is where `verify --save` records its report, for the card.
const ReportFile = "mtpconv-verify.json"

// Problem is one thing verify found wrong.
type Problem struct {
	Kind    string `json:"kind"`
	File    string `json:"file,omitempty"`
	Tensor  string `json:"tensor,omitempty"`
	Message string `json:"message"`
}

// Report is the outcome of Verify.
type Report struct {
	Out        string    `json:"out"`
	Source     string    `json:"source,omitempty"`
	OK         bool      `json:"ok"`
	Files      int       `json:"files_checked"`
	Entries    int       `json:"tensors_checked"`
	Recomputed int       `json:"tensors_recomputed"`
	Problems   []Problem `json:"problems"`
	// Warnings do not fail verification: tensors that hold NaN or infinite
	// values, as the manifest records.
	Warnings []Problem `json:"warnings"`
}

func (r *Report) add(kind, file, tensor, format string, a ...any) {
	r.Problems = append(r.Problems, Problem{kind, file, tensor, fmt.Sprintf(format, a...)})
}

// Verify checks an output folder against its manifest: every file's size and
// hash, every tensor's dtype, shape and hash, and expert completeness. With a
// source checkpoint it also recomputes every output tensor from the source:
// float tensors must equal the cast source exactly (a norm lacking or doubling
// its +1 is named as such, found by comparing with the source, never by
// magnitude), quantized ones must dequantize to within one step of it.
func Verify(dir string, src *st.Checkpoint) (*Report, error) {
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	r := &Report{Out: dir, Problems: []Problem{}, Warnings: []Problem{}}
	for _, f := range m.Files {
		r.Files++
		size, sum, err := HashFile(filepath.Join(dir, f.Name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.add("file_missing", f.Name, "", "%s is missing", f.Name)
		case err != nil:
			r.add("file_unreadable", f.Name, "", "%v", err)
		case size != f.Size || sum != f.SHA256:
			r.add("file_hash", f.Name, "", "%s: %d bytes with sha256 %s; the manifest records %d bytes with %s", f.Name, size, sum, f.Size, f.SHA256)
		}
	}
	outs := map[string]*outFile{}
	defer func() {
		for _, o := range outs {
			o.f.Close()
		}
	}()
	for i := range m.Tensors {
		t := &m.Tensors[i]
		o, err := openOut(dir, t.File, outs, m)
		if err != nil {
			r.add("file_unreadable", t.File, t.Name, "%v", err)
			continue
		}
		nonfinite, counted := int64(0), false
		for _, e := range t.Entries {
			r.Entries++
			info, ok := o.h.Lookup(e.Name)
			if !ok {
				r.add("tensor_missing", t.File, e.Name, "%s: tensor %s is missing", t.File, e.Name)
				continue
			}
			if string(info.DType) != e.DType || !slices.Equal(info.Shape, e.Shape) {
				r.add("tensor_shape", t.File, e.Name, "%s: tensor %s is %s %v; the manifest records %s %v", t.File, e.Name, info.DType, info.Shape, e.DType, e.Shape)
				continue
			}
			dtype := nonFiniteDType(t, e)
			sum, n, err := entryChecksumCount(o.f, info.Begin, info.End, dtype)
			if err != nil || sum != e.CRC32C {
				r.add("tensor_hash", t.File, e.Name, "%s: tensor %s does not match the manifest's CRC-32C", t.File, e.Name)
				continue
			}
			if dtype != "" {
				nonfinite, counted = n, true
			}
		}
		if counted {
			checkNonFinite(r, m, t, nonfinite)
		}
		checkExperts(r, m, t)
	}
	if src != nil {
		r.Source = src.Source.Name()
		cfg, err := st.ReadSmallFile(src.Source, "config.json", 16<<20)
		if err != nil {
			return nil, err
		}
		fp, err := Fingerprint(src, cfg)
		if err != nil {
			return nil, err
		}
		if d := SameSource(fp, m.Source); d != "" {
			r.add("source_mismatch", "", "", "the source is not the one this output was made from: %s", d)
		}
		for i := range m.Tensors {
			t := &m.Tensors[i]
			o, err := openOut(dir, t.File, outs, m)
			if err != nil {
				continue // reported above
			}
			if err := recompute(r, src, o, t); err != nil {
				r.add("recompute_failed", t.File, t.Name, "%v", err)
			}
			r.Recomputed++
		}
	}
	r.OK = len(r.Problems) == 0
	return r, nil
}

// checkExperts checks that a stacked or split expert tensor holds all E experts.
func checkExperts(r *Report, m *Manifest, t *Tensor) {
	_, split := t.Has("split_gate_up")
	_, stack := t.Has("stack_experts")
	if !split && !stack {
		return
	}
	e := m.Model.NumExperts
	if len(t.Shape) != 3 || t.Shape[0] != int64(e) || len(t.Segments) != e {
		r.add("experts_incomplete", t.File, t.Name, "%s holds %v experts from %d segments; the model has %d", t.Name, t.Shape, len(t.Segments), e)
	}
}

// outFile is an output tensor file: a safetensors file found by its
// header, or a raw OpenVINO .bin whose entries the manifest places.
type outFile struct {
	f *os.File
	h *st.Header
}

func openOut(dir, name string, cache map[string]*outFile, m *Manifest) (*outFile, error) {
	if o, ok := cache[name]; ok {
		return o, nil
	}
	if err := st.CheckLocalName(name); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	stat, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	var h *st.Header
	if strings.HasSuffix(name, ".bin") {
		h = &st.Header{File: name, FileSize: stat.Size()}
		for _, t := range m.Tensors {
			if t.File != name {
				continue
			}
			for _, e := range t.Entries {
				if e.Offset < 0 || e.Size < 0 || e.Offset+e.Size > stat.Size() {
					f.Close()
					return nil, fmt.Errorf("%s: tensor %s lies outside the %d-byte file", name, e.Name, stat.Size())
				}
				h.Tensors = append(h.Tensors, st.TensorInfo{Name: e.Name, DType: st.DType(e.DType), Shape: e.Shape, Begin: e.Offset, End: e.Offset + e.Size})
			}
		}
	} else if h, err = st.ReadHeader(f, stat.Size(), name); err != nil {
		f.Close()
		return nil, err
	}
	o := &outFile{f, h}
	cache[name] = o
	return o, nil
}

// entryChecksumCount returns an entry's checksum and, when dtype is a float
// type, how many of its values are NaN or infinite.
func entryChecksumCount(f *os.File, begin, end int64, dtype string) (string, int64, error) {
	h := NewTensorHash()
	buf := make([]byte, 1<<20) // a multiple of every element size
	var nonfinite int64
	for off := begin; off < end; {
		n := min(int64(len(buf)), end-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return "", 0, err
		}
		h.Write(buf[:n])
		if dtype != "" {
			c, err := quant.CountNonFinite(dtype, buf[:n])
			if err != nil {
				return "", 0, err
			}
			nonfinite += int64(c)
		}
		off += n
	}
	return TensorSum(h), nonfinite, nil
}

// recompute rebuilds a tensor's values from the source, row chunk by row
// chunk, and compares them with what the output holds.
func recompute(r *Report, src *st.Checkpoint, o *outFile, t *Tensor) error {
	_, plusOne := t.Has("norm_plus_one")
	q, quantized := t.Has("quantize")
	if quantized && q.Mode == "nncf" {
		return recomputeNNCF(r, src, o, t, q)
	}
	var qp quant.MLXAffineParams
	if quantized {
		if q.Mode != "mlx_affine" {
			return fmt.Errorf("quantization mode %q is not one verify knows", q.Mode)
		}
		rounding, err := quant.ParseMLXRounding(q.Rounding)
		if err != nil {
			return err
		}
		qp = quant.MLXAffineParams{Bits: q.Bits, GroupSize: q.Group, Rounding: rounding}
	}
	outSize, err := st.DType(t.DType).Size()
	if err != nil {
		return err
	}
	entry := func(name string) (st.TensorInfo, error) {
		info, ok := o.h.Lookup(name)
		if !ok {
			return info, fmt.Errorf("entry %s is missing", name)
		}
		return info, nil
	}
	main, err := entry(t.Name)
	if err != nil {
		return err
	}
	var scalesE, biasesE st.TensorInfo
	if quantized {
		base := t.Name[:len(t.Name)-len(".weight")]
		if scalesE, err = entry(base + ".scales"); err != nil {
			return err
		}
		if biasesE, err = entry(base + ".biases"); err != nil {
			return err
		}
	}
	// A tensor of the source's dtype without +1 was copied, bits and all
	// (a signalling NaN too, which arithmetic or a cast would quieten).
	copied := !plusOne
	for _, seg := range t.Segments {
		if s, ok := src.Tensors[seg.Source]; ok && string(s.DType) != t.DType {
			copied = false
		}
	}
	lacks, doubles, differs, beyond := 0, 0, 0, 0
	var worst float64
	err = sourceChunks(r, src, t, func(v []float32, n, outRow int64) error {
		elems := n * t.RowLen
		cast := func(add float32) []float32 {
			out := make([]float32, elems)
			if add == 0 && copied && !quantized {
				copy(out, v)
				return out
			}
			for i := range v {
				out[i] = v[i] + add
			}
			enc := make([]byte, elems*outSize)
			quant.EncodeF32(t.DType, out, enc)
			quant.DecodeF32(t.DType, enc, out)
			return out
		}
		want := cast(map[bool]float32{true: 1, false: 0}[plusOne])
		if !quantized {
			got, err := readF32(o.f, main, outRow*t.RowLen*outSize, elems, t.DType)
			if err != nil {
				return err
			}
			if !sameBits(got, want) {
				switch {
				case sameBits(got, cast(0)) && plusOne:
					lacks++
				case sameBits(got, cast(2)) && plusOne:
					doubles++
				case sameBits(got, cast(1)) && !plusOne:
					r.add("norm_unexpected_plus_one", t.File, t.Name, "%s holds source+1 but no +1 was recorded", t.Name)
				default:
					differs++
				}
			}
		} else {
			groups := t.RowLen / int64(qp.GroupSize)
			rowBytes := t.RowLen * int64(qp.Bits) / 8
			packed := make([]byte, n*rowBytes)
			if _, err := o.f.ReadAt(packed, main.Begin+outRow*rowBytes); err != nil {
				return err
			}
			scales, err := readF32(o.f, scalesE, outRow*groups*outSize, n*groups, t.DType)
			if err != nil {
				return err
			}
			biases, err := readF32(o.f, biasesE, outRow*groups*outSize, n*groups, t.DType)
			if err != nil {
				return err
			}
			// The stored scale is rounded to the dtype (relative error rel),
			// which moves code c by up to c*rel steps.
			rel := map[string]float64{"BF16": 1.0 / 256, "F16": 1.0 / 2048}[t.DType]
			slack := 1 + float64(int(1)<<qp.Bits-1)*rel
			deq := make([]float32, t.RowLen)
			for i := int64(0); i < n; i++ {
				quant.DequantizeMLXAffine(packed[i*rowBytes:(i+1)*rowBytes], int(t.RowLen), qp, scales[i*groups:], biases[i*groups:], deq)
				for j, x := range deq {
					step := math.Abs(float64(scales[i*groups+int64(j)/int64(qp.GroupSize)]))
					d := math.Abs(float64(x - want[i*t.RowLen+int64(j)]))
					worst = max(worst, d)
					// One step at a clamped end, plus the scale's own rounding over the code range.
					if d > step*slack+1e-6 {
						beyond++
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case lacks > 0:
		r.add("norm_missing_plus_one", t.File, t.Name, "%s: %d chunks equal the source without its +1: the zero-centred norm lacks the shift", t.Name, lacks)
	case doubles > 0:
		r.add("norm_double_plus_one", t.File, t.Name, "%s: %d chunks equal the source plus 2: the +1 was applied twice", t.Name, doubles)
	case differs > 0:
		r.add("values_differ", t.File, t.Name, "%s: %d chunks differ from the cast source", t.Name, differs)
	case beyond > 0:
		r.add("quant_bound", t.File, t.Name, "%s: %d values dequantize further than one step from the source (worst %g)", t.Name, beyond, worst)
	}
	if quantized && t.QuantError != nil && worst > t.QuantError.MaxAbs*1.0001+1e-9 {
		r.add("quant_error_record", t.File, t.Name, "%s: recomputed max error %g exceeds the recorded %g", t.Name, worst, t.QuantError.MaxAbs)
	}
	return nil
}

// sourceChunks streams a tensor's source rows, in segment order as the
// export read them, in chunks of verifyChunkRows rows (an even count)
// decoded to float32, so memory stays bounded however large the tensor; it
// then reports source bytes that differ from the manifest's checksum.
func sourceChunks(r *Report, src *st.Checkpoint, t *Tensor, fn func(vals []float32, rows, outRow int64) error) error {
	h := NewTensorHash()
	var raw []byte
	outRow := int64(0)
	for _, seg := range t.Segments {
		s, ok := src.Tensors[seg.Source]
		if !ok {
			return fmt.Errorf("source tensor %s is not in the source", seg.Source)
		}
		inSize, _ := s.DType.Size()
		for row := int64(0); row < seg.Rows; row += verifyChunkRows {
			n := min(verifyChunkRows, seg.Rows-row)
			var err error
			raw, err = src.ReadRange(s, (seg.Row+row)*t.RowLen*inSize, n*t.RowLen*inSize, raw)
			if err != nil {
				return err
			}
			h.Write(raw)
			v := make([]float32, n*t.RowLen)
			if err := quant.DecodeF32(string(s.DType), raw, v); err != nil {
				return err
			}
			if err := fn(v, n, outRow); err != nil {
				return err
			}
			outRow += n
		}
	}
	if TensorSum(h) != t.SourceCRC32C {
		r.add("source_changed", t.File, t.Name, "the source bytes of %s differ from those it was made from", t.Name)
	}
	return nil
}

const verifyChunkRows = 1024

func readF32(f *os.File, e st.TensorInfo, off, elems int64, dtype string) ([]float32, error) {
	size, err := st.DType(dtype).Size()
	if err != nil {
		return nil, err
	}
	if off < 0 || e.Begin+off+elems*size > e.End {
		return nil, fmt.Errorf("tensor %s is shorter than its manifest says", e.Name)
	}
	b := make([]byte, elems*size)
	if _, err := f.ReadAt(b, e.Begin+off); err != nil {
		return nil, err
	}
	out := make([]float32, elems)
	return out, quant.DecodeF32(dtype, b, out)
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// recomputeNNCF checks an NNCF-compressed tensor: every code dequantizes,
// with its stored f16 scale and zero point, to within one step of the
// source cast to f16, and the codes hash as the manifest says (checked above).
func recomputeNNCF(r *Report, src *st.Checkpoint, o *outFile, t *Tensor, q Transform) error {
	p := quant.NNCFParams{Bits: q.Bits, Sym: q.Sym, GroupSize: q.Group}
	base := strings.TrimSuffix(t.Name, ".weight")
	codesE, ok1 := o.h.Lookup(t.Name)
	scaleE, ok2 := o.h.Lookup(base + ".scale")
	zpE, ok3 := o.h.Lookup(base + ".zero_point")
	if !ok1 || !ok2 || (!p.Sym && !ok3) {
		return fmt.Errorf("the codes, scale or zero point of %s are missing", t.Name)
	}
	read := func(e st.TensorInfo) ([]byte, error) {
		b := make([]byte, e.End-e.Begin)
		_, err := o.f.ReadAt(b, e.Begin)
		return b, err
	}
	sb, err := read(scaleE)
	if err != nil {
		return err
	}
	var zps []byte
	if !p.Sym {
		if zps, err = read(zpE); err != nil {
			return err
		}
	}
	unpack := func(b []byte, i int64) uint8 {
		if p.Bits == 8 {
			return b[i]
		}
		return (b[i/2] >> (4 * (i % 2))) & 0xf
	}
	scales := make([]float32, len(sb)/2)
	quant.DecodeF32("F16", sb, scales)
	g := int64(p.Group(int(t.RowLen)))
	var i int64 // element index across the whole tensor
	beyond := 0
	var worst float64
	// Rows are checked in chunks of an even count, so 4-bit codes start on a byte.
	err = sourceChunks(r, src, t, func(v []float32, rows, _ int64) error {
		n := rows * t.RowLen
		enc := make([]byte, 2*n)
		quant.EncodeF32("F16", v, enc)
		quant.DecodeF32("F16", enc, v)
		start := i * int64(p.Bits) / 8
		codes, err := read(st.TensorInfo{Begin: codesE.Begin + start, End: codesE.Begin + start + n*int64(p.Bits)/8})
		if err != nil {
			return err
		}
		for k, want := range v {
			grp := i / g
			var zp uint8
			if !p.Sym {
				zp = unpack(zps, grp)
			}
			d := math.Abs(float64(quant.DequantizeNNCF(unpack(codes, int64(k)), zp, scales[grp], p) - want))
			worst = max(worst, d)
			if d > math.Abs(float64(scales[grp]))*1.001+1e-6 {
				beyond++
			}
			i++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if beyond > 0 {
		r.add("quant_bound", t.File, t.Name, "%s: %d values dequantize further than one step from the source (worst %g)", t.Name, beyond, worst)
	}
	return nil
}
