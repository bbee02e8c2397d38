package model

import (
	"fmt"
	"strconv"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests/words"
)

// Describing a checkpoint does work in proportion to the counts config.json
// declares (layers, experts) and to the MTP depth its tensor names imply. A
// few bytes can declare millions, so every such count is bounded, before
// that work, by what the checkpoint's headers can hold, and every list of
// problems or names in a message is capped (MaxListed, then "and K more").

// maxConfigLayers bounds num_hidden_layers before the checkpoint is read
// (ParseConfig derives one layer type per layer); checkLimits then bounds it
// by the checkpoint.
const maxConfigLayers = 1 << 16

// maxMTPLayers bounds the MTP depth of a family whose per-layer lists are
// padded to the MTP layers (Step-3.5; the releases have 1 to 3). Elsewhere
// the declared depth sizes nothing: it is compared with the tensors'.
const maxMTPLayers = 1 << 8

// minLayerLimit is the number of layers always accepted: a source may hold
// the head alone and still declare its trunk's layers.
const minLayerLimit = 1024

// checkLimits refuses counts from config.json or from tensor names that the
// checkpoint cannot back, naming the config key or the tensor; and a
// configuration whose RoPE cannot work (checked here, for supported
// families only).
func checkLimits(cfg *Config, ck *st.Checkpoint, spec *Spec) error {
	if err := cfg.checkRotary(); err != nil {
		return fmt.Errorf("%s: %w", ConfigFile, err)
	}
	n := len(ck.Names)
	// Every layer holds tensors of its own.
	if limit := max(n, minLayerLimit); cfg.NumHiddenLayers > limit {
		return fmt.Errorf("%s: num_hidden_layers is %d, more layers than the checkpoint's %d tensors can hold (at most %d)", ConfigFile, cfg.NumHiddenLayers, n, limit)
	}
	// A block that stores its experts one by one needs three tensors per
	// expert, and describing it lists them all: together such blocks may
	// want at most twice the tensors there are (room to report the missing
	// half). Fused blocks give their count by shape, which describing
	// compares with num_experts without work in proportion to it.
	if blocks, example := perExpertBlocks(ck, spec.MoE); blocks > 0 && int64(blocks)*3*int64(cfg.NumExperts) > 2*int64(n) {
		return fmt.Errorf("%s: num_experts is %d, but the checkpoint's %d tensors cannot hold its %d blocks of experts stored one by one (such as %s), 3 tensors per expert", ConfigFile, cfg.NumExperts, n, blocks, example)
	}
	// Every MTP layer holds head tensors of its own.
	mtp, deepest, maxLayer := 0, "", -1
	for _, name := range ck.Names {
		j, _, ok := spec.headPart(name, cfg.NumHiddenLayers)
		if !ok {
			continue
		}
		mtp++
		if j > maxLayer {
			deepest, maxLayer = name, j
		}
	}
	if maxLayer >= mtp {
		return fmt.Errorf("%s: tensor %s names MTP layer %d, but the checkpoint has only %d %s* tensors, too few for that many layers", ck.Tensors[deepest].Shard.Name, deepest, maxLayer, mtp, spec.headPattern(spec.TextPrefixes[0], cfg.NumHiddenLayers))
	}
	return nil
}

// perExpertBlocks counts the blocks that store their experts one by one
// (...{experts}{e}....) and none fused, with one of their tensor names.
// (A block holding both is a problem describing reports.)
func perExpertBlocks(ck *st.Checkpoint, moe *MoE) (int, string) {
	if moe == nil {
		return 0, ""
	}
	blocks := map[string]bool{}
	example := ""
	marker := "." + moe.Experts
	for _, name := range ck.Names {
		i := strings.Index(name, marker)
		if i < 0 {
			continue
		}
		prefix := name[:i+len(marker)]
		num, _, ok := strings.Cut(name[len(prefix):], ".")
		if _, err := strconv.Atoi(num); !ok || err != nil || blocks[prefix] {
			continue
		}
		_, gateUp := ck.Tensors[prefix+moe.FusedGateUp]
		_, down := ck.Tensors[prefix+moe.FusedDown]
		if !gateUp && !down {
			blocks[prefix] = true
			if example == "" {
				example = name
			}
		}
	}
	return len(blocks), example
}

// MaxListed caps every list of problems, tensors or names in a message.
const MaxListed = 20

// CapList keeps the first MaxListed items and says how many more there are.
func CapList(items []string, what string) []string {
	if len(items) <= MaxListed {
		return items
	}
	out := append([]string{}, items[:MaxListed]...)
	return append(out, "and "+words.Count(len(items)-MaxListed, "more "+strings.TrimSuffix(what, "s"), "more "+what))
}
