"""KerasHub presets both ways: a preset saved by keras_hub's AlbertBackbone / AlbertMaskedLM loads
into our models with KerasHub's outputs, and ours written as a preset loads into KerasHub's
classes with our outputs; round trips through the formats keep every tensor."""

import logging as py_logging
import warnings

import keras
import numpy as np
import keras_hub
import pytest

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.conversion import convert
from albert_tf.formats.checkpoints import read_checkpoint
from albert_tf.formats.tokenizers import load_tokenizer
from test_run_squad import write_spm

SHAPE = dict(num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=16, intermediate_dim=24,
             max_sequence_length=32)
TEXT = ["the first paragraph about a river", "who wrote the second one?"]


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return write_spm(tmp_path_factory.mktemp("spm"))


def _randomize(variables, seed):
    rng = np.random.default_rng(seed)
    for v in variables:
        v.assign(rng.normal(0.0, 0.3, v.shape).astype("float32"))


def _inputs(vocab):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab, (2, 12)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 8:] = 0
    types = np.zeros_like(ids)
    types[:, 6:] = 1
    positions = np.array([[1, 3, 5], [2, 4, 6]], "int32")
    return ids * mask, mask, types, positions


def _keras_hub_outputs(backbone, head_model, vocab):
    ids, mask, types, positions = _inputs(vocab)
    out = backbone({"token_ids": ids, "segment_ids": types, "padding_mask": mask})
    result = {k: np.asarray(out[k]) for k in ("sequence_output", "pooled_output")}
    if head_model is not None:
        result["mlm_logits"] = np.asarray(head_model(
            {"token_ids": ids, "segment_ids": types, "padding_mask": mask,
             "mask_positions": positions}))
    return result


def _our_outputs(model, vocab):
    ids, mask, types, positions = _inputs(vocab)
    features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    if isinstance(model, AlbertPretrainer):
        features["masked_lm_positions"] = positions
    out = model(features)
    return {k: np.asarray(out[k], np.float32) for k in
            ("sequence_output", "pooled_output", "mlm_logits") if k in out}


def _assert_close(ours, theirs, mask, atol):
    for name, value in theirs.items():
        got = ours[name]
        if name == "sequence_output":  # padded positions carry no meaning
            got, value = got[mask.astype(bool)], value[mask.astype(bool)]
        np.testing.assert_allclose(got, value, atol=atol, rtol=0, err_msg=name)


def _keras_hub_preset(path, spm_path, vocab, groups, inner, masked_lm):
    keras.utils.set_random_seed(groups * 10 + inner)
    backbone = keras_hub.models.AlbertBackbone(vocabulary_size=vocab, num_groups=groups,
                                               num_inner_repetitions=inner, **SHAPE)
    _randomize(backbone.weights, seed=groups + inner)
    tokenizer = keras_hub.models.AlbertTokenizer(proto=spm_path)
    head_model = None
    if masked_lm:
        head_model = keras_hub.models.AlbertMaskedLM(
            backbone, preprocessor=keras_hub.models.AlbertMaskedLMPreprocessor(
                tokenizer, sequence_length=16))
        _randomize(head_model.masked_lm_head.weights, seed=7)
        head_model.save_to_preset(str(path))
        head_model.preprocessor = None
    else:  # a grouped backbone in shards of ~6 KB: model.weights.json + model_00000.weights.h5...
        backbone.save_to_preset(str(path), max_shard_size=6e-6 if groups > 1 else 10)
        tokenizer.save_to_preset(str(path))
    return backbone, head_model


@pytest.mark.parametrize("groups,inner,masked_lm", [(1, 1, False), (2, 2, False), (2, 2, True)])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_keras_hub_presets_load_with_keras_hub_outputs(spm, tmp_path, groups, inner, masked_lm,
                                                       policy):
    spm_path, vocab = spm
    preset = tmp_path / "preset"
    backbone, head_model = _keras_hub_preset(preset, spm_path, vocab, groups, inner, masked_lm)
    assert (preset / "model.weights.json").exists() == (groups > 1 and not masked_lm)
    theirs = _keras_hub_outputs(backbone, head_model, vocab)
    keras.mixed_precision.set_global_policy(policy)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            encoder = AlbertEncoder.from_pretrained(str(preset))
            pretrainer = AlbertPretrainer.from_pretrained(str(preset)) if masked_lm else None
        assert keras.mixed_precision.global_policy().name == policy
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert encoder.dtype_policy.name == policy
    assert not [str(w.message) for w in caught if "Skipping variable loading" in str(w.message)]
    mask = _inputs(vocab)[1]
    atol = 1e-5 if policy == "float32" else 0.1
    _assert_close(_our_outputs(encoder, vocab), {k: v for k, v in theirs.items()
                                                 if k != "mlm_logits"}, mask, atol)
    if masked_lm:
        _assert_close(_our_outputs(pretrainer, vocab), theirs, mask, atol)
    if policy == "float32":  # the preset's SentencePiece model is the tokenizer
        ours = load_tokenizer(model=str(preset), do_lower_case=False)
        assert [ours.encode(t) for t in TEXT] == [
            np.asarray(ids).tolist() for ids in keras_hub.models.AlbertTokenizer.from_preset(
                str(preset))(TEXT)]


def _tiny_pretrainer(vocab):
    keras.utils.set_random_seed(3)
    config = AlbertConfig(vocab_size=vocab, embedding_size=8, hidden_size=16,
                          num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
                          num_attention_heads=2, intermediate_size=24,
                          max_position_embeddings=32, mlm_layer_norm_eps=1e-5)
    model = AlbertPretrainer(config)
    _our_outputs(model, vocab)  # builds it
    _randomize(model.trainable_variables, seed=11)
    return model


def test_our_pretrainer_written_as_a_preset_loads_into_keras_hub(spm, tmp_path, caplog):
    spm_path, vocab = spm
    model = _tiny_pretrainer(vocab)
    ours = _our_outputs(model, vocab)
    with caplog.at_level(py_logging.WARNING):
        model.save_pretrained(str(tmp_path / "preset"), format="keras_hub",
                              spm_model_file=spm_path)
    assert ("no SOP head: dropped cls/seq_relationship/output_bias, "
            "cls/seq_relationship/output_weights") in caplog.text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        masked_lm = keras_hub.models.AlbertMaskedLM.from_preset(str(tmp_path / "preset"))
        backbone = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "preset"))
        tokenizer = keras_hub.models.AlbertTokenizer.from_preset(str(tmp_path / "preset"))
    masked_lm.preprocessor = None
    _assert_close(ours, _keras_hub_outputs(masked_lm.backbone, masked_lm, vocab),
                  _inputs(vocab)[1], 1e-5)
    _assert_close(ours, _keras_hub_outputs(backbone, None, vocab), _inputs(vocab)[1], 1e-5)
    our_tokenizer = load_tokenizer(spm_path, do_lower_case=False)
    assert [our_tokenizer.encode(t) for t in TEXT] == [
        np.asarray(ids).tolist() for ids in tokenizer(TEXT)]


def test_converter_names_what_keras_hub_changes(spm, tmp_path, caplog):
    """An ALBERT MLM head (epsilon 1e-12) written to KerasHub is said to change."""
    spm_path, vocab = spm
    model = _tiny_pretrainer(vocab)
    model.config.mlm_layer_norm_eps = None
    model.save_pretrained(str(tmp_path / "ours"))
    with caplog.at_level(py_logging.WARNING):
        convert(str(tmp_path / "ours"), str(tmp_path / "preset"), "keras_hub",
                spm_model_file=spm_path)
    assert "the MLM head's LayerNorm epsilon becomes 1e-05 (this model's: 1e-12)" in caplog.text


def test_round_trips_keep_every_tensor(spm, tmp_path, request):
    """Original TF1 → ours → KerasHub → ours → TF1, and Hugging Face → KerasHub (last: it needs
    PyTorch, and skips where it is not installed)."""
    spm_path, vocab = spm
    model = _tiny_pretrainer(vocab)
    model.save_pretrained(str(tmp_path / "tf1"), format="tf1")
    start, _, _ = read_checkpoint(str(tmp_path / "tf1"))
    convert(str(tmp_path / "tf1"), str(tmp_path / "ours"), "albert_tf")
    convert(str(tmp_path / "ours"), str(tmp_path / "kh"), "keras_hub", spm_model_file=spm_path)
    convert(str(tmp_path / "kh"), str(tmp_path / "ours2"), "albert_tf")
    convert(str(tmp_path / "ours2"), str(tmp_path / "tf1_again"), "tf1")
    end, _, _ = read_checkpoint(str(tmp_path / "tf1_again"))
    sop = {n for n in start if n.startswith("cls/seq_relationship/")}
    assert sop and set(end) == set(start)  # the SOP head comes back at its initial values
    for name in set(start) - sop:
        np.testing.assert_array_equal(end[name], start[name], err_msg=name)
    _, hf_path = request.getfixturevalue("hf_albert")
    convert(hf_path, str(tmp_path / "hf_kh"), "keras_hub")  # (no tokenizer of that vocabulary)
    from_hf, _, _ = read_checkpoint(hf_path)
    via_kh, _, _ = read_checkpoint(str(tmp_path / "hf_kh"))
    assert set(via_kh) == {n for n in from_hf if not n.startswith("cls/seq_relationship/")}
    for name in via_kh:
        np.testing.assert_allclose(via_kh[name], from_hf[name], rtol=0, atol=0, err_msg=name)


def test_fill_mask_takes_a_keras_hub_preset(spm, tmp_path):
    """The predict side: FillMask (and `python -m albert_tf.predict --model=`) on a KerasHub
    AlbertMaskedLM preset ranks words as KerasHub's own model does."""
    from albert_tf import serving
    spm_path, vocab = spm
    _, masked_lm = _keras_hub_preset(tmp_path / "preset", spm_path, vocab, 2, 2, True)
    fill = serving.FillMask(str(tmp_path / "preset"), top_k=3)
    text = "the river [MASK] by the old house"
    ids, types, positions = fill.features(text)
    logits = np.asarray(masked_lm({
        "token_ids": np.array([ids], "int32"), "segment_ids": np.array([types], "int32"),
        "padding_mask": np.ones((1, len(ids)), "int32"),
        "mask_positions": np.array([positions], "int32")}))[0, 0]
    top = fill([text])[0]["masks"][0]["predictions"]
    assert [t["token_id"] for t in top] == np.argsort(-logits)[:3].tolist()


def test_text_classifier_both_ways(spm, tmp_path):
    """Our fine-tuned classifier ↔ KerasHub's AlbertTextClassifier: output_weights [labels, H]
    is the transpose of KerasHub's logits kernel; the logits agree both ways."""
    from albert_tf.modeling.classifier import AlbertClassifier
    spm_path, vocab = spm
    ids, mask, types, _ = _inputs(vocab)
    features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    khub = {"token_ids": ids, "segment_ids": types, "padding_mask": mask}
    ours = AlbertClassifier(_tiny_pretrainer(vocab).config, 3)
    ours(features)
    _randomize(ours.trainable_variables, seed=5)
    ours.save_pretrained(str(tmp_path / "ours_preset"), format="keras_hub",
                         spm_model_file=spm_path)
    theirs = keras_hub.models.AlbertTextClassifier.from_preset(str(tmp_path / "ours_preset"))
    theirs.preprocessor = None
    np.testing.assert_allclose(np.asarray(theirs(khub)), np.asarray(ours(features)["logits"]),
                               atol=1e-5, rtol=0)
    backbone, _ = _keras_hub_preset(tmp_path / "unused", spm_path, vocab, 2, 2, False)
    classifier = keras_hub.models.AlbertTextClassifier(
        backbone, num_classes=4, preprocessor=keras_hub.models.AlbertTextClassifierPreprocessor(
            keras_hub.models.AlbertTokenizer(proto=spm_path), sequence_length=16))
    _randomize(classifier.output_dense.weights, seed=9)
    classifier.save_to_preset(str(tmp_path / "kh_preset"))
    classifier.preprocessor = None
    loaded = AlbertClassifier.from_pretrained(str(tmp_path / "kh_preset"), num_labels=4)
    np.testing.assert_allclose(np.asarray(loaded(features)["logits"]),
                               np.asarray(classifier(khub)), atol=1e-5, rtol=0)
