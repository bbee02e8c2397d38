package convert

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	ov "github.com/mtpconv/mtpconv/formats/openvino"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// TargetOpenVINO is the OpenVINO IR target.
const TargetOpenVINO = "openvino"

// OpenVINO output files.
const (
	OVLayerXML  = "openvino_mtp_layer.xml"
	OVLayerBin  = "openvino_mtp_layer.bin"
	OVLMHeadXML = "openvino_mtp_lm_head.xml"
	OVLMHeadBin = "openvino_mtp_lm_head.bin"
)

// OVOptions are the choices of the OpenVINO target.
type OVOptions struct {
	Head      string // f16 | int8 | int4
	LMHead    string // f16 | int8 | int4
	GroupSize int    // int4: 64 or 128
	Sym       bool   // symmetric (i8/i4) instead of asymmetric (u8/u4)
}

// Validate checks the options before any work.
func (o OVOptions) Validate() (bool, error) {
	if _, err := o.ovQuant(o.Head); err != nil {
		return false, fmt.Errorf("--head-precision: %w", err)
	}
	if _, err := o.ovQuant(o.LMHead); err != nil {
		return false, fmt.Errorf("--lm-head-precision: %w", err)
	}
	return true, nil
}

// ovQuant is the NNCF mode of a precision name, or nil for f16.
func (o OVOptions) ovQuant(prec string) (*Quant, error) {
	switch prec {
	case "f16":
		return nil, nil
	case "int8":
		return &Quant{Mode: ModeNNCF, Bits: 8, GroupSize: -1, Sym: o.Sym}, nil
	case "int4":
		if o.GroupSize != 64 && o.GroupSize != 128 {
			return nil, fmt.Errorf("int4 group size %d: must be 64 or 128", o.GroupSize)
		}
		return &Quant{Mode: ModeNNCF, Bits: 4, GroupSize: o.GroupSize, Sym: o.Sym}, nil
	}
	return nil, fmt.Errorf("OpenVINO precision %q is not f16, int8 or int4", prec)
}

// PlanOpenVINO plans the OpenVINO target: every weight of the MTP layer in
// openvino_mtp_layer.bin and lm_head.weight in openvino_mtp_lm_head.bin, as
// f16 or NNCF-compressed integers, norms as f32 (1+w). The graphs that use
// them are built by OpenVINOGraphs once the weights are laid out.
func PlanOpenVINO(m *Model, o OVOptions) (*Plan, error) {
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	if m.MTPDepth != 1 {
		return nil, fmt.Errorf("the OpenVINO target writes one MTP layer; this head has %d", m.MTPDepth)
	}
	if _, ok := m.Checkpoint.Tensors["lm_head.weight"]; !ok {
		return nil, fmt.Errorf("%s: lm_head.weight is missing (tied embeddings are not supported by the OpenVINO target yet)", m.Checkpoint.Source.Name())
	}
	hq, err := o.ovQuant(o.Head)
	if err != nil {
		return nil, fmt.Errorf("--head-precision: %w", err)
	}
	lq, err := o.ovQuant(o.LMHead)
	if err != nil {
		return nil, fmt.Errorf("--lm-head-precision: %w", err)
	}
	pl := &planner{m: m, file: OVLayerBin}
	for _, n := range m.Checkpoint.Names {
		if !strings.HasPrefix(n, "mtp.") || strings.Contains(n, ".mlp.experts.") {
			continue
		}
		t := m.Checkpoint.Tensors[n]
		if len(t.Shape) == 1 {
			// Norm weights stay f32 Consts (1+w), the form the RMSNorm fusion wants.
			pl.plain(n, n, Precision{Name: "f32", Float: st.F32}, MLXOptions{})
			continue
		}
		if strings.HasSuffix(n, "mlp.gate.weight") || strings.HasSuffix(n, "shared_expert_gate.weight") {
			// The router and the shared-expert gate stay f16: the CPU plugin quantizes
			// the activations of compressed layers, which can flip top-k choices.
			pl.linearOV(n, n, nil)
			continue
		}
		pl.linearOV(n, n, hq)
	}
	pl.expertsOV(m.MTPExperts[0], "mtp.layers.0.", hq)
	pl.file = OVLMHeadBin
	pl.linearOV("lm_head.weight", "lm_head.weight", lq)
	p := &Plan{
		Target: TargetOpenVINO, Tensors: pl.out, TensorFiles: []string{OVLayerBin, OVLMHeadBin},
		Options: map[string]string{"head_precision": o.Head, "lm_head_precision": o.LMHead, "group_size": strconv.Itoa(o.GroupSize), "sym": strconv.FormatBool(o.Sym)},
	}
	return p, nil
}

// linearOV plans a 2-D linear weight [N, K] as f16 or with an NNCF mode.
func (pl *planner) linearOV(src, name string, q *Quant) {
	t := pl.m.Checkpoint.Tensors[src]
	rows, cols := t.Shape[0], t.Shape[1]
	out := OutTensor{Name: name, Segments: []Segment{{src, 0, rows}}, RowLen: cols, Shape: []int64{rows, cols}, DType: st.F16}
	pl.add(out, q)
}

// expertsOV plans the routed experts as [E, out, in] gate, up and down weights.
func (pl *planner) expertsOV(blk ExpertBlock, layer string, q *Quant) {
	before := len(pl.out)
	pl.experts(blk, layer, Precision{Name: "f16", Float: st.F16}, MLXOptions{})
	for i := before; i < len(pl.out); i++ {
		t := &pl.out[i]
		if q != nil {
			qq := *q
			t.Quant = &qq
			t.Transforms = append(t.Transforms, TQuantize)
		}
	}
}

// WriteOpenVINOGraphs builds the IR graphs over the weights Run wrote into
// dir, appends their small constants to each .bin and writes the .xml files.
// It returns the final records of the four files; res, when it has the
// weights' hash states, spares hashing each .bin again.
func WriteOpenVINOGraphs(dir string, m *Model, p *Plan, info []ov.Attr, res *Result) ([]manifests.File, error) {
	layer, head, err := OpenVINOGraphs(m, p, info)
	if err != nil {
		return nil, err
	}
	var out []manifests.File
	for _, x := range []struct {
		g        *ov.Graph
		xml, bin string
	}{{layer, OVLayerXML, OVLayerBin}, {head, OVLMHeadXML, OVLMHeadBin}} {
		binPath := filepath.Join(dir, x.bin)
		bf, err := os.OpenFile(binPath, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, err
		}
		fi, err := bf.Stat()
		if err != nil {
			bf.Close()
			return nil, err
		}
		var xmlBuf bytes.Buffer
		h := res.fileHash(x.bin)
		var bin io.Writer = bf
		if h != nil {
			bin = io.MultiWriter(bf, h)
		}
		binLen, err := x.g.Serialize(&xmlBuf, bin, fi.Size())
		if err != nil {
			bf.Close()
			return nil, fmt.Errorf("%s: %w", x.xml, err)
		}
		if err := bf.Close(); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, x.xml), xmlBuf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		out = append(out, manifests.File{Name: x.xml, Size: int64(xmlBuf.Len()), SHA256: manifests.SHA256(xmlBuf.Bytes())})
		if h != nil {
			out = append(out, manifests.File{Name: x.bin, Size: binLen, SHA256: hex.EncodeToString(h.Sum(nil))})
			continue
		}
		size, sum, err := manifests.HashFile(binPath)
		if err != nil {
			return nil, err
		}
		out = append(out, manifests.File{Name: x.bin, Size: size, SHA256: sum})
	}
	return out, nil
}
