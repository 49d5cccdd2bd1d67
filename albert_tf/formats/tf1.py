"""The original TF1 checkpoints' names for an encoder's variables: google-research/albert's
layout and brightmart/albert_zh's. (Hugging Face's names map onto these in `hf`, KerasHub's in
`keras_hub`.)

The encoder is any object with AlbertEncoder's attributes: `config`, `embeddings`,
`embedding_projection`, `groups` (of blocks with `query`, `key`, `value`, `attention_output`,
`attention_layer_norm`, `intermediate`, `ffn_output`, `output_layer_norm`) and `pooler`.
"""


def encoder_weights(encoder):
    """{TF1 name: variable} of the encoder, in a fixed order."""
    if encoder.config.embedding_layout == "brightmart":
        return _brightmart_weights(encoder)
    emb = encoder.embeddings
    out = {
        "bert/embeddings/word_embeddings": emb.word_embeddings,
        "bert/embeddings/token_type_embeddings": emb.token_type_embeddings,
        "bert/embeddings/position_embeddings": emb.position_embeddings,
        "bert/embeddings/LayerNorm/gamma": emb.layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": emb.layer_norm.beta,
    }
    if encoder.embedding_projection is not None:
        out.update(_dense_weights("bert/encoder/embedding_hidden_mapping_in",
                                  encoder.embedding_projection))
    for g, blocks in enumerate(encoder.groups):
        for i, block in enumerate(blocks):
            out.update(_block_weights(f"bert/encoder/transformer/group_{g}/inner_group_{i}",
                                      block))
    out.update(_dense_weights("bert/pooler/dense", encoder.pooler))
    return out


# A block's names under its prefix: self-attention's q/k/v ({} is query, key or value), the
# attention output, its LayerNorm, the FFN's intermediate and output, the output LayerNorm.
ORIGINAL_BLOCK = ("attention_1/self/{}", "attention_1/output/dense", "LayerNorm",
                  "ffn_1/intermediate/dense", "ffn_1/intermediate/output/dense", "LayerNorm_1")
# brightmart's pre-LN blocks keep these names: the LayerNorm before attention is
# attention/output's, the one before the FFN output's.
BRIGHTMART_BLOCK = ("attention/self/{}", "attention/output/dense",
                    "attention/output/LayerNorm", "intermediate/dense", "output/dense",
                    "output/LayerNorm")


def _block_weights(prefix, block, names=ORIGINAL_BLOCK):
    qkv, attention_output, attention_ln, intermediate, ffn_output, output_ln = names
    out = {}
    for name in ("query", "key", "value"):
        out.update(_dense_weights(f"{prefix}/{qkv.format(name)}", getattr(block, name)))
    out.update(_dense_weights(f"{prefix}/{attention_output}", block.attention_output))
    out.update(_ln_weights(f"{prefix}/{attention_ln}", block.attention_layer_norm))
    out.update(_dense_weights(f"{prefix}/{intermediate}", block.intermediate))
    out.update(_dense_weights(f"{prefix}/{ffn_output}", block.ffn_output))
    out.update(_ln_weights(f"{prefix}/{output_ln}", block.output_layer_norm))
    return out


def _brightmart_weights(encoder):
    """brightmart/albert_zh's names: BERT's, the one block under `layer_shared`."""
    emb = encoder.embeddings
    out = {"bert/embeddings/word_embeddings": emb.word_embeddings,
           "bert/embeddings/word_embeddings_2": emb.word_projection,
           "bert/embeddings/token_type_embeddings": emb.token_type_embeddings,
           "bert/embeddings/position_embeddings": emb.position_embeddings}
    out.update(_ln_weights("bert/embeddings/LayerNorm", emb.layer_norm))
    if len(encoder.groups) != 1 or len(encoder.groups[0]) != 1:
        raise ValueError("brightmart's layout shares one block across every layer "
                         "(num_hidden_groups and inner_group_num 1)")
    out.update(_block_weights("bert/encoder/layer_shared", encoder.groups[0][0],
                              BRIGHTMART_BLOCK))
    out.update(_dense_weights("bert/pooler/dense", encoder.pooler))
    return out


def _dense_weights(prefix, dense):
    return {f"{prefix}/kernel": dense.kernel, f"{prefix}/bias": dense.bias}


def _ln_weights(prefix, ln):
    return {f"{prefix}/gamma": ln.gamma, f"{prefix}/beta": ln.beta}
