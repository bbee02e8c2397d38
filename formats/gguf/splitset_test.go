package gguf

import "testing"

// A member's name gives its prefix, 0-based number and the set's count, as
// llama.cpp's llama_split_prefix reads it; SplitPath writes it back.
func TestSplitName(t *testing.T) {
	for _, c := range []struct {
		path      string
		prefix    string
		no, count int
		ok        bool
	}{
		{"/m/Qwen3.6-Q4_K_M-00001-of-00003.gguf", "/m/Qwen3.6-Q4_K_M", 0, 3, true},
		{"a-00003-of-00003.gguf", "a", 2, 3, true},
		{"a-00004-of-00003.gguf", "", 0, 0, false},
		{"a-00000-of-00003.gguf", "", 0, 0, false},
		{"a-0001-of-0003.gguf", "", 0, 0, false},
		{"a.gguf", "", 0, 0, false},
	} {
		prefix, no, count, ok := SplitName(c.path)
		if prefix != c.prefix || no != c.no || count != c.count || ok != c.ok {
			t.Errorf("%s: %q %d %d %v", c.path, prefix, no, count, ok)
		}
		if ok && SplitPath(prefix, no, count) != c.path {
			t.Errorf("%s: SplitPath gives %s", c.path, SplitPath(prefix, no, count))
		}
	}
}

// split.tensors.count is rewritten in its place and of its type; a value
// that does not fit the type is refused.
func TestSplitKV(t *testing.T) {
	kvs := []KV{Pair(KeySplitNo, Value{Type: TypeUint16, V: uint16(0)}), Pair(KeySplitTensorsCount, I32(76)), Pair("x", U32(1))}
	got, err := SplitKV(kvs, 96)
	if err != nil || got[1].Value != I32(96) || got[0] != kvs[0] || got[2] != kvs[2] || kvs[1].Value != I32(76) {
		t.Errorf("%v %v", got, err)
	}
	small := []KV{Pair(KeySplitTensorsCount, Value{Type: TypeUint16, V: uint16(5)})}
	if _, err := SplitKV(small, 70000); err == nil {
		t.Error("70000 written as a u16")
	}
}
