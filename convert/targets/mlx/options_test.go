package mlx

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/quant/codec"
)

func set(o targets.Options, names ...string) targets.Options {
	o.Set = map[string]bool{}
	for _, n := range names {
		o.Set[n] = true
	}
	return o
}

func TestPrecisionsParse(t *testing.T) {
	aliases := map[string]string{"fp8": "mxfp8"} // fp8 is MLX's mxfp8
	for _, n := range Precisions {
		p, err := ParsePrecision(n)
		want := n
		if a, ok := aliases[n]; ok {
			want = a
		}
		if err != nil || p.Name != want {
			t.Fatalf("%s: %+v %v", n, p, err)
		}
	}
	for n, want := range map[string][3]any{"int1": {1, codec.ModeMLXAffine, 0}, "int3": {3, codec.ModeMLXAffine, 0}, "int6": {6, codec.ModeMLXAffine, 0},
		"mxfp4": {4, codec.ModeMLXMXFP4, 32}, "mxfp8": {8, codec.ModeMLXMXFP8, 32}, "nvfp4": {4, codec.ModeMLXNVFP4, 16}} {
		p, _ := ParsePrecision(n)
		if p.Bits != want[0] || p.Mode != want[1] || p.Group != want[2] {
			t.Errorf("%s: %+v", n, p)
		}
	}
	for _, bad := range []string{"int7", "int0", "fp4", "int16"} {
		if _, err := ParsePrecision(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestOptionsAliasesAndGroups(t *testing.T) {
	type c struct {
		o                targets.Options
		trunk, recipe    string
		head, trunkGroup int
		err, note        string
	}
	cases := []c{
		{o: set(targets.Options{QBits: 3}, targets.OptQBits), trunk: "int3", head: 64, trunkGroup: 64},
		{o: set(targets.Options{QMode: "mxfp4"}, targets.OptQMode), trunk: "mxfp4", head: 64, trunkGroup: 32},
		{o: set(targets.Options{QMode: "nvfp4", QBits: 4}, targets.OptQMode, targets.OptQBits), trunk: "nvfp4", head: 64, trunkGroup: 16},
		{o: set(targets.Options{QMode: "mxfp8", QBits: 4}, targets.OptQMode, targets.OptQBits), err: "mxfp8 is 8-bit only"},
		{o: set(targets.Options{QBits: 7}, targets.OptQBits), err: "--q-bits 7"},
		{o: set(targets.Options{TrunkPrecision: "int5", QBits: 3}, targets.OptTrunkPrecision, targets.OptQBits), trunk: "int5", head: 64, trunkGroup: 64, note: "--trunk-precision wins"},
		{o: set(targets.Options{TrunkPrecision: "int4", GroupSize: 32, QGroupSize: 128}, targets.OptTrunkPrecision, targets.OptGroupSize, targets.OptQGroupSize), trunk: "int4", head: 32, trunkGroup: 128, note: "--q-group-size wins"},
		{o: set(targets.Options{TrunkPrecision: "mxfp4", GroupSize: 64}, targets.OptTrunkPrecision, targets.OptGroupSize), err: "--group-size 64: mxfp4 quantizes in groups of 32 only"},
		{o: set(targets.Options{HeadPrecision: "nvfp4", GroupSize: 32}, targets.OptHeadPrecision, targets.OptGroupSize), err: "--group-size 32: nvfp4 quantizes in groups of 16 only"},
		{o: set(targets.Options{HeadPrecision: "int4", GroupSize: 16}, targets.OptHeadPrecision, targets.OptGroupSize), err: "takes 32, 64 or 128"},
		// nvfp4 takes 16, as the help says; the bf16 trunk has no groups to refuse it for.
		{o: set(targets.Options{HeadPrecision: "nvfp4", GroupSize: 16}, targets.OptHeadPrecision, targets.OptGroupSize), trunk: "bf16", head: 16, trunkGroup: 16},
		{o: set(targets.Options{HeadPrecision: "nvfp4", TrunkPrecision: "int4", GroupSize: 16}, targets.OptHeadPrecision, targets.OptTrunkPrecision, targets.OptGroupSize), err: "--group-size 16: int4 (MLX affine) takes 32, 64 or 128"},
		{o: set(targets.Options{TrunkPrecision: "mxfp4", HeadPrecision: "int4", QGroupSize: 32, GroupSize: 128}, targets.OptTrunkPrecision, targets.OptHeadPrecision, targets.OptQGroupSize, targets.OptGroupSize), trunk: "mxfp4", head: 128, trunkGroup: 32, note: "--q-group-size wins"},
		{o: set(targets.Options{TrunkRecipe: "mixed_3_6"}, targets.OptTrunkRecipe), trunk: "mixed_3_6", recipe: "mixed_3_6", head: 64, trunkGroup: 64},
		{o: set(targets.Options{QuantPredicate: "mixed_2_6", QMode: "affine"}, targets.OptQuantPredicate, targets.OptQMode), trunk: "mixed_2_6", recipe: "mixed_2_6", head: 64, trunkGroup: 64},
		{o: set(targets.Options{TrunkRecipe: "mixed_4_6", QuantPredicate: "mixed_2_6"}, targets.OptTrunkRecipe, targets.OptQuantPredicate), trunk: "mixed_4_6", recipe: "mixed_4_6", head: 64, trunkGroup: 64, note: "--trunk-recipe wins"},
		{o: set(targets.Options{TrunkRecipe: "mixed_5_6"}, targets.OptTrunkRecipe), err: `--trunk-recipe "mixed_5_6": must be one of mixed_2_6, mixed_3_4, mixed_3_6, mixed_4_6`},
		// An error names the flag given.
		{o: set(targets.Options{QuantPredicate: "mixed_5_6"}, targets.OptQuantPredicate), err: `--quant-predicate "mixed_5_6": must be one of`},
		{o: set(targets.Options{QuantPredicate: "mixed_3_6", TrunkPrecision: "int4"}, targets.OptQuantPredicate, targets.OptTrunkPrecision), err: "--quant-predicate mixed_3_6 sets the trunk's bits"},
		{o: set(targets.Options{TrunkRecipe: "mixed_3_6", TrunkPrecision: "int4"}, targets.OptTrunkRecipe, targets.OptTrunkPrecision), err: "leave out --trunk-precision"},
		{o: set(targets.Options{QuantPredicate: "mixed_3_6", QMode: "mxfp4"}, targets.OptQuantPredicate, targets.OptQMode), err: "leave out --q-bits/--q-mode"},
		// 1 bit: MLX's CPU kernel only (its Metal kernel's rule is not known here).
		{o: set(targets.Options{HeadPrecision: "int1"}, targets.OptHeadPrecision), err: "--head-precision int1: MLX's 1-bit affine has a rule of its own, reproduced for MLX's CPU kernel only"},
		{o: set(targets.Options{HeadPrecision: "int1", MLXRounding: "cpu", GroupSize: 32}, targets.OptHeadPrecision, targets.OptMLXRounding, targets.OptGroupSize), trunk: "bf16", head: 32, trunkGroup: 32},
		{o: set(targets.Options{QBits: 1}, targets.OptQBits), err: "--q-bits 1: affine takes 2"},
	}
	for i, tc := range cases {
		got, err := options(tc.o)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("case %d: err %v, want %q", i, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got.Trunk.Name != tc.trunk || got.Recipe != tc.recipe || got.GroupSize != tc.head || got.TrunkGroup != tc.trunkGroup {
			t.Errorf("case %d: %+v", i, got)
		}
		if notes := strings.Join(got.Notes, "; "); (tc.note == "") != (notes == "") || !strings.Contains(notes, tc.note) {
			t.Errorf("case %d: notes %q, want %q", i, notes, tc.note)
		}
	}
}

// The drafter has no trunk: mlx-lm's trunk spellings and the recipe are not its flags.
func TestDrafterRefusesTrunkFlags(t *testing.T) {
	for _, f := range []string{targets.OptTrunkRecipe, targets.OptQBits, targets.OptQGroupSize, targets.OptQMode, targets.OptQuantPredicate} {
		if err := targets.CheckOptions(drafter{}, set(targets.Options{}, f)); err == nil || !strings.Contains(err.Error(), "--"+f) {
			t.Errorf("--target mlx took --%s: %v", f, err)
		}
		if err := targets.CheckOptions(combined{}, set(targets.Options{}, f)); err != nil {
			t.Errorf("--target combined refused --%s: %v", f, err)
		}
	}
}

func TestRecipeLayers(t *testing.T) {
	// mlx-lm's use_more_bits for 40 layers (Qwen3.5/3.6-35B-A3B): the first
	// and last eighth, and every third layer from the eighth on.
	var more []int
	n := 40
	for i := 0; i < n; i++ {
		if i < n/8 || i >= 7*n/8 || pyMod(i-n/8, 3) == 2 {
			more = append(more, i)
		}
	}
	want := []int{0, 1, 2, 3, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 34, 35, 36, 37, 38, 39}
	if len(more) != len(want) {
		t.Fatalf("%v", more)
	}
	for i := range want {
		if more[i] != want[i] {
			t.Fatalf("%v", more)
		}
	}
	at, err := layerLocation([]string{"language_model.model.embed_tokens.weight", "language_model.model.layers.0.mlp.shared_expert.down_proj.weight"})
	if err != nil || at != 3 {
		t.Fatal(at, err)
	}
	if _, err := layerLocation([]string{"a.b"}); err == nil {
		t.Fatal("no down_proj accepted")
	}
}

// A 1-bit component is --target mlx's: an mlx-lm model with one (--target
// combined, --into) is refused, naming why.
func TestNo1BitInMLXLM(t *testing.T) {
	for _, o := range []targets.Options{
		set(targets.Options{HeadPrecision: "int1", MLXRounding: "cpu"}, targets.OptHeadPrecision, targets.OptMLXRounding),
		set(targets.Options{TrunkPrecision: "int1", MLXRounding: "cpu"}, targets.OptTrunkPrecision, targets.OptMLXRounding),
	} {
		got, err := options(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := no1Bit(got); err == nil || !strings.Contains(err.Error(), "not checked a 1-bit head or trunk of an mlx-lm model against mlx_lm.convert") {
			t.Errorf("%+v: %v", o, err)
		}
	}
	got, _ := options(set(targets.Options{HeadPrecision: "int2"}, targets.OptHeadPrecision))
	if err := no1Bit(got); err != nil {
		t.Error(err)
	}
}
