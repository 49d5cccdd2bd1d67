"""The original's documented command lines (google-research/albert README, run_glue.sh, export
scripts; listed in docs/migration.md) run as they are, with `albert.` → `albert_tf.` and only
paths and sizes changed, and write what the original wrote. Each runs in this process as
`python -m albert_tf.<module>` runs it (`module.run(argv)` with only that tool's flags)."""

import importlib
import json
import os
import random
import shutil

import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.formats.checkpoints import read_checkpoint
from conftest import write_pretraining_records
from test_race import write_race
from test_run_squad import TINY, _paragraph, write_spm, write_squad
from tool_runner import run_tool

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V2_KEYS = {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
           "NoAns_f1", "NoAns_total", "null_score_diff_threshold"}

# module, the documented flags in their documented order ({...}: a tiny path or size), the
# files the original wrote, and the keys of its eval_results.txt.
COMMANDS = [
    ("run_pretraining",
     "--input_file={records} --output_dir={out} --init_checkpoint={release}/model.ckpt-best "
     "--albert_config_file={release}/albert_config.json --do_train --do_eval "
     "--train_batch_size=8 --eval_batch_size=8 --max_seq_length=16 "
     "--max_predictions_per_seq=4 --optimizer='lamb' --learning_rate=.00176 "
     "--num_train_steps=4 --num_warmup_steps=1 --save_checkpoints_steps=2",
     ["model.ckpt-4.index", "eval_results.txt",
      "30k-clean.model"],  # (the vocabulary beside --init_checkpoint, kept with the run)
     {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy",
      "sentence_order_loss"}),
    ("run_classifier",  # run_glue.sh, first pass: train only, from the hub handle's weights
     "--output_dir={out} --data_dir={glue} --vocab_file={release}/30k-clean.vocab "
     "--spm_model_file={release}/30k-clean.model --do_lower_case --max_seq_length=32 "
     "--optimizer=adamw --task_name=SST-2 --warmup_step=2 --learning_rate=1e-5 "
     "--train_step=6 --save_checkpoints_steps=3 --train_batch_size=32 --do_train "
     "--nodo_eval --nodo_predict --albert_hub_module_handle= "
     "--init_checkpoint={release}/model.ckpt-best",
     ["model.ckpt-6.index"], None),
    ("run_classifier",  # run_glue.sh, second pass: evaluate and predict in the same directory
     "--output_dir={out_previous} --data_dir={glue} --vocab_file={release}/30k-clean.vocab "
     "--spm_model_file={release}/30k-clean.model --do_lower_case --max_seq_length=32 "
     "--optimizer=adamw --task_name=SST-2 --warmup_step=2 --learning_rate=1e-5 "
     "--train_step=6 --save_checkpoints_steps=3 --train_batch_size=32 --nodo_train --do_eval "
     "--do_predict --albert_hub_module_handle=",
     ["eval_results.txt", "test_results.tsv", "submit_results.tsv"],
     {"eval_accuracy", "eval_loss", "global_step"}),
    ("run_squad_v1",
     "--albert_config_file={squad_init}/albert_config.json --output_dir={out} "
     "--train_file={squad_train_v1} --predict_file={squad_dev_v1} "
     "--train_feature_file={out}/train.tfrecord --predict_feature_file={out}/dev.tfrecord "
     "--predict_feature_left_file={out}/dev_left.pkl --init_checkpoint={squad_init} "
     "--spm_model_file={squad_spm} --do_lower_case --max_seq_length=40 --doc_stride=16 "
     "--max_query_length=12 --do_train=true --do_predict=true --train_batch_size=32 "
     "--predict_batch_size=8 --learning_rate=3e-3 --num_train_epochs=2.0 "
     "--warmup_proportion=.1 --save_checkpoints_steps=5000 --n_best_size=20 "
     "--max_answer_length=30",
     ["predictions.json", "nbest_predictions.json", "eval_results.txt", "train.tfrecord",
      "dev.tfrecord"], {"exact_match", "f1"}),
    ("run_squad_v2",
     "--albert_config_file={squad_init}/albert_config.json --output_dir={out} "
     "--train_file={squad_train_v2} --predict_file={squad_dev_v2} "
     "--train_feature_file={out}/train.tfrecord --predict_feature_file={out}/dev.tfrecord "
     "--predict_feature_left_file={out}/dev_left.pkl --init_checkpoint={squad_init} "
     "--spm_model_file={squad_spm} --do_lower_case --max_seq_length=40 --doc_stride=16 "
     "--max_query_length=12 --do_train --do_predict --train_batch_size=32 "
     "--predict_batch_size=8 --learning_rate=3e-3 --num_train_epochs=2.0 "
     "--warmup_proportion=.1 --save_checkpoints_steps=5000 --n_best_size=20 "
     "--max_answer_length=30",
     ["predictions.json", "nbest_predictions.json", "null_odds.json", "eval_results.txt",
      "train.tfrecord", "dev.tfrecord"], V2_KEYS),
    ("run_race",  # --train_file / --eval_file: the feature caches
     "--albert_config_file={squad_init}/albert_config.json --output_dir={out} "
     "--train_file={out}/train.tf_record --eval_file={out}/eval.tf_record --data_dir={race} "
     "--init_checkpoint={squad_init} --spm_model_file={squad_spm} --max_seq_length=48 "
     "--max_qa_length=16 --do_train --do_eval --train_batch_size=16 --eval_batch_size=8 "
     "--learning_rate=1e-5 --train_step=6 --warmup_step=2 --save_checkpoints_steps=3",
     ["model.ckpt-6.index", "eval_results.txt", "train.tf_record", "eval.tf_record"],
     {"eval_accuracy", "eval_accuracy_middle", "eval_accuracy_high", "eval_loss",
      "global_step"}),
    ("export_to_tfhub",
     "--albert_directory={release} --checkpoint_name=model.ckpt-best --do_lower_case "
     "--use_einsum --export_path={out}/hub",
     ["hub/saved_model.pb", "hub/assets/30k-clean.model"], None),
    ("export_checkpoints",
     "--albert_directory={release} --checkpoint_name=model.ckpt-best --do_lower_case "
     "--export_path={out}/slim/model.ckpt",
     ["slim/model.ckpt.index", "slim/checkpoint"], None),
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """A release-like directory (albert_config.json, 30k-clean.model/.vocab, a TF1
    model.ckpt-best of a tiny pretrainer), pretraining records, GLUE SST-2 and SQuAD files."""
    root = tmp_path_factory.mktemp("original")
    rng = random.Random(1)
    spm, vocab = write_spm(root)
    config = AlbertConfig(**{**TINY, "vocab_size": vocab, "max_position_embeddings": 64})
    release = root / "release"
    tf.keras.utils.set_random_seed(0)
    AlbertPretrainer(config).save_pretrained(str(release), format="tf1")
    shutil.copy(spm, release / "30k-clean.model")
    shutil.copy(spm[:-len(".model")] + ".vocab", release / "30k-clean.vocab")
    glue = root / "glue" / "SST-2"
    glue.mkdir(parents=True)
    for split, n in (("train", 64), ("dev", 16), ("test", 8)):
        rows = ["sentence\tlabel" if split != "test" else "index\tsentence"]
        for i in range(n):
            text, answer, _ = _paragraph(rng, i % 2)
            rows.append(f"{text}\t{int(answer is not None)}" if split != "test"
                        else f"{i}\t{text}")
        (glue / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    squad_init = root / "squad_init"
    AlbertPretrainer(config).encoder.save_pretrained(str(squad_init))
    out = dict(release=str(release), glue=str(root / "glue"), squad_init=str(squad_init),
               squad_spm=spm, race=(write_race(str(root / "race")), str(root / "race"))[1],
               records=str(write_pretraining_records(root / "train.tfrecord", 64, vocab=vocab)))
    for v, version_2 in (("v1", False), ("v2", True)):
        out[f"squad_train_{v}"] = write_squad(str(root / f"train-{v}.json"), 320, 0, version_2)
        out[f"squad_dev_{v}"] = write_squad(str(root / f"dev-{v}.json"), 40, 1, version_2)
    return out


def _read_kv(path):
    with open(path) as f:
        return {k: float(v) for k, v in (line.strip().split(" = ") for line in f if "=" in line)}


def test_documented_command_lines_run_and_write_what_the_original_wrote(paths, tmp_path, capsys):
    previous = None
    for i, (module, flags, files, keys) in enumerate(COMMANDS):
        out = tmp_path / f"{i}_{module}"
        argv = flags.format(out=out, out_previous=previous, **paths).replace("'", "").split()
        status, _, err = run_tool(importlib.import_module(f"albert_tf.{module}"), capsys, *argv)
        assert status == 0, (module, err[-3000:])
        where = out if "{out_previous}" not in flags else previous
        for name in files:
            assert (where / name).exists(), (module, name, sorted(os.listdir(where)))
        if keys:
            results = _read_kv(where / "eval_results.txt")
            assert set(results) == keys, (module, results)
        previous = out
    # the SQuAD scores are of these predictions: v1 perfect predictions would score 100
    v1 = tmp_path / "3_run_squad_v1"
    results = _read_kv(v1 / "eval_results.txt")
    assert 0 <= results["exact_match"] <= results["f1"] <= 100
    v2 = _read_kv(tmp_path / "4_run_squad_v2" / "eval_results.txt")
    odds = json.loads((tmp_path / "4_run_squad_v2" / "null_odds.json").read_text())
    predictions = json.loads((tmp_path / "4_run_squad_v2" / "predictions.json").read_text())
    assert v2["total"] == len(odds) == len(predictions)
    assert all(predictions[q] == "" for q in odds if odds[q] > v2["null_score_diff_threshold"])
    # the slim checkpoint holds the model's weights under the original names, no slots
    slim_prefix = str(tmp_path / "7_export_checkpoints" / "slim" / "model.ckpt")
    slim, _, fmt = read_checkpoint(slim_prefix)
    release, _, _ = read_checkpoint(os.path.join(paths["release"], "model.ckpt-best"))
    assert fmt == "tf1" and set(slim) == set(release)
    assert not [n for n, _ in tf.train.list_variables(slim_prefix) if "lamb" in n]
    hub = tf.saved_model.load(str(tmp_path / "6_export_to_tfhub" / "hub"))
    assert hasattr(hub, "mlm") and hasattr(hub, "sop")
