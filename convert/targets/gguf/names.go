package gguf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// expertKinds are the stacked gate, up and down experts.
var expertKinds = [3]gg.TensorName{gg.Weight(gg.KindFFNGateExps), gg.Weight(gg.KindFFNUpExps), gg.Weight(gg.KindFFNDownExps)}

// headName maps a head tensor (name without the head prefix) to its GGUF
// name by the family's tables, given the trunk's layer count: the MTP
// layer j is block n_layer + j, the head's own tensors are block n_layer's.
func headName(g model.GGUFSpec, rest string, nLayer int) (string, error) {
	if n, ok := g.HeadTop[rest]; ok {
		return n.In(nLayer), nil
	}
	if after, ok := strings.CutPrefix(rest, "layers."); ok {
		j, suffix, ok := strings.Cut(after, ".")
		if n, err := strconv.Atoi(j); ok && err == nil {
			if name, ok := g.Layer[suffix]; ok {
				return name.In(nLayer + n), nil
			}
		}
	}
	return "", fmt.Errorf("no GGUF name for MTP tensor %q", rest)
}
