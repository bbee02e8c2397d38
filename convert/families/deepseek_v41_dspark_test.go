package families

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// A DeepSeek-V4 config with DSpark stages (0731) and a DeepSeek-V4.1 one are
// this family; a DeepSeek-V4 config without the dspark keys is not (its
// classic head is another family's).
func TestDSparkIdentity(t *testing.T) {
	t.Parallel()
	v41 := []byte(strings.Replace(string(fixtureConfig(t, fixtures.DSparkV4Flash)), `"model_type": "deepseek_v4"`, `"model_type": "deepseek_v41"`, 1))
	for _, c := range []struct {
		name string
		raw  []byte
		want bool
	}{
		{"0731", fixtureConfig(t, fixtures.DSparkV4Flash), true},
		{"V4.1", v41, true},
		{"V4 without dspark keys", fixtureConfig(t, fixtures.DSparkV4Flash, dsparkKey, nil), false},
		{"dspark key nested in text_config", []byte(`{"model_type":"deepseek_v4","text_config":{"dspark_target_layer_ids":[1]}}`), true},
	} {
		id, err := model.ReadIdentity(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := deepseekV41Family.Matches(id); got != c.want {
			t.Errorf("%s: matches %v, want %v (keys %v)", c.name, got, c.want, id.Keys)
		}
	}
	c, err := model.ParseConfig(fixtureConfig(t, fixtures.DSparkV4Flash))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := c.Family(); err != nil || f != deepseekV41Family {
		t.Fatalf("the fixture's config: family %v, %v", f, err)
	}
	d := model.KeysOf[DSparkConfig](c)
	if len(d.TargetLayerIDs) != 3 || d.BlockSize != 4 || *d.NoiseTokenID != 500 || *d.MarkovRank != 32 || d.HCMult != 4 || d.OGroups != 2 {
		t.Errorf("keys %+v", d)
	}
}

// Bad DSpark configs are refused naming the key.
func TestDSparkConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kv   []any
		want string
	}{
		{[]any{dsparkKey, []int{}}, "dspark_target_layer_ids is missing or empty"},
		{[]any{dsparkKey, []int{2, 1}}, "distinct and increasing"},
		{[]any{dsparkKey, []int{1, 1}}, "distinct and increasing"},
		{[]any{dsparkKey, []int{1, 4}}, "the layers are 0..3 (num_hidden_layers 4)"},
		{[]any{"dspark_noise_token_id", nil}, "dspark_noise_token_id is missing"},
		{[]any{"dspark_noise_token_id", 512}, "outside the vocabulary of 512"},
		{[]any{"dspark_block_size", 0}, "dspark_block_size"},
		{[]any{"scoring_func", "softmax"}, `scoring_func is "softmax"`},
		{[]any{"hc_mult", 1}, "hc_mult is 1"},
		{[]any{"o_groups", 3}, "o_groups 3 does not divide"},
		{[]any{"qk_rope_head_dim", 256}, "qk_rope_head_dim is 256"},
		{[]any{"q_lora_rank", 0}, "q_lora_rank"},
		{[]any{"compress_ratios", []int{0, 128, 4, 0}}, "compress_ratios has 4 entries for num_hidden_layers 4"},
		{[]any{"compress_ratios", []int{0, 128, 4, 0, 0, 4, 0}}, "compress_ratios[5] is 4: the DSpark stages do not compress"},
	} {
		if _, err := model.ParseConfig(fixtureConfig(t, fixtures.DSparkV4Flash, c.kv...)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.kv, err, c.want)
		}
	}
}
