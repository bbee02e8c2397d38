package model

import (
	"fmt"
	"strings"

	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The official FP8 releases (Qwen/Qwen3.6-35B-A3B-FP8 and siblings) store
// most 2-D linear weights as float8 e4m3fn in 128 × 128 blocks, each weight
// X.weight with its float scales X.weight_scale_inv
// [ceil(rows/128), ceil(cols/128)], and declare it in config.json's
// quantization_config (quant_method fp8, fmt e4m3, weight_block_size,
// modules_to_not_convert for what stays bf16: embeddings, norms, routers,
// linear-attention parameters, parts of the vision tower). That storage is
// the same for every family: it lives here, not in a family file. Each FP8
// weight is dequantized exactly (code × its block's scale in float32) as
// the runner reads it; see convert/rows.

// ScaleSuffix names a weight's block scales: X.weight -> X.weight_scale_inv.
const ScaleSuffix = "_scale_inv"

// FP8Info is what an FP8 source declares and holds.
type FP8Info struct {
	Method     string   `json:"quant_method"`
	Format     string   `json:"fmt"`
	Block      []int64  `json:"weight_block_size"`
	ScaleDType string   `json:"scale_dtype"` // of the block scales found
	Weights    int      `json:"fp8_weights"` // F8_E4M3 weights with their scales
	KeptBF16   []string `json:"modules_to_not_convert,omitempty"`
}

// RowShards is an FP8 weight a release stores as Shards tensor-parallel
// shards, each shard holding its Parts[k] rows of the weight's k-th part
// in part order (MiMo-V2.5's qkv_proj: per rank [Q_r | K_r | V_r]) with
// block-scale rows of its own. Dequantized by shard, its rows are
// regrouped part by part (shard 0's, shard 1's, ...): the unsharded layout.
type RowShards struct {
	Shards int64
	Parts  []int64
}

// Rows is the rows of one shard.
func (r *RowShards) Rows() int64 {
	var n int64
	for _, p := range r.Parts {
		n += p
	}
	return n
}

// RowShards is how the FP8 weight src is sharded (nil: not sharded), as the
// family's Spec.FP8Shards found it when the checkpoint was described.
func (m *Model) RowShards(src string) *RowShards { return m.shards[src] }

// ShardRows is the rows of one tensor-parallel shard of an FP8 weight (0:
// not sharded), for its rows.Segment.
func (m *Model) ShardRows(src string) int64 {
	if r := m.shards[src]; r != nil {
		return r.Rows()
	}
	return 0
}

// fp8Problem is a problem of one FP8 weight (or of the whole config, tensor "").
type fp8Problem struct{ tensor, msg string }

// fp8 checks the FP8 declaration of the config against the tensors: an
// F8_E4M3 weight needs the config's block size and a scale of the shape that
// block size implies, in F32 or BF16 (or F8_E8M0 for the X.scale naming,
// fp8_ue8m0.go). It returns nil for a checkpoint
// without FP8 tensors, and the problems found (each naming the file and
// tensor).
func (m *Model) fp8() (*FP8Info, []fp8Problem) {
	var weights []*st.Tensor
	for _, n := range m.Checkpoint.Names {
		if t := m.Checkpoint.Tensors[n]; t.DType.IsFloat8() {
			if _, _, mx := m.MXFP8Scale(n); mx {
				continue // MX fp8 with its own E8M0 scales (mxfp8.go), declared by its scale tensor
			}
			weights = append(weights, t)
		}
	}
	if len(weights) == 0 {
		return nil, nil
	}
	q := m.Config.QuantizationConfig
	if q == nil || q.QuantMethod != "fp8" {
		t := weights[0]
		return nil, []fp8Problem{{"", fmt.Sprintf("%s: tensor %s is %s, but %s declares no fp8 quantization_config", t.Shard.Name, t.Name, t.DType, ConfigFile)}}
	}
	info := &FP8Info{Method: q.QuantMethod, Format: q.Fmt, Block: q.WeightBlockSize, KeptBF16: q.ModulesToNotConvert}
	var problems []fp8Problem
	if q.Fmt != "" && q.Fmt != "e4m3" {
		problems = append(problems, fp8Problem{"", fmt.Sprintf("%s: quantization_config.fmt is %q; this tool reads e4m3", ConfigFile, q.Fmt)})
	}
	if b := q.WeightBlockSize; len(b) != 2 || b[0] <= 0 || b[1] <= 0 || b[0] > rows.MaxBlock || b[1] > rows.MaxBlock {
		return info, append(problems, fp8Problem{"", fmt.Sprintf("%s: quantization_config.weight_block_size is %v; it must be two sizes from 1 to %d (FP8 releases use [128, 128])", ConfigFile, b, rows.MaxBlock)})
	}
	dtypes := map[st.DType]bool{}
	for _, t := range weights {
		if t.DType != st.F8E4M3 {
			problems = append(problems, fp8Problem{t.Name, fmt.Sprintf("%s: tensor %s is %s; FP8 releases store F8_E4M3", t.Shard.Name, t.Name, t.DType)})
			continue
		}
		scale := m.fp8ScaleOf(t.Name)
		var cols int64
		if len(t.Shape) == 2 {
			cols = t.Shape[1]
		}
		seg := rows.Segment{Source: t.Name, Scale: scale, Block: q.WeightBlockSize}
		if f := m.Spec.FP8Shards; f != nil && len(t.Shape) == 2 {
			r, err := f(m, t.Name)
			if err != nil {
				problems = append(problems, fp8Problem{t.Name, fmt.Sprintf("%s: tensor %s: %v", t.Shard.Name, t.Name, err)})
				continue
			}
			if r != nil {
				if r.Shards <= 0 || r.Rows() <= 0 || r.Shards*r.Rows() != t.Shape[0] {
					problems = append(problems, fp8Problem{t.Name, fmt.Sprintf("%s: tensor %s: %d rows are not %d tensor-parallel shards of %v", t.Shard.Name, t.Name, t.Shape[0], r.Shards, r.Parts)})
					continue
				}
				seg.ShardRows = r.Rows()
				if m.shards == nil {
					m.shards = map[string]*RowShards{}
				}
				m.shards[t.Name] = r
			}
		}
		if err := rows.Check(m.Checkpoint, seg, cols); err != nil {
			problems = append(problems, fp8Problem{t.Name, err.Error()})
			continue
		}
		dtypes[m.Checkpoint.Tensors[scale].DType] = true
		info.Weights++
	}
	var ds []string
	for d := range dtypes {
		ds = append(ds, string(d))
	}
	info.ScaleDType = strings.Join(ds, ", ")
	return info, problems
}

// IsBlockScale reports whether a tensor is the block scale of an FP8 weight
// (either naming) or the scale of an FP4 or MXFP8 one (read with its weight,
// never planned on its own).
func (m *Model) IsBlockScale(name string) bool {
	if m.isFP4Scale(name) || m.isUE8M0Scale(name) || isMXFP8Scale(m.Checkpoint.Tensors, name) {
		return true
	}
	w, ok := strings.CutSuffix(name, ScaleSuffix)
	if !ok {
		return false
	}
	t, ok := m.Checkpoint.Tensors[w]
	return ok && t.DType == st.F8E4M3
}
