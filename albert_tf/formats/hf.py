"""Hugging Face ALBERT checkpoints: transformers' tensor names ↔ the original TF1 names, and
reading/writing `model.safetensors` (or a `pytorch_model.bin` with torch installed)."""

import json
import os
import re

import numpy as np
import tensorflow as tf

from albert_tf.files import atomic_write_text
from albert_tf.formats.resolve import SourceError
from albert_tf.tokenization import SENTENCEPIECE, WORDPIECE_SPECIALS

# Hugging Face ↔ TF1 names: (HF pattern, TF1 pattern, transpose). `{g}`/`{i}` are group and
# inner-group indices. HF stores Linear weights [out, in]; TF1 kernels are [in, out].
_LAYER = "albert.encoder.albert_layer_groups.{g}.albert_layers.{i}."
_BLOCK = "bert/encoder/transformer/group_{g}/inner_group_{i}/"
_HF_RULES = [
    ("albert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", False),
    ("albert.embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings",
     False),
    ("albert.embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings",
     False),
    ("albert.embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", False),
    ("albert.embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", False),
    ("albert.encoder.embedding_hidden_mapping_in.weight",
     "bert/encoder/embedding_hidden_mapping_in/kernel", True),
    ("albert.encoder.embedding_hidden_mapping_in.bias",
     "bert/encoder/embedding_hidden_mapping_in/bias", False),
]
for _hf, _tf1 in [("attention.query", "attention_1/self/query"),
                  ("attention.key", "attention_1/self/key"),
                  ("attention.value", "attention_1/self/value"),
                  ("attention.dense", "attention_1/output/dense"),
                  ("ffn", "ffn_1/intermediate/dense"),
                  ("ffn_output", "ffn_1/intermediate/output/dense")]:
    _HF_RULES += [(_LAYER + _hf + ".weight", _BLOCK + _tf1 + "/kernel", True),
                  (_LAYER + _hf + ".bias", _BLOCK + _tf1 + "/bias", False)]
for _hf, _tf1 in [("attention.LayerNorm", "LayerNorm"), ("full_layer_layer_norm", "LayerNorm_1")]:
    _HF_RULES += [(_LAYER + _hf + ".weight", _BLOCK + _tf1 + "/gamma", False),
                  (_LAYER + _hf + ".bias", _BLOCK + _tf1 + "/beta", False)]
_HF_RULES += [
    ("albert.pooler.weight", "bert/pooler/dense/kernel", True),
    ("albert.pooler.bias", "bert/pooler/dense/bias", False),
    ("predictions.dense.weight", "cls/predictions/transform/dense/kernel", True),
    ("predictions.dense.bias", "cls/predictions/transform/dense/bias", False),
    ("predictions.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma", False),
    ("predictions.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta", False),
    ("predictions.bias", "cls/predictions/output_bias", False),
    ("sop_classifier.classifier.weight", "cls/seq_relationship/output_weights", False),
    ("sop_classifier.classifier.bias", "cls/seq_relationship/output_bias", False),
    # Fine-tuned heads, both [outputs, hidden]: AlbertFor{SequenceClassification,MultipleChoice}
    # as the original run_classifier / run_race head, AlbertForQuestionAnswering as its SQuAD
    # v1 head (start logits first, then end logits, in both).
    ("classifier.weight", "output_weights", False),
    ("classifier.bias", "output_bias", False),
    ("qa_outputs.weight", "cls/squad/output_weights", False),
    ("qa_outputs.bias", "cls/squad/output_bias", False),
    # AlbertForTokenClassification's head is named as the sequence classifier's: written from
    # ours by this rule, read by hf_to_tf1's `architecture` (the rule above matches first).
    ("classifier.weight", "token_classifier/output_weights", False),
    ("classifier.bias", "token_classifier/output_bias", False),
]
TOKEN_CLASSIFICATION = "AlbertForTokenClassification"
_HF_SCOPES = ("albert.", "predictions.", "sop_classifier.", "classifier.", "qa_outputs.")
# Tied copies and buffers that transformers may store; they carry no weights of their own.
_HF_IGNORED = re.compile(r"(^predictions\.decoder\.|position_ids$)")


def _pattern_to_regex(pattern):
    return re.compile("^" + re.escape(pattern).replace(r"\{g\}", r"(?P<g>\d+)")
                      .replace(r"\{i\}", r"(?P<i>\d+)") + "$")


_HF_TO_TF1 = [(_pattern_to_regex(hf), tf1, t) for hf, tf1, t in _HF_RULES]
_TF1_TO_HF = [(_pattern_to_regex(tf1), hf, t) for hf, tf1, t in _HF_RULES]


def _rename(name, rules):
    for regex, target, transpose in rules:
        m = regex.match(name)
        if m:
            return target.format(**m.groupdict()), transpose
    return None, False


def hf_to_tf1(state, architecture=None):
    """Hugging Face state dict (numpy arrays) → {TF1 name: array}. Unknown keys are an error.
    An `architecture` of AlbertForTokenClassification reads `classifier` as our token head."""
    out, unknown = {}, []
    for key, value in state.items():
        name = key if key.startswith(_HF_SCOPES) else "albert." + key
        if _HF_IGNORED.search(name):
            continue
        target, transpose = _rename(name, _HF_TO_TF1)
        if target is None:
            unknown.append(key)
            continue
        out[target] = np.ascontiguousarray(value.T) if transpose else value
    if unknown:
        raise ValueError(f"Hugging Face checkpoint has tensors that are not ALBERT weights: "
                         f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
    if architecture == TOKEN_CLASSIFICATION:
        out = {"token_classifier/" + k if k in ("output_weights", "output_bias") else k: v
               for k, v in out.items()}
    return out


def tf1_to_hf(arrays):
    """{TF1 name: array} → a Hugging Face state dict (transformers' AlbertForPreTraining names)."""
    out = {}
    for name, value in arrays.items():
        target, transpose = _rename(name, _TF1_TO_HF)
        if target is None:
            raise ValueError(f"no Hugging Face name for tensor {name!r}")
        out[target] = np.ascontiguousarray(value.T) if transpose else np.ascontiguousarray(value)
    return out


def read_hf_state(location):
    if location.endswith(".index.json"):
        with tf.io.gfile.GFile(location) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        state = {}
        for shard in shards:
            state.update(read_hf_state(os.path.join(os.path.dirname(location), shard)))
        return state
    if location.endswith(".safetensors"):
        from safetensors.numpy import load_file
        return load_file(location)
    try:
        import torch
    except ImportError:
        raise SourceError(f"{location} is a PyTorch pickle: install torch to read it (pip "
                          f"install torch), or save the model as model.safetensors") from None
    state = torch.load(location, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy()
            for k, v in state.items()}



def write_hf_checkpoint(arrays, config, directory):
    """config.json + model.safetensors that transformers' Albert*.from_pretrained loads."""
    from safetensors.numpy import save_file
    state = tf1_to_hf(arrays)
    hf_config = config.to_hf_dict()
    if not any(k.startswith(("predictions.", "sop_classifier.")) for k in state):
        hf_config["architectures"] = ["AlbertModel"]
    tmp = os.path.join(directory, f".model.safetensors.tmp-{os.getpid()}")
    save_file(state, tmp, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(directory, "model.safetensors"))
    atomic_write_text(os.path.join(directory, "config.json"), json.dumps(hf_config, indent=2))


HF_PROBLEM_TYPES = {"single_label": "single_label_classification",
                    "multi_label": "multi_label_classification", "regression": "regression"}


def write_hf_labels(directory, label_set):
    """A classifier's labels in its config.json: AlbertForSequenceClassification, num_labels,
    id2label / label2id and problem_type, as transformers' pipelines read them."""
    names = list(label_set.labels) or ["LABEL_0"]
    write_hf_architecture(directory, "AlbertForSequenceClassification", num_labels=len(names),
                          id2label={str(i): n for i, n in enumerate(names)},
                          label2id={n: i for i, n in enumerate(names)},
                          problem_type=HF_PROBLEM_TYPES[label_set.problem_type])


def architectures(directory):
    """The `architectures` a Hugging Face config.json in `directory` names, () without one."""
    return tuple(_read_config(directory).get("architectures") or ())


def _read_config(directory):
    """The config.json in `directory` as a dict; {} without one (or another JSON value)."""
    try:
        with tf.io.gfile.GFile(os.path.join(directory, "config.json")) as f:
            config = json.load(f)
    except (ValueError, tf.errors.OpError):
        return {}
    return config if isinstance(config, dict) else {}


def drop_pooler(directory):
    """model.safetensors without the pooler, which transformers' AlbertForQuestionAnswering and
    AlbertForTokenClassification have none of (they report it as unexpected)."""
    from safetensors.numpy import load_file, save_file
    path = os.path.join(directory, "model.safetensors")
    state = {k: v for k, v in load_file(path).items() if not k.startswith("albert.pooler.")}
    tmp = os.path.join(directory, f".model.safetensors.tmp-{os.getpid()}")
    save_file(state, tmp, metadata={"format": "pt"})
    os.replace(tmp, path)


def write_hf_tags(directory, tags):
    """A token classifier's tags in its config.json, as transformers' pipelines read them."""
    write_hf_architecture(directory, TOKEN_CLASSIFICATION, num_labels=len(tags),
                          id2label={str(i): t for i, t in enumerate(tags)},
                          label2id={t: i for i, t in enumerate(tags)})


def hf_tags(directory):
    """The tags of an AlbertForTokenClassification config.json in `directory` (id2label), or
    None."""
    config = _read_config(directory)
    if TOKEN_CLASSIFICATION not in (config.get("architectures") or ()):
        return None
    id2label = config.get("id2label") or {}
    return [str(id2label.get(str(i), f"LABEL_{i}")) for i in range(len(id2label))] or None


def write_hf_architecture(directory, architecture, **fields):
    """config.json's `architectures` (the transformers model its weights are for) and
    `fields`."""
    path = os.path.join(directory, "config.json")
    with tf.io.gfile.GFile(path) as f:
        config = json.load(f)
    config.update(architectures=[architecture], **fields)
    atomic_write_text(path, json.dumps(config, indent=2, ensure_ascii=False))


def write_hf_tokenizer(tokenizer, directory, model_max_length=None):
    """The tokenizer files transformers' AutoTokenizer reads, with our tokenizer's ids.

    WordPiece: vocab.txt (one token per line in id order, so that line numbers are the ids
    `load_vocab` gives) for BertTokenizer. SentencePiece: spiece.model for AlbertTokenizer.
    """
    # A pair's second segment is segment 1 in ALBERT: transformers 5's AlbertTokenizer returns
    # no token_type_ids unless the config names them (all 0 then: another model's input).
    settings = {"do_lower_case": bool(tokenizer.do_lower_case),
                "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}
    if model_max_length:
        settings["model_max_length"] = int(model_max_length)
    if tokenizer.kind == SENTENCEPIECE:
        tf.io.gfile.copy(tokenizer.spm_model_file, os.path.join(directory, "spiece.model"),
                         overwrite=True)
        settings.update(tokenizer_class="AlbertTokenizer", keep_accents=False,
                        remove_space=True, unk_token="<unk>", pad_token="<pad>",
                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    else:
        tokens = tokenizer.convert_ids_to_tokens(range(len(tokenizer)))
        atomic_write_text(os.path.join(directory, "vocab.txt"), "".join(t + "\n" for t in tokens))
        names = {"[PAD]": "pad_token", "[UNK]": "unk_token", "[CLS]": "cls_token",
                 "[SEP]": "sep_token", "[MASK]": "mask_token"}
        settings.update(tokenizer_class="BertTokenizer", tokenize_chinese_chars=True,
                        strip_accents=None,
                        **{names[t]: t for t in WORDPIECE_SPECIALS.values()})
    atomic_write_text(os.path.join(directory, "tokenizer_config.json"),
                      json.dumps(settings, indent=2, ensure_ascii=False))
