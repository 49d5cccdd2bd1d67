"""What the fine-tuning models share: the encoder they wrap, the weight of each example, and
Keras's own loop (`compile`, `fit`, `evaluate`, `predict`, `.keras` files)."""

import re
import warnings

import keras
import tensorflow as tf

from albert_tf.formats.checkpoints import PretrainedMixin
from albert_tf.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.optimizers import finetuning_optimizer

# The pooler, which token and span heads do not use: transformers' AlbertForTokenClassification
# and AlbertForQuestionAnswering files have none.
UNUSED_POOLER = ("bert/pooler/",)
# The same variables by their Keras paths.
POOLER_PATHS = ("pooler/",)


class TaskModel(PretrainedMixin, keras.Model):
    """An encoder plus a task head. `encoder` is an AlbertConfig (or its dict; a new
    AlbertEncoder is built) or any encoder layer with the TF-Hub call API, `config`,
    `pooled_output(inputs, training)` and `tf1_weights()` (AlbertEncoder,
    formats.hub.HubEncoder).

    With Keras's loop: `compile(loss=...)` with standard losses and metrics meets the outputs
    `keras_outputs()` names when the labels are an array (or a tuple, one per name); labels in a
    dict keyed by output names meet those outputs. `compile` without a loss trains the task's
    own objective, its labels read from the features (`label_ids`, ...), as run_* scripts do.
    """

    # Variables (path prefixes) that no loss of the head reaches. Keras's loop leaves them as they
    # are, as the original's optimizers skipped a variable without a gradient.
    unreached = ()

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        if isinstance(encoder, dict):
            encoder = AlbertConfig.from_dict(encoder)
        if isinstance(encoder, AlbertConfig):
            encoder = AlbertEncoder(encoder, dtype=self.dtype_policy)
        self.encoder = encoder
        self.config = encoder.config

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def eval_outputs(self, outputs):
        """The outputs `prediction_outputs` takes, from those an ids-in .tflite gives: as they
        are (SQuAD v1 adds its top-k)."""
        return outputs

    def keras_outputs(self):
        """The outputs that labels given as an array (or a tuple of arrays) are compared with."""
        return ("logits",)

    def _keras_view(self, y, y_pred):
        if y is None or not isinstance(y_pred, dict):
            return y_pred
        if isinstance(y, dict):  # labels by output name: those outputs, the others left out
            return {k: y_pred[k] for k in y if k in y_pred}
        names = self.keras_outputs()
        return y_pred[names[0]] if len(names) == 1 else tuple(y_pred[n] for n in names)

    def compile(self, optimizer=None, loss=None, **kwargs):
        """Keras's compile; without an optimizer, the scripts' fine-tuning update
        (`finetuning_optimizer()`: AdamW with bias correction at a constant 5e-5, clipped)."""
        if optimizer is None:
            optimizer = finetuning_optimizer()
        super().compile(optimizer=optimizer, loss=loss, **kwargs)
        if loss is None:  # Keras would keep an earlier compile's loss and metrics
            self._compile_loss = None
            if kwargs.get("metrics") is None and kwargs.get("weighted_metrics") is None:
                self._compile_metrics = None

    def compile_from_config(self, config):
        """A .keras file's compile state (Keras skips it for models that override compile)."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.optimizer is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    def train_step(self, data):
        """Keras's step, without Keras's warning that the variables of `unreached` get no
        gradient (it asks whether `compile` forgot a loss); a warning that names others stays."""
        paths = [v.path for v in self.trainable_variables if v.path.startswith(self.unreached)]
        with warnings.catch_warnings():
            if paths:
                warnings.filterwarnings("ignore", re.escape(
                    f"Gradients do not exist for variables {paths} when"))
            return super().train_step(data)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self._compile_loss is None:  # compiled without a loss: the task's own objective
            sums = self.loss_sums(x, y_pred)
            return self.replica_loss(sums, self.denominators(x)) + sum(self.losses)
        return super().compute_loss(x, y, self._keras_view(y, y_pred), sample_weight, training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, self._keras_view(y, y_pred), sample_weight)


def example_weights(features):
    """1.0 for real examples, 0.0 for the padding examples that complete eval batches."""
    if "is_real_example" in features:
        return tf.cast(tf.reshape(features["is_real_example"], [-1]), tf.float32)
    return tf.ones([tf.shape(features["input_word_ids"])[0]], tf.float32)
