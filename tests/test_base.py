"""The task contract (tasks/base.py): a task missing a required method is refused when it is
made, naming the method; the optional ones' defaults are what the driver gets."""

import pytest

from albert_tf.tasks import FinetuningOptions, FinetuningTask, run_finetuning


class _Minimal(FinetuningTask):
    """The required part of the contract and nothing more."""

    name = "minimal"
    best_metric = "eval_accuracy"
    head_names = ("output_weights", "output_bias")

    def build_model(self, encoder):
        raise AssertionError("not built in these tests")

    def train_features(self):
        return {}

    def eval_sets(self):
        return []

    def eval_metrics(self, name, features, outputs):
        return {}

    def predict_sets(self):
        return []

    def write_predictions(self, name, features, outputs, output_dir):
        return None


def test_a_task_missing_a_required_method_is_refused_by_name():
    class NoMetrics(FinetuningTask):
        name, best_metric, head_names = "no_metrics", "eval_accuracy", ()

        def build_model(self, encoder):
            return None

        def train_features(self):
            return {}

        def eval_sets(self):
            return []

        def predict_sets(self):
            return []

        def write_predictions(self, name, features, outputs, output_dir):
            return None

    with pytest.raises(TypeError, match="abstract method.*eval_metrics"):
        NoMetrics()


def test_the_optional_parts_default_to_doing_nothing(tmp_path):
    task = _Minimal()
    assert task.higher_is_better is True
    assert task.tokenizer is None
    assert task.exportable is False
    assert task.constant_loss({"label_ids": [0, 1]}) is None
    assert task.predicted_classes({}, {}) is None
    assert task.check_inputs(["train", "dev"]) is None
    assert task.align_warm_head(None, str(tmp_path)) is None
    assert task.write_labels(str(tmp_path)) is None
    assert task.pick_thresholds("dev", {}, {}, str(tmp_path)) is None
    assert task.report("dev", {}, {}, 1, str(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(NotImplementedError, match="minimal has no export"):
        task.export(None, str(tmp_path / "export"))


def test_the_driver_refuses_an_export_the_task_does_not_have(tmp_path):
    options = FinetuningOptions(output_dir=str(tmp_path / "out"), do_predict=True,
                                export_dir=str(tmp_path / "export"))
    with pytest.raises(ValueError, match="^--export_dir: minimal has no export$"):
        run_finetuning(_Minimal(), options)
    assert not (tmp_path / "out").exists()


def test_the_driver_checks_the_inputs_of_the_asked_actions_first(tmp_path):
    asked = []

    class Checked(_Minimal):
        def check_inputs(self, splits):
            asked.append(splits)
            raise FileNotFoundError("minimal test file not found: test.tsv")

    options = FinetuningOptions(output_dir=str(tmp_path / "out"), do_eval=True, do_predict=True)
    with pytest.raises(FileNotFoundError, match="test.tsv"):
        run_finetuning(Checked(), options)
    assert asked == [["dev", "test"]]
    assert not (tmp_path / "out").exists()
