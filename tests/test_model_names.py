"""Models by name (formats/names): Hugging Face repositories through a local server speaking the
Hub's file route (HF_ENDPOINT), KerasHub presets through a pre-populated kagglehub cache, TF-Hub
modules and the original's release archives served locally; every entry point that takes a
checkpoint, and each failure as one line that leaves nothing half-written in a cache."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import zh_release
from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf import convert_checkpoint, export_hub, predict
from albert_tf.formats import names
from albert_tf.formats.checkpoints import read_checkpoint, save_pretrained, write_tf1_checkpoint
from albert_tf.formats.resolve import resolve_checkpoint
from albert_tf.formats.tokenizers import load_tokenizer
from model_server import ModelServer, tar_gz, zip_bytes
from test_brightmart import _config as brightmart_config, _weights as brightmart_weights
from tool_runner import run_tool, run_tool_logged

RELEASE = "/albert_models/albert_base_zh.tar.gz"
BRIGHTMART = "/albert_zh/albert_tiny.zip"
TF_HUB = "/tensorflow/albert_zh_tiny/1"
REPO = "org/albert-chinese-tiny"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The models as their owners publish them, and a server that serves them."""
    root = tmp_path_factory.mktemp("names")
    release, vocab = zh_release.write_release(str(root / "release"))
    arrays, _, _ = read_checkpoint(release)
    server = ModelServer()
    server.serve(RELEASE, tar_gz(release, "albert_base"))
    for name in ("albert_large_zh", "albert_xlarge_zh", "albert_xxlarge_zh"):
        server.serve(f"/albert_models/{name}.tar.gz", tar_gz(release, "albert_base"))
    server.cut_short.add("/albert_models/albert_large_zh.tar.gz")
    data = server.files["/albert_models/albert_xlarge_zh.tar.gz"]
    server.serve("/albert_models/albert_xlarge_zh.tar.gz", data, md5=data + b"x")
    server.serve("/albert_models/albert_base_v1.tar.gz", b"this is not an archive")

    brightmart = root / "brightmart"
    brightmart.mkdir()
    (brightmart / "albert_config_tiny.json").write_text(json.dumps(brightmart_config("preln")))
    write_tf1_checkpoint(brightmart_weights(np.random.default_rng(0)),
                         str(brightmart / "albert_model.ckpt"))
    (brightmart / "vocab.txt").write_text(  # their zips hold vocab.txt: the model's 40 entries
        "".join(t + "\n" for t in zh_release.vocab_tokens()[:brightmart_config("preln")["vocab_size"]]),
        encoding="utf-8")
    server.serve(BRIGHTMART, zip_bytes(str(brightmart), "albert_tiny_zh"))

    hub_module = root / "hub_module"  # the original's TF1 hub modules: module/ names, assets/
    (hub_module / "assets").mkdir(parents=True)
    write_tf1_checkpoint({f"module/{k}": v for k, v in arrays.items()},
                         str(hub_module / "variables" / "variables"))
    (hub_module / "assets" / "albert_config.json").write_text(
        (root / "release" / "albert_config.json").read_text())
    (hub_module / "tfhub_module.pb").write_bytes(b"")
    server.serve(TF_HUB, tar_gz(str(hub_module), "."))

    hf = root / "hf"
    save_pretrained(AlbertPretrainer.from_pretrained(release), str(hf), format="hf",
                    vocab_file=vocab, do_lower_case=False)
    commit = server.add_repo(REPO, str(hf))
    server.add_repo("org/albert-cut-short", str(hf))  # its weights never arrive whole
    server.cut_short.add("/org/albert-cut-short/resolve/main/model.safetensors")
    yield dict(root=root, release=release, vocab=vocab, arrays=arrays, server=server,
               commit=commit, brightmart=brightmart)
    server.close()


@pytest.fixture
def env(world, tmp_path, monkeypatch):
    """Empty caches of every family, the server as the Hub and the release bucket."""
    monkeypatch.setattr(names, "_resolved", {})
    for variable in ("ALBERT_TF_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(variable, raising=False)
    settings = dict(ALBERT_TF_CACHE=tmp_path / "albert_tf", ALBERT_TF_RELEASES_URL=world["server"].url,
                    HF_ENDPOINT=world["server"].url, HF_HUB_CACHE=tmp_path / "hf",
                    KAGGLEHUB_CACHE=tmp_path / "kaggle", TFHUB_CACHE_DIR=tmp_path / "tfhub")
    for key, value in settings.items():
        monkeypatch.setenv(key, str(value))
    world["server"].requests.clear()
    return {k: str(v) for k, v in settings.items()}


def _same_arrays(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _files_under(path):
    return sorted(os.path.relpath(os.path.join(d, f), path)
                  for d, _, fs in os.walk(path) for f in fs)


def test_a_release_name_is_downloaded_checked_and_unpacked_once(world, env, monkeypatch):
    # What a download killed mid-way left (its process is gone) goes at the next one.
    bucket = os.path.join(env["ALBERT_TF_CACHE"], "releases", "albert_models")
    os.makedirs(os.path.join(bucket, ".albert_base_zh.999999999.x1.partial", "albert_base"))
    # What is not ours, or is a live process's download, stays.
    live = f".albert_base_zh.{os.getpid()}.x2.partial"
    os.makedirs(os.path.join(bucket, live))
    with open(os.path.join(bucket, "notes.txt"), "w") as f:
        f.write("mine")
    arrays, config, fmt = read_checkpoint("albert_base_zh")
    assert fmt == "tf1"
    _same_arrays(arrays, world["arrays"])
    where = names.local_model_path("albert_base_zh")
    assert where == os.path.join(env["ALBERT_TF_CACHE"], "releases", "albert_models",
                                 "albert_base_zh", "albert_base")
    assert config == os.path.join(where, "albert_config.json")
    assert _files_under(where) == _files_under(world["release"])
    assert world["server"].requests == [RELEASE]
    # The same release by its link, then offline: the cache, not the network.
    monkeypatch.setattr(names, "_resolved", {})
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    link = "https://storage.googleapis.com/albert_models/albert_base_zh.tar.gz"
    assert names.local_model_path(link) == where
    assert load_tokenizer(model="albert_base_zh").asset_file == os.path.join(
        where, "vocab_chinese.txt")
    assert world["server"].requests == [RELEASE]
    assert sorted(os.listdir(bucket)) == sorted([live, "albert_base_zh", "notes.txt"])
    with open(os.path.join(bucket, "notes.txt")) as f:
        assert f.read() == "mine"


def test_brightmart_releases_by_name_in_their_layout(world, env):
    config = AlbertConfig.from_json_file(resolve_checkpoint("brightmart/albert_tiny_zh")[2])
    assert (config.embedding_layout, config.ln_type) == ("brightmart", "preln")
    encoder = AlbertEncoder.from_pretrained("brightmart/albert_tiny_zh")
    np.testing.assert_array_equal(
        encoder.embeddings.word_projection.numpy(),
        brightmart_weights(np.random.default_rng(0))["bert/embeddings/word_embeddings_2"])
    assert world["server"].requests == [BRIGHTMART]


def test_a_local_path_wins_over_a_name(world, env, tmp_path, monkeypatch):
    local = tmp_path / "work"
    local.mkdir()
    save_pretrained(AlbertPretrainer.from_pretrained(world["release"]), str(local / "albert_base_zh"),
                    format="tf1")
    monkeypatch.chdir(local)
    assert names.local_model_path("albert_base_zh") == "albert_base_zh"
    assert resolve_checkpoint("albert_base_zh")[1] == os.path.join("albert_base_zh",
                                                                   "model.ckpt-best")
    assert world["server"].requests == []


def test_a_hugging_face_name_with_its_tokenizer_settings(world, env, monkeypatch):
    arrays, _, fmt = read_checkpoint(f"hf://{REPO}")
    assert fmt == "hf"
    for key in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
        np.testing.assert_allclose(arrays[key], world["arrays"][key], atol=1e-6)
    tokenizer = load_tokenizer(model=f"hf://{REPO}")
    assert (tokenizer.kind, tokenizer.do_lower_case, len(tokenizer)) == (
        "wordpiece", False, len(zh_release.vocab_tokens()))
    snapshot = os.path.join(env["HF_HUB_CACHE"], "models--org--albert-chinese-tiny", "snapshots",
                            world["commit"])
    assert names.local_model_path(f"hf://{REPO}") == snapshot
    assert sorted(os.listdir(snapshot)) == ["config.json", "model.safetensors",
                                            "tokenizer_config.json", "vocab.txt"]
    # A pinned commit, offline: read from the cache without a request.
    monkeypatch.setattr(names, "_resolved", {})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = len(world["server"].requests)
    assert names.local_model_path(f"hf://{REPO}@{world['commit']}") == snapshot
    assert len(world["server"].requests) == asked


def test_a_keras_hub_preset_name_from_the_kagglehub_cache(world, env, monkeypatch):
    handle = names.KERAS_HUB_PRESETS["albert_base_en_uncased"]
    owner, model, framework, variation, version = handle.split("/")
    base = os.path.join(env["KAGGLEHUB_CACHE"], "models", owner, model, framework, variation)
    save_pretrained(AlbertPretrainer.from_pretrained(world["release"]),
                    os.path.join(base, version), format="keras_hub")
    open(os.path.join(base, f"{version}.complete"), "w").close()
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    arrays, _, fmt = read_checkpoint("albert_base_en_uncased")
    assert fmt == "keras_hub"
    np.testing.assert_array_equal(arrays["bert/embeddings/word_embeddings"],
                                  world["arrays"]["bert/embeddings/word_embeddings"])
    monkeypatch.setattr(names, "_resolved", {})
    assert names.local_model_path(f"kaggle://{handle}") == os.path.join(base, version)


def test_a_tf_hub_address_through_the_tensorflow_hub_cache(world, env):
    url = world["server"].url + TF_HUB
    arrays, config, fmt = read_checkpoint(url)
    assert fmt == "tf1" and config.endswith(os.path.join("assets", "albert_config.json"))
    _same_arrays(arrays, world["arrays"])
    assert names.local_model_path(url).startswith(env["TFHUB_CACHE_DIR"])
    assert world["server"].requests == [TF_HUB]


@pytest.mark.parametrize("name, setting, message", [
    ("albert_base_zhh", {}, "checkpoint not found: albert_base_zhh (no such path, and no model "
     "has that name; did you mean albert_base_zh or albert_base_v2?"),
    # transformers' ids, as from_pretrained takes them: the Hub's address is hf://
    ("albert/albert-base-v2", {}, "checkpoint not found: albert/albert-base-v2 (no such path; a "
     "Hugging Face Hub id? give hf://albert/albert-base-v2, as docs/models.md says)"),
    ("albert-large-v1", {}, "checkpoint not found: albert-large-v1 (no such path; a Hugging "
     "Face Hub id? give hf://albert/albert-large-v1, as docs/models.md says)"),
    ("albert_base_zh", {"ALBERT_TF_OFFLINE": "1"}, "albert_base_zh: not in the release cache "
     "{ALBERT_TF_CACHE}/releases (ALBERT_TF_CACHE) and ALBERT_TF_OFFLINE is set"),
    ("albert_base_v2", {}, "albert_base_v2: {server}/albert_models/albert_base_v2.tar.gz "
     "answered 404 Not Found: no release of that name"),
    ("albert_large_zh", {}, "albert_large_zh: the download of {server}/albert_models/"
     "albert_large_zh.tar.gz stopped after"),
    ("albert_xlarge_zh", {}, "albert_xlarge_zh: {server}/albert_models/albert_xlarge_zh.tar.gz "
     "does not match the server's MD5 checksum; nothing was kept"),
    ("albert_xxlarge_zh#sha256=" + "0" * 64, {}, "has sha256 "),
    ("albert_base_v1", {}, "albert_base_v1: cannot unpack albert_base_v1.tar.gz"),
    ("albert_base_zh", {"ALBERT_TF_RELEASES_URL": "http://127.0.0.1:9"},
     "albert_base_zh: cannot reach http://127.0.0.1:9/albert_models/albert_base_zh.tar.gz"),
    (f"hf://{REPO}", {"HF_HUB_OFFLINE": "1"}, f"hf://{REPO}: not in the Hugging Face cache "
     "{HF_HUB_CACHE} and the Hub is off"),
    ("hf://org/albert-missing", {}, "hf://org/albert-missing: no such model repository on {server}"),
    (f"hf://{REPO}@v3", {}, f"hf://{REPO}@v3: the repository has no revision 'v3'"),
    (f"hf://{REPO}", {"HF_ENDPOINT": "http://127.0.0.1:9"},
     f"hf://{REPO}: not in the Hugging Face cache {{HF_HUB_CACHE}} and the Hub cannot be reached"),
    ("hf://org/albert-cut-short", {}, "hf://org/albert-cut-short: the download into the Hugging "
     "Face cache {HF_HUB_CACHE} failed (peer closed connection without sending complete message "
     "body"),
    ("albert_large_en_uncased", {"ALBERT_TF_OFFLINE": "1"}, "albert_large_en_uncased: keras/albert/"
     "keras/albert_large_en_uncased/3 is not in the kagglehub cache {KAGGLEHUB_CACHE}"),
    ("kaggle://keras/albert", {}, "kaggle://keras/albert: not a Kaggle model handle"),
    ("{server}/tensorflow/albert_missing/1", {}, "{server}/tensorflow/albert_missing/1: TF-Hub "
     "could not download it"),
])
def test_each_failure_is_one_line_and_leaves_no_partial_files(world, env, monkeypatch, name,
                                                              setting, message):
    fill = dict(env, server=world["server"].url)
    if name.startswith("hf://"):  # huggingface_hub waits up to 23 s between its retries
        monkeypatch.setattr("huggingface_hub.utils._http.time.sleep", lambda seconds: None)
        monkeypatch.setattr("huggingface_hub.file_download.time.sleep", lambda seconds: None)
    for key, value in setting.items():
        monkeypatch.setenv(key, value)
        fill[key] = value
    with pytest.raises((ValueError, FileNotFoundError)) as raised:
        read_checkpoint(name.format(**fill))
    text = str(raised.value)
    assert "\n" not in text and message.format(**fill) in text, text
    for cache in ("ALBERT_TF_CACHE", "HF_HUB_CACHE", "TFHUB_CACHE_DIR"):
        left = [f for f in _files_under(env[cache]) if not f.startswith(".locks")] \
            if os.path.isdir(env[cache]) else []
        assert not [f for f in left if "partial" in f or ".tmp" in f or f.endswith(".incomplete")
                    or os.path.basename(f).startswith(("model.", "albert_model."))
                    or f.endswith(".index")], (cache, left)


# Every variable that moves a library's cache away from its default under HOME.
_CACHE_VARIABLES = ("HF_HUB_CACHE", "HF_HOME", "HF_ENDPOINT", "HUGGINGFACE_HUB_CACHE",
                    "HF_HUB_OFFLINE", "XDG_CACHE_HOME", "KAGGLEHUB_CACHE", "TFHUB_CACHE_DIR",
                    "ALBERT_TF_CACHE", "ALBERT_TF_RELEASES_URL")
_LOOK_UP = """
import sys
from albert_tf.formats import names
for name in sys.argv[1:]:
    try:
        print(names.local_model_path(name))
    except names.ModelNameError as e:
        print(e)
"""


def test_each_family_reads_its_library_s_default_cache(tmp_path):
    """With no cache variable set, each name is looked up in its library's own default cache
    (issue 62: every hf:// name failed with "AttributeError: No huggingface_hub attribute
    constants"); offline, the one line names that folder. In a process of its own, so none of
    the suite's variables reach it."""
    env = {k: v for k, v in os.environ.items() if k not in _CACHE_VARIABLES}
    env.update(HOME=str(tmp_path), ALBERT_TF_OFFLINE="1")
    hub = "https://tfhub.dev/google/albert_base/3"
    out = subprocess.run([sys.executable, "-c", _LOOK_UP, f"hf://{REPO}",
                          "albert_base_en_uncased", "albert_base_zh", hub],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    cache = tmp_path / ".cache"
    releases = cache / "albert_tf" / "releases"
    assert out.stdout.splitlines() == [
        f"hf://{REPO}: not in the Hugging Face cache {cache}/huggingface/hub and the Hub is off "
        f"(HF_HUB_OFFLINE or ALBERT_TF_OFFLINE is set): fetch it once online, or point "
        f"HF_HUB_CACHE at a cache that has it",
        f"albert_base_en_uncased: keras/albert/keras/albert_base_en_uncased/5 is not in the "
        f"kagglehub cache {cache}/kagglehub and ALBERT_TF_OFFLINE is set: fetch it once online, "
        f"or point KAGGLEHUB_CACHE at a cache that has it",
        f"albert_base_zh: not in the release cache {releases} (ALBERT_TF_CACHE) and "
        f"ALBERT_TF_OFFLINE is set: fetch it once online, or unpack https://storage.googleapis."
        f"com/albert_models/albert_base_zh.tar.gz there as {releases}/albert_models/albert_base_zh",
        # tensorflow_hub's default is a folder of the temporary directory, not of HOME
        f"{hub}: not in the TF-Hub cache {tempfile.gettempdir()}/tfhub_modules (TFHUB_CACHE_DIR) "
        f"and ALBERT_TF_OFFLINE is set: fetch it once online, or point TFHUB_CACHE_DIR at a "
        f"cache that has it"], out.stderr[-3000:]


def test_every_tool_takes_a_name(world, env, tmp_path, capsys):
    """convert_checkpoint --input, export_hub --init_checkpoint, predict --model and the
    fine-tuning scripts' --init_checkpoint (run_classifier's own-data path)."""
    status, last, err = run_tool(convert_checkpoint, capsys, input="albert_base_zh",
                                 output_dir=str(tmp_path / "hf"), format="hf")
    assert status == 0, err
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["vocab_size"] == len(
        zh_release.vocab_tokens())
    status, last, err = run_tool(export_hub, capsys, init_checkpoint=f"hf://{REPO}",
                                 export_type="encoder", export_path=str(tmp_path / "encoder"))
    assert status == 0, err
    encoder = tf.saved_model.load(str(tmp_path / "encoder"))
    assert bool(encoder.do_lower_case.numpy()) is False  # the repository's tokenizer_config.json
    with pytest.raises(ValueError, match="is a TF2 SavedModel .a TF-Hub text encoder.; fine-tune "
                                         "it with --albert_hub_module_handle"):
        read_checkpoint(str(tmp_path / "encoder"))
    (tmp_path / "masked.txt").write_text("我爱[MASK]然语言处理。\n", encoding="utf-8")
    status, out, err = run_tool(predict, capsys, model="brightmart/albert_tiny_zh", task="embed",
                                input_file=str(tmp_path / "masked.txt"), output_file=str(tmp_path / "emb.jsonl"))
    assert status == 0, err
    vector = json.loads((tmp_path / "emb.jsonl").read_text().splitlines()[0])
    assert len(vector["embedding"]) == brightmart_config("preln")["hidden_size"]
    status, last, err = run_tool(predict, capsys, model="hf://org/albert-missing", task="embed",
                                 input_file=str(tmp_path / "masked.txt"))
    assert (status, last) == (2, "predict: error: hf://org/albert-missing: no such model repository on "
                                 f"{world['server'].url} (or it needs a token: huggingface-cli "
                                 "login)"), err


def test_fine_tuning_starts_from_a_hugging_face_name(world, env, tmp_path):
    """run_classifier --init_checkpoint=hf://...: the weights, config and WordPiece vocabulary
    with the repository's do_lower_case=False, from the Hub's cache."""
    rows = ["text,label"] + [f"{t},{i % 2}" for i, t in enumerate(zh_release.sentences(24))]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    status, log = run_tool_logged(
        "run_classifier", init_checkpoint=f"hf://{REPO}", train_file=tmp_path / "train.csv",
        text_column_names="text", output_dir=tmp_path / "out", do_train=True, train_step=2,
        train_batch_size=8, max_seq_length=24, strategy="one_device")
    assert status == 0, log[-3000:]
    assert f"Model hf://{REPO}: " in log and "do_lower_case=False" in log, log[:3000]
    assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1] == \
        zh_release.vocab_tokens()
