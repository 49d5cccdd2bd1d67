"""A small learnable CoNLL-2003-style corpus made in the tests: sentences from templates, with
people (one or two words), places and organisations tagged in BIO or IOBES."""

import os
import random

from albert_tf.data.vocab import train_sentencepiece

# "paris" and "jordan" are people or places by their context; "new" begins a place or is O.
PEOPLE = ["anna", "boris", "carla", "dmitri", "elena", "farid", "paris", "jordan"]
SURNAMES = ["smith", "novak", "rossi", "ivanov"]
PLACES = ["paris", "berlin", "oslo", "jordan", "new york", "san jose"]
ORGS = ["acme", "globex", "initech", "umbrella"]
FILLER = ["the", "a", "today", "that", "very", "old", "new", "big", "and", "then", "again",
          "later", "we", "heard", "news", "york"]


def _person(rng):
    words = [rng.choice(PEOPLE)] + ([rng.choice(SURNAMES)] if rng.random() < 0.4 else [])
    return words, "PER"


def _entity(rng, kind):
    """[(word, BIO tag)]: a person who then says something, a place after "in" or "from", or
    an organisation."""
    if kind == "PER":
        words, after = _person(rng)[0], [("said", "O")] if rng.random() < 0.7 else []
        return _tagged(words, "PER") + after
    if kind == "LOC":
        return [(rng.choice(["in", "from"]), "O")] + _tagged(rng.choice(PLACES).split(), "LOC")
    return _tagged([rng.choice(ORGS)], "ORG")


def _tagged(words, label):
    return [(w, ("B-" if i == 0 else "I-") + label) for i, w in enumerate(words)]


def sentence(rng, min_words=4, max_words=14):
    """[(word, tag)] in BIO."""
    out, length = [], rng.randint(min_words, max_words)
    while len(out) < length:
        kind = rng.random()
        if kind < 0.55:
            out.append((rng.choice(FILLER), "O"))
        else:
            out.extend(_entity(rng, "PER" if kind < 0.75 else "LOC" if kind < 0.9 else "ORG"))
    return out


def to_iobes(tags):
    out = []
    for i, tag in enumerate(tags):
        following = tags[i + 1] if i + 1 < len(tags) else "O"
        inside = following.startswith("I-")
        if tag.startswith("B-"):
            out.append(tag if inside else "S-" + tag[2:])
        elif tag.startswith("I-"):
            out.append(tag if inside else "E-" + tag[2:])
        else:
            out.append(tag)
    return out


def write_conll(directory, seed=0, sizes=(("train", 300), ("dev", 60), ("test", 60)),
                long_every=10, long_words=(40, 60), scheme="bio", dev_name="dev.txt"):
    """train.txt, dev.txt and test.txt in the CoNLL-2003 layout (token, POS, chunk, tag),
    -DOCSTART- lines and all; every `long_every`-th sentence has 40-60 words. Returns
    {split: [[(word, tag)]]}."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    data = {}
    for split, count in sizes:
        sentences = []
        for i in range(count):
            long = long_every and i % long_every == long_every - 1
            s = sentence(rng, *long_words) if long else sentence(rng)
            if scheme == "iobes":
                s = list(zip([w for w, _ in s], to_iobes([t for _, t in s])))
            sentences.append(s)
        data[split] = sentences
        lines = ["-DOCSTART- -X- -X- O", ""]
        for s in sentences:
            lines.extend(f"{w} NN I-NP {t}" for w, t in s)
            lines.append("")
        name = dev_name if split == "dev" else f"{split}.txt"
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
    return data


def corpus_text(seed=1, lines=400):
    rng = random.Random(seed)
    return "\n".join(" ".join(w for w, _ in sentence(rng)) for _ in range(lines))


def sentencepiece_model(root, extra=""):
    """A 100-piece lowercasing SentencePiece model of corpus_text() (+ `extra` text), trained
    under the directory `root` (a pathlib.Path); its path."""
    (root / "corpus.txt").write_text(corpus_text() + extra, encoding="utf-8")
    return train_sentencepiece(str(root / "corpus.txt"), str(root / "spm"), 100,
                               do_lower_case=True, hard_vocab_limit=False)


def chinese_sentences(count, seed=0):
    """[(character, tag)] sentences: names of three characters and places of two from the
    Chinese test vocabulary, tagged per character (BIO), as the Chinese NER sets are."""
    import zh_release
    chars = zh_release.CHARS
    rng = random.Random(seed)
    names = [chars[i:i + 3] for i in range(0, 24, 3)]
    places = [chars[i:i + 2] for i in range(30, 42, 2)]
    filler = chars[60:90]
    out = []
    for _ in range(count):
        sentence = []
        while len(sentence) < rng.randint(6, 16):
            kind = rng.random()
            if kind < 0.25:
                word, label = rng.choice(names), "PER"
            elif kind < 0.4:
                word, label = rng.choice(places), "LOC"
            else:
                sentence.append((rng.choice(filler), "O"))
                continue
            sentence.extend((c, ("B-" if i == 0 else "I-") + label) for i, c in enumerate(word))
        out.append(sentence)
    return out


def write_sentences(path, sentences, separator=" "):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(f"{w}{separator}{t}" for w, t in s) for s in sentences)
                + "\n")
