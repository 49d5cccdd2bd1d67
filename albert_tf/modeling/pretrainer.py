"""AlbertPretrainer: the encoder with the masked-LM and sentence-order heads."""

import keras

from albert_tf.checkpoints import PretrainedMixin
from albert_tf.config import AlbertConfig
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.heads import MaskedLMHead, SentenceOrderHead


class AlbertPretrainer(PretrainedMixin, keras.Model):
    """Encoder + MLM head (tied to the word embeddings) + SOP head.

    Inputs: the encoder dict plus `masked_lm_positions` [batch, P]. Outputs: the encoder's plus
    `mlm_logits` [batch, P, vocab] and `sop_logits` [batch, 2], both float32.
    """

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "albert_pretrainer")
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        self.config = config
        policy = self.dtype_policy
        self.encoder = AlbertEncoder(config, dtype=policy)
        self.masked_lm = MaskedLMHead(config, self.encoder.get_embedding_table,
                                      name="cls_predictions", dtype=policy)
        self.sentence_order = SentenceOrderHead(config, name="cls_seq_relationship",
                                                dtype=policy)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def build(self, *args, **kwargs):
        pass  # weights are created in __init__: their shapes come from the config

    def call(self, inputs, training=None):
        outputs = dict(self.encoder(inputs, training=training))
        outputs["mlm_logits"] = self.masked_lm(outputs["sequence_output"],
                                               inputs["masked_lm_positions"])
        outputs["sop_logits"] = self.sentence_order(outputs["pooled_output"])
        return outputs

    def tf1_weights(self):
        """Encoder weights plus the heads under their original `cls/...` names."""
        out = self.encoder.tf1_weights()
        mlm, sop = self.masked_lm, self.sentence_order
        out.update({
            "cls/predictions/transform/dense/kernel": mlm.dense.kernel,
            "cls/predictions/transform/dense/bias": mlm.dense.bias,
            "cls/predictions/transform/LayerNorm/gamma": mlm.layer_norm.gamma,
            "cls/predictions/transform/LayerNorm/beta": mlm.layer_norm.beta,
            "cls/predictions/output_bias": mlm.output_bias,
            "cls/seq_relationship/output_weights": sop.output_weights,
            "cls/seq_relationship/output_bias": sop.output_bias,
        })
        return out
