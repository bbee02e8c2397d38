package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/quant/codec"

	_ "github.com/mtpconv/mtpconv/convert/targets/gguf"
	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino"
)

func byName(p *plan.Plan) map[string]plan.OutTensor {
	out := map[string]plan.OutTensor{}
	for _, t := range p.Tensors {
		out[t.Name] = t
	}
	return out
}

// The plan is pure data: decided from headers alone, checked here without reading a tensor.
func TestPlanMLXHead(t *testing.T) {
	cases := []struct {
		fixture  string
		expertTr plan.Transform
		segments int
	}{
		{fixtures.Qwen36, plan.TSplitGateUp, 256},
		{fixtures.Qwen35, plan.TStackExperts, 256},
		{fixtures.Next, plan.TStackExperts, 512},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			m := testmodel.Load(t, c.fixture)
			p, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
			if err != nil {
				t.Fatal(err)
			}
			ts := byName(p)
			if len(p.Tensors) != 20 {
				t.Fatalf("%d output tensors", len(p.Tensors))
			}
			plusOne := 0
			for _, o := range p.Tensors {
				if o.Has(plan.TNormPlusOne) {
					plusOne++
					if len(o.Shape) != 1 || o.Quant != nil {
						t.Errorf("%s: shifted but not a float vector", o.Name)
					}
				}
				if strings.HasPrefix(o.Name, "mtp.") {
					t.Errorf("%s keeps the mtp. prefix", o.Name)
				}
			}
			if plusOne != 7 {
				t.Errorf("%d norms shifted, want 7", plusOne)
			}
			gate := ts["layers.0.mlp.switch_mlp.gate_proj.weight"]
			if !gate.Has(c.expertTr) || len(gate.Segments) != c.segments || gate.Quant == nil || gate.Quant.Bits != 4 {
				t.Errorf("gate: %+v", gate.Transforms)
			}
			if r := ts["layers.0.mlp.gate.weight"]; r.Quant == nil || r.Quant.Bits != 8 || r.Quant.GroupSize != 64 {
				t.Errorf("router not at the 8-bit floor: %+v", r.Quant)
			}
			if c.expertTr == plan.TSplitGateUp {
				up := ts["layers.0.mlp.switch_mlp.up_proj.weight"]
				// Expert 1's up rows start after expert 0's gate and up rows and expert 1's gate rows.
				if s := up.Segments[1]; s.Row != 3*128 || s.Rows != 128 || s.Source != "mtp.layers.0.mlp.experts.gate_up_proj" {
					t.Errorf("up segment 1 = %+v", s)
				}
			}
			var cfg map[string]any
			if err := json.Unmarshal(p.Files[0].Contents, &cfg); err != nil || cfg["model_type"] != "qwen3_5_mtp" {
				t.Fatalf("config: %v %v", err, cfg["model_type"])
			}
		})
	}
}

func TestPlanCombined(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen35)
	p, err := testmodel.Plan(t, m, "combined", targets.Options{TrunkPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	ts := byName(p)
	conv := ts["language_model.model.layers.0.linear_attn.conv1d.weight"]
	if !conv.Has(plan.TConv1dRelayout) || conv.Shape[1] != 4 || conv.Shape[2] != 1 || conv.Quant != nil {
		t.Errorf("conv1d %+v", conv)
	}
	if a := ts["language_model.model.layers.0.linear_attn.A_log"]; a.DType != "F32" || a.Has(plan.TCast) {
		t.Errorf("A_log cast: %+v", a)
	}
	if n := ts["language_model.model.layers.0.linear_attn.norm.weight"]; n.Has(plan.TNormPlusOne) {
		t.Error("linear_attn.norm shifted")
	}
	if n := ts["language_model.model.norm.weight"]; !n.Has(plan.TNormPlusOne) {
		t.Error("final norm not shifted")
	}
	if h := ts["mtp.layers.0.mlp.switch_mlp.down_proj.weight"]; h.Quant != nil || h.DType != "BF16" || !h.Has(plan.TStackExperts) {
		t.Errorf("head experts: %+v", h)
	}
	if e := ts["language_model.model.embed_tokens.weight"]; e.Quant == nil || e.Quant.Bits != 4 {
		t.Error("embedding not quantized with the trunk")
	}
	for name := range ts {
		if strings.Contains(name, "visual") {
			t.Errorf("vision tensor %s kept", name)
		}
	}
}

// Chunked execution gives the same bytes as whole-tensor execution, for
// MLX packing and for NNCF's nibble-packed codes and zero points.
func TestRunChunkedEqualsWhole(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	mlx, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	ov, err := testmodel.Plan(t, m, "openvino", targets.Options{HeadPrecision: "int4", LMHeadPrecision: "int4", GroupSize: 128, Set: map[string]bool{"group-size": true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*plan.Plan{mlx, ov} {
		var files [][]byte
		for _, chunk := range []int64{1 << 30, 1000} { // one chunk per tensor, then many chunks per tensor
			dir := t.TempDir()
			if _, err := run.Run(context.Background(), p, m.Checkpoint, dir, run.RunOptions{Jobs: 2, ChunkElems: chunk}); err != nil {
				t.Fatal(err)
			}
			var all []byte
			for _, f := range p.TensorFiles {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			files = append(files, all)
		}
		if !bytes.Equal(files[0], files[1]) {
			t.Fatalf("%s: chunked output differs", p.Target)
		}
	}
}

func TestPlanOpenVINO(t *testing.T) {
	for _, fx := range []string{fixtures.Qwen36, fixtures.Qwen35, fixtures.Next} {
		m := testmodel.Load(t, fx)
		p, err := testmodel.Plan(t, m, "openvino", targets.Options{HeadPrecision: "int4", LMHeadPrecision: "int8", GroupSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		ts := byName(p)
		if len(p.Tensors) != 21 {
			t.Fatalf("%s: %d tensors", fx, len(p.Tensors))
		}
		for _, n := range []string{"mtp.layers.0.mlp.gate.weight", "mtp.layers.0.mlp.shared_expert_gate.weight"} {
			if ts[n].Quant != nil || ts[n].DType != "F16" {
				t.Errorf("%s: %s should stay f16: %+v", fx, n, ts[n].Quant)
			}
		}
		if n := ts["mtp.norm.weight"]; n.DType != "F32" || !n.Has(plan.TNormPlusOne) {
			t.Errorf("%s: final norm %+v", fx, n)
		}
		e := ts["mtp.layers.0.mlp.switch_mlp.down_proj.weight"]
		if e.Quant == nil || e.Quant.Mode != codec.ModeNNCF || e.Quant.Bits != 4 || e.Quant.Sym || e.Quant.GroupSize != 64 || e.File != "openvino_mtp_model.bin" {
			t.Errorf("%s: experts %+v", fx, e.Quant)
		}
		entries := e.Entries()
		if len(entries) != 3 || entries[0].DType != "U4" || len(entries[0].Shape) != 4 || entries[2].Name != "mtp.layers.0.mlp.switch_mlp.down_proj.zero_point" {
			t.Errorf("%s: expert entries %+v", fx, entries)
		}
		if h := ts["lm_head.weight"]; h.File != "openvino_mtp_lm_head.bin" || h.Quant == nil || h.Quant.Bits != 8 || h.Quant.GroupSize != -1 {
			t.Errorf("%s: lm_head %+v", fx, h.Quant)
		}
		lay, err := p.Layout("openvino_mtp_model.bin")
		if err != nil {
			t.Fatal(err)
		}
		for name, off := range lay.Offsets {
			if off%64 != 0 {
				t.Errorf("%s: %s at unaligned offset %d", fx, name, off)
			}
		}
	}
	m := testmodel.Load(t, fixtures.Qwen36)
	if _, err := testmodel.Plan(t, m, "openvino", targets.Options{HeadPrecision: "int4", LMHeadPrecision: "int8", GroupSize: 32, Set: map[string]bool{"group-size": true}}); err == nil {
		t.Error("int4 group 32 accepted")
	}
}

func TestCombinedShards(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	const maxShard = 40_000_000
	p, err := testmodel.Plan(t, m, "combined", targets.Options{MaxShardSize: maxShard})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.TensorFiles) < 3 || p.TensorFiles[0] != "model-00001-of-0000"+strconv.Itoa(len(p.TensorFiles))+".safetensors" {
		t.Fatalf("files %v", p.TensorFiles)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	var raw []byte
	for _, f := range p.Files {
		if f.Name == "model.safetensors.index.json" {
			raw = f.Contents
		}
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	for _, file := range p.TensorFiles {
		lay, err := p.Layout(file)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, e := range lay.Entries {
			n += lay.Sizes[e.Name]
			if index.WeightMap[e.Name] != file {
				t.Errorf("index puts %s in %s, plan in %s", e.Name, index.WeightMap[e.Name], file)
			}
		}
		if n > maxShard && len(lay.Entries) > 1 {
			t.Errorf("%s holds %d tensor bytes, over %d", file, n, maxShard)
		}
	}
	if len(index.WeightMap) != 96 {
		t.Errorf("index lists %d tensors", len(index.WeightMap))
	}
}

// GLM-4.7-Flash's mlx-vlm drafter, planned at every kind of quantization
// its splitter offers: the splitter's tensor names, and its rule (every
// weight of two or more dimensions whose stored last dimension divides by
// the group, except the router mlp.gate, at the chosen mode, bits and
// group); kv_b_proj's key half transposed, stored in rows of nope, which
// the plan states; a config.json quantization block of exactly
// group_size, bits and mode. No tensor is read.
func TestPlanGLMFlashDrafter(t *testing.T) {
	m := testmodel.Load(t, fixtures.GLM47Flash)
	names := []string{"lm_head.weight", "model.eh_proj.weight", "model.embed_tokens.weight", "model.enorm.weight", "model.hnorm.weight",
		"model.shared_head_norm.weight", "model.mtp_block.input_layernorm.weight", "model.mtp_block.post_attention_layernorm.weight",
		"model.mtp_block.mlp.gate.weight", "model.mtp_block.mlp.gate.e_score_correction_bias",
		"model.mtp_block.mlp.shared_experts.gate_proj.weight", "model.mtp_block.mlp.shared_experts.up_proj.weight",
		"model.mtp_block.mlp.shared_experts.down_proj.weight", "model.mtp_block.mlp.switch_mlp.gate_proj.weight",
		"model.mtp_block.mlp.switch_mlp.up_proj.weight", "model.mtp_block.mlp.switch_mlp.down_proj.weight",
		"model.mtp_block.self_attn.q_a_proj.weight", "model.mtp_block.self_attn.q_a_layernorm.weight",
		"model.mtp_block.self_attn.q_b_proj.weight", "model.mtp_block.self_attn.kv_a_proj_with_mqa.weight",
		"model.mtp_block.self_attn.kv_a_layernorm.weight", "model.mtp_block.self_attn.embed_q.weight",
		"model.mtp_block.self_attn.unembed_out.weight", "model.mtp_block.self_attn.o_proj.weight"}
	cases := []struct {
		prec  string
		group int // 0: the flag left out
		mode  codec.Mode
		bits  int
		want  int // the group the plan quantizes with
	}{
		{"bf16", 0, "", 0, 0},
		{"int4", 0, codec.ModeMLXAffine, 4, 64},
		{"int4", 32, codec.ModeMLXAffine, 4, 32},
		{"int8", 128, codec.ModeMLXAffine, 8, 128},
		{"int2", 64, codec.ModeMLXAffine, 2, 64},
		{"mxfp4", 0, codec.ModeMLXMXFP4, 4, 32},
		{"mxfp8", 0, codec.ModeMLXMXFP8, 8, 32},
		{"nvfp4", 0, codec.ModeMLXNVFP4, 4, 16},
	}
	for _, c := range cases {
		t.Run(c.prec+"-"+strconv.Itoa(c.group), func(t *testing.T) {
			o := targets.Options{HeadPrecision: c.prec, MLXRounding: "cpu", Set: map[string]bool{}}
			if c.group != 0 {
				o.GroupSize, o.Set[targets.OptGroupSize] = c.group, true
			}
			p, err := testmodel.Plan(t, m, "mlx", o)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(m.Checkpoint); err != nil {
				t.Fatal(err)
			}
			ts := byName(p)
			if len(ts) != len(names) {
				t.Errorf("%d tensors, want %d", len(ts), len(names))
			}
			for _, n := range names {
				o, ok := ts[n]
				if !ok {
					t.Errorf("%s not planned", n)
					continue
				}
				last := o.Shape[len(o.Shape)-1]
				quantized := c.bits > 0 && strings.HasSuffix(n, ".weight") && !strings.HasSuffix(n, "mlp.gate.weight") &&
					len(o.Shape) >= 2 && last%int64(c.want) == 0
				if !quantized {
					if o.Quant != nil || o.DType != "BF16" && !strings.HasSuffix(n, "e_score_correction_bias") {
						t.Errorf("%s: %s %+v, want float", n, o.DType, o.Quant)
					}
					continue
				}
				if q := o.Quant; q == nil || q.Mode != c.mode || q.Bits != c.bits || q.GroupSize != c.want || q.Rounding != "cpu" {
					t.Errorf("%s: %+v, want %s %d-bit group %d", n, q, c.mode, c.bits, c.want)
				}
			}
			eq := ts["model.mtp_block.self_attn.embed_q.weight"]
			if !eq.Has(plan.TTranspose) || eq.RowLen != 64 || eq.StoredRow() != 32 || !slices.Equal(eq.Shape, []int64{4, 64, 32}) {
				t.Errorf("embed_q: row %d, stored row %d, shape %v, transforms %v", eq.RowLen, eq.StoredRow(), eq.Shape, eq.Transforms)
			}
			if uo := ts["model.mtp_block.self_attn.unembed_out.weight"]; uo.Has(plan.TTranspose) || uo.StoredRow() != 64 {
				t.Errorf("unembed_out: %+v", uo)
			}
			var cfg map[string]json.RawMessage
			if err := json.Unmarshal(p.Files[0].Contents, &cfg); err != nil {
				t.Fatal(err)
			}
			want := ""
			if c.bits > 0 {
				want = `{"group_size":` + strconv.Itoa(c.want) + `,"bits":` + strconv.Itoa(c.bits) + `,"mode":"` + c.mode.MLXModeName() + `"}`
			}
			for _, k := range []string{"quantization", "quantization_config"} {
				var got bytes.Buffer
				if cfg[k] != nil {
					json.Compact(&got, cfg[k])
				}
				if got.String() != want {
					t.Errorf("config %s = %s, want %s", k, got.String(), want)
				}
			}
			if p.Options["router_bits"] != "float" {
				t.Errorf("router_bits recorded as %q", p.Options["router_bits"])
			}
		})
	}
	// --router-bits does not apply: the splitter keeps the routers float.
	_, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4", RouterBits: 8, Set: map[string]bool{targets.OptRouterBits: true}})
	if !errors.As(err, new(targets.UsageError)) || !strings.Contains(err.Error(), "keeps the routers float") {
		t.Errorf("--router-bits: %v", err)
	}
}

// A transposed tensor's stored rows are what the executor fills: a plan
// that does not state them, states them for a tensor that is not
// transposed, or quantizes in groups that do not divide them is refused
// before a byte is written.
func TestValidateStoredRows(t *testing.T) {
	m := testmodel.Load(t, fixtures.GLM47Flash)
	o := targets.Options{HeadPrecision: "int4", GroupSize: 32, Set: map[string]bool{targets.OptGroupSize: true}}
	p, err := testmodel.Plan(t, m, "mlx", o)
	if err != nil {
		t.Fatal(err)
	}
	at := func(name string) *plan.OutTensor {
		for i := range p.Tensors {
			if p.Tensors[i].Name == name {
				return &p.Tensors[i]
			}
		}
		t.Fatalf("%s not planned", name)
		return nil
	}
	embedQ, unembed := at("model.mtp_block.self_attn.embed_q.weight"), at("model.mtp_block.self_attn.unembed_out.weight")
	for _, c := range []struct {
		what   string
		change func()
		want   string
	}{
		{"stored rows not stated", func() { embedQ.StoredRowLen = 0 }, "is not the last dimension"},
		{"stored rows on a tensor not transposed", func() { unembed.StoredRowLen = 32 }, "not transposed"},
		{"a group that divides the row but not the stored row", func() { embedQ.Quant = &plan.Quant{Mode: codec.ModeMLXAffine, Bits: 4, GroupSize: 64} }, "stored row length 32 not a multiple of group size 64"},
		{"a segment that is not one stored row high", func() { embedQ.Segments[1].Rows, embedQ.Segments[2].Rows = 16, 48 }, "transposed segment of 16 rows"},
	} {
		saved := *embedQ
		savedSegs := slices.Clone(embedQ.Segments)
		savedU := *unembed
		c.change()
		if err := p.Validate(m.Checkpoint); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
		*embedQ, *unembed = saved, savedU
		embedQ.Segments = savedSegs
	}
	if err := p.Validate(m.Checkpoint); err != nil {
		t.Fatalf("restored plan: %v", err)
	}
}

// FP4 codes move raw only whole and untouched: an MXFP4 repack or an mxfp4
// move of anything but FP4 codes with their scales per 32, with a value
// transform, or an MXFP4 tensor planned any other way is refused; the
// GGUF and MLX plans of DeepSeek-V4's experts validate.
func TestValidateFP4Moves(t *testing.T) {
	m := testmodel.Load(t, fixtures.DeepSeekV4)
	for _, target := range []string{"gguf", "mlx"} {
		p, err := testmodel.Plan(t, m, target, targets.Options{})
		if err != nil {
			t.Fatal(err)
		}
		at := slices.IndexFunc(p.Tensors, func(o plan.OutTensor) bool {
			return strings.Contains(o.Name, "gate_exps") || strings.Contains(o.Name, "switch_mlp.gate_proj")
		})
		if at < 0 {
			t.Fatalf("%s: no gate experts planned", target)
		}
		ex := &p.Tensors[at]
		for _, c := range []struct {
			what   string
			change func()
			want   string
		}{
			{"a value transform", func() { ex.Transforms = append(ex.Transforms, plan.TNormPlusOne) }, "no transform on values"},
			{"codes read unpacked", func() { ex.Segments = slices.Clone(ex.Segments); ex.Segments[0].Packed = "" }, "but has a block scale"},
			{"scales per 16", func() { ex.Segments = slices.Clone(ex.Segments); ex.Segments[0].Block = []int64{1, 16} }, ""},
		} {
			saved := *ex
			c.change()
			if err := p.Validate(m.Checkpoint); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %s: %v, want %q", target, c.what, err, c.want)
			}
			*ex = saved
		}
		if err := p.Validate(m.Checkpoint); err != nil {
			t.Fatalf("%s: restored plan: %v", target, err)
		}
	}
	p, err := testmodel.Plan(t, m, "gguf", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Tensors {
		if p.Tensors[i].Name == "blk.4.attn_q_a.weight" {
			p.Tensors[i].DType = plan.DTypeMXFP4
		}
	}
	if err := p.Validate(m.Checkpoint); err == nil || !strings.Contains(err.Error(), "only written by an MXFP4 repack") {
		t.Errorf("a bf16 matrix planned MXFP4: %v", err)
	}
}

// MX fp8 moves only whole and untouched as MLX mxfp8 of its own group, and
// MX fp8 codes are never read without their decoder: a value transform, a
// group other than the scales', or a tensor neither moved nor decoded is
// refused; Hy4's mlx plan validates.
func TestValidateMXFP8Moves(t *testing.T) {
	m := testmodel.Load(t, fixtures.Hy4)
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := slices.IndexFunc(p.Tensors, func(o plan.OutTensor) bool { return o.Name == "decoder.self_attn.q_a_proj.weight" })
	if at < 0 || !p.Tensors[at].Has(plan.TMoveMXFP8) {
		t.Fatalf("q_a_proj not planned as an mxfp8 move")
	}
	ex := &p.Tensors[at]
	for _, c := range []struct {
		what   string
		change func()
		want   string
	}{
		{"a value transform", func() { ex.Transforms = append(ex.Transforms, plan.TNormPlusOne) }, "no transform on values"},
		{"another group", func() { q := *ex.Quant; q.GroupSize = 64; ex.Quant = &q }, "not mxfp8 of its group"},
		{"neither moved nor decoded", func() { ex.Transforms = nil; ex.Quant = nil }, "read only decoded with its scales"},
	} {
		saved := *ex
		c.change()
		if err := p.Validate(m.Checkpoint); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
		*ex = saved
	}
	if err := p.Validate(m.Checkpoint); err != nil {
		t.Fatalf("restored plan: %v", err)
	}
}

// A block-FP8 tensor moved as mxfp8 (each ue8m0 block scale repeated per
// group) is refused once it is not whole blocks of E4M3 codes with F8_E8M0
// scales, each block whole groups wide: the repeated scales would not fit.
func TestValidateBlockFP8Moves(t *testing.T) {
	m := testmodel.Load(t, fixtures.DeepSeekV4FP8Blocks)
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := slices.IndexFunc(p.Tensors, func(o plan.OutTensor) bool { return o.Name == "decoder.attn.wq_b.weight" })
	if at < 0 || !p.Tensors[at].Has(plan.TMoveMXFP8) || p.Tensors[at].Segments[0].Block[0] != 128 {
		t.Fatalf("wq_b not planned as an mxfp8 move of its 128 × 128 blocks")
	}
	ex := &p.Tensors[at]
	for _, c := range []struct {
		what   string
		change func()
		want   string
	}{
		{"part of a block's rows", func() { ex.Segments[0].Rows = 64; ex.Shape = []int64{64, 128} }, "is not whole 128 × 128 blocks"},
		{"groups wider than a block", func() { q := *ex.Quant; q.GroupSize = 256; ex.Quant = &q }, "not mxfp8 of its group"},
		{"a value transform", func() { ex.Transforms = append(ex.Transforms, plan.TTranspose) }, "no transform on values"},
	} {
		saved := *ex
		saved.Segments = slices.Clone(ex.Segments)
		c.change()
		if err := p.Validate(m.Checkpoint); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
		*ex = saved
	}
	if err := p.Validate(m.Checkpoint); err != nil {
		t.Fatalf("restored plan: %v", err)
	}
}
