"""Fill-mask: the top-k tokens at each [MASK] of a text, from the masked-LM head."""

import re

import numpy as np

from albert_tf.serving.predictor import (PredictError, Predictor, batches, check_pairs,
                                         inference_function, pack, pad_batch)
from albert_tf.tokenization import WORDPIECE

MASK_PATTERN = re.compile(r"\[MASK\]", re.IGNORECASE)
_UNDERLINE = "\u2581"


def piece_text(piece, wordpiece=False):
    """Readable text of a piece: SentencePiece's word-start mark or WordPiece's ## continuation
    mark becomes nothing."""
    if piece.startswith("<") or piece.startswith("["):
        return piece
    if wordpiece:
        return piece.removeprefix("##")
    return piece.replace(_UNDERLINE, " ").strip()


class FillMask(Predictor):
    """Top-k tokens for each [MASK] of each text, from the masked-LM head.

    The text is split on [MASK] (any case); the pieces are tokenized one by one and joined with
    the mask id, so each [MASK] is exactly one token. The special pieces (the unknown piece,
    [CLS], padding, ...) come last whatever their probability (each keeps the model's). A piece
    that follows a [MASK] without a space ("[MASK]." or "un[MASK]able") loses its word-start
    mark, as in running text.
    """

    def __init__(self, model, top_k=5, **kwargs):
        super().__init__(model, **kwargs)
        self.top_k = int(top_k)
        if self.top_k < 1:
            raise PredictError(f"--top_k={top_k} must be at least 1")
        if not self.source.has_mlm_head():
            what = ("a checkpoint without the masked-LM head (cls/predictions/...)"
                    if self.source.kind == "checkpoint" else f"a {self.source.kind} export")
            raise PredictError(f"fill_mask needs a masked-LM head, but {self.source.path} is "
                               f"{what}: use a pretraining checkpoint or an export made with "
                               f"--export_type=pretrainer")
        if self.source.kind == "checkpoint":
            from albert_tf.modeling.pretrainer import AlbertPretrainer
            self._mlm = inference_function(self.source.build(AlbertPretrainer))
        else:
            self._mlm = lambda feed: self.source.loaded.mlm(feed, training=False)

    def _segment_ids(self, text):
        """Ids of one segment with `None` where the masks go."""
        tokenizer = self.tokenizer
        parts = MASK_PATTERN.split(text)
        ids = []
        for i, part in enumerate(parts):
            if i:
                ids.append(None)
            pieces = tokenizer.tokenize(part)
            if i and pieces and part[:1] and not part[:1].isspace():
                # Glued to the mask: no word start ("▁" alone is dropped, "▁x" becomes "x").
                first = pieces[0]
                if first == _UNDERLINE:
                    pieces = pieces[1:]
                elif first.startswith(_UNDERLINE) and first[1:] in tokenizer.vocab:
                    pieces = [first[1:]] + pieces[1:]
            ids.extend(tokenizer.convert_tokens_to_ids(pieces))
        return ids

    def features(self, text, text_b=None):
        """(ids, type ids, mask positions) of one input; errors for no or truncated masks."""
        a = self._segment_ids(text)
        b = None if text_b is None else self._segment_ids(text_b)
        count = a.count(None) + (b.count(None) if b is not None else 0)
        if not count:
            raise PredictError(f"no [MASK] in {text!r}" + (
                f" or {text_b!r}" if text_b is not None else "") +
                ": fill_mask predicts the token at each [MASK]")
        ids, types = pack(a, b, self.max_seq_length, -1, -2)
        positions = [i for i, t in enumerate(ids) if t is None]
        if len(positions) != count:
            raise PredictError(f"{count - len(positions)} [MASK] of {text!r} fall beyond "
                               f"--max_seq_length={self.max_seq_length}")
        special = {-1: self.cls_id, -2: self.sep_id, None: self.mask_id}
        ids = [special.get(t, t) if t is None or t < 0 else t for t in ids]
        return ids, types, positions

    def __call__(self, texts, texts_b=None):
        import tensorflow as tf
        texts, texts_b = check_pairs(texts, texts_b)
        feats = [self.features(a, b) for a, b in zip(texts, texts_b)]
        results = []
        for part in batches(len(feats), self.batch_size):
            batch = feats[part]
            width = max(len(f[2]) for f in batch)
            positions = np.zeros([len(batch), width], np.int32)
            for i, f in enumerate(batch):
                positions[i, :len(f[2])] = f[2]
            inputs = pad_batch([(f[0], f[1]) for f in batch],
                               {"masked_lm_positions": positions})
            logits = np.asarray(self._mlm({k: tf.constant(v) for k, v in inputs.items()})[
                "mlm_logits"], np.float64)
            for i, f in enumerate(batch):
                results.append(self._result(texts[part][i], texts_b[part][i],
                                            logits[i, :len(f[2])], f[2]))
        return results

    def _result(self, text, text_b, logits, positions):
        tokenizer = self.tokenizer
        logits = logits - logits.max(-1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(-1, keepdims=True)
        masks, wordpiece = [], tokenizer.kind == WORDPIECE
        # The special pieces ([UNK], [CLS], padding, ...) fill no text: ranked after the rest.
        special = list(tokenizer.special_ids().values())
        for k, (row, position) in enumerate(zip(probabilities, positions)):
            ranked = row.copy()
            ranked[special] = -1.0
            top = np.argsort(-ranked, kind="stable")[:self.top_k]
            pieces = tokenizer.convert_ids_to_tokens(top)
            masks.append({"mask": k, "position": int(position), "predictions": [
                {"token": piece, "token_id": int(i), "text": piece_text(piece, wordpiece),
                 "probability": float(row[i])} for piece, i in zip(pieces, top)]})
        out = {"text": text}
        if text_b is not None:
            out["text_b"] = text_b
        fills = iter([m["predictions"][0]["text"] for m in masks])
        out["filled"] = MASK_PATTERN.sub(lambda _: next(fills), text)
        if text_b is not None:
            out["filled_b"] = MASK_PATTERN.sub(lambda _: next(fills), text_b)
        out["masks"] = masks
        return out
