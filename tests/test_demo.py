"""The demo's pieces (scripts/demo.sh, demo_plan.py, demo_report.py) and the tools' quiet
stderr. The full demo is not run here; its times are in the README."""

import importlib
import importlib.util
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertPretrainer, FullTokenizer, create_pretraining_data
from albert_tf.data.vocab import train_sentencepiece
from albert_tf.startup import NOISE
from albert_tf.training.excursions import write_log
from conftest import TINY
from tool_runner import run_tool, tool_flags

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = "the cat sat on a mat and dog ran to old house by river while bird sang".split()


def _script(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts",
                                                                     name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plan_mod, report = _script("demo_plan"), _script("demo_report")


def test_plan_fits_the_time_budget():
    for seconds in (0.05, 0.11, 0.3, 0.72, 1.5):
        steps, epochs = plan_mod.plan(seconds, 8, 8)
        assert plan_mod.MIN_STEPS <= steps <= plan_mod.MAX_STEPS and steps % 20 == 0
        total = (plan_mod.FIXED_SECONDS + steps * seconds * plan_mod.PRETRAIN_OVERHEAD
                 + epochs * plan_mod.FINETUNE_STEPS_PER_EPOCH * plan_mod.FINETUNE_STEP_COST
                 * seconds)
        assert total <= 8 * 60 or steps == plan_mod.MIN_STEPS, (seconds, steps, epochs)
    assert plan_mod.plan(0.001, 8, 8) == (plan_mod.MAX_STEPS, 8)
    assert plan_mod.plan(1.5, 8, 8)[1] < 8  # a slow machine fine-tunes fewer epochs
    slow = plan_mod.plan(0.72, 8, 8)[0]
    assert plan_mod.plan(0.72, 12, 8)[0] > slow  # DEMO_MINUTES buys steps


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_probe_times_the_demo_model_s_training_step(policy):
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", "albert_demo.json"))
    seconds = plan_mod.step_seconds(config, policy, 2, 8, 2, budget_s=0.3)
    assert 0 < seconds < 5


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny SentencePiece model, records built from text and a pretraining run with
    held-out evaluation, by the demo's own commands."""
    root = tmp_path_factory.mktemp("demo")
    rng = random.Random(0)
    text = "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 12))) + "."
                     for _ in range(600))
    (root / "corpus.txt").write_text(text.replace(". ", ".\n"), encoding="utf-8")
    spm = train_sentencepiece(str(root / "corpus.txt"), str(root / "spm"), 60,
                              hard_vocab_limit=False)
    env = dict(os.environ, PYTHONPATH=ROOT)
    common = [f"--spm_model_file={spm}", "--max_seq_length=16", "--max_predictions_per_seq=3"]
    assert run_tool(create_pretraining_data, None, *common, input_file=root / "corpus.txt",
                    output_file=root / "train.tfrecord", dupe_factor=2) == 0
    config = root / "albert_config.json"
    vocab = len(FullTokenizer(spm, do_lower_case=True))
    AlbertConfig(**dict(TINY, vocab_size=vocab, max_position_embeddings=16)).to_json_file(
        str(config))
    out = root / "pretrained"
    proc = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_pretraining", f"--albert_config_file={config}",
         f"--input_file={root / 'train.tfrecord'}", f"--output_dir={out}",
         "--max_seq_length=16", "--max_predictions_per_seq=3", "--train_batch_size=8",
         "--num_train_steps=6", "--num_warmup_steps=1", "--learning_rate=1e-2",
         "--save_checkpoints_steps=3", "--log_steps=2", "--do_eval", "--max_eval_steps=2",
         "--dynamic_masking", "--ngram=1", "--mixed_precision=none"],
        env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(root=root, spm=spm, config=str(config), out=str(out), stderr=proc.stderr,
                vocab=vocab)


def test_curves_png_from_the_run_s_summaries(run, tmp_path):
    scalars = report.read_scalars(os.path.join(run["out"], "train"))
    assert [s for s, _ in scalars["masked_lm_loss"]] == [2, 4, 6]
    held_out = report.read_scalars(os.path.join(run["out"], "eval"))
    assert [s for s, _ in held_out["masked_lm_accuracy"]] == [3, 6]
    png = tmp_path / "curves.png"
    report.plot_curves(run["out"], str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 2 * height > 0  # three panels side by side
    with pytest.raises(SystemExit, match="no TensorBoard summaries"):
        report.plot_curves(str(tmp_path), str(tmp_path / "none.png"))


def test_fill_mask_ranks_before_and_after(run, tmp_path):
    initial = str(tmp_path / "initial")
    report.write_initial(run["config"], initial)
    before = AlbertPretrainer.from_pretrained(initial)
    after = AlbertPretrainer.from_pretrained(run["out"])
    assert not np.allclose(before.encoder.embeddings.word_embeddings.numpy(),
                           after.encoder.embeddings.word_embeddings.numpy())
    sentences = [("the cat [MASK] on", "sat"), ("the old [MASK].", "house")]
    ranks = report.fill_mask_ranks(run["out"], run["spm"], sentences)
    for rank, probability, top in ranks:
        assert rank is None or 1 <= rank <= run["vocab"]
        assert 0 <= probability <= 1 and len(top) == 5
        assert len(set(top)) == 5 and all(w.strip() and w != "▁" for w in top), top
    text, before_ranks, after_ranks = report.show_fill_mask(initial, run["out"], run["spm"],
                                                            sentences)
    assert after_ranks == ranks
    assert text.count("before pretraining") == 2
    assert re.search(r"The right word is in the top 5 for \d of 2 sentences", text)


def test_finetune_against_its_majority_baseline(tmp_path):
    results = tmp_path / "eval_results.txt"
    results.write_text("eval_accuracy = 0.75\neval_loss = 0.5\nglobal_step = 10\n")
    tsv = tmp_path / "train.tsv"
    tsv.write_text("sentence\tlabel\n" + "a\t1\n" * 3 + "b\t0\n")
    text, accuracy, baseline = report.finetune_summary(str(results), str(tsv))
    assert (accuracy, baseline) == (0.75, 0.75)
    assert "'1'" in text and "0.750 against 0.750" in text
    assert text.endswith("no better, so it learned nothing of the task yet; a longer run learns "
                         "it (more DEMO_MINUTES, or DEMO_STEPS)")
    results.write_text("eval_accuracy = 0.875\nglobal_step = 10\n")
    assert report.finetune_summary(str(results), str(tsv))[0].endswith(
        "0.875 against 0.750 for always answering the most frequent training label ('1'): "
        "+0.125, it learned the task")


def test_demo_script_uses_flags_its_tools_define():
    script = open(os.path.join(ROOT, "scripts", "demo.sh")).read()
    assert subprocess.run(["bash", "-n", os.path.join(ROOT, "scripts", "demo.sh")]).returncode == 0
    calls = re.findall(r"run \$PY -m albert_tf\.(\w+)((?:[^\n]|\\\n)*)", script)
    assert {m for m, _ in calls} >= {"train_vocab", "create_pretraining_data", "run_pretraining",
                                     "run_classifier", "export_hub", "predict"}
    for module in {m for m, _ in calls}:
        defined = tool_flags(importlib.import_module(f"albert_tf.{module}"))
        for _, args in (c for c in calls if c[0] == module):
            for flag in re.findall(r"--(\w+)", args):
                assert flag in defined, (module, flag)
    for name in ("demo_plan.py", "demo_report.py"):
        assert f"scripts/{name}" in script


def test_quiet_stderr_drops_only_the_known_noise_and_survives_a_crash():
    """The known lines (TensorFlow's at startup, its persistent XLA cache's at each load, the
    LiteRT converter's), a tf.data service server's configuration dump up to its blank line and
    the converter's custom-op list up to its last line."""
    code = ("from albert_tf.startup import quiet_stderr\n"
            "quiet_stderr()\n"
            "import os\n"
            "os.write(2, b'E0000 cuda_platform.cc:52] failed call to cuInit: INTERNAL\\n')\n"
            "os.write(2, b'a real warning\\n')\n"
            "os.write(2, b'E0000 text_format.cc:378] Error parsing text-format tensorflow."
            "XlaSerializedCacheEntry: 2:1: Expected identifier, got: 6\\n')\n"
            "os.write(2, b'E0000 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target "
            "machine feature +prefer-no-scatter is not  supported on the host machine.\\n')\n"
            "print('stdout line', flush=True)\n"
            "os.write(2, b'I0000 port.cc:153] oneDNN custom operations are on.\\n')\n"
            "os.write(2, b'I0000 service.cc:153] XLA service 0x55 initialized for platform Host "
            "(this does not guarantee that XLA will be used). Devices:\\n')\n"
            "os.write(2, b'I0000 service.cc:161]   StreamExecutor [0]: Host, Default Version "
            "(Driver: 0.0.0)\\n')\n"
            "os.write(2, b'I0000 worker_impl.cc:190] Worker registered with dispatcher running "
            "at h:1. Worker config: goo.gle/debugstr \\nport: 2\\nprotocol: grpc\\n\\n')\n"
            "os.write(2, b'W0000 flatbuffer_export.cc:4248] The following operation(s) need "
            "TFLite custom op implementation(s):\\nCustom ops: FastBertNormalize\\nDetails:\\n"
            "\\ttf.FastBertNormalize(tensor<1x!tf_type.string>)\\nSee instructions: "
            "https://www.tensorflow.org/lite/guide/ops_custom\\n')\n"
            "os.write(2, b'I0000 flatbuffer_export.cc:4302] Estimated count of arithmetic ops: "
            "1.822 M  ops, equivalently 0.911 M  MACs\\n')\n"
            "os.write(2, b'the last words\\n')\n"
            "os.abort()\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert proc.stdout == "stdout line\n"
    assert proc.stderr == "a real warning\nthe last words\n"


def test_tools_start_without_error_like_lines(run):
    assert "Precision policy float32" in run["stderr"]
    for noise in NOISE:
        assert noise not in run["stderr"]
    assert not re.search(r"^E\d{4} ", run["stderr"], re.MULTILINE), run["stderr"][:2000]


def test_the_report_says_how_each_excursion_was_recovered(run, tmp_path):
    assert report.excursions_summary(run["out"]) == (
        "  No loss excursion: the training loss never spiked or kept rising.")
    write_log(str(tmp_path), [dict(number=1, kind="rise", detected_at_step=7169,
                                   rolled_back_to_step=3870, skipped_batches=3299, lr_scale=0.5)])
    assert report.excursions_summary(str(tmp_path)) == (
        "  Excursion 1 (rise) seen at step 7169: back to step 3870, past 3299 batches, learning "
        "rate x0.5.")
