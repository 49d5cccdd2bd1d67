"""ALBERT tokenization: the original `tokenization.py` API, for both kinds of vocabulary the
original shipped, and their in-graph twins.

Where things are:
  vocabulary               special pieces, SentencePiece vs WordPiece, which file the flags name
  sentencepiece_tokenizer  SentencePiece (`spm_model_file`, the English releases)
  wordpiece_tokenizer      WordPiece (`vocab_file`, the Chinese releases, BERT-style vocabularies)
  characters               the Unicode classes both split and normalize by
  full_tokenizer           `FullTokenizer`: the same tokens and ids as the original on any text
  in_graph                 the same ids inside a TensorFlow graph (tensorflow-text)

The tools load a tokenizer through `albert_tf.formats.tokenizers.load_tokenizer`.
"""

from albert_tf.tokenization.characters import CJK_RANGES
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.sentencepiece_tokenizer import (FastEncoder, encode_ids,
                                                            encode_pieces, is_start_piece,
                                                            load_sp_model, preprocess_text,
                                                            special_ids)
from albert_tf.tokenization.vocabulary import (CLS, MASK, PAD, SENTENCEPIECE, SEP,
                                               SPECIAL_PIECES, SPIECE_UNDERLINE, UNK, WORDPIECE,
                                               WORDPIECE_SPECIALS, convert_to_unicode,
                                               printable_text, sentencepiece_listing,
                                               vocabulary_file, vocabulary_kind)
from albert_tf.tokenization.wordpiece_tokenizer import (BasicTokenizer, WordpieceTokenizer,
                                                        convert_by_vocab, convert_ids_to_tokens,
                                                        convert_tokens_to_ids,
                                                        is_wordpiece_start, load_vocab,
                                                        whitespace_tokenize)

__all__ = ["CJK_RANGES", "FullTokenizer", "FastEncoder", "encode_ids", "encode_pieces",
           "is_start_piece", "load_sp_model", "preprocess_text", "special_ids", "CLS", "MASK",
           "PAD", "SENTENCEPIECE", "SEP", "SPECIAL_PIECES", "SPIECE_UNDERLINE", "UNK", "WORDPIECE",
           "WORDPIECE_SPECIALS", "convert_to_unicode", "printable_text", "sentencepiece_listing",
           "vocabulary_file", "vocabulary_kind", "BasicTokenizer", "WordpieceTokenizer",
           "convert_by_vocab", "convert_ids_to_tokens", "convert_tokens_to_ids",
           "is_wordpiece_start", "load_vocab", "whitespace_tokenize", "InGraphTokenizer",
           "InGraphWordpieceTokenizer", "in_graph_tokenizer"]

_IN_GRAPH = ("InGraphTokenizer", "InGraphWordpieceTokenizer", "in_graph_tokenizer")


def __getattr__(name):
    # The in-graph twins import TensorFlow (seconds); the data builder's workers and
    # train_vocab use the host tokenizers only, so that import waits until a twin is asked for.
    if name in _IN_GRAPH:
        from albert_tf.tokenization import in_graph
        return getattr(in_graph, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
