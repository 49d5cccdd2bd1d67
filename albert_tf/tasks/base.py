"""The contract between a fine-tuning task and the driver (`run_finetuning`): every method and
attribute the driver uses, the optional ones with their defaults."""

import abc


class FinetuningTask(abc.ABC):
    """A fine-tuning task for `run_finetuning`: subclass it, set the attributes and write the
    abstract methods; override an optional one where the task has more to say.

    Required attributes:
      name          the task's name (log lines, the run kind kept in --output_dir)
      best_metric   the eval metric that selects the best checkpoint
      head_names    the head's variables, which a warm start may lack or have reshaped
    Optional attributes:
      higher_is_better  whether a larger best_metric is better (default True)
      tokenizer         the run's tokenizer, kept beside its checkpoints (default None)
      exportable        whether `export` writes anything: without it the driver refuses
                        --export_dir before any work (default False)
      sequences_per_example  the sequences of --max_seq_length one example is (a multiple
                        choice's: one per choice), for the step's memory estimate (default 1)
      last_block_rows   the rows of a sequence the training step's last block computes (a
                        sentence head's: 1, [CLS]), for the same estimate (default None: all)
      max_seq_length    the length its features are cut to (default None: unsaid); the run's
                        options must say the same (run_finetuning takes it where they left
                        theirs at the default)

    A dataset's `features` are a dict of numpy arrays (see `albert_tf.data.features`); a model's
    `outputs` are its prediction outputs for them, as numpy.
    """

    # Required: None until a subclass (or its __init__) sets them; run_finetuning checks.
    REQUIRED_ATTRIBUTES = ("name", "best_metric", "head_names")
    name = best_metric = head_names = None

    higher_is_better = True
    tokenizer = None
    exportable = False
    sequences_per_example = 1
    last_block_rows = None
    max_seq_length = None

    def check_contract(self):
        """TypeError naming the required attributes this task has not set."""
        unset = [a for a in self.REQUIRED_ATTRIBUTES if getattr(self, a) is None]
        if unset:
            raise TypeError(f"{type(self).__name__} sets no {', '.join(unset)}: a "
                            f"FinetuningTask's required attributes (tasks/base.py)")

    def check_best_metric(self, results):
        """ValueError when the metrics of the first eval set lack `best_metric`, naming them."""
        if self.best_metric not in results:
            raise ValueError(f"{type(self).__name__}.best_metric={self.best_metric!r} is not "
                             f"among the metrics its eval_metrics returns: "
                             f"{', '.join(sorted(results))}")

    # ---- required -----------------------------------------------------------------------------

    @abc.abstractmethod
    def build_model(self, encoder):
        """A model with the trainer's task protocol and `prediction_outputs(features, outputs)`
        (a `modeling.task_model.TaskModel`) around `encoder`."""

    @abc.abstractmethod
    def train_features(self):
        """The training features."""

    @abc.abstractmethod
    def eval_sets(self):
        """[(name, features)]: the first one selects the best checkpoint."""

    @abc.abstractmethod
    def eval_metrics(self, name, features, outputs):
        """{original metric name: value} of one eval set's outputs."""

    @abc.abstractmethod
    def predict_sets(self):
        """[(name, features)] to write predictions for."""

    @abc.abstractmethod
    def write_predictions(self, name, features, outputs, output_dir):
        """Writes a predict set's predictions; returns None, or scores of the predictions
        (written to eval_results.txt when --do_eval is off)."""

    # ---- optional -----------------------------------------------------------------------------

    def check_inputs(self, splits):
        """Raises when the data of `splits` ("train", "dev", "test") is missing or cannot be
        read (each file parsed, nothing written): a mistyped file or a bad row of the test set
        stops the run before any training, not after it. Default: nothing checked."""

    def align_warm_head(self, model, init_checkpoint):
        """After `model` was loaded from `init_checkpoint` (a warm start, not a resume): its
        head made to mean what this task's outputs mean. Default: nothing to align."""

    def write_labels(self, output_dir):
        """Before training, on the chief: the label files that predictions, conversions and
        exports read later. Default: none."""

    def constant_loss(self, features):
        """The training loss of the best constant prediction on the training `features` (what
        a run that learns nothing stays at), or None (the default) when there is none."""
        return None

    def predicted_classes(self, features, outputs):
        """The predicted classes of an eval set (a run predicting one class for everything is
        reported), or None (the default) where there are none."""
        return None

    def pick_thresholds(self, name, features, outputs, output_dir):
        """On the chief, at each new best evaluation, before `report`: decision thresholds
        picked on the eval set `name`, which later reports, predictions and exports use.
        Default: none."""

    def report(self, name, features, outputs, step, output_dir):
        """On the chief, at each new best evaluation: reports on the eval set `name` written to
        output_dir. Default: none."""

    def export(self, model, export_dir, lite_options=None, output_dir=None):
        """With --export_dir, where `exportable`: the exports from the restored float32
        `model`; `lite_options` (a `serving.lite.LiteOptions`) says which LiteRT files,
        quantized how, calibrated and scored on what; `output_dir`: the run's (what its
        evaluation chose there, such as SQuAD v2's threshold)."""
        raise NotImplementedError(f"{self.name} has no export")
