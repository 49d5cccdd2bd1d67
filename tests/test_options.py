"""FinetuningOptions and the scripts' flags: one field per flag, the same defaults (each script's
own numbers aside), help, choices and bounds; the training loop's flags the same in
run_pretraining, and PretrainingOptions' fields its flags the same way; distribution.setup's
arguments the distribution flags."""

import dataclasses
import json
import os

import pytest
from absl import flags

from albert_tf import run_classifier, run_ner, run_pretraining, run_race, run_squad
from albert_tf.tasks import driver
from albert_tf.tasks.flags import (define_export_flags, define_flags, keep_how_the_run_read,
                                   script_settings)
from albert_tf.tasks.options import (DISTRIBUTION, EXPORT_FIELDS, FinetuningOptions, LoopOptions,
                                     PretrainingOptions, value_type)
from albert_tf.training import distribution
from albert_tf.training.checkpoint_files import changed_settings, record_run, recorded_settings
from albert_tf.training.excursions import ExcursionSettings
from albert_tf.modeling.optimizers import OPTIMIZER_NAMES
from tool_runner import own_flags

FLAG_TYPES = {bool: "bool", int: "int", float: "float", str: "string"}
SCRIPTS = {run_classifier: {}, run_squad: run_squad.SQUAD_DEFAULTS,
           run_race: run_race.RACE_DEFAULTS, run_ner: run_ner.NER_DEFAULTS}


def _script_flags(module, defaults):
    """{name: Flag} of `python -m albert_tf.<module>`, with the defaults its run() sets."""
    with own_flags():
        module.define_flags()
        for name, value in defaults.items():
            flags.FLAGS.set_default(name, value)
        return {name: flags.FLAGS[name] for name in flags.FLAGS}


def _assert_flag_is_field(flag, field, default):
    assert flag.default == default, (field.name, flag.default, default)
    choices = field.metadata["choices"]
    assert getattr(flag.parser, "enum_values", None) == (list(choices) if choices else None)
    assert flag.flag_type() == ("string enum" if choices else FLAG_TYPES[value_type(field)])
    assert getattr(flag.parser, "lower_bound", None) == field.metadata["lower_bound"]
    help_text = field.metadata["help"]
    # absl's enum flags name their choices first; --jit_compile (also --jit_compile and
    # --nojit_compile) is a flag of its own kind that does not.
    if choices and field.name != "jit_compile":
        help_text = f"<{'|'.join(choices)}>: {help_text}"
    if field.name == "export_dir":
        head, tail = help_text.split("{what}")
        assert flag.help.startswith(head) and flag.help.endswith(tail), flag.help
    else:
        assert flag.help == help_text, field.name


@pytest.mark.parametrize("module", list(SCRIPTS), ids=lambda m: m.__name__.rsplit(".")[-1])
def test_every_field_is_a_flag_of_each_script_with_its_default_and_help(module):
    script_flags = _script_flags(module, SCRIPTS[module])
    for field in dataclasses.fields(FinetuningOptions):
        if module is run_race and field.name in EXPORT_FIELDS:
            assert field.name not in script_flags  # run_race exports nothing
            continue
        _assert_flag_is_field(script_flags[field.name], field,
                              SCRIPTS[module].get(field.name, field.default))


def test_the_fine_tuning_flags_are_the_fields():
    values = flags.FlagValues()
    define_flags(flag_values=values)
    define_export_flags("the exports", flag_values=values)
    assert set(values) == {f.name for f in dataclasses.fields(FinetuningOptions)}


def test_the_training_loop_s_flags_are_the_same_in_run_pretraining():
    script_flags = _script_flags(run_pretraining, run_pretraining.PRETRAINING_DEFAULTS)
    for field in dataclasses.fields(LoopOptions):
        default = 5000 if field.name == "save_checkpoints_steps" else field.default
        _assert_flag_is_field(script_flags[field.name], field, default)
    assert script_flags["optimizer"].parser.enum_values == list(OPTIMIZER_NAMES)
    assert FinetuningOptions().optimizer in OPTIMIZER_NAMES


def test_every_pretraining_field_is_a_flag_of_run_pretraining_with_its_default_and_help():
    script_flags = _script_flags(run_pretraining, run_pretraining.PRETRAINING_DEFAULTS)
    fields = dataclasses.fields(PretrainingOptions)
    for field in fields:
        _assert_flag_is_field(script_flags[field.name], field, field.default)
    with own_flags():
        absl_flags = set(flags.FLAGS)
    assert set(script_flags) - absl_flags == {f.name for f in fields}
    # The loss guard and distribution fields are fine-tuning's, the guard recovering.
    shared = {f.name: f for f in dataclasses.fields(FinetuningOptions) if f.metadata["defined_by"]}
    for field in fields:
        if field.name in shared:
            assert field.metadata == shared[field.name].metadata
            assert field.default == ("recover" if field.name == "on_loss_spike"
                                     else shared[field.name].default)


def test_the_options_are_read_from_the_flags_and_checked():
    class Parsed:
        input_file, num_train_steps, mask_token_id = "train-*", 7, 5
    options = PretrainingOptions.from_flags(Parsed())
    assert (options.input_file, options.num_train_steps, options.mask_token_id) == (
        "train-*", 7, 5)
    assert options.save_checkpoints_steps == 5000 and options.optimizer == "lamb"
    assert options.excursions() == ExcursionSettings(action="recover")
    assert FinetuningOptions().excursions() == ExcursionSettings(action="warn")
    assert PretrainingOptions(on_loss_spike="stop", max_loss_recoveries=0,
                              recovery_lr_factor=1).excursions() == ExcursionSettings(
        action="stop", max_recoveries=0, lr_factor=1.0)
    with pytest.raises(ValueError, match=r"^masked_lm_prob=0\.0: .*must be in \(0, 1\]"):
        PretrainingOptions(masked_lm_prob=0)
    with pytest.raises(ValueError, match=r"^max_eval_steps=-1: "):
        PretrainingOptions(max_eval_steps=-1)
    with pytest.raises(ValueError, match=r"^optimizer='sgd': one of "):
        PretrainingOptions(optimizer="sgd")


def test_setup_takes_the_distribution_flags_and_the_options_hand_them_over():
    values = flags.FlagValues()
    distribution.define_flags(values)
    assert set(values) == set(distribution.FLAG_NAMES)
    fields = [f for f in dataclasses.fields(FinetuningOptions)
              if f.metadata["defined_by"] == DISTRIBUTION]
    assert {f.name for f in fields} == set(distribution.FLAG_NAMES)
    for field in fields:
        _assert_flag_is_field(values[field.name], field, field.default)
    options = FinetuningOptions(strategy="one_device", jit_compile="false", attention="plain")
    assert options.distribution() == dict(
        strategy="one_device", use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None,
        master=None, mixed_precision="auto", jit_compile="false", attention="plain")


def test_a_fine_tuning_run_records_its_data_flags_and_a_resume_names_those_it_changed(tmp_path):
    """run.json keeps the script's own flags (the data) beside the options: a resume with other
    columns or files is named, one that leaves a flag unset (None) is not."""
    with own_flags():
        run_classifier.define_flags()
        flags.DEFINE_integer("hbm_oom_exit", 1, "TensorFlow's own", module_name="tensorflow.x")
        flags.FLAGS(["run_classifier", "--train_file=a.csv", "--text_column_names=title,body",
                     "--long_text=windows", "--learning_rate=1e-4"])
        try:
            data = script_settings(flags.FLAGS)
        finally:
            flags.FLAGS.unparse_flags()
    # a data path as an absolute one, that a rerun from another directory finds
    assert (data["train_file"], data["text_column_names"], data["long_text"]) == (
        os.path.abspath("a.csv"), ["title", "body"], "windows")
    assert data["task_name"] is None and data["label_column_name"] == "label"
    fields = {f.name for f in dataclasses.fields(FinetuningOptions)}
    assert not set(data) & (fields | {"verbosity", "v", "help", "flagfile", "hbm_oom_exit"})
    options = FinetuningOptions(learning_rate=1e-4).settings()
    # run_race's and the GLUE layout's --data_dir, an option, too
    assert FinetuningOptions(data_dir="race").settings()["data_dir"] == os.path.abspath("race")
    assert FinetuningOptions(data_dir="gs://b/race").settings()["data_dir"] == "gs://b/race"
    record_run(str(tmp_path), "fine-tuning of text", {**options, **data})
    now = {**data, "train_file": "b.csv", "text_column_names": ("title", "body"),
           "long_text": None, "do_eval": True}
    assert changed_settings(str(tmp_path), {**options, **now, "learning_rate": 2e-5}) == [
        "--learning_rate (run: 0.0001, now: 2e-05)",
        f"--train_file (run: {os.path.abspath('a.csv')!r}, now: 'b.csv')"]


def test_run_json_keeps_the_settings_the_run_last_trained_with(tmp_path):
    """A resume is compared with the last training process's settings (each rerun of a
    finished run used to name the same change again); a rerun's own choices, an unset
    setting and a copied directory are no change."""
    run = str(tmp_path)
    first = {"output_dir": "/a/run", "do_eval": True, "train_step": 40, "init_checkpoint": "x",
             "text_column_names": ("title",)}
    record_run(run, "fine-tuning of text", first)
    same = {**first, "output_dir": "/b/copy", "do_eval": False, "init_checkpoint": None,
            "text_column_names": ["title"]}
    assert changed_settings(run, same) == []
    record_run(run, "fine-tuning of text", same)
    assert json.load(open(tmp_path / "run.json"))["settings"] == {**first,
                                                                  "text_column_names": ["title"]}
    longer = {**same, "train_step": 80}
    assert changed_settings(run, longer) == ["--train_step (run: 40, now: 80)"]
    record_run(run, "fine-tuning of text", longer)
    assert changed_settings(run, longer) == []
    record_run(run, "fine-tuning of text", {**longer, "train_step": 120, "init_checkpoint": "y"})
    assert changed_settings(run, {**longer, "init_checkpoint": "y"}) == [
        "--init_checkpoint (run: 'x', now: 'y'; not read: a resume goes on from its own "
        "checkpoints)", "--train_step (run: 120, now: 80)"]
    recorded = json.load(open(tmp_path / "run.json"))
    assert recorded["kind"] == "fine-tuning of text"
    assert recorded["started_with"] == {**first, "text_column_names": ["title"]}
    assert recorded["settings"] == {**first, "output_dir": "/b/copy", "do_eval": False,
                                    "text_column_names": ["title"], "train_step": 120}


def test_a_pretraining_run_s_settings_are_no_fine_tuning_run_s(tmp_path):
    """predict takes a fine-tuning run's max_seq_length (how it read texts), not a pretraining
    run's (serving.predictor)."""
    record_run(str(tmp_path), "pretraining", {"max_seq_length": 512})
    assert recorded_settings(str(tmp_path)) == {"max_seq_length": 512}
    assert recorded_settings(str(tmp_path), kind="fine-tuning") == {}
    assert recorded_settings(str(tmp_path / "none"), kind="fine-tuning") == {}


def test_an_inference_only_rerun_at_other_lengths_is_warned(tmp_path, caplog):
    record_run(str(tmp_path), "fine-tuning of squad",
               {**FinetuningOptions(max_seq_length=32).settings(), "doc_stride": 12,
                "window_stride": 4, "train_file": "a.json"})
    caplog.set_level("WARNING")
    same = FinetuningOptions(output_dir=str(tmp_path), max_seq_length=32)
    driver._check_inference_lengths(same, {"doc_stride": 12, "train_file": None})
    assert not caplog.messages
    driver._check_inference_lengths(FinetuningOptions(output_dir=str(tmp_path)),
                                    {"doc_stride": 20, "window_stride": 6})
    assert caplog.messages == [
        f"Reading the examples with other lengths than the run in {tmp_path} trained with "
        f"(run.json): --doc_stride (run: 12, now: 20), --max_seq_length (run: 32, now: 512), "
        f"--window_stride (run: 4, now: 6); give the run's to read them as it did"]


@pytest.mark.parametrize("given,expected", [((), (32, 12)), (("--max_seq_length=64",), (64, 12)),
                                            (("--doc_stride=20",), (32, 20))])
def test_a_rerun_without_its_lengths_takes_the_run_s(tmp_path, given, expected):
    record_run(str(tmp_path), "fine-tuning of squad",
               {**FinetuningOptions(max_seq_length=32).settings(), "doc_stride": 12})
    with own_flags():
        run_squad.define_flags()
        flags.FLAGS(["run_squad", f"--output_dir={tmp_path}", *given])
        try:
            keep_how_the_run_read(flags.FLAGS)
            assert (flags.FLAGS.max_seq_length, flags.FLAGS.doc_stride) == expected
            assert flags.FLAGS.max_query_length == 64  # the run recorded none: the default
        finally:
            flags.FLAGS.unparse_flags()
