import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# A tiny ALBERT with every structural feature: E != H, 2 groups of 2 inner blocks, 4 layers.
TINY = dict(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=4,
            num_hidden_groups=2, inner_group_num=2, num_attention_heads=2, intermediate_size=24,
            max_position_embeddings=32, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)


@pytest.fixture
def tiny_config():
    from albert_tf import AlbertConfig
    return AlbertConfig(**TINY)


@pytest.fixture
def batch():
    """Two sequences with padding and two segments, plus masked positions."""
    ids = np.array([[2, 5, 6, 7, 3, 9, 10, 3, 0, 0], [2, 11, 12, 3, 13, 14, 15, 16, 17, 3]],
                   np.int32)
    types = np.array([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]], np.int32)
    return {"input_word_ids": ids, "input_mask": (ids != 0).astype(np.int32),
            "input_type_ids": types,
            "masked_lm_positions": np.array([[1, 2, 5], [3, 4, 6]], np.int32)}


@pytest.fixture(scope="session")
def hf_albert(tmp_path_factory):
    """A transformers AlbertForPreTraining with random non-trivial weights, saved to disk."""
    import torch
    import transformers
    torch.manual_seed(0)
    config = transformers.AlbertConfig(**TINY)
    model = transformers.AlbertForPreTraining(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    path = tmp_path_factory.mktemp("hf_albert")
    model.save_pretrained(str(path))
    return model, str(path)


def torch_outputs(model, batch):
    """Reference outputs of a transformers AlbertForPreTraining on `batch`."""
    import torch
    ids = torch.tensor(batch["input_word_ids"], dtype=torch.long)
    kwargs = dict(attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                  token_type_ids=torch.tensor(batch["input_type_ids"], dtype=torch.long))
    with torch.no_grad():
        full = model(input_ids=ids, **kwargs)
        base = model.albert(input_ids=ids, **kwargs)
    positions = batch["masked_lm_positions"]
    mlm = np.take_along_axis(full.prediction_logits.numpy(), positions[:, :, None], axis=1)
    return {"sequence_output": base.last_hidden_state.numpy(),
            "pooled_output": base.pooler_output.numpy(), "mlm_logits": mlm,
            "sop_logits": full.sop_logits.numpy()}
