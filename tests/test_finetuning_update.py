"""The fine-tuning update on real text: the bundled novels' source task (data/glue/SST-2: which
of two held-out Austen novels a sentence comes from) at a rate where the original's update,
which has no bias correction, ends predicting one class for every input and says so, while
the default learns under float32, mixed_bfloat16 and mixed_float16."""

import os

import keras
import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder, run_classifier
from albert_tf.data.vocab import train_sentencepiece
from conftest import run_main

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "data", "glue", "SST-2")
N_DEV = 200
MODEL = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """SST-2 layout with every training sentence and the first 200 dev ones, a SentencePiece
    model trained on the training sentences and a tiny encoder's initial checkpoint."""
    root = tmp_path_factory.mktemp("novels")
    data = root / "data" / "SST-2"
    data.mkdir(parents=True)
    for split, n in (("train", None), ("dev", N_DEV)):
        with open(os.path.join(SOURCE, f"{split}.tsv")) as f:
            lines = f.read().splitlines()
        (data / f"{split}.tsv").write_text("\n".join(lines[:None if n is None else n + 1])
                                           + "\n")
    with open(os.path.join(SOURCE, "train.tsv")) as f:
        (root / "text.txt").write_text("\n".join(line.split("\t")[0]
                                                 for line in f.read().splitlines()[1:]))
    spm = train_sentencepiece(str(root / "text.txt"), str(root / "spm"), 1000,
                              hard_vocab_limit=False)
    keras.utils.set_random_seed(0)
    AlbertEncoder(AlbertConfig(vocab_size=1000, **MODEL)).save_pretrained(str(root / "init"))
    labels = np.array([int(line.rsplit("\t", 1)[1])
                       for line in (data / "dev.tsv").read_text().splitlines()[1:]])
    return {"data_dir": str(root / "data"), "spm": spm, "init": str(root / "init"),
            "majority": np.bincount(labels).max() / len(labels)}


def finetune(assets, out, **flags):
    """run_classifier at 3e-3: 300 steps of 32 (30 warmup), evaluated once at the end."""
    run_main(run_classifier, dict(
        task_name="sst-2", data_dir=assets["data_dir"], output_dir=out,
        spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
        do_eval=True, strategy="one_device", max_seq_length=32, train_batch_size=32,
        eval_batch_size=100, learning_rate=3e-3, train_step=300, warmup_step=30,
        save_checkpoints_steps=300, log_steps=100), flags)
    with open(out / "eval_results.txt") as f:
        return dict(line.strip().split(" = ") for line in f if line.strip())


@pytest.mark.parametrize("precision", ["none", "bfloat16", "float16"])
def test_default_update_learns(assets, tmp_path, caplog, precision):
    results = finetune(assets, tmp_path / "out", mixed_precision=precision)
    assert float(results["eval_accuracy"]) >= assets["majority"] + 0.07, results
    assert "not learning" not in caplog.text and "Every dev prediction" not in caplog.text


def test_original_update_ends_at_one_class_and_says_so(assets, tmp_path, caplog):
    results = finetune(assets, tmp_path / "out", mixed_precision="none",
                       bias_correction=False, decay_after_warmup=False, adam_epsilon=1e-6)
    accuracy = float(results["eval_accuracy"])
    assert any(accuracy == pytest.approx(v) for v in (assets["majority"],
                                                       1 - assets["majority"])), results
    assert float(results["eval_loss"]) == pytest.approx(np.log(2), abs=0.01)
    assert ("Update: adamw at learning rate 0.003, no bias correction, decay from step 0, "
            "epsilon 1e-06, weight decay 0.01") in caplog.text
    assert "no better than a constant prediction's (0.6931" in caplog.text
    assert "model is not learning from its input; try a lower --learning_rate (now 0.003)" \
        in caplog.text
    assert "Every dev prediction at step 300 is " in caplog.text
    assert f"({N_DEV} of {N_DEV})" in caplog.text
