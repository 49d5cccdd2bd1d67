"""training.step_memory: the estimate against the peak memory XLA compiled for nine steps on an
NVIDIA H200, the micro-batch and accumulation it advises, the lines it writes."""

import json
import os
import subprocess
import sys

from albert_tf.config import AlbertConfig
from albert_tf.training.step_memory import (
    GIB, StepMemory, StepShape, accumulation_that_fits, batch_that_fits, gpu_memory_bytes,
    step_bytes)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
# The newest variant of each shape (docs/benchmarks.md, "Memory of a step"): the step's name in
# the results file → (config, masked positions, sequences per example, rows of the last block,
# the estimate's error in percent as the docs' table states it). Pretraining's last block ran
# at [CLS] and the 20 masked positions; the sentence heads' (classifier, RACE) at every row:
# they were measured before their step ran it at [CLS] only (2503d3e).
MEASURED = {
    "step_base128_1colsum_auto": ("albert_base_v2", 20, 1, 21, -2.9),
    "step_base512_3both_auto": ("albert_base_v2", 20, 1, 21, 0.2),
    "step_large512_1colsum_auto": ("albert_large_v2", 20, 1, 21, 4.7),
    "step_xxlarge512_3both_auto": ("albert_xxlarge_v2", 20, 1, 21, 4.9),
    "ft_cls32_0base_auto": ("albert_base_v2", 0, 1, None, -0.8),
    "ft_cls256_1colsum_auto": ("albert_base_v2", 0, 1, None, -0.3),
    "ft_squad32_0base_auto": ("albert_base_v2", 0, 1, None, -0.6),
    "ft_squad96_1colsum_auto": ("albert_base_v2", 0, 1, None, -0.7),
    "ft_race8_0base_auto": ("albert_base_v2", 0, 4, None, -0.3),
}


def _h200_steps():
    steps = {}
    for name in ("2026-11-27T1836-h200-pretraining-variants.txt",
                 "2026-11-27T1900-h200-finetuning.txt"):
        with open(os.path.join(RESULTS, name)) as f:
            for line in f:
                if line.startswith('{"what": "variant"'):
                    step = json.loads(line)
                    steps[step["name"]] = step
    return steps


def test_the_estimate_is_within_the_documented_error_of_the_h200_figures():
    steps = _h200_steps()
    for name, (config_name, masked, choices, rows, documented) in MEASURED.items():
        step = steps[name]
        config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", config_name + ".json"))
        # The step's arguments are the float32 weights and the two slots of LAMB or AdamW (the
        # batch's ids add well under a thousandth).
        parameters = round(step["argument_gib"] * GIB / 12)
        estimate = step_bytes(config, parameters, step["batch"],
                              StepShape(step["seq"], masked, choices, rows), "mixed_bfloat16", 2,
                              fused_attention=True)
        error = 100 * (estimate / (step["peak_gib"] * GIB) - 1)
        assert round(error, 1) == documented, (name, error)
        assert -3 <= error <= 5, name


# The XLA step on a GPU with kernels.XLA_GPU_REWRITES, compiled for an H200 without one
# (bench/gpu/compile_offline.py; docs/benchmarks.md "Compiled for a GPU without one"): the
# step's name → (config, masked positions, sequences per example, rows of the last block, the
# documented error). The sentence heads' last block now runs at [CLS] only.
_BATCH_SEQ = {"base128": (256, 128), "base512": (64, 512), "large512": (32, 512),
              "xxlarge512": (16, 512), "ft_cls32": (32, 128), "ft_cls256": (256, 128),
              "ft_squad32": (32, 384), "ft_squad96": (96, 384), "ft_race8": (8, 512)}


REWRITTEN = {
    "base128_after_auto": ("albert_base_v2", 20, 1, 21, 3.7),
    "base512_after_auto": ("albert_base_v2", 20, 1, 21, -0.2),
    "large512_after_auto": ("albert_large_v2", 20, 1, 21, 0.1),
    "xxlarge512_after_auto": ("albert_xxlarge_v2", 20, 1, 21, 4.2),
    "ft_cls32_after_auto": ("albert_base_v2", 0, 1, 1, 1.2),
    "ft_cls256_after_auto": ("albert_base_v2", 0, 1, 1, -0.4),
    "ft_squad32_after_auto": ("albert_base_v2", 0, 1, None, 0.1),
    "ft_squad96_after_auto": ("albert_base_v2", 0, 1, None, -0.4),
    "ft_race8_after_auto": ("albert_base_v2", 0, 4, 1, -0.5),
}


def test_the_rewritten_estimate_is_within_the_documented_error_of_the_compiled_steps():
    steps = {}
    with open(os.path.join(RESULTS, "2026-11-28T0125-offline-h200-xla-gpu-rewrites.txt")) as f:
        for line in f:
            if line.startswith("{"):
                step = json.loads(line)
                steps[step["name"]] = step
    for name, (config_name, masked, choices, rows, documented) in REWRITTEN.items():
        step = steps[name]
        batch, seq = _BATCH_SEQ[name.split("_after")[0]]
        config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", config_name + ".json"))
        parameters = round(step["argument_gib"] * GIB / 12)
        estimate = step_bytes(config, parameters, batch, StepShape(seq, masked, choices, rows),
                              "mixed_bfloat16", 2, fused_attention=True, rewritten=True)
        error = 100 * (estimate / (step["peak_gib"] * GIB) - 1)
        assert round(error, 1) == documented, (name, error)
        assert -1 <= error <= 5, name


def test_the_plain_attention_keeps_its_probabilities_and_float32_doubles_the_activations():
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", "albert_base_v2.json"))
    shape = StepShape(512, 20)
    fused = step_bytes(config, 0, 8, shape, "mixed_bfloat16", 2, True)
    plain = step_bytes(config, 0, 8, shape, "mixed_bfloat16", 2, False)
    assert plain - fused == 8 * 512 * 12 * 12 * 512 * 2  # tokens × layers × heads × seq × 2 B
    # A last block at 21 rows of 512 keeps its input, keys and values for all: 3 H-sized values.
    last = step_bytes(config, 0, 8, StepShape(512, 20, last_block_rows=21), "mixed_bfloat16", 2,
                      True)
    assert fused - last == 8 * (512 - 21) * (20 * 768 + 6 * 3072 - 3 * 768 * 2)
    weights = step_bytes(config, 1000, 8, shape, "float32", 2, True) - step_bytes(
        config, 0, 8, shape, "float32", 2, True)
    assert weights == 1000 * 16  # float32 weights, gradients and two slots
    assert step_bytes(config, 1000, 8, shape, "mixed_bfloat16", 2, True) - fused == 1000 * 18


def _memory(needed_per_example, device_gib, batch=256, replicas=1, accumulation=1, **kwargs):
    return StepMemory(lambda b: b * needed_per_example, batch, replicas, accumulation,
                      StepShape(512), "mixed_bfloat16", "GPU:0",
                      device_gib and int(device_gib * GIB), **kwargs)


def test_the_micro_batch_that_fits_and_the_accumulation_that_keeps_the_global_batch():
    per_example = GIB // 8  # 32 GiB at 256
    assert batch_that_fits(lambda b: b * per_example, 24 * GIB, 256) == 172  # 0.9 × 24 GiB
    assert batch_that_fits(lambda b: b * per_example, 64 * GIB, 256) is None  # it fits
    assert batch_that_fits(None, 24 * GIB, 256) is None
    assert accumulation_that_fits(256, 1, 1, 172) == 2
    assert accumulation_that_fits(256, 1, 2, 60) == 8  # micro-batches of 32
    assert accumulation_that_fits(256, 2, 1, 100) == 2
    assert accumulation_that_fits(6, 1, 1, 4) == 2
    assert accumulation_that_fits(7, 1, 1, 4) == 7  # a prime batch: micro-batches of one
    assert accumulation_that_fits(8, 1, 8, 4) == 8


def test_the_out_of_memory_line_names_the_batch_that_fits_and_the_accumulation():
    memory = _memory(GIB // 8, 24)
    assert memory.out_of_memory(0, None) == (
        "out of memory in the training step at --train_batch_size=256 and --max_seq_length=512: "
        "the step needs about 32.0 GiB of GPU memory (estimate; batch 256 x 512, mixed_bfloat16) "
        "and GPU:0 has 24.0 GiB; a micro-batch of 128 fits, and "
        "--gradient_accumulation_steps=2 keeps the global batch of 256. Training stopped after "
        "step 0 without saving; last checkpoint: none.")
    # Accumulation already on: multiplied. Several replicas: per replica.
    assert "; a micro-batch of 32 fits, and --gradient_accumulation_steps=8 keeps the global " \
           "batch of 256." in _memory(GIB // 8, 6, accumulation=2).out_of_memory(3, "ck")
    assert ("; a micro-batch of 64 a replica fits, and --gradient_accumulation_steps=2 keeps "
            "the global batch of 256.") in _memory(GIB // 8, 12, replicas=2).out_of_memory(3, "c")
    # The estimate said the batch fits (it did not), or no device size: half may fit.
    assert "; a micro-batch of 128 may fit, and --gradient_accumulation_steps=2" in _memory(
        GIB // 8, 80).out_of_memory(0, None)
    unknown = _memory(GIB // 8, None).out_of_memory(5, "/out/model.ckpt-5")
    assert unknown.endswith("(estimate; batch 256 x 512, mixed_bfloat16); a micro-batch of 128 "
                            "may fit, and --gradient_accumulation_steps=2 keeps the global batch "
                            "of 256. Training stopped after step 5 without saving; last "
                            "checkpoint: /out/model.ckpt-5."), unknown
    assert _memory(GIB // 8, 0.5, batch=7).out_of_memory(0, None).endswith(
        "; a micro-batch of 1 fits, and --gradient_accumulation_steps=7 keeps the global batch "
        "of 7. Training stopped after step 0 without saving; last checkpoint: none.")


def test_the_line_before_training():
    assert _memory(GIB // 16, 140).log_line() == (
        "The step needs about 16.0 GiB of GPU memory (estimate; batch 256 x 512, "
        "mixed_bfloat16) of 140.0 GiB on GPU:0", False)
    assert _memory(GIB // 16, 12).log_line() == (
        "The step needs about 16.0 GiB of GPU memory (estimate; batch 256 x 512, "
        "mixed_bfloat16), more than the 12.0 GiB of GPU:0: a micro-batch of 128 fits, and "
        "--gradient_accumulation_steps=2 keeps the global batch of 256", True)
    assert _memory(GIB // 16, None).log_line() == (
        "The step needs about 16.0 GiB of GPU memory (estimate; batch 256 x 512, "
        "mixed_bfloat16)", False)
    race = StepMemory(lambda b: b * 2 ** 20, 8, 1, 1, StepShape(512, sequences_per_example=4),
                      "float32")
    assert race.log_line() == ("The step needs about 8.0 MiB of device memory (estimate; batch "
                               "8 x 4 x 512, float32)", False)
    assert StepMemory(None, 8, 1, 1, None, "float32").log_line() == (None, False)


def test_the_gpu_s_memory_comes_from_nvidia_smi(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$1 $3 $4" = "--query-gpu=memory.total -i 3" ] '
                   '&& echo 143771 || exit 6\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert gpu_memory_bytes() == 143771 * 2 ** 20
    assert gpu_memory_bytes(1) is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert gpu_memory_bytes() is None


def test_the_estimate_loads_without_tensorflow():
    code = ("import sys; import albert_tf.training.step_memory, albert_tf.training.trainer_options;"
            " print('tensorflow' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    assert found.stdout.strip() == "False"
