package model_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The concat projection is the Forward's FC, and the same tensor of every
// later MTP layer of a head whose layers each have one; its input is the
// embedding first for every family mtpconv knows.
func TestConcat(t *testing.T) {
	testmodel.RegisterGLM(t)
	glm := testmodel.GLM(t, testmodel.GLMConfig(2, false), nil, nil)
	qwen := testmodel.Load(t, fixtures.Qwen36)
	for _, c := range []struct {
		name string
		want bool
	}{{"model.layers.3.eh_proj.weight", true}, {"model.layers.4.eh_proj.weight", true}, {"model.layers.3.enorm.weight", false}, {"model.layers.2.mlp.down_proj.weight", false}} {
		if emb, ok := glm.Concat(c.name); ok != c.want || (ok && !emb) {
			t.Errorf("glm %s: concat %v (embedding first %v), want %v", c.name, ok, emb, c.want)
		}
	}
	if emb, ok := qwen.Concat("mtp.fc.weight"); !ok || !emb {
		t.Errorf("qwen mtp.fc.weight: concat %v, embedding first %v", ok, emb)
	}
	if _, ok := qwen.Concat("mtp.layers.0.self_attn.q_proj.weight"); ok {
		t.Error("q_proj taken for the concat projection")
	}
}

// Every family's own head tensors, read from its tables, hold its concat
// projection and the norms before it, and no tensor a checkpoint may lack.
func TestHeadOwn(t *testing.T) {
	t.Parallel()
	for _, name := range model.Families() {
		f, _ := model.LookupFamily(name)
		s := f.Spec(&model.Config{})
		own := f.HeadOwn(0)
		if len(s.HeadTop)+len(s.HeadLayer) == 0 { // a head that is no NextN head (DSpark stages): nothing of one
			if len(own) != 0 {
				t.Errorf("%s: no head wants, yet own tensors %v", name, own)
			}
			continue
		}
		if f.GGUF.Arch == "dflash" { // a block draft: its own tensors those llama.cpp keeps outside the blocks, fc among them
			fc := false
			for _, rel := range own {
				_, suffix, _ := strings.Cut(strings.TrimPrefix(rel, "layers."), ".")
				n, ok := f.GGUF.Layer[suffix]
				if !ok || n.Kind.Info().Block {
					t.Errorf("%s: own tensor %s is written in a block", name, rel)
				}
				fc = fc || n.Kind == gg.KindFC
			}
			if !fc {
				t.Errorf("%s: the draft's own tensors %v lack fc", name, own)
			}
			continue
		}
		concat, norms := 0, 0
		for _, rel := range own {
			_, suffix, _ := strings.Cut(strings.TrimPrefix(rel, "layers."), ".")
			switch {
			case strings.HasSuffix(rel, "eh_proj.weight") || rel == "fc.weight" || rel == "layers.0.input_proj.weight" ||
				f.GGUF.HeadTop[rel].Kind == gg.KindNextNEHProj || f.GGUF.Layer[suffix].Kind == gg.KindNextNEHProj:
				concat++
			case strings.Contains(rel, "norm"):
				norms++
			}
			for _, w := range append(append([]model.Want{}, s.HeadTop...), s.HeadLayer...) {
				if w.Role&model.RoleOptional != 0 && strings.HasSuffix(rel, w.Suffix) {
					t.Errorf("%s: %s is optional", name, rel)
				}
			}
		}
		if s.HeadLayers != "" { // a drafter checkpoint: its projections from and to the target's width
			if !slices.Equal(own, []string{"pre_projection.weight", "post_projection.weight"}) {
				t.Errorf("%s: the drafter's own tensors %v: want its pre and post projections", name, own)
			}
			continue
		}
		m := &model.Model{Family: f, Spec: s, Config: &model.Config{}}
		// The two norms before the projection, and a final norm where the
		// head has one of its own (Inkling's depths end in the trunk's).
		wantNorms := 3
		if s.Forward != nil && s.Forward(m).FinalNorm == "" {
			wantNorms = 2
		}
		if split := m.ConcatSplit(); concat != map[bool]int{false: 1, true: 2}[split] || norms < wantNorms {
			t.Errorf("%s: the head's own tensors %v: want the concat projection and its norms", name, own)
		}
	}
}
