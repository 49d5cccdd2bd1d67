"""Embeddings: one vector per text (or pair) from an encoder checkpoint or export."""

import numpy as np

from albert_tf.serving.predictor import PredictError, Predictor, batches, check_pairs, pad_batch

POOLINGS = ("cls", "first", "mean")


class Embedder(Predictor):
    """One vector per text (or pair): `cls` the encoder's pooled_output ([CLS] through the
    pooler, the original `get_pooled_output`), `first` the [CLS] position of sequence_output,
    `mean` sequence_output averaged over the real tokens (special tokens included)."""

    def __init__(self, model, pooling="cls", **kwargs):
        super().__init__(model, **kwargs)
        if pooling not in POOLINGS:
            raise PredictError(f"--pooling={pooling!r}: one of {', '.join(POOLINGS)}")
        self.pooling = pooling
        source = self.source
        if (pooling == "cls" and source.kind == "checkpoint"
                and "bert/pooler/dense/kernel" not in source.arrays):
            raise PredictError(f"{source.path} has no pooler (transformers saves "
                               f"AlbertForMaskedLM, ...ForTokenClassification and "
                               f"...ForQuestionAnswering without one), so --pooling=cls would "
                               f"give untrained vectors: use --pooling=mean or --pooling=first")
        self._load_encoder("embed")

    def vectors(self, texts, texts_b=None):
        """float32 [texts, hidden]."""
        texts, texts_b = check_pairs(texts, texts_b)
        out = []
        for part in batches(len(texts), self.batch_size):
            inputs = pad_batch([self._encode(a, b) for a, b in zip(texts[part], texts_b[part])])
            encoded = self._encoder_outputs(inputs)
            if self.pooling == "cls":
                vectors = encoded["pooled_output"]
            elif self.pooling == "first":
                vectors = encoded["sequence_output"][:, 0]
            else:
                mask = inputs["input_mask"][..., None].astype(np.float32)
                vectors = (encoded["sequence_output"] * mask).sum(1) / mask.sum(1)
            out.append(np.asarray(vectors, np.float32))
        if not out:
            return np.zeros([0, 0], np.float32)
        return np.concatenate(out, 0)

    def __call__(self, texts, texts_b=None):
        texts, texts_b = check_pairs(texts, texts_b)
        vectors = self.vectors(texts, texts_b)
        results = []
        for a, b, v in zip(texts, texts_b, vectors):
            row = {"text": a}
            if b is not None:
                row["text_b"] = b
            row["embedding"] = [float(x) for x in v]
            results.append(row)
        return results
