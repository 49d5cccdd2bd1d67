"""Models by name: a name or address turned into a local directory through the cache of the
library that owns its protocol, after which `formats.resolve` reads it like any other path.

  hf://org/name[@revision]          Hugging Face Hub (huggingface_hub: HF_HUB_CACHE, HF_ENDPOINT,
                                    HF_HUB_OFFLINE)
  albert_base_en_uncased, ...       KerasHub presets, and kaggle://owner/model/framework/variation
                                    [/version] handles (kagglehub: KAGGLEHUB_CACHE)
  https://tfhub.dev/..., other      TF-Hub handles and URLs, Kaggle Models addresses (tensorflow_hub:
  http(s) addresses                 TFHUB_CACHE_DIR)
  albert_base_v2, albert_base_zh,   the original's releases and brightmart/albert_zh's, by name or
  brightmart/albert_tiny_zh, ...    by link; downloaded, checked and unpacked once into
                                    ALBERT_TF_CACHE (default ~/.cache/albert_tf)

A local path always wins over a name. ALBERT_TF_OFFLINE=1 reads every cache without the network.
"""

import base64
import difflib
import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import typing
import urllib.error
import urllib.request
import zipfile

import tensorflow as tf
from absl import logging

GOOGLE_RELEASES = {f"albert_{size}_{kind}": f"albert_models/albert_{size}_{kind}.tar.gz"
                   for size in ("base", "large", "xlarge", "xxlarge")
                   for kind in ("v1", "v2", "zh")}
BRIGHTMART_RELEASES = {f"brightmart/{name}": f"albert_zh/{archive}" for name, archive in (
    ("albert_tiny_zh", "albert_tiny.zip"), ("albert_tiny_489k", "albert_tiny_489k.zip"),
    ("albert_tiny_zh_google", "albert_tiny_zh_google.zip"),
    ("albert_small_zh_google", "albert_small_zh_google.zip"),
    ("albert_base_zh", "albert_base_zh.zip"),
    ("albert_base_zh_additional_36k_steps", "albert_base_zh_additional_36k_steps.zip"),
    ("albert_large_zh", "albert_large_zh.zip"),
    ("albert_xlarge_zh_177k", "albert_xlarge_zh_177k.zip"),
    ("albert_xlarge_zh_183k", "albert_xlarge_zh_183k.zip"))}
RELEASES = {**GOOGLE_RELEASES, **BRIGHTMART_RELEASES}
# keras_hub/src/models/albert/albert_presets.py (KerasHub 0.32)
KERAS_HUB_PRESETS = {
    "albert_base_en_uncased": "keras/albert/keras/albert_base_en_uncased/5",
    "albert_large_en_uncased": "keras/albert/keras/albert_large_en_uncased/3",
    "albert_extra_large_en_uncased": "keras/albert/keras/albert_extra_large_en_uncased/3",
    "albert_extra_extra_large_en_uncased": "keras/albert/keras/albert_extra_extra_large_en_uncased/3",
}
# What a Hugging Face model repository holds that a model here reads: the first file of each
# group found (the weights are required), and any of the tokenizer and KerasHub preset files.
_HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.weights.h5")
_HF_EXTRAS = ("spiece.model", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
              "metadata.json", "tokenizer.json", "preprocessor.json", "task.json",
              "assets/tokenizer/vocabulary.spm")
_CHUNK = 1 << 20
_resolved = {}  # name → local directory, once per process


class ModelNameError(ValueError):
    """A name that cannot be turned into a local model: unknown, not cached while offline, or
    a download that failed; the message names the name, the cache and what to do."""


class DownloadError(ModelNameError):
    exit_status = 1  # the network or the server, not the command line


def cache_root():
    return os.path.expanduser(os.environ.get("ALBERT_TF_CACHE") or "~/.cache/albert_tf")


def releases_url():
    """Where the releases are served from (a mirror may stand in for Google Cloud Storage)."""
    return (os.environ.get("ALBERT_TF_RELEASES_URL") or "https://storage.googleapis.com").rstrip("/")


def _true(variable):
    return os.environ.get(variable, "").strip().lower() in ("1", "true", "yes", "on")


def offline():
    return _true("ALBERT_TF_OFFLINE")


def known_names():
    return sorted({*RELEASES, *KERAS_HUB_PRESETS})


def _claimed(text):
    """The scheme of SCHEMES (below) that owns `text`, the first that claims it; None for a
    path."""
    return next((scheme for scheme in SCHEMES if scheme.claims(text)), None)


def _is_address(text, scheme):
    """A name with a scheme (hf://, kaggle://, http(s)://, gs://): never a local path."""
    return scheme is not None and "://" in text


def _exists(text, scheme):
    if _is_address(text, scheme):
        return False
    try:
        return tf.io.gfile.exists(text) or tf.io.gfile.exists(text + ".index")
    except tf.errors.OpError:  # a scheme TensorFlow has no file system for
        return False


def is_name(text):
    """Whether `text` is a model name or address of a family above (not a local path)."""
    return _claimed(os.fspath(text)) is not None


def local_model_path(name):
    """The local path for `name`: `name` itself when it exists here (or on a file system
    TensorFlow reads) or is no name of the families above; else the directory its family's cache
    holds for it, downloaded when missing. Logs where the files came from, once per name."""
    text = os.fspath(name)
    scheme = _claimed(text)
    if _exists(text, scheme):
        if scheme is not None and _resolved.get(text) != text:
            logging.info("%s: the local path, not the model of that name", text)
            _resolved[text] = text
        return text
    if scheme is None:
        return text
    if text not in _resolved:
        path, origin = scheme.fetch(text)
        logging.info("Model %s: %s (%s)", text, path, origin)
        _resolved[text] = path
    return _resolved[text]


def suggestion(text):
    """" (did you mean ...?)" for a path that does not exist and looks like a name; else ""."""
    text = os.fspath(text)
    hub_id = re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", text) or re.fullmatch(
        r"albert-(base|large|xlarge|xxlarge)-v[12]", text)
    on_the_hub = f"hf://{text if '/' in text else 'albert/' + text}"
    if (hub_id and not text.startswith("brightmart/") and not _is_address(text, _claimed(text))
            and not os.path.isdir(text.split("/")[0])):  # (a local folder: a path's typo)
        return (f" (no such path; a Hugging Face Hub id? give {on_the_hub}, as docs/models.md "
                f"says)")
    if "/" in text.replace("brightmart/", "", 1) or _is_address(text, _claimed(text)):
        return ""
    close = difflib.get_close_matches(text, known_names(), n=2, cutoff=0.75)
    return (f" (no such path, and no model has that name; did you mean {' or '.join(close)}? "
            f"docs/models.md lists the names)") if close else ""


# ---- Hugging Face Hub ---------------------------------------------------------------------------

def _from_hugging_face(text):
    try:
        import huggingface_hub  # optional: only names on the Hub need it
        from huggingface_hub import constants, errors
    except ImportError:
        raise ModelNameError(f"{text}: reading Hugging Face names needs huggingface_hub "
                             f"(pip install huggingface_hub)") from None
    repo, _, revision = text[len("hf://"):].partition("@")
    if repo.count("/") > 1 or not repo.strip("/"):
        raise ModelNameError(f"{text}: expected hf://<org>/<name>[@<revision>]")
    cache = os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE
    offline_here = offline() or _true("HF_HUB_OFFLINE")

    def download(filename):
        return huggingface_hub.hf_hub_download(
            repo, filename, revision=revision or None, cache_dir=cache,
            endpoint=os.environ.get("HF_ENDPOINT") or None, local_files_only=offline_here)

    where = f"the Hugging Face cache {cache}"
    try:
        found = _first_of(download, text, ("config.json",), True, offline_here)
        _first_of(download, text, _HF_WEIGHTS, True, offline_here)
        for name in _HF_EXTRAS:
            _first_of(download, text, (name,), False, offline_here)
    except errors.RevisionNotFoundError:
        raise ModelNameError(f"{text}: the repository has no revision {revision!r}") from None
    except errors.RepositoryNotFoundError:
        raise ModelNameError(f"{text}: no such model repository on "
                             f"{os.environ.get('HF_ENDPOINT') or 'the Hugging Face Hub'} (or it "
                             f"needs a token: huggingface-cli login)") from None
    except errors.LocalEntryNotFoundError:
        _drop_incomplete(cache, repo)
        if offline_here:
            raise _not_cached(f"{text}: not in {where} and the Hub is off (HF_HUB_OFFLINE or "
                              f"ALBERT_TF_OFFLINE is set)", "HF_HUB_CACHE") from None
        raise DownloadError(f"{text}: not in {where} and the Hub cannot be reached: check the "
                            f"network (or HF_ENDPOINT), or point HF_HUB_CACHE at a cache that "
                            f"has it") from None
    except ModelNameError:
        raise
    except Exception as e:  # noqa: BLE001 - OSError, and the HTTP client's own (a cut connection)
        _drop_incomplete(cache, repo)
        raise DownloadError(f"{text}: the download into {where} failed ({_short(e)}); nothing "
                            f"partial was kept: run again") from None
    directory = os.path.dirname(found)
    return directory, f"Hugging Face Hub {repo}, revision {os.path.basename(directory)}, in {where}"


def _first_of(download, text, names, required, offline_here):
    """The path of the first of `names` the repository has; None for none, unless required."""
    from huggingface_hub import errors
    uncached = None
    for filename in names:
        try:
            return download(filename)
        except errors.EntryNotFoundError as e:
            if isinstance(e, errors.LocalEntryNotFoundError):
                if not offline_here:
                    raise  # not found for want of the network
                uncached = e
    if required and uncached:
        raise uncached
    if required:
        raise ModelNameError(f"{text}: the repository has none of {', '.join(names)}; is it an "
                             f"ALBERT model in the transformers or KerasHub layout?")
    return None


def _drop_incomplete(cache, repo):
    """huggingface_hub keeps a failed download's bytes as blobs/*.incomplete to resume it; a
    failure here leaves none."""
    blobs = os.path.join(cache, "models--" + repo.replace("/", "--"), "blobs")
    for name in (os.listdir(blobs) if os.path.isdir(blobs) else ()):
        if name.endswith(".incomplete"):
            os.remove(os.path.join(blobs, name))


def _not_cached(what, variable):
    return DownloadError(f"{what}: fetch it once online, or point {variable} at a cache that has it")


def _short(error):
    return " ".join(str(error).split())[:300] or type(error).__name__


# ---- Kaggle (KerasHub presets) ------------------------------------------------------------------

def _from_kaggle(text, handle):
    try:
        import kagglehub  # optional: only Kaggle names need it
        from kagglehub import cache as kaggle_cache
        from kagglehub.config import get_cache_folder
        from kagglehub.handle import parse_model_handle
    except ImportError:
        raise ModelNameError(f"{text}: reading KerasHub presets and kaggle:// handles needs "
                             f"kagglehub (pip install kagglehub)") from None
    try:
        parsed = parse_model_handle(handle)
    except ValueError as e:
        raise ModelNameError(f"{text}: not a Kaggle model handle "
                             f"(owner/model/framework/variation[/version]): {_short(e)}") from None
    where = f"the kagglehub cache {get_cache_folder()}"
    cached = parsed.is_versioned() and kaggle_cache.Cache().load_from_cache(parsed)
    if cached:
        return cached, f"Kaggle {handle}, in {where}"
    if offline():
        raise _not_cached(f"{text}: {handle} is not in {where} and ALBERT_TF_OFFLINE is set",
                          "KAGGLEHUB_CACHE")
    try:
        path = kagglehub.model_download(handle)
    except Exception as e:  # noqa: BLE001 - kagglehub raises its own and the HTTP client's errors
        raise DownloadError(f"{text}: Kaggle could not give {handle} ({_short(e)}); it is not "
                            f"in {where}: check the name and the network, or point "
                            f"KAGGLEHUB_CACHE at a cache that has it") from None
    return path, f"Kaggle {handle}, downloaded into {where}"


# ---- TF-Hub -------------------------------------------------------------------------------------

def _from_tf_hub(text):
    import tensorflow_hub as hub  # 0.2 s to import: only for TF-Hub names
    from tensorflow_hub import resolver
    cache = resolver.tfhub_cache_dir(use_temp=True)
    cached = os.path.join(cache, hashlib.sha1(text.encode("utf-8")).hexdigest())
    where = f"the TF-Hub cache {cache} (TFHUB_CACHE_DIR)"
    if tf.io.gfile.isdir(cached) and tf.io.gfile.listdir(cached):
        return cached, f"TF-Hub {text}, in {where}"
    if offline():
        raise _not_cached(f"{text}: not in {where} and ALBERT_TF_OFFLINE is set",
                          "TFHUB_CACHE_DIR")
    try:
        return hub.resolve(text), f"TF-Hub {text}, downloaded into {where}"
    except (urllib.error.URLError, OSError, ValueError, tf.errors.OpError) as e:
        raise DownloadError(f"{text}: TF-Hub could not download it ({_short(e)}); it is not in "
                            f"{where}: check the address and the network") from None


# ---- the releases -------------------------------------------------------------------------------

def _release_key(text):
    """(archive path under the releases URL, pinned sha256 or None) for a release name or link."""
    base, _, fragment = text.partition("#")
    pinned = re.fullmatch(r"sha256=([0-9a-fA-F]{64})", fragment)
    if fragment and not pinned:
        return None
    digest = pinned.group(1).lower() if pinned else None
    if base in RELEASES:
        return RELEASES[base], digest
    for prefix in {"https://storage.googleapis.com", releases_url()}:
        if base.startswith(prefix + "/"):
            path = base[len(prefix) + 1:]
            if path.startswith(("albert_models/", "albert_zh/")):
                return path, digest
    return None


def _from_release(text, archive, digest):
    url = f"{releases_url()}/{archive}"
    stem = re.sub(r"\.(tar\.gz|tgz|zip)$", "", os.path.basename(archive))
    cache = os.path.join(cache_root(), "releases")
    final = os.path.join(cache, os.path.dirname(archive), stem)
    where = f"the release cache {cache} (ALBERT_TF_CACHE)"
    if os.path.isdir(final):
        return _model_dir(final), f"the release {url}, in {where}"
    if offline():
        raise DownloadError(f"{text}: not in {where} and ALBERT_TF_OFFLINE is set: fetch it once "
                            f"online, or unpack {url} there as {final}")
    os.makedirs(os.path.dirname(final), exist_ok=True)
    _drop_abandoned(os.path.dirname(final), stem)
    work = tempfile.mkdtemp(prefix=f".{stem}.{os.getpid()}.", suffix=".partial",
                            dir=os.path.dirname(final))
    try:
        path = os.path.join(work, os.path.basename(archive))
        _download(text, url, path, digest)
        unpacked = os.path.join(work, stem)
        _unpack(text, path, unpacked)
        if not _holds_a_checkpoint(unpacked):
            raise DownloadError(f"{text}: {url} holds no checkpoint (*.index); nothing was kept")
        try:
            os.rename(unpacked, final)
        except OSError:
            if not os.path.isdir(final):  # else another process finished first: use theirs
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _model_dir(final), f"the release {url}, downloaded and checked into {where}"


def _drop_abandoned(directory, stem):
    """Removes the temporary folders of downloads whose process is gone (killed mid-way)."""
    for name in os.listdir(directory):
        m = re.fullmatch(re.escape(f".{stem}.") + r"(\d+)\..*\.partial", name)
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _download(text, url, path, digest):
    """`url` into `path`, checked against its length, the server's MD5 (Google Cloud Storage's
    x-goog-hash) and a pinned sha256; a one-line DownloadError otherwise."""
    try:
        response = urllib.request.urlopen(url, timeout=60)
    except urllib.error.HTTPError as e:
        raise DownloadError(f"{text}: {url} answered {e.code} {e.reason}"
                            + (": no release of that name" if e.code == 404 else "")) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(f"{text}: cannot reach {url} ({_short(reason)}) and it is not in the "
                            f"cache {cache_root()}: check the network, or set ALBERT_TF_CACHE to a "
                            f"cache that has it") from None
    expected = int(response.headers.get("Content-Length") or -1)
    md5_header = re.search(r"md5=([A-Za-z0-9+/=]+)", response.headers.get("x-goog-hash", ""))
    md5, sha256, received, logged = hashlib.md5(), hashlib.sha256(), 0, 0
    try:
        with response, open(path, "wb") as f:
            while chunk := response.read(_CHUNK):
                f.write(chunk)
                md5.update(chunk)
                sha256.update(chunk)
                received += len(chunk)
                if expected > 0 and received * 10 // expected > logged:
                    logged = received * 10 // expected
                    logging.info("Downloading %s: %d%% of %.1f MB", url, logged * 10, expected / 1e6)
    except (OSError, ValueError) as e:  # http.client.IncompleteRead, a reset connection
        raise DownloadError(f"{text}: the download of {url} stopped after {received} bytes "
                            f"({_short(e)}); nothing was kept: run again") from None
    if expected >= 0 and received != expected:
        raise DownloadError(f"{text}: the download of {url} stopped after {received} of {expected} "
                            f"bytes; nothing was kept: run again")
    if md5_header and base64.b64decode(md5_header.group(1)) != md5.digest():
        raise DownloadError(f"{text}: {url} does not match the server's MD5 checksum; nothing was "
                            f"kept: run again, and if it persists the download is being altered")
    if digest and sha256.hexdigest() != digest:
        raise DownloadError(f"{text}: {url} has sha256 {sha256.hexdigest()}, not the pinned "
                            f"{digest}; nothing was kept")


def _unpack(text, archive, into):
    try:
        if archive.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    target = os.path.realpath(os.path.join(into, member))
                    if not target.startswith(os.path.realpath(into) + os.sep):
                        raise ValueError(f"{member} lies outside the archive's folder")
                z.extractall(into)
        else:
            with tarfile.open(archive) as t:
                t.extractall(into, filter="data")
    except (OSError, EOFError, ValueError, tarfile.TarError, zipfile.BadZipFile) as e:
        raise DownloadError(f"{text}: cannot unpack {os.path.basename(archive)} ({_short(e)}); "
                            f"nothing was kept") from None


def _holds_a_checkpoint(directory):
    return any(name.endswith(".index") for _, _, names in os.walk(directory) for name in names)


def _model_dir(directory):
    """The folder that holds the model: the archive's one top-level folder, as the releases pack."""
    entries = [e for e in os.listdir(directory) if not e.startswith(".")]
    if len(entries) == 1 and os.path.isdir(os.path.join(directory, entries[0])):
        return _model_dir(os.path.join(directory, entries[0]))
    return directory


# ---- the schemes --------------------------------------------------------------------------------

class Scheme(typing.NamedTuple):
    """A family of names: `claims(text)` whether a text is one, `fetch(text)` → (local path,
    where it came from, for the log)."""
    claims: typing.Callable
    fetch: typing.Callable


def _tf_hub_address(text):
    """http(s):// addresses (TF-Hub handles and URLs, Kaggle Models addresses) and TF-Hub's
    compressed modules on Google Cloud Storage (gs://....tar.gz: tensorflow_hub unpacks them)."""
    scheme = text.split("://", 1)[0] if "://" in text else ""
    return scheme in ("http", "https") or (
        scheme == "gs" and text.endswith((".tar", ".tar.gz", ".tgz")))


# In the order they are tried: the first that claims a name fetches it. A new family is one entry.
SCHEMES = (
    Scheme(lambda text: text.startswith("hf://"), _from_hugging_face),
    Scheme(lambda text: text.startswith("kaggle://"),
           lambda text: _from_kaggle(text, text[len("kaggle://"):])),
    Scheme(lambda text: text in KERAS_HUB_PRESETS,
           lambda text: _from_kaggle(text, KERAS_HUB_PRESETS[text])),
    Scheme(lambda text: _release_key(text) is not None,
           lambda text: _from_release(text, *_release_key(text))),
    Scheme(_tf_hub_address, _from_tf_hub),
)
