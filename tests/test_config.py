import json

import pytest

from albert_tf import AlbertConfig

ORIGINAL_BASE_V2 = {
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
    "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0,
    "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2,
    "vocab_size": 30000,
}


def test_reads_original_config_with_unused_keys(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(dict(ORIGINAL_BASE_V2, layers_to_keep=[])))
    config = AlbertConfig.from_json_file(str(path))
    assert (config.hidden_size, config.num_hidden_layers, config.embedding_size) == (768, 12, 128)
    assert config.hidden_act == "gelu"
    assert config.extra == {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
                            "layers_to_keep": []}


def test_round_trip_writes_original_format(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps(ORIGINAL_BASE_V2))
    out = tmp_path / "out.json"
    AlbertConfig.from_json_file(str(src)).to_json_file(str(out))
    assert json.loads(out.read_text()) == ORIGINAL_BASE_V2
    assert not list(tmp_path.glob("*.tmp-*"))


def test_reads_hugging_face_config(tmp_path):
    hf = {"architectures": ["AlbertForMaskedLM"], "model_type": "albert", "vocab_size": 30000,
          "embedding_size": 128, "hidden_size": 768, "num_hidden_layers": 12,
          "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu_new",
          "num_hidden_groups": 1, "inner_group_num": 1, "layer_norm_eps": 1e-12,
          "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3,
          "classifier_dropout_prob": 0.1, "transformers_version": "4.0"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    config = AlbertConfig.from_json_file(str(path))
    assert config.hidden_act == "gelu"  # HF gelu_new is the original tanh GELU
    assert config.extra == {}
    assert config.to_hf_dict()["hidden_act"] == "gelu_new"
    hf["hidden_act"] = "gelu"  # HF "gelu" is the exact erf form
    path.write_text(json.dumps(hf))
    assert AlbertConfig.from_json_file(str(path)).hidden_act == "gelu_exact"


@pytest.mark.parametrize("name,v,dropout,params", [
    ("base", "v1", 0.1, 11_683_584), ("large", "v2", 0.0, 17_683_968),
    ("xlarge", "v2", 0.0, 58_724_864), ("xxlarge", "v1", 0.1, 222_595_584)])
def test_bundled_configs(name, v, dropout, params):
    config = AlbertConfig.from_json_file(f"configs/albert_{name}_{v}.json")
    assert config.hidden_dropout_prob == dropout
    assert config.attention_probs_dropout_prob == dropout
    # Encoder + pooler parameter count, from the shapes alone.
    e, h, i, v_, p = (config.embedding_size, config.hidden_size, config.intermediate_size,
                      config.vocab_size, config.max_position_embeddings)
    emb = (v_ + p + config.type_vocab_size) * e + 2 * e + e * h + h
    block = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
    assert emb + block + h * h + h == params


@pytest.mark.parametrize("changes,message", [
    ({"hidden_act": "mish"}, "hidden_act='mish' is not supported"),
    ({"num_attention_heads": 5}, "hidden_size=768 is not divisible by num_attention_heads=5"),
    ({"num_hidden_groups": 5}, "num_hidden_layers=12 is not divisible by num_hidden_groups=5"),
    ({"vocab_size": 0}, "vocab_size must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be in [0, 1)"),
])
def test_inconsistent_config_is_a_clear_error(tmp_path, changes, message):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(dict(ORIGINAL_BASE_V2, **changes)))
    with pytest.raises(ValueError) as err:
        AlbertConfig.from_json_file(str(path))
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        AlbertConfig.from_json_file(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        AlbertConfig.from_json_file(str(bad))


def test_group_routing_is_the_originals():
    config = AlbertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2,
                          intermediate_size=8, num_hidden_layers=12, num_hidden_groups=3)
    assert [config.group_of_layer(i) for i in range(12)] == [0] * 4 + [1] * 4 + [2] * 4


def test_a_number_given_as_a_string_names_its_key(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**ORIGINAL_BASE_V2, "hidden_dropout_prob": "0.1"}))
    with pytest.raises(ValueError, match=r"AlbertConfig.hidden_dropout_prob must be a number, "
                                         r"got '0.1' \(a string: write the number without"):
        AlbertConfig.from_json_file(str(path))
