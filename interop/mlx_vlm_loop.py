"""mlx-vlm 0.7.10's own speculative loop, as the MLX drafter tests of the
families mlx-vlm alone drafts with (GLM-5.3-Flash, Qwen3.8-Flash-Next) run
it: their fixtures made by mkfixtures, mlx-vlm's trunk of a fixture loaded
strictly in float32, greedy generation with and without our drafter."""
import subprocess
from pathlib import Path

import mlx.core as mx

from conftest import ROOT

PROMPT = [3, 17, 200, 33, 4, 99, 250, 11]
NEW_TOKENS = 48


def make_fixtures(fixtures):
    """The fixtures (key -> name), generated into testdata/fixtures: key -> folder."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *fixtures.values()], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return dict(zip(fixtures, [Path(p) for p in res.stdout.split()]))


def load_trunk(folder):
    """mlx-vlm's model of the fixture, loaded strictly (every language-model
    parameter from the checkpoint; mlx-vlm drops the vision tower a
    checkpoint has no weights for), in float32 (MLX's CPU backend has no
    bf16 gather-matmul for the experts)."""
    from mlx_vlm.utils import load_model
    model = load_model(folder, strict=True)
    assert model.vision_tower is None
    model.set_dtype(mx.float32)
    return model


def load_drafter(folder):
    """Our drafter folder as mlx-vlm's load_drafter reads it, in float32."""
    from mlx_vlm.speculative.drafters import load_drafter as load
    drafter, kind = load(str(folder))
    assert kind == "mtp"
    drafter.set_dtype(mx.float32)
    return drafter


def greedy(model, drafter=None):
    """NEW_TOKENS greedy tokens after PROMPT, drafted by drafter when given."""
    from mlx_vlm.generate.ar import generate_step
    kw = dict(draft_model=drafter, draft_kind="mtp") if drafter is not None else {}
    out = []
    for tok, _ in generate_step(mx.array([PROMPT]), model, None, None, max_tokens=NEW_TOKENS, temperature=0.0, **kw):
        out.append(int(tok.item()) if hasattr(tok, "item") else int(tok))
    return out


def acceptance(drafter):
    """The drafts mlx-vlm's loop made and accepted with drafter."""
    return sum(drafter.draft_lens), sum(drafter.accept_lens)


def assert_rigged_accepted(model, want, drafter, label):
    """mlx-vlm's loop with drafter next to model (a rigged trunk whose greedy
    tokens are want): the greedy tokens unchanged and nearly every draft
    accepted; the counts printed under label."""
    got = greedy(model, drafter)
    drafted, accepted = acceptance(drafter)
    print(f"{label}: drafted {drafted}, accepted {accepted}, acceptance {accepted / max(drafted, 1):.3f}")
    assert got == want
    assert drafted >= NEW_TOKENS // 2 and accepted >= 0.95 * drafted, (drafted, accepted)


def assert_rejected(model, drafter, label):
    """mlx-vlm's loop with a head of random weights: the greedy tokens
    unchanged and few drafts accepted (the rigged acceptance can fail)."""
    assert greedy(model, drafter) == greedy(model)
    drafted, accepted = acceptance(drafter)
    print(f"{label}: drafted {drafted}, accepted {accepted}")
    assert drafted >= NEW_TOKENS // 2 and accepted < 0.5 * drafted, (drafter.accept_lens, drafter.draft_lens)


def bf16_drafters(mtpconv, src, tmp_path, split):
    """Our bf16 drafter of src and the splitter's, on a copy of src whose
    config.json is written as transformers writes it (Python's float
    literals: 1e-05), so that the drafters' config.json compare byte for
    byte too: (ours, ref)."""
    import json
    import shutil
    from conftest import export
    copy = tmp_path / "src"
    shutil.copytree(src, copy)
    cfg = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    ref = split(str(copy), str(tmp_path / "ref"))
    return export(mtpconv, copy, tmp_path / "ours", "--target", "mlx"), ref


def fp8_drafters(mtpconv, fp8, dequant, tmp_path, split):
    """A block-FP8 source: our bf16 drafter of it equals the one of its
    dequantized float32 twin byte for byte (the dequantization runs before
    any cast), and at --head-precision fp8 ours is what the splitter writes
    from the FP8 source itself (mxfp8): the two fp8 folders (ours, ref),
    both loaded by load_drafter."""
    import json
    from conftest import export
    from mlx_vlm.speculative.drafters import load_drafter as load
    a = export(mtpconv, fp8, tmp_path / "fp8", "--target", "mlx")
    b = export(mtpconv, dequant, tmp_path / "dequant", "--target", "mlx")
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "config.json").read_bytes() == (b / "config.json").read_bytes()
    with mx.stream(mx.cpu):
        ref = split(str(fp8), str(tmp_path / "ref"))
    ours = export(mtpconv, fp8, tmp_path / "ours", "--target", "mlx", "--head-precision", "fp8", "--mlx-rounding", "cpu")
    assert json.loads((ours / "config.json").read_text())["quantization"]["mode"] == "mxfp8"
    for folder in (a, ours):
        assert load(str(folder))[1] == "mtp"
    return ours, ref
