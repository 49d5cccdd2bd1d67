"""The pretraining data builder: schema, SOP pairs, masking statistics, determinism, errors."""

import os
import random
import subprocess
import sys

import numpy as np
import pytest

import zh_release
from albert_tf import create_pretraining_data, tokenization
from albert_tf.data import build_records as cpd
from albert_tf.data import pretraining, records
from albert_tf.data.vocab import train_sentencepiece
from tool_runner import assert_refused, run_tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("the of and to a in that is was he for it with as his on be at by this had not are "
         "but from or have an they which one you were her all she there would their we him "
         "been has when who will more no if out so said what up its about into than them can "
         "only other new some could time these two may then do first any my now such like our "
         "over man me even most made after also did many before must through back years where "
         "much your way well down should because each just those people how too little state "
         "acquaintance disappointment recollection satisfaction consideration circumstances "
         "neighbourhood agreeable excellent particularly understanding conversation").split()


def write_corpus(path, documents=60, seed=0):
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 0.7 for i in range(len(WORDS))]
    docs = []
    for _ in range(documents):
        sentences = []
        for _ in range(rng.randint(1, 25)):
            words = rng.choices(WORDS, weights, k=rng.randint(3, 30))
            if rng.random() < 0.2:
                number = f"{rng.randint(1, 99)}.{rng.randint(0, 9)},"
                words.insert(rng.randint(0, len(words)), number)
            words[0] = words[0].capitalize()
            sentences.append(" ".join(words) + ".")
        docs.append("\n".join(sentences))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    corpus = write_corpus(d / "corpus.txt", 120)
    shards = [write_corpus(d / f"shard{i}.txt", 40, seed=10 + i) for i in range(3)]
    model = train_sentencepiece(corpus, str(d / "spm"), 600, hard_vocab_limit=False)
    return d, corpus, shards, model


def options(model, **kw):
    kw.setdefault("max_seq_length", 128)
    kw.setdefault("dupe_factor", 3)
    return cpd.BuildOptions(spm_model_file=model, **kw)


def read_features(paths, max_seq_length=128, max_predictions=20, do_permutation=False):
    import tensorflow as tf

    spec = records.pretraining_feature_spec(max_seq_length, max_predictions, do_permutation)
    out = {k: [] for k in spec}
    for batch in tf.data.TFRecordDataset(paths).batch(4096):
        parsed = tf.io.parse_example(batch, spec)
        for k in spec:
            out[k].append(parsed[k].numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def built(data):
    d, corpus, _, model = data
    out = str(d / "out" / "train.tfrecord")
    cpd.build(corpus, out, options(model))
    return out, read_features([out])


def test_record_schema_matches_original(built, data):
    import tensorflow as tf

    out, _ = built
    raw = next(iter(tf.data.TFRecordDataset([out]))).numpy()
    example = tf.train.Example.FromString(raw)
    feature = example.features.feature
    # The schema's features and the vocabulary's fingerprint, which parsers of the schema skip.
    assert sorted(feature) == sorted(records.FEATURE_NAMES + (records.VOCAB_FINGERPRINT,))
    assert list(feature[records.VOCAB_FINGERPRINT].int64_list.value) == [
        tokenization.FullTokenizer(spm_model_file=data[3]).fingerprint()]
    expected = records.pretraining_feature_lengths(128, 20)
    for name, (dtype, length) in expected.items():
        kind = "float_list" if dtype == "float32" else "int64_list"
        assert feature[name].WhichOneof("kind") == kind, name
        assert len(getattr(feature[name], kind).value) == length, name
    assert expected["masked_lm_positions"] == ("int64", 20)
    assert records.pretraining_feature_lengths(512, 20, True)["masked_lm_weights"] == (
        "float32", 40)
    spec = records.pretraining_feature_spec(128, 20)
    assert spec["masked_lm_weights"].dtype == tf.float32
    assert spec["input_ids"].shape == [128] and spec["next_sentence_labels"].shape == [1]


def test_serializer_equals_protobuf():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    lengths = records.pretraining_feature_lengths(16, 4)
    features = {n: (rng.random((5, k)).astype(np.float32) if t == "float32"
                    else rng.integers(0, 2 ** rng.integers(1, 40), (5, k)))
                for n, (t, k) in lengths.items()}
    serialized = records.ExampleSerializer(lengths).serialize(features)
    for b, raw in enumerate(serialized):
        expected = tf.train.Example(features=tf.train.Features(feature={
            n: (tf.train.Feature(float_list=tf.train.FloatList(value=features[n][b]))
                if t == "float32" else
                tf.train.Feature(int64_list=tf.train.Int64List(value=features[n][b])))
            for n, (t, _) in lengths.items()}))
        assert tf.train.Example.FromString(raw) == expected


def test_tfrecord_framing_equals_tensorflow_writer(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(1)
    payloads = [rng.integers(0, 256, n, dtype=np.uint8).tobytes()
                for n in [0, 1, 2, 3, 4, 5, 7, 8, 9, 100, 1023, 4096] + list(range(10, 40))]
    with tf.io.TFRecordWriter(str(tmp_path / "tf")) as w:
        for p in payloads:
            w.write(p)
    assert records.frame_records(payloads) == (tmp_path / "tf").read_bytes()
    crc = records.masked_crc32c([b"123456789"])[0]  # crc32c check value 0xE3069283, masked
    raw = 0xE3069283
    assert crc == ((((raw >> 15) | (raw << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    batch = records.Batch.from_list(payloads)
    assert batch.take(np.array([3, 1, 10])).to_list() == [payloads[3], payloads[1], payloads[10]]


def test_instance_layout(built):
    _, f = built
    ids, mask, seg, tb = f["input_ids"], f["input_mask"], f["segment_ids"], f["token_boundary"]
    n = mask.sum(1)
    rows = np.arange(len(ids))
    assert (ids[:, 0] == 2).all() and (ids[rows, n - 1] == 3).all()
    assert (mask == (np.arange(128)[None] < n[:, None])).all()
    first_b = np.argmax(seg == 1, axis=1)
    assert (ids[rows, first_b - 1] == 3).all()  # the first [SEP] closes segment A
    unmasked = np.ones_like(mask, dtype=bool)
    unmasked[rows[:, None], f["masked_lm_positions"]] = False
    unmasked[:, 0] = True
    assert ((ids == 3) & unmasked).sum(1).tolist() == [2] * len(ids)
    assert ((ids == 2) & unmasked).sum(1).tolist() == [1] * len(ids)
    assert (seg.sum(1) == n - first_b).all()
    assert (tb[rows, 0] == 1).all() and (tb[rows, n - 1] == 1).all()
    assert (tb[mask == 0] == 0).all() and (ids[mask == 0] == 0).all()
    assert (first_b >= 2).all() and (n - first_b >= 2).all()  # both segments non-empty


def test_masking_rules_and_statistics(built):
    _, f = built
    w = f["masked_lm_weights"] > 0
    n = f["input_mask"].sum(1)
    count = w.sum(1)
    budget = np.minimum(20, np.maximum(1, np.rint(n * 0.15)))
    assert (count <= budget).all() and (count >= 1).all()
    assert count.mean() == pytest.approx(budget.mean(), rel=0.05)
    rows = np.nonzero(w)[0]
    pos = f["masked_lm_positions"][w]
    for r in np.unique(rows)[:500]:
        p = f["masked_lm_positions"][r][w[r]]
        assert (np.diff(p) > 0).all()  # sorted, distinct
    assert (f["masked_lm_positions"][~w] == 0).all() and (f["masked_lm_ids"][~w] == 0).all()
    shown, label = f["input_ids"][rows, pos], f["masked_lm_ids"][w]
    assert not np.isin(label, [0, 2, 3, 4]).any()  # never [CLS]/[SEP]/padding
    assert (f["segment_ids"][rows, pos] >= 0).all() and (pos > 0).all()
    assert len(label) > 5000
    is_mask = shown == 4
    kept = (shown == label) & ~is_mask
    assert is_mask.mean() == pytest.approx(0.8, abs=0.02)
    assert kept.mean() == pytest.approx(0.1, abs=0.015)
    assert (1 - is_mask.mean() - kept.mean()) == pytest.approx(0.1, abs=0.015)
    unmasked = ~np.isin(np.arange(128)[None].repeat(len(n), 0), f["masked_lm_positions"]) | ~(
        f["input_mask"] > 0)
    assert (f["input_ids"][unmasked & (f["input_mask"] > 0)] != 4).all()


def test_whole_words_are_masked(built):
    _, f = built
    for i in range(min(2000, len(f["input_ids"]))):
        n = f["input_mask"][i].sum()
        ids, tb = f["input_ids"][i, :n], f["token_boundary"][i, :n]
        special = np.zeros(n, bool)
        special[0] = special[n - 1] = True
        special[np.argmax(f["segment_ids"][i] == 1) - 1] = True
        masked = np.zeros(n, bool)
        masked[f["masked_lm_positions"][i][f["masked_lm_weights"][i] > 0]] = True
        text = np.nonzero(~special)[0]
        for a, b in zip(text[:-1], text[1:]):  # b continues a's word: both or neither masked
            if tb[b] == 0:
                assert masked[a] == masked[b], (i, a, b, ids)


def _words(f, i):
    """Word lengths (pieces) and masked flags per word of record i, from token_boundary."""
    n = f["input_mask"][i].sum()
    special = np.zeros(n, bool)
    special[0] = special[n - 1] = True
    special[np.argmax(f["segment_ids"][i] == 1) - 1] = True
    masked = np.zeros(n, bool)
    masked[f["masked_lm_positions"][i][f["masked_lm_weights"][i] > 0]] = True
    text = np.nonzero(~special)[0]
    starts = f["token_boundary"][i, text] == 1
    starts[0] = True
    word = np.cumsum(starts) - 1
    return np.bincount(word), np.bincount(word, weights=masked[text]) > 0, n


def _runs(word_masked):
    edges = np.diff(np.concatenate([[0], word_masked.astype(int), [0]]))
    return list(np.nonzero(edges == -1)[0] - np.nonzero(edges == 1)[0])


def _reference_spans(word_lengths, budget, rng, ngram=3):
    """The original span rule, stated sequentially: the vectorised one must match it."""
    p = [1 / n for n in range(1, ngram + 1)]
    starts = list(range(len(word_lengths)))
    rng.shuffle(starts)
    covered, count = set(), 0
    for w in starts:
        if count >= budget:
            break
        n = rng.choices(range(1, ngram + 1), p)[0]
        while n > 0:
            span = range(w, min(w + n, len(word_lengths)))
            size = sum(word_lengths[j] for j in span)
            if count + size <= budget:
                break
            n -= 1
        if n == 0 or any(j in covered for j in span):
            continue
        covered.update(span)
        count += size
    masked = np.zeros(len(word_lengths), bool)
    masked[list(covered)] = True
    return masked


def test_masked_spans_match_a_sequential_reference(built):
    _, f = built
    rng = random.Random(0)
    ours, ref, ours_count, ref_count = [], [], [], []
    for i in range(len(f["input_ids"])):
        lengths, masked, n = _words(f, i)
        budget = min(20, max(1, round(n * 0.15)))
        ours += _runs(masked)
        ours_count.append(lengths[masked].sum())
        for _ in range(2):
            m = _reference_spans(lengths, budget, rng)
            ref += _runs(m)
            ref_count.append(lengths[m].sum())
    ours, ref = np.array(ours), np.array(ref)
    hist = [np.mean(ours == k) for k in (1, 2, 3, 4)]
    expected = [np.mean(ref == k) for k in (1, 2, 3, 4)]
    assert hist == pytest.approx(expected, abs=0.015)
    assert np.mean(ours_count) == pytest.approx(np.mean(ref_count), rel=0.01)
    assert len(ours) > 3000


def test_ngram_sampler_and_span_rule():
    assert pretraining.ngram_probabilities(3).tolist() == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    assert pretraining.ngram_probabilities(3, False).tolist() == pytest.approx(
        [2 / 11, 3 / 11, 6 / 11])
    # One word per row and a budget of 1 word-piece per word: first spans are whole n-grams.
    rng = np.random.default_rng(0)
    batch = 20000
    lengths = np.ones((batch, 3), dtype=np.int64)
    covered, count = pretraining.select_ngram_spans(
        lengths, np.full(batch, 3), np.full(batch, 3), pretraining.ngram_probabilities(3), rng)
    assert (count == covered[:, :3].sum(1)).all()
    # Three words, budget 3: all three get covered unless a 2-gram/1-gram blocks the rest.
    assert (count <= 3).all() and (count >= 1).all()
    # A span longer than the budget falls back to a shorter n-gram; words too long are skipped.
    lengths = np.array([[5, 1, 1, 5]])
    for seed in range(20):
        covered, count = pretraining.select_ngram_spans(
            lengths, np.array([4]), np.array([2]), pretraining.ngram_probabilities(3),
            np.random.default_rng(seed))
        assert not covered[0, 0] and not covered[0, 3] and count[0] == 2
        assert covered[0, 1] and covered[0, 2]


def test_sop_pairs(data):
    d, corpus, _, model = data
    tokenizer, _ = cpd.tokenizer_and_special_ids(options(model))
    c = cpd.read_corpus(corpus, tokenizer)
    order = list(range(c.num_documents))
    for negatives in (True, False):
        a0, a1, b0, b1, label = pretraining.segment_pairs(
            c, order, 128, 0.1, random.Random(0), sop_random_negatives=negatives)
        assert ((a1 > a0) & (b1 > b0)).all()
        swapped = (label == 1) & (b1 == a0)
        natural = (label == 0) & (a1 == b0)
        assert natural.sum() == (label == 0).sum()
        assert swapped.sum() / (swapped.sum() + natural.sum()) == pytest.approx(0.5, abs=0.05)
        if negatives:  # one-sentence chunks take B from a random document, label 1
            assert swapped.sum() < (label == 1).sum() and label.mean() > 0.55
        else:
            assert swapped.sum() == (label == 1).sum()  # every label 1 is a true swap
            assert label.mean() == pytest.approx(0.5, abs=0.05)
    a_start, a_len, b_start, b_len = pretraining.truncate_pairs(
        a0, a1, b0, b1, 125, np.random.default_rng(0))
    assert (a_len + b_len <= 125).all() and (a_len >= 1).all() and (b_len >= 1).all()
    assert ((a_start >= a0) & (a_start + a_len <= a1)).all()


def test_nsp_mode_and_masking_options(data):
    d, corpus, _, model = data
    tokenizer, _ = cpd.tokenizer_and_special_ids(options(model))
    c = cpd.read_corpus(corpus, tokenizer)
    a0, a1, b0, b1, label = pretraining.segment_pairs(
        c, range(c.num_documents), 128, 0.1, random.Random(0), random_next_sentence=True)
    assert ((label == 0) == (a1 == b0)).all()  # NSP: label 0 is the actual next segment
    assert ((label == 1) & (b1 == a0)).mean() < 0.01  # no swaps in NSP mode
    assert label.mean() > 0.5
    pairs = (*pretraining.truncate_pairs(a0, a1, b0, b1, 125, np.random.default_rng(0)), label)
    n = pairs[1] + pairs[3] + 3
    budget = np.minimum(20, np.maximum(1, np.rint(n * 0.15)))
    # Every piece its own word: the budget is always filled exactly.
    piecewise = pretraining.MaskingOptions(vocab_size=600, mask_id=4, do_whole_word_mask=False)
    f = pretraining.build_features(c, pairs, 128, 2, 3, piecewise, np.random.default_rng(0))
    assert (f["masked_lm_weights"].sum(1) == budget).all()
    none = pretraining.MaskingOptions(vocab_size=600, mask_id=4, masked_lm_prob=0.0)
    f = pretraining.build_features(c, pairs, 128, 2, 3, none, np.random.default_rng(0))
    assert f["masked_lm_weights"].sum() == 0 and (f["input_ids"] != 4).all()


def test_sop_random_negatives_flag(data, tmp_path):
    _, corpus, _, model = data
    cpd.build(corpus, str(tmp_path / "a"), options(model, sop_random_negatives=False))
    f = read_features([str(tmp_path / "a")])
    assert f["next_sentence_labels"].mean() == pytest.approx(0.5, abs=0.05)


def _warnings_of_a_build(caplog, tmp_path, said, quiet, loud, build_options):
    """The builder's warnings holding `said`: none for corpus `quiet`, those of `loud`."""
    for path, warned in ((quiet, False), (loud, True)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="absl"):
            cpd.build(path, str(tmp_path / "out"), build_options, overwrite=True)
        found = [m for m in caplog.messages if said in m]
        assert bool(found) == warned, caplog.messages
    return found


def test_lines_longer_than_a_sequence_are_said_to_lose_their_rest(data, tmp_path, caplog):
    """A corpus of a paragraph a line: each line is one segment, cut to fit (the original's
    rule); the log counts the lines and the tokens no record holds. A corpus of sentences
    loses too little to say (the module's corpus: silent)."""
    from albert_tf.tokenization import FullTokenizer
    _, corpus, _, model = data
    sentences = open(corpus, encoding="utf-8").read().split("\n\n")
    paragraphs = tmp_path / "paragraphs.txt"
    paragraphs.write_text("\n\n".join(" ".join(doc.split("\n")) for doc in sentences) + "\n",
                          encoding="utf-8")
    tokenizer = FullTokenizer(model, do_lower_case=True)
    lengths = [len(tokenizer.encode(line)) for line in paragraphs.read_text().splitlines()
               if line.strip()]
    lost = sum(n - 61 for n in lengths if n > 61)
    said = _warnings_of_a_build(caplog, tmp_path, "longer than a sequence holds", corpus,
                                str(paragraphs), options(model, max_seq_length=64, dupe_factor=1))
    assert said[0].startswith(
        f"Shard 0: {paragraphs} has {sum(n > 61 for n in lengths)} lines longer than a "
        f"sequence holds (61 tokens: --max_seq_length less 3): at most that much of each "
        f"reaches a record, {lost} of its {sum(lengths)} tokens "), said[0]


def test_a_corpus_the_vocabulary_does_not_fit_is_said(data, tmp_path, caplog):
    """More than 1% of a shard's tokens unknown is said, with the count (the module's corpus,
    which its vocabulary was trained on: silent)."""
    from albert_tf.tokenization import FullTokenizer
    _, corpus, _, model = data
    foreign = tmp_path / "foreign.txt"
    text = open(corpus, encoding="utf-8").read().replace(" the ", " ⁂ 神 ")
    foreign.write_text(text, encoding="utf-8")
    tokenizer = FullTokenizer(model, do_lower_case=True)
    unk = tokenizer.special_ids()["<unk>"]
    ids = [i for line in text.splitlines() if line.strip() for i in tokenizer.encode(line)]
    unknown = sum(i == unk for i in ids)
    said = _warnings_of_a_build(caplog, tmp_path, "are the unknown piece", corpus,
                                str(foreign), options(model, dupe_factor=1))
    assert said[0].startswith(
        f"Shard 0: {unknown} of the {len(ids)} tokens of {foreign} "
        f"({100 * unknown / len(ids):.1f}%) are the unknown piece <unk> of {model}: the "
        f"vocabulary lacks characters this text has"), said[0]
    assert said[0].endswith("is it the vocabulary for this text?"), said[0]
    # The lower-cased vocabulary read without lower-casing: its capitals are what it lacks.
    caplog.clear()
    with caplog.at_level("WARNING", logger="absl"):
        cpd.build(corpus, str(tmp_path / "out"), options(model, dupe_factor=1,
                                                         do_lower_case=False), overwrite=True)
    [said] = [m for m in caplog.messages if "are the unknown piece" in m]
    assert said.endswith("it has no capital letter, and --do_lower_case=False keeps the "
                         "text's"), said


def test_permutation_targets(data, tmp_path):
    _, corpus, _, model = data
    cpd.build(corpus, str(tmp_path / "p"), options(model, do_permutation=True, dupe_factor=1))
    f = read_features([str(tmp_path / "p")], do_permutation=True)
    assert f["masked_lm_positions"].shape == (len(f["input_ids"]), 40)
    assert (f["masked_lm_weights"] > 0).sum(1).max() > 20

    # With a one-id vocabulary, random replacements show 0: every other shown target token is
    # either kept or moved by the permutation, so shown and original multisets agree.
    tokenizer, ids = cpd.tokenizer_and_special_ids(options(model))
    c = cpd.read_corpus(corpus, tokenizer)
    a0, a1, b0, b1, label = pretraining.segment_pairs(c, range(c.num_documents), 128, 0.1,
                                                      random.Random(0))
    pairs = pretraining.truncate_pairs(a0, a1, b0, b1, 125, np.random.default_rng(0))
    masking = pretraining.MaskingOptions(vocab_size=1, mask_id=4, do_permutation=True)
    f = pretraining.build_features(c, (*pairs, label), 128, 2, 3, masking,
                                   np.random.default_rng(0))
    w = f["masked_lm_weights"] > 0
    moved = 0
    for i in range(len(label)):
        pos, lab = f["masked_lm_positions"][i][w[i]], f["masked_lm_ids"][i][w[i]]
        assert (np.diff(pos) > 0).all()
        shown = f["input_ids"][i][pos]
        keep = (shown != 4) & (shown != 0)
        assert sorted(shown[keep]) == sorted(lab[keep])
        moved += (shown[keep] != lab[keep]).sum()
    assert moved > 100


def test_deterministic_and_independent_of_workers(data, tmp_path):
    _, _, shards, model = data
    opts = options(model, dupe_factor=2)
    one = cpd.build(",".join(shards), str(tmp_path / "one" / "x"), opts, num_workers=1)
    two = cpd.build(",".join(shards), str(tmp_path / "two" / "x"), opts, num_workers=2)
    assert [os.path.basename(p) for p in one] == [f"x-{i:05d}-of-00003" for i in range(3)]
    for a, b in zip(one, two):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            assert fa.read() == fb.read()
    again = cpd.build(shards[0], str(tmp_path / "again"), opts)
    with open(again[0], "rb") as fa, open(one[0], "rb") as fb:
        assert fa.read() == fb.read()  # a shard depends on its file, index and flags only
    other = cpd.build(shards[0], str(tmp_path / "seed"), options(model, dupe_factor=2,
                                                                 random_seed=1))
    with open(other[0], "rb") as fa, open(again[0], "rb") as fb:
        assert fa.read() != fb.read()
    with open(again[0], "rb") as f:
        before = f.read()
    cpd.build(shards[0], str(tmp_path / "again"), opts, overwrite=True)  # a rerun, replacing
    with open(again[0], "rb") as f:
        assert f.read() == before
    assert not [n for n in os.listdir(tmp_path / "one") if n.endswith(".incomplete")]


def test_a_rebuild_with_other_shards_replaces_the_earlier_build_only_with_overwrite(data,
                                                                                 tmp_path):
    _, _, shards, model = data
    out = str(tmp_path / "records" / "train.tfrecord")
    first = cpd.build(",".join(shards), out, options(model, dupe_factor=1))
    assert [os.path.basename(p) for p in first] == [
        f"train.tfrecord-0000{i}-of-00003" for i in range(3)]
    with pytest.raises(cpd.OutputRefused, match=r"--output_file=.*train.tfrecord: 3 record files "
                                                r"of an earlier build of it are there .*pass "
                                                r"--overwrite to replace that build"):
        cpd.build(",".join(shards[:2]), out, options(model, dupe_factor=1))
    assert sorted(os.listdir(tmp_path / "records")) == sorted(map(os.path.basename, first))
    second = cpd.build(",".join(shards[:2]), out, options(model, dupe_factor=1), overwrite=True)
    assert sorted(os.listdir(tmp_path / "records")) == sorted(map(os.path.basename, second)) == [
        "train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002"]
    notes = tmp_path / "records" / "train.tfrecord-00000-of-00005"  # a user's file at such a name
    notes.write_text("not records\n")
    with pytest.raises(cpd.OutputRefused, match=r"train.tfrecord-00000-of-00005 exists and is not "
                                                r"a TFRecord file"):
        cpd.build(shards[0], out, options(model, dupe_factor=1), overwrite=True)
    assert notes.read_text() == "not records\n"
    assert sorted(os.listdir(tmp_path / "records")) == sorted(
        [notes.name] + [os.path.basename(p) for p in second])


def test_round_robin_outputs(data, tmp_path):
    _, _, shards, model = data
    outs = cpd.build(shards[0], f"{tmp_path}/a,{tmp_path}/b", options(model, dupe_factor=1))
    counts = [len(read_features([p])["input_ids"]) for p in outs]
    assert abs(counts[0] - counts[1]) <= 1 and sum(counts) > 10


@pytest.mark.parametrize("content,message", [
    (b"", "is empty"),
    (b"  \n\n \n", "holds only blank lines"),
    (b"good line\n\nsecond \xff\xfe line\n", r"bad\.txt:3: not valid UTF-8"),
])
def test_bad_input_files(data, tmp_path, content, message):
    model = data[3]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    with pytest.raises(cpd.InputError, match=message):
        cpd.build(str(bad), str(tmp_path / "out"), options(model))
    assert os.listdir(tmp_path) == ["bad.txt"]


def test_bad_flags_and_models(data, tmp_path):
    _, corpus, _, model = data
    with pytest.raises(cpd.InputError, match="No input file matches"):
        cpd.build(str(tmp_path / "nothing*.txt"), str(tmp_path / "o"), options(model))
    with pytest.raises(cpd.InputError, match="max_seq_length=4 is too small"):
        cpd.build(corpus, str(tmp_path / "o"), options(model, max_seq_length=4))
    with pytest.raises(cpd.InputError, match=r"--spm_model_file=.*none.model does not exist"):
        cpd.build(corpus, str(tmp_path / "o"), options(str(tmp_path / "none.model")))
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=str(tmp_path / "plain"),
                                   vocab_size=200, hard_vocab_limit=False, minloglevel=2)
    with pytest.raises(cpd.InputError, match=r"plain.model lacks the special pieces.*\[CLS\]"):
        cpd.build(corpus, str(tmp_path / "o"), options(str(tmp_path / "plain.model")))
    with pytest.raises(cpd.InputError, match="3 input files and 2 output files"):
        cpd.output_paths(["a", "b", "c"], "x,y")
    assert sorted(os.listdir(tmp_path)) == ["plain.model", "plain.vocab"]


def test_failed_run_leaves_no_output(data, tmp_path, monkeypatch):
    _, corpus, _, model = data
    calls = []

    def failing(self, features):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("killed")
        return original(self, features)

    original = records.ExampleSerializer.serialize_batch
    monkeypatch.setattr(records.ExampleSerializer, "serialize_batch", failing)
    monkeypatch.setattr(cpd, "BATCH_SIZE", 64)
    with pytest.raises(RuntimeError, match="killed"):
        cpd.build(corpus, str(tmp_path / "out.tfrecord"), options(model))
    assert os.listdir(tmp_path) == []


def test_command_line(data, tmp_path, capsys):
    _, corpus, _, model = data
    env = dict(os.environ, PYTHONPATH=ROOT)
    ok = subprocess.run(
        [sys.executable, "create_pretraining_data.py", f"--input_file={corpus}",
         f"--output_file={tmp_path}/cli.tfrecord", f"--spm_model_file={model}",
         "--max_seq_length=64", "--dupe_factor=1", "--sop_random_negatives=false"],
        cwd=ROOT, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "MB/s of text copies" in ok.stderr
    assert len(read_features([f"{tmp_path}/cli.tfrecord"], 64)["input_ids"]) > 50
    status, last, _ = run_tool(create_pretraining_data, capsys,
                               f"--input_file={tmp_path}/missing.txt",
                               f"--output_file={tmp_path}/x", f"--spm_model_file={model}")
    assert status != 0 and "error: No input file matches" in last  # run_tool: no traceback


def test_wordpiece_records(tmp_path, capsys):
    """--vocab_file (the Chinese releases): the original's records, whole words by ## pieces,
    the same bytes on a rerun, and both vocabularies at once refused."""
    corpus = zh_release.write_corpus(tmp_path / "zh.txt", documents=40)
    vocab = zh_release.write_vocab(tmp_path / "vocab_chinese.txt")
    tokenizer = tokenization.FullTokenizer(vocab)
    argv = [f"--input_file={corpus}", f"--vocab_file={vocab}", "--spm_model_file=",
            "--max_seq_length=64", "--dupe_factor=4"]
    for name in "ab":
        assert run_tool(create_pretraining_data, None, *argv,
                        output_file=tmp_path / f"{name}.tfrecord") == 0
    with open(tmp_path / "a.tfrecord", "rb") as a, open(tmp_path / "b.tfrecord", "rb") as b:
        assert a.read() == b.read()
    f = read_features([str(tmp_path / "a.tfrecord")], 64)
    ids, mask, tb = f["input_ids"], f["input_mask"] > 0, f["token_boundary"]
    special = tokenizer.special_ids()
    text = mask & ~np.isin(ids, [special["[CLS]"], special["[SEP]"]])
    w = f["masked_lm_weights"] > 0
    rows = np.nonzero(w)[0]
    labels = f["masked_lm_ids"][w]
    shown = ids[rows, f["masked_lm_positions"][w]]
    # token_boundary: 0 exactly on ## pieces (their labels where masked), 1 on word starts.
    original = ids.copy()
    original[rows, f["masked_lm_positions"][w]] = labels
    is_cont = np.isin(original, [i for t, i in tokenizer.vocab.items() if t.startswith("##")])
    assert (tb[text] == (~is_cont[text]).astype(int)).all() and is_cont[text].sum() > 20
    for i in range(len(ids)):  # a ## piece is masked with the text token before it
        masked = np.zeros(64, bool)
        masked[f["masked_lm_positions"][i][w[i]]] = True
        positions = np.nonzero(text[i])[0]
        for a, b in zip(positions[:-1], positions[1:]):
            if is_cont[i, b]:
                assert masked[a] == masked[b], (i, a, b)
    n = mask.sum(1)
    budget = np.minimum(20, np.maximum(1, np.rint(n * 0.15)))
    assert w.sum(1).mean() == pytest.approx(budget.mean(), rel=0.06)
    assert (shown == special["[MASK]"]).mean() == pytest.approx(0.8, abs=0.04)
    assert not np.isin(labels, list(special.values())).any()
    assert f["next_sentence_labels"].mean() == pytest.approx(0.5, abs=0.1)
    cjk = [tokenizer.vocab[c] for c in zh_release.CHARS if c in tokenizer.vocab]
    assert np.isin(original[text], cjk).mean() > 0.7  # Chinese characters, one token each

    (tmp_path / "x.model").write_bytes(b"not read")
    assert_refused(run_tool(create_pretraining_data, capsys, *argv[:2],
                            spm_model_file=tmp_path / "x.model",
                            output_file=tmp_path / "c.tfrecord"),
                   "name two different vocabularies")
    assert_refused(run_tool(create_pretraining_data, capsys, argv[0],
                            output_file=tmp_path / "c.tfrecord"),
                   "--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is required")
    assert not os.path.exists(tmp_path / "c.tfrecord")
