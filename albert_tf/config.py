"""AlbertConfig: reads and writes the original `albert_config.json`, and reads Hugging Face
configs and KerasHub presets' `config.json`."""

import copy
import dataclasses
import difflib
import json
import os

import tensorflow as tf
from absl import logging

from albert_tf.files import atomic_write_text

# Activation names accepted in `hidden_act`. The original "gelu" is the tanh approximation;
# Hugging Face calls that "gelu_new" and uses "gelu" for the exact (erf) form.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_exact", "relu", "tanh", "linear",
               "swish", "silu")
_HF_TO_OURS_ACT = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                   "gelu_fast": "gelu"}
_OURS_TO_HF_ACT = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new",
                   "gelu_exact": "gelu"}

# Keys of the original albert_config.json, in its order. Released files also carry vestiges of
# Google-internal code (net_structure_type, gap_size, num_memory_blocks, layers_to_keep) that the
# model never reads; they are kept in `extra` so a round trip preserves them.
_ORIGINAL_KEYS = (
    "attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "embedding_size",
    "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings",
    "num_attention_heads", "num_hidden_layers", "num_hidden_groups", "inner_group_num",
    "type_vocab_size", "vocab_size", "down_scale_factor",
)
_ORIGINAL_VESTIGES = ("net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep",
                      # brightmart/albert_zh's configs carry Chinese BERT's pooler settings
                      "directionality", "pooler_fc_size", "pooler_num_attention_heads",
                      "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type")
# The two layouts of the factorised embedding: "google" (word, position and type tables at E,
# summed, LayerNorm over E, then E → H) and "brightmart" (brightmart/albert_zh: the word table
# at E times `word_embeddings_2` [E, H], then H-wide position and type tables, LayerNorm over H).
EMBEDDING_LAYOUTS = ("google", "brightmart")
# Block order: "postln" (the original's: LayerNorm after each residual sum) or "preln"
# (brightmart's xxlarge: LayerNorm before attention and before the FFN, none after the last).
LN_TYPES = ("postln", "preln")
# Keys a config file must give: the dataclass defaults are the original's xxlarge, which a
# forgotten key would silently turn into a 4096-wide model.
REQUIRED_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                 "num_attention_heads", "intermediate_size")
# A KerasHub preset's config.json names its class; its MLM head's LayerNorm epsilon is 1e-5
# (ALBERT's: 1e-12).
KERAS_HUB_BACKBONE = "AlbertBackbone"
KERAS_HUB_MLM_EPSILON = 1e-5


@dataclasses.dataclass
class AlbertConfig:
    """Hyper-parameters of an ALBERT model; the defaults are the original's (xxlarge-shaped)."""

    vocab_size: int
    embedding_size: int = 128
    hidden_size: int = 4096
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    inner_group_num: int = 1
    down_scale_factor: int = 1
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    # The MLM head's LayerNorm epsilon when it differs (KerasHub's head uses 1e-5).
    mlm_layer_norm_eps: float = None
    embedding_layout: str = "google"
    ln_type: str = "postln"
    extra: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Raises ValueError naming the field for an inconsistent or unsupported config."""
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                     "num_hidden_groups", "num_attention_heads", "intermediate_size",
                     "inner_group_num", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"AlbertConfig.{name} must be a positive integer, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
                     "layer_norm_eps", "mlm_layer_norm_eps"):
            value = getattr(self, name)
            if value is None and name == "mlm_layer_norm_eps":
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                quoted = " (a string: write the number without quotes)" if isinstance(
                    value, str) else ""
                raise ValueError(f"AlbertConfig.{name} must be a number, got {value!r}{quoted}")
        for name, allowed in (("embedding_layout", EMBEDDING_LAYOUTS), ("ln_type", LN_TYPES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"AlbertConfig.{name}={getattr(self, name)!r}: one of "
                                 f"{', '.join(allowed)}")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"AlbertConfig.hidden_act={self.hidden_act!r} is not supported; "
                             f"use one of {', '.join(ACTIVATIONS)}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"AlbertConfig.hidden_size={self.hidden_size} is not divisible by "
                             f"num_attention_heads={self.num_attention_heads}")
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(f"AlbertConfig.num_hidden_layers={self.num_hidden_layers} is not "
                             f"divisible by num_hidden_groups={self.num_hidden_groups}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"AlbertConfig.{name} must be in [0, 1), got {value!r}")

    def check_google_layout(self, what):
        """A ValueError unless the model is the original's layout (`what` has no other)."""
        if (self.embedding_layout, self.ln_type) != ("google", "postln"):
            raise ValueError(f"{what} has the original ALBERT layout only; this model has "
                             f"embedding_layout={self.embedding_layout}, ln_type={self.ln_type} "
                             f"(brightmart/albert_zh's): keep it in albert_tf or TF1 format")

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    def group_of_layer(self, layer_idx):
        """The group used by layer `layer_idx`, with the original's routing."""
        return int(layer_idx / self.num_hidden_layers * self.num_hidden_groups)

    # ---- construction ------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data):
        """From an original albert_config.json dict or a Hugging Face ALBERT config.json dict."""
        data = dict(data)
        if data.get("class_name") == KERAS_HUB_BACKBONE and isinstance(data.get("config"), dict):
            data = _from_keras_hub(data["config"])
        is_hf = "model_type" in data or "architectures" in data or "transformers_version" in data
        if is_hf and data.get("model_type", "albert") != "albert":
            raise ValueError(f"config has model_type={data['model_type']!r}, expected 'albert'")
        fields = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        unknown = [k for k in data if k not in fields and k != "extra"]
        missing = [k for k in REQUIRED_KEYS if k not in data]
        if missing:
            hints = [f"{m!r} (given as {close[0]!r}?)" if close else repr(m) for m in missing
                     for close in [difflib.get_close_matches(m, unknown, n=1, cutoff=0.85)]]
            raise ValueError(f"config has no {', '.join(hints)}: every ALBERT config gives "
                             f"{', '.join(REQUIRED_KEYS)}")
        _warn_unknown_keys(unknown, fields, is_hf)
        if "ln_type" in data and "embedding_layout" not in data:
            data["embedding_layout"] = "brightmart"  # their own configs name ln_type; ours both
            data["ln_type"] = data["ln_type"] or "postln"
        kwargs = {k: data.pop(k) for k in list(data) if k in fields}
        if is_hf:
            act = kwargs.get("hidden_act", "gelu_new")
            kwargs["hidden_act"] = _HF_TO_OURS_ACT.get(act, act)
            data = {}  # the rest of an HF config (token ids, torch dtype...) means nothing here
        extra = data.pop("extra", {}) if isinstance(data.get("extra"), dict) else {}
        extra.update(data)
        return cls(**kwargs, extra=extra)

    @classmethod
    def from_json_file(cls, path):
        """Reads an original `albert_config.json` or a Hugging Face `config.json`."""
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"ALBERT config file not found: {path}")
        if tf.io.gfile.isdir(path):
            inside = [n for n in ("albert_config.json", "config.json")
                      if tf.io.gfile.exists(os.path.join(path, n))]
            raise ValueError(f"{path} is a directory, not an ALBERT config file" + (
                f": give {os.path.join(path, inside[0])}, or leave the flag out where the "
                f"checkpoint is in that directory" if inside else ""))
        with tf.io.gfile.GFile(path, "r") as f:
            text = f.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} must hold a JSON object")
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None

    # ---- serialisation -----------------------------------------------------------------------

    def to_dict(self):
        """The original albert_config.json layout (plus any extra keys that were read)."""
        out = {k: getattr(self, k) for k in _ORIGINAL_KEYS}
        if self.layer_norm_eps != 1e-12:
            out["layer_norm_eps"] = self.layer_norm_eps
        if self.mlm_layer_norm_eps is not None:
            out["mlm_layer_norm_eps"] = self.mlm_layer_norm_eps
        if (self.embedding_layout, self.ln_type) != ("google", "postln"):
            out.update(embedding_layout=self.embedding_layout, ln_type=self.ln_type)
        out.update(copy.deepcopy(self.extra))
        return out

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    def to_json_file(self, path):
        """Writes the original format atomically."""
        atomic_write_text(path, self.to_json_string())

    def to_hf_dict(self):
        """A config.json that transformers' AlbertConfig reads."""
        self.check_google_layout("a Hugging Face ALBERT")
        out = {k: getattr(self, k) for k in _ORIGINAL_KEYS if k != "down_scale_factor"}
        out.update(model_type="albert", architectures=["AlbertForPreTraining"],
                   hidden_act=_OURS_TO_HF_ACT.get(self.hidden_act, self.hidden_act),
                   layer_norm_eps=self.layer_norm_eps, pad_token_id=0, bos_token_id=2,
                   eos_token_id=3, tie_word_embeddings=True)
        return out



def _from_keras_hub(config):
    """AlbertConfig fields from an `AlbertBackbone` config dict."""
    return dict(vocab_size=config["vocabulary_size"], num_hidden_layers=config["num_layers"],
                num_attention_heads=config["num_heads"], embedding_size=config["embedding_dim"],
                hidden_size=config["hidden_dim"], intermediate_size=config["intermediate_dim"],
                num_hidden_groups=config.get("num_groups", 1),
                inner_group_num=config.get("num_inner_repetitions", 1),
                hidden_dropout_prob=config.get("dropout", 0.0),
                attention_probs_dropout_prob=config.get("dropout", 0.0),
                max_position_embeddings=config.get("max_sequence_length", 512),
                type_vocab_size=config.get("num_segments", 2), hidden_act="gelu",
                mlm_layer_norm_eps=KERAS_HUB_MLM_EPSILON)


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(AlbertConfig)}


def _warn_unknown_keys(keys, fields, is_hf):
    """A key the model does not read is likely misspelt. The original's vestiges are expected;
    Hugging Face configs carry many keys of their own, so there only near-misses warn."""
    for key in keys:
        if key in _ORIGINAL_VESTIGES:
            continue
        close = difflib.get_close_matches(key, sorted(fields), n=1, cutoff=0.85)
        if close:
            logging.warning("config key %r is not an ALBERT setting: did you mean %r? (%r keeps "
                            "its default, %r)", key, close[0], close[0],
                            _DEFAULTS.get(close[0]))
        elif not is_hf:
            logging.warning("config key %r is not an ALBERT setting; it is kept but not used",
                            key)
