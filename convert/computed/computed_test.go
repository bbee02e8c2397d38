package computed

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// TestLlama3RopeFactorsEqualReference: the factors are the bytes the
// reference converter's own generate_extra_tensors computes
// (testdata/rope_freqs_reference.json, recorded by
// interop/reference_rope_freqs.py), for Step-3.7-Flash's values, the
// fixture's, the converter's defaults and others.
func TestLlama3RopeFactorsEqualReference(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/rope_freqs_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Configs []struct {
			Name        string
			RopeTheta   float64 `json:"rope_theta"`
			HeadDim     int     `json:"head_dim"`
			RotaryDim   int     `json:"rotary_dim"`
			RopeScaling struct {
				Factor   *float64 `json:"factor"`
				Low      *float64 `json:"low_freq_factor"`
				High     *float64 `json:"high_freq_factor"`
				Original *int     `json:"original_max_position_embeddings"`
			} `json:"rope_scaling"`
			Hex string
		}
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Configs) < 5 {
		t.Fatalf("%d reference configs", len(ref.Configs))
	}
	or := func(p *float64, d float64) float64 {
		if p == nil {
			return d
		}
		return *p
	}
	for _, c := range ref.Configs {
		t.Run(c.Name, func(t *testing.T) {
			r := Llama3RopeFactors{Base: c.RopeTheta, HeadDim: c.HeadDim, RotaryDim: c.RotaryDim,
				Factor: or(c.RopeScaling.Factor, 8), LowFreq: or(c.RopeScaling.Low, 1), HighFreq: or(c.RopeScaling.High, 4), OriginalMaxPositionEmbeddings: 8192}
			if c.RopeScaling.Original != nil {
				r.OriginalMaxPositionEmbeddings = *c.RopeScaling.Original
			}
			dt, shape, data, err := Tensor(r.Name())
			if err != nil {
				t.Fatal(err)
			}
			if dt != st.F32 || len(shape) != 1 || shape[0] != int64(c.HeadDim/2) {
				t.Fatalf("%s %v, want F32 [%d]", dt, shape, c.HeadDim/2)
			}
			if got := hex.EncodeToString(data); got != c.Hex {
				t.Errorf("bytes differ from the reference converter's:\n got %s\nwant %s", got, c.Hex)
			}
		})
	}
}

func TestComputedNames(t *testing.T) {
	r := Llama3RopeFactors{Base: 5e6, HeadDim: 64, RotaryDim: 32, Factor: 8, LowFreq: 1, HighFreq: 32, OriginalMaxPositionEmbeddings: 256}
	for _, tc := range []struct{ name, err string }{
		{r.Name(), ""},
		{strings.Replace(r.Name(), "factor=8,", "factor=8.0,", 1), "not written as mtpconv writes it"},
		{strings.Replace(r.Name(), "high_freq_factor=32", "high_freq_factor=1", 1), "not 0 < low < high"},
		{strings.Replace(r.Name(), "rotary_dim=32", "rotary_dim=66", 1), "up to head_dim"},
		{strings.Replace(r.Name(), ",original_max_position_embeddings=256", "", 1), "6 of the 7 values"},
		{strings.Replace(r.Name(), "base=5e+06", "base=5e+06,base=5e+06", 1), "once"},
		{Prefix + "yarn_factors(x=1)", "unknown kind"},
		{Prefix + "llama3_rope_factors", "not kind(values)"},
	} {
		_, _, _, err := Tensor(tc.name)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
	// Attach adds it once, readable as a source tensor; other names are left alone.
	ck := &st.Checkpoint{Tensors: map[string]*st.Tensor{}}
	for range 2 {
		if err := Attach(ck, []string{r.Name(), "model.norm.weight"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(ck.Tensors) != 1 {
		t.Fatalf("%d tensors attached", len(ck.Tensors))
	}
	tn := ck.Tensors[r.Name()]
	got, err := ck.ReadTensor(tn, nil)
	_, _, want, _ := Tensor(r.Name())
	if err != nil || string(got) != string(want) || tn.Shard.Name != Shard {
		t.Fatalf("read %x (%v) from %s, want %x", got, err, tn.Shard.Name, want)
	}
}

// Gemma 4's proportional RoPE factors: the reference converter's rope_freqs
// of the Gemma-4 fixtures (global head 64, a quarter rotated: 8 of 32
// frequencies kept, 1e30 after them; testdata/gguf_reference's records hold
// the same bytes, checked by the gguf target's reference test).
func TestProportionalRopeFactors(t *testing.T) {
	r := ProportionalRopeFactors{HeadDim: 64, Rotated: 8}
	dt, shape, data, err := Tensor(r.Name())
	if err != nil || dt != st.F32 || len(shape) != 1 || shape[0] != 32 {
		t.Fatalf("%v %v %v", dt, shape, err)
	}
	for i := range 32 {
		want := float32(1)
		if i >= 8 {
			want = 1e30
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])); got != want {
			t.Errorf("factor %d is %v, want %v", i, got, want)
		}
	}
	for _, tc := range []struct{ name, err string }{
		{Prefix + "proportional_rope_factors(head_dim=64,rotated=33)", "33 rotated of head_dim 64"},
		{Prefix + "proportional_rope_factors(head_dim=63,rotated=8)", "head_dim 63"},
		{Prefix + "proportional_rope_factors(head_dim=64,rotated=8,x=1)", "not written as mtpconv writes it"},
		{Prefix + "proportional_rope_factors(rotated=8)", "input does not match format"},
	} {
		if _, _, _, err := Tensor(tc.name); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
