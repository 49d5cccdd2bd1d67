"""A tiny Chinese "release" made in the test: WordPiece vocab_chinese.txt, albert_config.json and
a TF1 model.ckpt-best, laid out as the original's albert_*_zh downloads; plus Chinese text."""

import json
import os
import random

CHARS = ("我你他她们的是在有不了人这中大为上个国说年生到以会家可下而过天去能对小多然于心学么之"
         "都好看起发当没成只如事把还用第样道想作种开美总从无情己面最女但现前些所同日手又行意动方"
         "期它头经长儿回位分爱老因很给名法间斯知世什两次使身者被高已亲其进此话常与活正感见明问力"
         "理尔点文几定本公特做外孩相西果走将月十实向声车全信重三机工物气每并别真打太新比才便夫再"
         "书部水像眼等体却加电主界门利海受听表德少克代员许稜先口由死安写性马光白或住难望教命花结"
         "乐色更拉东神记处让母父应直字场平报友关放至张认接告入笑内英军候民岁往何度山觉路带万男边"
         "风解叫任金快原吃妈变通师立象数四失满战远格士音轻目条呢")
PUNCT = "，。！？、：；“”（）《》"
WORDS = ("albert", "model", "learning", "deep", "tensorflow", "data", "token", "google",
         "bert", "Chinese", "NLP", "GPU")
# WordPiece entries for the English words: whole words and ## continuations.
PIECES = ("albert", "model", "learn", "##ing", "deep", "tensor", "##flow", "data", "token",
          "##s", "google", "bert", "chinese", "nl", "##p", "gp", "##u", "http", "www", "com",
          "cafe", "##e", "naive", "the")
SPECIALS = ("[PAD]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

TRICKY = [
    "我爱自然语言处理。",
    "ALBERT模型在2019年发布，参数量只有BERT的1/18！",
    "访问 https://www.google.com/albert?q=中文&lang=zh 看看",
    "全角字符：ＡＢＣ１２３，半角abc123。",
    "Café naïve RÉSUMÉ 的 déjà vu",
    "表情😀和符号★☆，还有\u200b零宽\u00a0空格\u3000全角空格",
    "控制字符\x00\x07\ufffd与\t制表\r\n换行",
    "ΣΟΦΟΣ İstanbul ǅ ﬁ ²",
    "数字3.14、1,000和１０％",
    "",
    "   ",
    "learning deep tensorflow tokens!!! unaffable",
    "繁體中文與简体中文，「引號」『書名』",
    "조선어 かな カナ ไทย",
]


def vocab_tokens():
    """Tokens of the test vocabulary, in id order."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens = list(SPECIALS) + list(PUNCT) + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    tokens += list("0123456789") + ["##" + d for d in "0123456789"]
    tokens += list(letters) + ["##" + c for c in letters]
    tokens += list(dict.fromkeys(CHARS)) + ["##" + c for c in CHARS[:20]]
    tokens += [p for p in PIECES if p not in tokens] + ["ａ", "１", "％", "★", "😀"]
    return tokens


def write_vocab(path, with_counts=False):
    with open(path, "w", encoding="utf-8") as f:
        for i, token in enumerate(vocab_tokens()):
            f.write(f"{token} {1000 - i % 1000}\n" if with_counts else f"{token}\n")
    return str(path)


def sentences(n, seed=0):
    """Chinese sentences mixed with some English words, digits and punctuation."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(2, 4)):
            parts.append("".join(rng.choices(CHARS, k=rng.randint(3, 9))))
            if rng.random() < 0.3:
                parts.append(rng.choice(WORDS) + ("s" if rng.random() < 0.2 else ""))
            if rng.random() < 0.2:
                parts.append(str(rng.randint(0, 2020)))
            parts.append(rng.choice("，、：" if len(parts) < 6 else "。"))
        out.append("".join(parts[:-1]) + rng.choice("。！？"))
    return out


def write_corpus(path, documents=30, per_document=8, seed=0):
    """One sentence per line, blank lines between documents."""
    lines = sentences(documents * per_document, seed)
    docs = [lines[i:i + per_document] for i in range(0, len(lines), per_document)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in docs) + "\n")
    return str(path)


def config_dict(vocab_size, **overrides):
    config = dict(vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                  num_hidden_groups=1, inner_group_num=1, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, type_vocab_size=2, hidden_act="gelu",
                  initializer_range=0.02)
    config.update(overrides)
    return config


def write_release(directory, vocab_name="vocab_chinese.txt", seed=0):
    """albert_config.json + model.ckpt-best (TF1 names) + the WordPiece vocabulary, as the
    original's albert_base_zh release; returns the directory."""
    import keras

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.formats.checkpoints import save_pretrained

    os.makedirs(directory, exist_ok=True)
    vocab = write_vocab(os.path.join(directory, vocab_name))
    keras.utils.set_random_seed(seed)
    model = AlbertPretrainer(AlbertConfig(**config_dict(len(vocab_tokens()))))
    save_pretrained(model, directory, format="tf1")
    with open(os.path.join(directory, "albert_config.json"), "w") as f:
        json.dump(config_dict(len(vocab_tokens())), f)
    return str(directory), vocab
