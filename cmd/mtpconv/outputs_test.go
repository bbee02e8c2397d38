package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

var updateOutputs = flag.Bool("update-outputs", false, "rewrite testdata/golden/outputs.sha256 from this build")

// outputCase is one target × precision export of the output matrix.
type outputCase struct {
	name    string
	fixture string
	args    []string
}

// outputMatrix is every target × precision × fixture whose model files are
// pinned by sha256: a refactor may not change one byte of them.
func outputMatrix() []outputCase {
	all := []string{fixtures.Qwen36, fixtures.Qwen35, fixtures.Next}
	moe := []string{fixtures.Qwen36, fixtures.Qwen35}
	var cs []outputCase
	add := func(fxs []string, name string, args ...string) {
		for _, f := range fxs {
			cs = append(cs, outputCase{name, f, args})
		}
	}
	for _, p := range []string{"bf16", "f16", "int8", "int4"} {
		add(all, "mlx-"+p, "--target", "mlx", "--head-precision", p)
	}
	add(all, "mlx-int4-g32-cpu", "--target", "mlx", "--head-precision", "int4", "--group-size", "32", "--mlx-rounding", "cpu")
	add(all, "mlx-int8-g128-router0", "--target", "mlx", "--head-precision", "int8", "--group-size", "128", "--router-bits", "0")
	for _, tp := range []string{"bf16", "f16", "int8", "int4"} {
		add(moe, "combined-"+tp+"-bf16", "--target", "combined", "--trunk-precision", tp, "--head-precision", "bf16")
	}
	add(moe, "combined-int4-int4-cpu", "--target", "combined", "--trunk-precision", "int4", "--head-precision", "int4", "--mlx-rounding", "cpu")
	add(moe, "combined-bf16-int8-shards", "--target", "combined", "--head-precision", "int8", "--max-shard-size", "20MB")
	add(all, "openvino-f16", "--target", "openvino", "--head-precision", "f16", "--lm-head-precision", "f16")
	add(all, "openvino-int8", "--target", "openvino", "--head-precision", "int8")
	add(all, "openvino-int8-sym", "--target", "openvino", "--head-precision", "int8", "--sym")
	add(all, "openvino-int4-g64", "--target", "openvino", "--head-precision", "int4", "--group-size", "64")
	add(all, "openvino-int4-g128-sym-lm4", "--target", "openvino", "--head-precision", "int4", "--group-size", "128", "--sym", "--lm-head-precision", "int4")
	return cs
}

// modelFile reports whether a file is one whose bytes are pinned (not the manifest or card).
func modelFile(name string) bool {
	return strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".bin") || strings.HasSuffix(name, ".xml") ||
		name == "config.json" || name == "model.safetensors.index.json"
}

// TestOutputsUnchanged exports the whole matrix and compares every model
// file's sha256 with testdata/golden/outputs.sha256 (go test -run
// TestOutputsUnchanged -update-outputs rewrites it).
func TestOutputsUnchanged(t *testing.T) {
	golden := filepath.Join(fixtures.Root(), "testdata", "golden", "outputs.sha256")
	want := map[string]string{}
	if f, err := os.Open(golden); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if sum, key, ok := strings.Cut(sc.Text(), "  "); ok {
				want[key] = sum
			}
		}
		f.Close()
	} else if !*updateOutputs {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range outputMatrix() {
		src := fixtures.Ensure(t, c.fixture)
		out := filepath.Join(t.TempDir(), "o")
		args := append([]string{"export", "--src", src, "--out", out, "--quiet"}, c.args...)
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%s %s: exit %d: %s", c.name, c.fixture, code, stderr)
		}
		ents, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !modelFile(e.Name()) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(out, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			s := sha256.Sum256(b)
			got[c.fixture+"/"+c.name+"/"+e.Name()] = hex.EncodeToString(s[:])
		}
	}
	if *updateOutputs {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s  %s\n", got[k], k)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for k, sum := range got {
		if want[k] != sum {
			t.Errorf("%s: sha256 %s, pinned %s", k, sum, want[k])
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: pinned but not written", k)
		}
	}
}
