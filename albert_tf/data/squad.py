"""SQuAD v1.1/v2.0 (and CMRC 2018 / DRCD, in the same layout): reading the JSON, aligning
pieces to the characters of the original context, doc-stride windows `[CLS] query [SEP] doc
[SEP]`, and turning per-feature logits back into answer texts."""

import dataclasses
import difflib
import json
import re
import unicodedata

import numpy as np
from absl import logging

from albert_tf.data.text_files import read_text
from albert_tf.tokenization import (SPIECE_UNDERLINE, WORDPIECE, encode_pieces,
                                    preprocess_text)


@dataclasses.dataclass
class Question:
    qas_id: str
    question: str
    context: str
    paragraph: int            # index of the paragraph in the file (questions share contexts)
    answers: list             # every gold answer text ([] when unanswerable)
    answer_start: int = -1    # character offset of the training answer, -1 if none
    answer_text: str = ""
    is_impossible: bool = False


@dataclasses.dataclass
class ReadStats:
    questions: int = 0
    misaligned: int = 0       # training answers not found at answer_start (skipped)
    at_byte_offsets: int = 0  # of those, found at answer_start UTF-8 bytes into the context


JSON_KINDS = {str: "a string", int: "an integer", list: "a list", dict: "an object",
              float: "a number", bool: "true or false"}


def is_squad_file(path):
    """Whether `path` holds one SQuAD JSON document (an object with a 'data' list), which a
    .json name does not tell from JSON Lines."""
    try:
        data = json.loads(read_text(path))
    except (ValueError, OSError):
        return False
    return isinstance(data, dict) and isinstance(data.get("data"), list)


def read_squad(path, is_training, version_2_with_negative):
    """Questions of a SQuAD JSON file, with clear errors naming the file and question id.

    Training keeps one answer per question; an answer whose text is not at its answer_start is
    skipped with a warning and counted in the returned ReadStats.
    """
    try:
        data = json.loads(read_text(path))
    except FileNotFoundError:
        raise FileNotFoundError(f"SQuAD file not found: {path}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path}: expected a SQuAD JSON object with a 'data' list of articles")
    questions, stats, paragraph, seen = [], ReadStats(), -1, {}
    for a, article in enumerate(data["data"]):
        where = f"{path}: article {a}"
        for p, para in enumerate(_get(article, "paragraphs", list, where)):
            paragraph += 1
            where = f"{path}: article {a}, paragraph {p}"
            context = _get(para, "context", str, where)
            for q, qa in enumerate(_get(para, "qas", list, where)):
                qid = _get(qa, "id", (str, int), f"{where}, question {q}")
                if str(qid) in seen:  # predictions.json and the scores are keyed by id
                    raise ValueError(f"{where}, question {q}: id {qid!r} is also the id of "
                                     f"{seen[str(qid)]}: each question needs an id of its own")
                seen[str(qid)] = f"article {a}, paragraph {p}, question {q}"
                question = _parse_question(qa, str(qid), context, paragraph, is_training,
                                           version_2_with_negative, f"{path}: question {qid!r}")
                if question is None:
                    stats.misaligned += 1
                    stats.at_byte_offsets += _at_byte_offset(qa, context)
                    continue
                questions.append(question)
    stats.questions = len(questions)
    # Most skipped, of more than a few in a hundred: the offsets, not a stray annotation.
    if (stats.at_byte_offsets > stats.misaligned // 2
            and stats.misaligned > 0.05 * (stats.misaligned + len(questions))):
        raise ValueError(f"{path}: {stats.misaligned} training answers are not at their "
                         f"answer_start, {stats.at_byte_offsets} of them that many UTF-8 bytes "
                         f"into the context: answer_start counts characters (a Python str "
                         f"index), not bytes")
    if stats.misaligned:
        logging.warning("%s: skipped %d training questions whose answer text is not at its "
                        "answer_start", path, stats.misaligned)
    if not questions:
        raise ValueError(f"{path} holds no usable questions")
    return questions, stats


def _get(obj, key, kind, where):
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, found {type(obj).__name__}")
    if key not in obj:
        raise ValueError(f"{where}: missing key {key!r}")
    if not isinstance(obj[key], kind) or isinstance(obj[key], bool):
        kinds = (kind,) if isinstance(kind, type) else kind
        names = " or ".join(JSON_KINDS.get(k, k.__name__) for k in kinds)
        raise ValueError(f"{where}: {key!r} should be {names}, found "
                         f"{JSON_KINDS.get(type(obj[key]), type(obj[key]).__name__)}")
    return obj[key]


def _at_byte_offset(qa, context):
    """Whether a training answer not at its answer_start is there counted in UTF-8 bytes."""
    answer = qa["answers"][0]
    text, start = answer["text"].encode("utf-8"), answer["answer_start"]
    return bool(text.strip()) and context.encode("utf-8")[start:start + len(text)] == text


def _parse_question(qa, qid, context, paragraph, is_training, version_2, where):
    text = _get(qa, "question", str, where)
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise ValueError(f"{where}: 'is_impossible' should be true or false, found {impossible!r}")
    if impossible and not version_2:
        raise ValueError(f"{where} is marked is_impossible, which needs "
                         f"--version_2_with_negative")
    raw = qa.get("answers", [])
    if not isinstance(raw, list):
        raise ValueError(f"{where}: 'answers' should be a list")
    answers = []
    for i, answer in enumerate(raw):
        answers.append((_get(answer, "text", str, f"{where}, answer {i}"),
                        _get(answer, "answer_start", int, f"{where}, answer {i}")))
    if impossible:
        answers = []  # the official v2.0 script treats these as unanswerable whatever is listed
    question = Question(qid, text, context, paragraph, [a for a, _ in answers],
                        is_impossible=impossible)
    if not is_training or impossible:
        return question
    if not answers:
        raise ValueError(f"{where} has no answer; training needs one"
                         + ("" if version_2 else " (or --version_2_with_negative with "
                                                  "is_impossible)"))
    answer, start = answers[0]
    stripped = answer.strip()
    start += len(answer) - len(answer.lstrip())
    if not stripped or start < 0 or context[start:start + len(stripped)] != stripped:
        logging.warning("%s: answer %r is not at answer_start %d of the context; skipped",
                        where, answer, answers[0][1])
        return None
    question.answer_start, question.answer_text = start, stripped
    return question


# ---- SentencePiece pieces ↔ characters of the original context -------------------------------

def _preprocessed_with_index(text, lower):
    """preprocess_text(text) built character by character, plus each output character's index
    in `text` (a collapsed whitespace run maps to its first character)."""
    out, index, space_at = [], [], -1
    for i, c in enumerate(text):
        if c.isspace():
            if out and space_at < 0:
                space_at = i
            continue
        if space_at >= 0:
            out.append(" ")
            index.append(space_at)
            space_at = -1
        if not c.isascii():
            c = "".join(x for x in unicodedata.normalize("NFKD", c)
                        if not unicodedata.combining(x))
        if lower:
            c = c.lower()
        out.extend(c)
        index.extend([i] * len(c))
    return "".join(out), index


def _char_map(source, target):
    """For each character of `target`, the index of the same character in `source` or -1.

    Walks both strings, letting either side have extra spaces; anything else (a rare
    context-dependent lowercase such as a final sigma, an unknown piece) falls back to difflib,
    mapping replaced runs onto each other.
    """
    out = [-1] * len(target)
    i = j = 0
    while i < len(source) and j < len(target):
        if source[i] == target[j]:
            out[j] = i
            i += 1
            j += 1
        elif target[j] == " ":
            j += 1
        elif source[i] == " ":
            i += 1
        else:
            break
    if all(c == " " for c in target[j:]):
        return out
    out = [-1] * len(target)
    matcher = difflib.SequenceMatcher(None, source, target, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):  # a replaced run maps onto the run it replaces
            for j in range(j1, j2):
                out[j] = i1 + min(j - j1, i2 - i1 - 1)
    return out


def align_pieces(context, pieces, lower):
    """(start, end) character offsets (inclusive) in `context` of each piece.

    `pieces` are those of preprocess_text(context): whitespace collapsed, NFKD without
    combining marks, maybe lowercased. A piece made only of a space maps to the whitespace it
    stands for (or, with none, to the end of the piece before it).
    """
    rebuilt, index = _preprocessed_with_index(context, lower)
    processed = preprocess_text(context, lower=lower)
    if rebuilt != processed:
        to_rebuilt = _char_map(rebuilt, processed)
        index = [index[k] if k >= 0 else -1 for k in to_rebuilt]
    text = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
    to_processed = _char_map(processed, text)
    starts, ends = np.zeros(len(pieces), np.int32), np.zeros(len(pieces), np.int32)
    position, previous_end = 0, 0
    for k, piece in enumerate(pieces):
        mapped = [(text[c] == " ", index[to_processed[c]])
                  for c in range(position, position + len(piece))
                  if to_processed[c] >= 0 and index[to_processed[c]] >= 0]
        chars = [i for space, i in mapped if not space] or [i for _, i in mapped]
        position += len(piece)
        if chars:
            starts[k], ends[k] = min(chars), max(chars)
            previous_end = ends[k]
        else:
            starts[k] = ends[k] = previous_end
    return starts, ends


# ---- features ----------------------------------------------------------------------------------

def windows(num_tokens, max_tokens, doc_stride):
    """(start, length) of the doc-stride windows over `num_tokens` document tokens."""
    spans, start = [], 0
    while True:
        length = min(num_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, doc_stride)


def max_context(spans, position):
    """Index of the window where `position` has the most context: min(left, right) + 0.01·len."""
    best, best_score = None, None
    for w, (start, length) in enumerate(spans):
        if not start <= position < start + length:
            continue
        score = min(position - start, start + length - 1 - position) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = w, score
    return best


def _answer_tokens(question, starts, ends):
    """(first, last) context token of the answer, or None when it covers no token."""
    last = question.answer_start + len(question.answer_text) - 1
    inside = np.nonzero((ends >= question.answer_start) & (starts <= last))[0]
    return (int(inside[0]), int(inside[-1])) if len(inside) else None


def _context_tokens(tokenizer, context):
    """(piece ids, first char, last char) of a context's pieces. WordPiece tracks characters
    as it tokenizes, so Chinese contexts, which have no spaces, give character-exact spans."""
    if tokenizer.kind == WORDPIECE:
        pieces, starts, ends = tokenizer.tokenize_with_offsets(context)
        return (np.asarray(tokenizer.convert_tokens_to_ids(pieces), np.int32),
                np.asarray(starts, np.int32), np.asarray(ends, np.int32))
    pieces = encode_pieces(tokenizer.sp_model, tokenizer.preprocess(context))
    return (np.asarray(tokenizer.convert_tokens_to_ids(pieces), np.int32),
            *align_pieces(context, pieces, tokenizer.do_lower_case))


def convert_questions(questions, tokenizer, max_seq_length, doc_stride, max_query_length,
                      is_training):
    """Features (finetuning's layout): [CLS] query [SEP] doc [SEP] per window, p_mask, and
    either training labels or host_ maps from tokens back to context characters."""
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"--max_seq_length={max_seq_length} must exceed --max_query_length="
                         f"{max_query_length} + 3")
    if doc_stride < 1:
        raise ValueError(f"--doc_stride must be positive, got {doc_stride}")
    ids = tokenizer.special_ids()
    cls_id, sep_id = ids["[CLS]"], ids["[SEP]"]
    contexts = {}
    out = {k: [] for k in ("input_word_ids", "input_type_ids", "p_mask", "lengths",
                           "start_positions", "end_positions", "is_impossible",
                           "host_question", "host_start_char", "host_end_char",
                           "host_max_context")}
    unmappable = 0
    for qi, q in enumerate(questions):
        if q.paragraph not in contexts:
            contexts[q.paragraph] = _context_tokens(tokenizer, q.context)
        doc_ids, starts, ends = contexts[q.paragraph]
        query = tokenizer.encode(q.question)[:max_query_length]
        tok_start = tok_end = 0
        if is_training and not q.is_impossible:
            answer = _answer_tokens(q, starts, ends)
            if answer is None:
                unmappable += 1
                continue
            tok_start, tok_end = answer
        spans = windows(len(doc_ids), max_seq_length - len(query) - 3, doc_stride)
        offset = len(query) + 2
        for w, (start, length) in enumerate(spans):
            seq = [cls_id] + query + [sep_id] + doc_ids[start:start + length].tolist() + [sep_id]
            out["input_word_ids"].extend(seq)
            out["input_type_ids"].extend([0] * offset + [1] * (length + 1))
            out["p_mask"].extend([0] + [1] * (offset - 1) + [0] * length + [1])
            out["lengths"].append(len(seq))
            if is_training:
                impossible = q.is_impossible or not (
                    start <= tok_start and tok_end < start + length)
                out["is_impossible"].append(int(impossible))
                out["start_positions"].append(0 if impossible else tok_start - start + offset)
                out["end_positions"].append(0 if impossible else tok_end - start + offset)
            else:
                out["host_question"].append(qi)
                doc = slice(start, start + length)
                out["host_start_char"].extend([-1] * offset + starts[doc].tolist() + [-1])
                out["host_end_char"].extend([-1] * offset + ends[doc].tolist() + [-1])
                out["host_max_context"].extend(
                    [0] * offset + [int(max_context(spans, p) == w) for p in range(start, start +
                                                                                  length)] + [0])
    if unmappable:
        logging.warning("skipped %d training questions whose answer covers no document token",
                        unmappable)
    if not out["lengths"]:
        raise ValueError("no features were built (every question was skipped)")
    return _as_arrays(out, is_training)


def _as_arrays(out, is_training):
    """The feature lists as numpy arrays: labels for training, host_ maps for prediction."""
    dtypes = {"input_type_ids": np.int8, "p_mask": np.int8, "host_max_context": np.int8}
    keep = (("start_positions", "end_positions", "is_impossible") if is_training else
            ("host_question", "host_start_char", "host_end_char", "host_max_context"))
    return {k: np.asarray(v, dtypes.get(k, np.int32)) for k, v in out.items()
            if k in keep or k in ("input_word_ids", "input_type_ids", "p_mask", "lengths")}


def read_threshold(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    match = re.search(r"null_score_diff_threshold\s*=\s*(\S+)", text)
    try:
        return float(match.group(1) if match else text.strip())
    except ValueError:
        raise ValueError(f"{path} holds no threshold (a number or a "
                         f"'null_score_diff_threshold = x' line)") from None
