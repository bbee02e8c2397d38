package manifests

import (
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Fingerprint describes a source checkpoint without reading tensor data:
// the config's hash and each shard's name, size and header hash.
func Fingerprint(ck *st.Checkpoint, config []byte) (Source, error) {
	s := Source{Name: ck.Source.Name(), ConfigSHA256: SHA256(config)}
	for _, sh := range ck.Shards {
		h, err := sh.HeaderBytes()
		if err != nil {
			return s, err
		}
		s.Shards = append(s.Shards, Shard{Name: sh.Name, Size: sh.Header.FileSize, HeaderSHA256: SHA256(h)})
		s.TotalBytes += sh.Header.FileSize
	}
	return s, nil
}

// SameSource reports how two fingerprints differ, or "" when they agree.
func SameSource(a, b Source) string {
	if a.ConfigSHA256 != b.ConfigSHA256 {
		return "config.json differs"
	}
	if len(a.Shards) != len(b.Shards) {
		return "the number of shards differs"
	}
	for i := range a.Shards {
		if a.Shards[i] != b.Shards[i] {
			return "shard " + a.Shards[i].Name + " differs (name, size or header)"
		}
	}
	return ""
}
