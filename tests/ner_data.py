"""A small learnable CoNLL-2003-style corpus made in the tests: sentences from templates, with
people (one or two words), places and organisations tagged in BIO or IOBES."""

import os
import random

PEOPLE = ["anna", "boris", "carla", "dmitri", "elena", "farid", "greta", "hugo"]
SURNAMES = ["smith", "novak", "rossi", "ivanov"]
PLACES = ["paris", "berlin", "oslo", "lima", "cairo", "quito"]
ORGS = ["acme", "globex", "initech", "umbrella"]
FILLER = ["the", "a", "today", "said", "that", "very", "old", "new", "big", "and", "then",
          "again", "later", "we", "heard", "news"]


def _person(rng):
    words = [rng.choice(PEOPLE)] + ([rng.choice(SURNAMES)] if rng.random() < 0.4 else [])
    return words, "PER"


def sentence(rng, min_words=4, max_words=14):
    """[(word, tag)] in BIO."""
    out = []
    while len(out) < rng.randint(min_words, max_words):
        kind = rng.random()
        if kind < 0.2:
            words, label = _person(rng)
        elif kind < 0.35:
            words, label = [rng.choice(PLACES)], "LOC"
        elif kind < 0.45:
            words, label = [rng.choice(ORGS)], "ORG"
        else:
            out.append((rng.choice(FILLER), "O"))
            continue
        out.extend((w, ("B-" if i == 0 else "I-") + label) for i, w in enumerate(words))
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
