import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.conversion import convert
from albert_tf.formats.checkpoints import read_checkpoint
from albert_tf.formats.sources import ModelSource
from albert_tf.modeling.optimizers import create_optimizer
from albert_tf.training import results
from albert_tf.training.trainer import Trainer
from albert_tf.training.trainer_options import TrainerOptions
from conftest import SMALL, TINY, peers, torch_outputs
from tool_runner import run_tool_logged


def _original_name(hf_name):
    """The original TF1 variable name of a transformers ALBERT weight (written independently of
    the library's rule table), and whether the tensor is transposed."""
    n = hf_name
    for a, b in [("albert.embeddings.", "bert/embeddings/"), ("albert.pooler", "bert/pooler/dense"),
                 ("albert.encoder.embedding_hidden_mapping_in",
                  "bert/encoder/embedding_hidden_mapping_in"),
                 ("predictions.dense", "cls/predictions/transform/dense"),
                 ("predictions.LayerNorm", "cls/predictions/transform/LayerNorm"),
                 ("predictions.bias", "cls/predictions/output_bias"),
                 ("sop_classifier.classifier.weight", "cls/seq_relationship/output_weights"),
                 ("sop_classifier.classifier.bias", "cls/seq_relationship/output_bias")]:
        n = n.replace(a, b)
    n = re.sub(r"albert\.encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.",
               r"bert/encoder/transformer/group_\1/inner_group_\2/", n)
    for a, b in [("attention.query", "attention_1/self/query"),
                 ("attention.key", "attention_1/self/key"),
                 ("attention.value", "attention_1/self/value"),
                 ("attention.dense", "attention_1/output/dense"),
                 ("attention.LayerNorm", "LayerNorm"), ("full_layer_layer_norm", "LayerNorm_1"),
                 ("ffn_output", "ffn_1/intermediate/output/dense"),
                 ("ffn.", "ffn_1/intermediate/dense.")]:
        n = n.replace(a, b)
    is_ln = "LayerNorm" in n
    n = re.sub(r"\.weight$", "/gamma" if is_ln else "/kernel", n)
    n = re.sub(r"\.bias$", "/beta" if is_ln else "/bias", n)
    n = n.replace("bert/embeddings/word_embeddings/kernel", "bert/embeddings/word_embeddings")
    n = n.replace("bert/embeddings/position_embeddings/kernel", "bert/embeddings/position_embeddings")
    n = n.replace("bert/embeddings/token_type_embeddings/kernel",
                  "bert/embeddings/token_type_embeddings")
    transpose = n.endswith("/kernel")
    return n, transpose


def write_original_release(hf_model, directory, prefix_scope=""):
    """Writes a checkpoint as the original TF1 code did (graph-mode variables, tf.compat.v1 Saver,
    Adam slots and global_step included) plus albert_config.json."""
    state = {k: v.numpy() for k, v in hf_model.state_dict().items()
             if not k.startswith("predictions.decoder")}
    os.makedirs(directory, exist_ok=True)
    with tf.Graph().as_default():
        for hf_name, value in state.items():
            name, transpose = _original_name(hf_name)
            value = value.T if transpose else value
            tf.compat.v1.get_variable(prefix_scope + name, initializer=value)
            for slot in ("adam_m", "adam_v"):
                tf.compat.v1.get_variable(f"{prefix_scope}{name}/{slot}",
                                          initializer=np.zeros_like(value), trainable=False)
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, os.path.join(directory, "model.ckpt-best"))
    AlbertConfig(**TINY).to_json_file(os.path.join(directory, "albert_config.json"))
    return directory


def _assert_matches_torch(model, batch, expected, atol=1e-4):
    out = model(batch)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_allclose(out[key], expected[key], atol=atol, rtol=0, err_msg=key)


def test_parity_with_transformers_through_hf_checkpoint(hf_albert, batch):
    torch_model, path = hf_albert
    model = AlbertPretrainer.from_pretrained(path)
    _assert_matches_torch(model, batch, torch_outputs(torch_model, batch))


def test_a_transformers_masked_lm_without_pooler_loads_with_its_weights(hf_albert, batch,
                                                                         tmp_path, caplog):
    """transformers saves AlbertForMaskedLM without the pooler and the SOP head: it loads (fill
    mask, the encoder's sequence output, a start for fine-tuning), those two left at their
    initial values and named in a warning, as transformers' own classes do from it."""
    torch, transformers = peers()
    torch_model, _ = hf_albert
    masked_lm = transformers.AlbertForMaskedLM(torch_model.config).eval()
    masked_lm.albert.load_state_dict(torch_model.albert.state_dict(), strict=False)
    masked_lm.predictions.load_state_dict(torch_model.predictions.state_dict())
    masked_lm.save_pretrained(str(tmp_path / "mlm"))
    expected = torch_outputs(torch_model, batch)
    with caplog.at_level("WARNING", logger="absl"):
        model = AlbertPretrainer.from_pretrained(str(tmp_path / "mlm"))
    out = model(batch)
    for key in ("sequence_output", "mlm_logits"):
        np.testing.assert_allclose(out[key], expected[key], atol=1e-4, rtol=0, err_msg=key)
    assert ("4 tensors not in the checkpoint keep their initial values: bert/pooler/dense/kernel, "
            "bert/pooler/dense/bias, cls/seq_relationship/output_weights, "
            "cls/seq_relationship/output_bias") in caplog.text, caplog.text
    encoder = AlbertEncoder.from_pretrained(str(tmp_path / "mlm"))
    np.testing.assert_allclose(encoder(batch)["sequence_output"], expected["sequence_output"],
                               atol=1e-4, rtol=0)
    # Its pooled output would be the untrained pooler's: predict's embeddings say so.
    from albert_tf.serving import Embedder
    from albert_tf.serving.predictor import PredictError
    with pytest.raises(PredictError, match=r"has no pooler .* use --pooling=mean or "
                                           r"--pooling=first"):
        Embedder(str(tmp_path / "mlm"))
    assert Embedder(str(tmp_path / "mlm"), pooling="mean").pooling == "mean"


def test_parity_with_transformers_through_original_tf1_checkpoint(hf_albert, batch, tmp_path):
    torch_model, _ = hf_albert
    release = write_original_release(torch_model, str(tmp_path / "albert_tiny"))
    expected = torch_outputs(torch_model, batch)
    _assert_matches_torch(AlbertPretrainer.from_pretrained(release), batch, expected)
    # A checkpoint prefix, and the .index file users often pass by mistake, load the same.
    prefix = os.path.join(release, "model.ckpt-best")
    for path in (prefix, prefix + ".index"):
        _assert_matches_torch(AlbertPretrainer.from_pretrained(path), batch, expected)
    encoder = AlbertEncoder.from_pretrained(release)
    np.testing.assert_allclose(encoder(batch)["pooled_output"], expected["pooled_output"],
                               atol=1e-4)


def test_tf_hub_v1_module_names(hf_albert, batch, tmp_path):
    torch_model, _ = hf_albert
    release = write_original_release(torch_model, str(tmp_path / "hub"), prefix_scope="module/")
    model = AlbertPretrainer.from_pretrained(release)
    _assert_matches_torch(model, batch, torch_outputs(torch_model, batch))


def _arrays(model):
    return {name: v.numpy() for name, v in model.tf1_weights().items()}


@pytest.mark.parametrize("fmt", ["albert_tf", "tf1", "hf"])
def test_round_trip_is_bit_identical(tiny_config, tmp_path, fmt):
    model = AlbertPretrainer(tiny_config)
    out_dir = str(tmp_path / fmt)
    model.save_pretrained(out_dir, format=fmt)
    assert not [f for f in os.listdir(out_dir) if ".tmp-" in f]
    loaded = AlbertPretrainer.from_pretrained(out_dir)
    assert loaded.config == tiny_config
    original, again = _arrays(model), _arrays(loaded)
    assert sorted(original) == sorted(again)
    for name in original:
        assert original[name].tobytes() == again[name].tobytes(), name


def test_tf1_export_has_original_names(tiny_config, tmp_path):
    model = AlbertPretrainer(tiny_config)
    model.save_pretrained(str(tmp_path), format="tf1")
    names = dict(tf.train.list_variables(str(tmp_path / "model.ckpt-best")))
    key = "bert/encoder/transformer/group_1/inner_group_1/attention_1/self/query/kernel"
    assert names[key] == [16, 16]
    assert names["cls/seq_relationship/output_weights"] == [2, 16]
    assert names["bert/encoder/embedding_hidden_mapping_in/kernel"] == [8, 16]
    assert "global_step" in names
    config = json.loads((tmp_path / "albert_config.json").read_text())
    assert config["num_hidden_groups"] == 2 and config["inner_group_num"] == 2


def test_hf_export_loads_in_transformers(tiny_config, batch, tmp_path):
    _, transformers = peers()
    model = AlbertPretrainer(tiny_config)
    model.save_pretrained(str(tmp_path), format="hf")
    torch_model = transformers.AlbertForPreTraining.from_pretrained(str(tmp_path)).eval()
    _assert_matches_torch(model, batch, torch_outputs(torch_model, batch))


def test_encoder_loads_from_pretrainer_checkpoint_and_back(tiny_config, batch, tmp_path):
    pretrainer = AlbertPretrainer(tiny_config)
    pretrainer.save_pretrained(str(tmp_path / "pre"))
    encoder = AlbertEncoder.from_pretrained(str(tmp_path / "pre"))
    np.testing.assert_array_equal(encoder(batch)["sequence_output"],
                                  pretrainer(batch)["sequence_output"])
    encoder.save_pretrained(str(tmp_path / "enc"), format="hf")
    # The masked-LM head is missing (the SOP head may be, as in transformers' saved models).
    with pytest.raises(ValueError, match="5 tensors the model needs are missing, e.g. "
                                         "cls/predictions/"):
        AlbertPretrainer.from_pretrained(str(tmp_path / "enc"))
    partial = AlbertPretrainer.from_pretrained(str(tmp_path / "enc"), allow_missing=("cls/",))
    np.testing.assert_array_equal(partial(batch)["sequence_output"],
                                  pretrainer(batch)["sequence_output"])


def test_wrong_vocab_names_tensor_and_both_shapes(tiny_config, tmp_path):
    AlbertPretrainer(tiny_config).save_pretrained(str(tmp_path), format="tf1")
    config = dict(TINY, vocab_size=100)
    with pytest.raises(ValueError) as err:
        AlbertPretrainer.from_pretrained(str(tmp_path), config=config)
    message = str(err.value)
    assert "bert/embeddings/word_embeddings: checkpoint (60, 8) vs model (100, 8)" in message
    assert "cls/predictions/output_bias: checkpoint (60,) vs model (100,)" in message


def test_config_with_other_groups_is_rejected(tiny_config, tmp_path):
    AlbertEncoder(tiny_config).save_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="tensors the config does not use"):
        AlbertEncoder.from_pretrained(str(tmp_path), config=dict(TINY, num_hidden_groups=1))
    with pytest.raises(ValueError, match="missing, e.g. bert/encoder/transformer/group_2/"):
        AlbertEncoder.from_pretrained(str(tmp_path),
                                      config=dict(TINY, num_hidden_groups=4))


def test_missing_tensor_is_named(tiny_config, tmp_path):
    """A Hugging Face directory (ours: transformers' own needs PyTorch) less one tensor."""
    from safetensors.numpy import load_file, save_file
    path = tmp_path / "hf"
    AlbertPretrainer(tiny_config).save_pretrained(str(path), format="hf")
    state = load_file(str(path / "model.safetensors"))
    del state["albert.encoder.albert_layer_groups.1.albert_layers.0.ffn.bias"]
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / "config.json").write_text((path / "config.json").read_text())
    with pytest.raises(ValueError,
                       match="bert/encoder/transformer/group_1/inner_group_0/ffn_1/intermediate/"
                             "dense/bias"):
        AlbertPretrainer.from_pretrained(str(tmp_path))


def test_init_from_group0(tiny_config, batch, tmp_path):
    one_group = AlbertEncoder(AlbertConfig(**dict(TINY, num_hidden_groups=1)))
    one_group.save_pretrained(str(tmp_path))
    model = AlbertEncoder.from_pretrained(str(tmp_path), config=tiny_config,
                                          init_from_group0=True)
    weights = model.tf1_weights()
    for name, value in weights.items():
        if "/group_1/" in name:
            np.testing.assert_array_equal(value.numpy(),
                                          weights[name.replace("/group_1/", "/group_0/")].numpy())


def test_unreadable_paths_are_clear_errors(tmp_path, tiny_config):
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        AlbertEncoder.from_pretrained(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="no checkpoint in"):
        AlbertEncoder.from_pretrained(str(tmp_path))
    AlbertEncoder(tiny_config).save_pretrained(str(tmp_path / "m"), format="tf1")
    os.remove(tmp_path / "m" / "albert_config.json")
    with pytest.raises(ValueError, match="pass config="):
        AlbertEncoder.from_pretrained(str(tmp_path / "m"))


def test_convert_checkpoint_command(hf_albert, batch, tmp_path):
    torch_model, path = hf_albert
    out = tmp_path / "tf1"
    status, log = run_tool_logged("convert_checkpoint", f"--input={path}", f"--output_dir={out}",
                                  "--format=tf1")  # as `python -m` runs it
    assert status == 0, log[-3000:]
    assert (out / "model.ckpt-best.index").exists() and (out / "albert_config.json").exists()
    expected = torch_outputs(torch_model, batch)
    _assert_matches_torch(AlbertPretrainer.from_pretrained(str(out)), batch, expected)
    back = convert(str(out), str(tmp_path / "hf"), "hf")
    assert isinstance(back, AlbertPretrainer)
    _assert_matches_torch(AlbertPretrainer.from_pretrained(str(tmp_path / "hf")), batch, expected)


def test_pytorch_bin_and_bare_albert_model(hf_albert, batch, tmp_path):
    torch_model, _ = hf_albert
    torch, _ = peers()
    torch_model.config.save_pretrained(str(tmp_path / "bin"))
    torch.save(torch_model.state_dict(), str(tmp_path / "bin" / "pytorch_model.bin"))
    expected = torch_outputs(torch_model, batch)
    _assert_matches_torch(AlbertPretrainer.from_pretrained(str(tmp_path / "bin")), batch,
                          expected)
    # A bare AlbertModel checkpoint stores its keys without the "albert." prefix.
    torch_model.albert.save_pretrained(str(tmp_path / "bare"))
    encoder = AlbertEncoder.from_pretrained(str(tmp_path / "bare"))
    np.testing.assert_allclose(encoder(batch)["sequence_output"], expected["sequence_output"],
                               atol=1e-4)


def test_transformers_fine_tuned_heads_load_with_their_weights(batch, tmp_path):
    """A transformers AlbertForSequenceClassification / AlbertForQuestionAnswering directory
    (a model fine-tuned with transformers) is read with its head: the same logits as torch."""
    torch, transformers = peers()
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.squad import AlbertSquad

    torch.manual_seed(1)
    kwargs = {k: torch.tensor(batch[k], dtype=torch.long)
              for k in ("input_word_ids", "input_mask", "input_type_ids")}
    kwargs = dict(input_ids=kwargs["input_word_ids"], attention_mask=kwargs["input_mask"],
                  token_type_ids=kwargs["input_type_ids"])
    for name, cls in (("classifier", transformers.AlbertForSequenceClassification),
                      ("squad", transformers.AlbertForQuestionAnswering)):
        labels = 3 if name == "classifier" else 2  # QA: start and end
        names = {0: "positive", 1: "negative", 2: "neutral"} if name == "classifier" else None
        model = cls(transformers.AlbertConfig(**TINY, num_labels=labels,
                                              **({"id2label": names} if names else {}))).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.3)
            expected = model(**kwargs)
        model.save_pretrained(str(tmp_path / name))
        if name == "classifier":
            ours = AlbertClassifier.from_pretrained(str(tmp_path / name), num_labels=3)
            np.testing.assert_allclose(ours(batch)["logits"], expected.logits.numpy(),
                                       atol=1e-4, rtol=0)
            # Its id2label names the outputs for predict, and a conversion keeps head and names.
            from albert_tf.serving import Classifier
            assert Classifier(str(tmp_path / name)).labels == ["positive", "negative", "neutral"]
            for fmt in ("albert_tf", "hf"):
                converted = convert(str(tmp_path / name), str(tmp_path / f"{name}_{fmt}"), fmt)
                np.testing.assert_allclose(converted(batch)["logits"], expected.logits.numpy(),
                                           atol=1e-4, rtol=0)
                assert Classifier(str(tmp_path / f"{name}_{fmt}")).labels == [
                    "positive", "negative", "neutral"]
            hf_config = json.loads((tmp_path / f"{name}_hf" / "config.json").read_text())
            assert hf_config["id2label"] == {"0": "positive", "1": "negative", "2": "neutral"}
            continue
        real = batch["input_mask"] == 1
        # Read, and converted (auto: its head kept) to the original layout and back to
        # transformers' AlbertForQuestionAnswering.
        for path in (tmp_path / name, convert(str(tmp_path / name), str(tmp_path / "qa_tf1"),
                                              "tf1") and tmp_path / "qa_tf1",
                     convert(str(tmp_path / "qa_tf1"), str(tmp_path / "qa_hf"), "hf")
                     and tmp_path / "qa_hf"):
            out = AlbertSquad.from_pretrained(str(path))(batch)
            for key in ("start_logits", "end_logits"):
                np.testing.assert_allclose(np.asarray(out[key])[real],
                                           getattr(expected, key).numpy()[real], atol=1e-4,
                                           rtol=0)
        back = cls.from_pretrained(str(tmp_path / "qa_hf")).eval()
        with torch.no_grad():
            np.testing.assert_allclose(back(**kwargs).start_logits.numpy(),
                                       expected.start_logits.numpy(), atol=1e-5, rtol=0)
        assert json.loads((tmp_path / "qa_hf" / "config.json").read_text())[
            "architectures"] == ["AlbertForQuestionAnswering"]
    # AlbertForTokenClassification: read as our token head (its id2label as the tags), and
    # converted back as one.
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier
    tags = {0: "O", 1: "B-PER", 2: "I-PER"}
    model = transformers.AlbertForTokenClassification(
        transformers.AlbertConfig(**TINY, num_labels=3, id2label=tags)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        expected = model(**kwargs).logits.numpy()
    model.save_pretrained(str(tmp_path / "tagger"))
    convert(str(tmp_path / "tagger"), str(tmp_path / "tagger_hf"), "hf")
    for path in (tmp_path / "tagger", tmp_path / "tagger_hf"):
        ours = AlbertTokenClassifier.from_pretrained(str(path), num_labels=3)(batch)["logits"]
        np.testing.assert_allclose(np.asarray(ours)[real], expected[real], atol=1e-4, rtol=0)
    back = transformers.AlbertForTokenClassification.from_pretrained(
        str(tmp_path / "tagger_hf")).eval()
    with torch.no_grad():
        np.testing.assert_allclose(back(**kwargs).logits.numpy(), expected, atol=1e-5)
    assert back.config.id2label == tags
    from albert_tf.formats.hf import hf_tags  # what predict --task=ner names the tags by
    assert hf_tags(str(tmp_path / "tagger")) == list(tags.values())
    # AlbertForMultipleChoice: read as RACE's head, and converted back as one.
    from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
    model = transformers.AlbertForMultipleChoice(transformers.AlbertConfig(**TINY)).eval()
    choices = {k: v[None] for k, v in kwargs.items()}  # one question, the batch its 2 choices
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        expected = model(**choices).logits.numpy()
    model.save_pretrained(str(tmp_path / "mc"))
    ours = {k: batch[k][None] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    convert(str(tmp_path / "mc"), str(tmp_path / "mc_hf"), "hf")
    for path in (tmp_path / "mc", tmp_path / "mc_hf"):
        np.testing.assert_allclose(AlbertMultipleChoice.from_pretrained(str(path))(ours)["logits"],
                                   expected, atol=1e-4, rtol=0)
    assert json.loads((tmp_path / "mc_hf" / "config.json").read_text())["architectures"] == [
        "AlbertForMultipleChoice"]


@pytest.mark.parametrize("kind", ["squad_v2", "race", "ner"])
def test_a_fine_tuned_head_is_converted_with_its_run_or_refused_never_dropped(
        tiny_config, tmp_path, kind):
    """A run's SQuAD 2.0, RACE or NER head goes into the original layout (and ours) with every
    tensor, NER's into transformers' AlbertForTokenClassification too (its tags as id2label,
    and back); transformers (v2's head) and KerasHub, which have no model for it, are refused
    naming why."""
    from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
    from albert_tf.modeling.squad import AlbertSquad
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier
    tf.keras.utils.set_random_seed(3)
    model = {"squad_v2": lambda: AlbertSquad(tiny_config, version_2=True),
             "race": lambda: AlbertMultipleChoice(tiny_config),
             "ner": lambda: AlbertTokenClassifier(tiny_config, 5)}[kind]()
    for weight in model.weights:  # heads start at zero biases: make every tensor tell
        weight.assign(tf.random.normal(weight.shape, dtype=weight.dtype))
    run = tmp_path / "run"
    model.save_pretrained(str(run))
    if kind == "race":
        (run / "run.json").write_text(json.dumps({"kind": "fine-tuning of race"}))
    if kind == "ner":
        (run / "labels.txt").write_text("O\nB-PER\nI-PER\nB-LOC\nI-LOC\n")
    expected = {name: np.asarray(w) for name, w in model.tf1_weights().items()}
    for fmt in ("tf1", "albert_tf"):
        convert(str(run), str(tmp_path / fmt), fmt)
        arrays = read_checkpoint(str(tmp_path / fmt))[0]
        assert arrays.keys() == expected.keys(), fmt
        for name in expected:
            np.testing.assert_array_equal(arrays[name], expected[name], err_msg=name)
    if kind == "ner":
        assert (tmp_path / "tf1" / "labels.txt").read_text() == (run / "labels.txt").read_text()
        convert(str(run), str(tmp_path / "hf"), "hf")
        config = json.loads((tmp_path / "hf" / "config.json").read_text())
        assert config["architectures"] == ["AlbertForTokenClassification"]
        assert config["id2label"] == {str(i): t for i, t in enumerate(
            ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])}
        back = read_checkpoint(str(tmp_path / "hf"))[0]  # (transformers keeps no pooler)
        assert back.keys() == {n for n in expected if not n.startswith("bert/pooler/")}
        for name in back:
            np.testing.assert_allclose(back[name], expected[name], atol=1e-7, err_msg=name)
    refused = {"squad_v2": ["hf", "keras_hub"], "race": ["keras_hub"], "ner": ["keras_hub"]}
    for fmt in refused[kind]:
        with pytest.raises(ValueError) as e:
            convert(str(run), str(tmp_path / f"no_{fmt}"), fmt)
        if fmt == "hf":
            assert str(e.value) == ("--format=hf: transformers has no ALBERT model for SQuAD "
                                    "2.0's head (start_logits, end_logits, answer_class: the "
                                    "original's); convert to tf1 or albert_tf, or "
                                    "--model=encoder for the encoder alone (a run with "
                                    "run_squad --v2_head=span converts to "
                                    "AlbertForQuestionAnswering)")
        else:
            what = {"squad_v2": "a SQuAD model", "race": "a multiple-choice model (RACE)",
                    "ner": "a token classifier (NER)"}[kind]
            assert str(e.value) == (f"--format=keras_hub: KerasHub has no ALBERT model for "
                                    f"{what}; convert to tf1, hf or albert_tf, or --model=encoder "
                                    f"for the encoder alone")
        assert not (tmp_path / f"no_{fmt}").exists()


def test_a_head_of_another_shape_is_left_at_its_initial_values(tmp_path, caplog):
    """MNLI's fine-tuned model (3 labels) before RTE (2 labels), as the paper did: the encoder
    is loaded, the head keeps its initialisation, and the log says why."""
    from albert_tf.modeling.classifier import HEAD_NAMES, AlbertClassifier

    mnli = AlbertClassifier(AlbertConfig(**TINY), num_labels=3)
    mnli.save_pretrained(str(tmp_path))
    rte = AlbertClassifier(AlbertConfig(**TINY), num_labels=2)
    initial = rte.output_weights.numpy().copy()
    rte.load_checkpoint(str(tmp_path), allow_missing=HEAD_NAMES, allow_reshaped=HEAD_NAMES)
    np.testing.assert_array_equal(rte.output_weights.numpy(), initial)
    for ours, theirs in zip(rte.encoder.weights, mnli.encoder.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert "its head has another shape, so this model's keeps its initial values: " \
           "output_weights: checkpoint (3, 16) vs model (2, 16); output_bias: checkpoint " \
           "(3,) vs model (2,)" in caplog.text
    # Unless asked (as the fine-tuning scripts' warm start asks), another shape is an error:
    # from_pretrained(num_labels=2) of this checkpoint (tests/test_classifier.py).
    with pytest.raises(ValueError, match="output_weights: checkpoint"):
        AlbertClassifier(AlbertConfig(**TINY), num_labels=2).load_checkpoint(
            str(tmp_path), allow_missing=HEAD_NAMES)


def test_a_run_directory_means_its_best_checkpoint_for_every_reader(tmp_path, caplog):
    """One checkpoint rule (resolve.run_checkpoint): a run directory means the run's best
    (model.ckpt-best, by its evaluations), else its newest; the log says which and why. Every
    reader goes through it: from_pretrained and --init_checkpoint (read_checkpoint),
    convert_checkpoint, predict and the exports (ModelSource); a prefix is read as given."""
    run = tmp_path / "run"
    trainer = Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"),
                      lambda: AlbertPretrainer(AlbertConfig(**SMALL)),
                      lambda: create_optimizer(1e-2, 10, 0, "lamb"), str(run),
                      TrainerOptions(global_batch_size=2))
    dense = "bert/encoder/embedding_hidden_mapping_in/kernel"
    weights = {}
    for step in (2, 4):
        trainer.optimizer.iterations.assign(step)
        variable = trainer.model.tf1_weights()[dense]
        variable.assign(np.full(variable.shape, float(step), np.float32))
        weights[step] = trainer.save()
    caplog.set_level("INFO")
    assert read_checkpoint(str(run))[0][dense][0, 0] == 4.0  # no evaluation: the newest
    assert "model.ckpt-4 (the run's newest checkpoint (it kept no best" in caplog.text
    trainer.record_eval({"global_step": 2, "masked_lm_accuracy": 0.5}, weights[2],
                        "masked_lm_accuracy")
    trainer.close()
    caplog.clear()
    assert read_checkpoint(str(run))[0][dense][0, 0] == 2.0
    assert (f"Reading the albert_tf checkpoint {run}/model.ckpt-best (the run's best by "
            f"masked_lm_accuracy (0.5 at step 2); its newest is model.ckpt-4)") in caplog.text
    assert ModelSource(str(run)).arrays[dense][0, 0] == 2.0
    encoder = convert(str(run), str(tmp_path / "hf"), "hf")
    assert encoder.tf1_weights()[dense].numpy()[0, 0] == 2.0
    caplog.clear()
    assert read_checkpoint(weights[4])[0][dense][0, 0] == 4.0  # a prefix: as given
    assert f"Reading the albert_tf checkpoint {weights[4]}\n" in caplog.text + "\n"


@pytest.mark.parametrize("metric,loss_name", [("eval_accuracy", "eval_loss"),  # fine-tuning
                                              ("masked_lm_accuracy", "loss")])  # pretraining
def test_a_tie_on_the_metric_goes_to_the_lower_loss(tmp_path, caplog, metric, loss_name):
    """model.ckpt-best moves to a checkpoint that beats the best, or ties it with a lower
    loss (a small dev set's accuracy ties often); a tie at a higher loss, or a worse
    metric, leaves it."""
    variable = tf.Variable(0.0)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), str(tmp_path), 9,
                                         checkpoint_name="model.ckpt")
    caplog.set_level("INFO")
    kept = []
    for step, accuracy, loss in ((1, 0.5, 0.7), (2, 0.5, 0.6), (3, 0.5, 0.65), (4, 0.4, 0.1),
                                 (5, 0.75, 0.9)):
        variable.assign(float(step))
        path = manager.save(checkpoint_number=step)
        if results.record_eval(str(tmp_path), {"global_step": step, metric: accuracy,
                                               loss_name: loss}, path, metric):
            kept.append(step)
        if step == 3:
            assert results.best_results(str(tmp_path))["global_step"] == 2
    assert kept == [1, 2, 5]
    assert f"New best {metric} 0.5 at step 2 (a tie with step 1, at a lower {loss_name} " \
           "0.6): model.ckpt-best" in caplog.messages
    assert tf.train.load_variable(str(tmp_path / "model.ckpt-best"), "v/.ATTRIBUTES/"
                                  "VARIABLE_VALUE") == 5.0
