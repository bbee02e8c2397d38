package targets

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// AddToTotalSize adds n bytes to metadata.total_size of a safetensors index
// (root: the index as decoded) that files are added to: an index whose
// metadata has no total_size (or that has no metadata) stays so, rather
// than counting only the added files.
func AddToTotalSize(root *jsonobj.Object, n int64) error {
	raw, ok := root.Get("metadata")
	if !ok {
		return nil
	}
	meta, err := jsonobj.Decode(raw)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	raw, ok = meta.Get("total_size")
	if !ok {
		return nil
	}
	total, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return fmt.Errorf("metadata.total_size %s is not a byte count", raw)
	}
	meta.Set("total_size", total+n)
	root.Set("metadata", meta)
	return nil
}
