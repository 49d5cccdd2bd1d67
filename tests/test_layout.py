"""The package's shape: no import cycles, imports only down the documented layers, the
original's tokenization names where users import them, the tokenizers without TensorFlow, every module without the extras' packages, no long
functions in the tokenizer rooms, no AutoGraph in its traced functions, and no scikit-learn in
the suite's environment."""

import ast
import json
import importlib.util
import pathlib
import subprocess
import sys

from albert_tf import tokenization

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "albert_tf"
# The original tokenization.py's public names that ALBERT users call (its private _is_*
# helpers and validate_case_matches_checkpoint, for BERT checkpoint names, are left out).
ORIGINAL_NAMES = ("preprocess_text", "encode_pieces", "encode_ids", "convert_to_unicode",
                  "printable_text", "load_vocab", "convert_by_vocab", "FullTokenizer",
                  "BasicTokenizer", "WordpieceTokenizer", "convert_tokens_to_ids",
                  "convert_ids_to_tokens", "whitespace_tokenize")


def _modules():
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(name, modules):
    """albert_tf modules `name` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(modules[name].read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("albert_tf"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("albert_tf"))
    return {m for m in found if m in modules and m != name}


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, modules) for name in modules}
    assert graph["albert_tf.formats.sources"] >= {"albert_tf.formats.checkpoints",
                                                  "albert_tf.formats.resolve"}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    # The checker finds a cycle where there is one.
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


# The layers of docs/architecture.md, top to bottom: a module imports from its own layer and the
# ones below it, never from one above. The entry points are the package's lazy names, `cli` and
# `conversion` beside the tools (top-level modules run as `python -m albert_tf.<name>`).
LAYERS = ("entry points", "tasks", "serving", "training", "modeling", "formats", "base")
ENTRY_POINTS = ("albert_tf", "albert_tf.cli", "albert_tf.conversion")
FOLDERS = {"albert_tf.tasks": "tasks", "albert_tf.serving": "serving",
           "albert_tf.training": "training", "albert_tf.modeling": "modeling",
           "albert_tf.formats": "formats", "albert_tf.data": "data",
           "albert_tf.tokenization": "base"}
BASE = ("albert_tf.config", "albert_tf.dtype_policy", "albert_tf.files", "albert_tf.outputs",
        "albert_tf.startup", "albert_tf.tracing")
# `data` stands beside the layers: it reads only these, and the layers from training up read it.
DATA_READS = ("albert_tf.tokenization", "albert_tf.files", "albert_tf.outputs")
DATA_READERS = LAYERS[:LAYERS.index("training") + 1]


def _under(name, packages):
    return any(name == p or name.startswith(p + ".") for p in packages)


def _is_tool(path):
    return any(isinstance(node, ast.Compare) and isinstance(node.left, ast.Name)
               and node.left.id == "__name__" for node in ast.walk(ast.parse(path.read_text())))


def _layer(name, modules):
    """The layer (or "data") of module `name`; None for a module the layering does not place."""
    folder = [layer for package, layer in FOLDERS.items() if _under(name, (package,))]
    if folder:
        return folder[0]
    if name in BASE:
        return "base"
    if name in ENTRY_POINTS or (name.count(".") == 1 and _is_tool(modules[name])):
        return "entry points"
    return None


def _may_import(importer, imported, layer):
    mine, theirs = layer(importer), layer(imported)
    if mine == "data":
        return theirs == "data" or _under(imported, DATA_READS)
    if theirs == "data":
        return mine in DATA_READERS
    return LAYERS.index(mine) <= LAYERS.index(theirs)


def _layering_violations(graph, layer):
    """"<module> (<layer>) imports <module> (<layer>)" for each import against the layers."""
    return [f"{name} ({layer(name)}) imports {other} ({layer(other)})"
            for name in sorted(graph) for other in sorted(graph[name])
            if not _may_import(name, other, layer)]


def test_imports_run_down_the_documented_layers(tmp_path):
    """docs/architecture.md's order, for imports at the top of a module and inside functions."""
    modules = _modules()
    graph = {name: _imports(name, modules) for name in modules}
    unplaced = [name for name in sorted(modules) if _layer(name, modules) is None]
    assert not unplaced, (f"{unplaced}: in no layer; place them in tests/test_layout.py's "
                          f"layers and in docs/architecture.md's package map")
    violations = _layering_violations(graph, lambda name: _layer(name, modules))
    assert not violations, "\n".join(violations)
    # The checker finds each kind of wrong import, with both modules named.
    made_up = {"albert_tf.config": {"albert_tf.formats.keras_hub"},
               "albert_tf.formats.sources": {"albert_tf.serving.lite", "albert_tf.config"},
               "albert_tf.modeling.encoder": {"albert_tf.data.glue"},
               "albert_tf.data.glue": {"albert_tf.config", "albert_tf.files"},
               "albert_tf.serving.tag": {"albert_tf.data.conll", "albert_tf.modeling.layers"}}
    assert _layering_violations(made_up, lambda name: _layer(name, modules)) == [
        "albert_tf.config (base) imports albert_tf.formats.keras_hub (formats)",
        "albert_tf.data.glue (data) imports albert_tf.config (base)",
        "albert_tf.formats.sources (formats) imports albert_tf.serving.lite (serving)",
        "albert_tf.modeling.encoder (modeling) imports albert_tf.data.glue (data)"]
    assert _layer("albert_tf.run_squad", modules) == "entry points"
    assert _layer("albert_tf.cli", modules) == "entry points"
    # An import inside a function counts as one at the top.
    (tmp_path / "config.py").write_text("def f():\n    from albert_tf.formats import keras_hub\n")
    assert _imports("albert_tf.config", dict(modules, **{
        "albert_tf.config": tmp_path / "config.py"})) == {"albert_tf.formats.keras_hub"}


def _own_cell(parts):
    """How the package map names a top-level module or folder (parts: its name's, package's
    left out)."""
    if not parts:
        return "`__init__.py`"
    return f"`{parts[0]}/`" if (PACKAGE / parts[0]).is_dir() else f"`{parts[0]}.py`"


def test_the_architecture_doc_names_every_module():
    """docs/architecture.md's package map names each module: a folder's in the folder's row,
    a top-level one (or a folder) in a row of its own."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    table = doc.split("## The package map", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    unnamed = []
    for name in sorted(_modules()):
        parts = name.split(".")[1:]
        if len(parts) == 2:
            folder = [row for row in rows
                      if f"`{parts[0]}/`" in (cell.strip() for cell in row.split("|"))]
            named = any(f"`{parts[1]}`" in row for row in folder)
        else:
            named = any(_own_cell(parts) in row for row in rows)
        if not named:
            unnamed.append(name)
    assert not unnamed, f"{unnamed}: not in docs/architecture.md's package map"


def test_the_original_tokenization_names_import_as_before():
    for name in ORIGINAL_NAMES + ("InGraphTokenizer", "InGraphWordpieceTokenizer",
                                  "in_graph_tokenizer", "FastEncoder", "vocabulary_file"):
        assert getattr(tokenization, name) is not None, name
    assert set(tokenization.__all__) <= set(dir(tokenization)) | {
        "InGraphTokenizer", "InGraphWordpieceTokenizer", "in_graph_tokenizer"}
    assert tokenization.InGraphTokenizer.__module__ == "albert_tf.tokenization.in_graph"


def test_host_tokenizers_and_the_builder_load_without_tensorflow():
    code = ("import sys\nfrom albert_tf.tokenization import FullTokenizer, load_vocab\n"
            "from albert_tf.data import build_records\n"
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_no_function_over_60_lines_in_the_tokenizer_and_format_rooms():
    long = []
    for folder in ("tokenization", "formats"):
        for path in (PACKAGE / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 60:
                        long.append(f"{folder}/{path.name}:{node.name} ({lines} lines)")
    assert not long, long



def test_every_traced_function_is_built_without_autograph():
    """The package's loops and conditions are TensorFlow ops: its tf.functions are
    tracing.graph_function (autograph=False). A bare tf.function brings back AutoGraph's
    rewriting of every function it calls (bench/bench_startup.py)."""
    bare = [f"{path.relative_to(PACKAGE)}:{node.lineno}"
            for path in PACKAGE.rglob("*.py") if path.name != "tracing.py"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr == "function"
            and isinstance(node.value, ast.Name) and node.value.id == "tf"]
    assert not bare, bare


def test_the_suite_s_environment_has_no_scikit_learn():
    """Keras imports scikit-learn (and SciPy) whenever it is installed: 2 s of CPU in each of
    the suite's TensorFlow processes, for nothing of ours. Test tools that need it run in
    environments of their own (tests/side_envs.py)."""
    for name in ("sklearn", "scipy"):
        spec = importlib.util.find_spec(name)
        assert spec is None, (
            f"{name} is installed ({spec.origin}): a test dependency pulled it in (move that "
            f"tool to tests/side_envs.py), or .venv predates a775b70 (remove it and rerun "
            f"scripts/test.sh)")


# The extras' packages (setup.py): a base install (`pip install albert_tf`) has none of them.
EXTRAS = ("apache_beam", "ai_edge_litert", "torch", "transformers", "keras_hub", "tf_keras",
          "matplotlib", "nbclient", "onnx", "onnxruntime")
_WITHOUT_EXTRAS = f"""
import importlib, runpy, sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRAS!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Absent())
"""


def _without_extras(code, *args):
    return subprocess.run([sys.executable, "-c", _WITHOUT_EXTRAS + code, *args],
                          capture_output=True, text=True, cwd=PACKAGE.parent)


def test_every_module_imports_on_a_base_install():
    """Every module but the [beam] extra's own builder imports without the extras' packages
    (the blocker does block them), and asking for Beam there is the tool's one line naming the
    extra."""
    names = sorted(n for n in _modules() if n != "albert_tf.data.beam_builder")
    out = _without_extras("for name in sys.argv[1:]: importlib.import_module(name)\n"
                          "print('imported', len(sys.argv) - 1)", *names)
    assert out.returncode == 0 and out.stdout == f"imported {len(names)}\n", out.stderr[-3000:]
    out = _without_extras("import transformers")
    assert "ModuleNotFoundError: No module named 'transformers'" in out.stderr
    out = _without_extras("sys.argv[0] = 'create_pretraining_data'\n"
                          "runpy.run_module('albert_tf.create_pretraining_data', "
                          "run_name='__main__')", "--input_file=x.txt",
                          "--output_file=x.tfrecord", "--vocab_file=x.vocab",
                          "--runner=DirectRunner")
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr == (
        "create_pretraining_data: error: --runner=DirectRunner needs Apache Beam: pip install "
        "'albert_tf[beam]' (No module named 'apache_beam')\n"), out.stderr[-3000:]


# The optional packages a fine-tuning run without --export_dir never needs.
HEAVY = ("tensorflow_text", "apache_beam", "ai_edge_litert", "matplotlib", "tensorflow_hub",
         "huggingface_hub", "kagglehub", "keras_hub")
_TINY_RUN = f"""
import atexit, json, os, runpy, sys
root = sys.argv[1]
words = "the cat sat on a mat dog ran far away bird sang zebra".split()
with open(os.path.join(root, "vocab.txt"), "w") as f:
    f.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\\n")
for split in ("train", "dev"):
    with open(os.path.join(root, split + ".csv"), "w") as f:
        f.write("text,label\\n" + "".join(f"{{' '.join(words[i:i + 4])}},{{i % 2}}\\n"
                                          for i in range(8)))
import keras  # what Keras imports itself whenever it is installed: matplotlib, huggingface_hub
keras_own = sorted(m for m in {HEAVY!r} if m in sys.modules)
from albert_tf import AlbertConfig, AlbertEncoder
AlbertEncoder(AlbertConfig(vocab_size=18, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=16,
                           max_position_embeddings=32)).save_pretrained(root + "/init")
atexit.register(lambda: print("MODULES", json.dumps(dict(
    keras=keras_own, end=sorted(m for m in {HEAVY!r} if m in sys.modules)))))
sys.argv = ["run_classifier", f"--train_file={{root}}/train.csv",
            f"--validation_file={{root}}/dev.csv", f"--init_checkpoint={{root}}/init",
            f"--vocab_file={{root}}/vocab.txt", f"--output_dir={{root}}/out", "--do_train",
            "--do_eval", "--train_step=2", "--save_checkpoints_steps=2", "--max_seq_length=16",
            "--train_batch_size=4", "--eval_batch_size=4"]
runpy.run_module("albert_tf.run_classifier", run_name="__main__")
"""


def test_a_fine_tuning_run_without_export_imports_no_optional_package(tmp_path):
    """run_classifier trains and evaluates without --export_dir and imports none of the
    optional packages (tensorflow-text, Beam, LiteRT, the Hub libraries) beyond what Keras
    itself imports whenever it is installed (matplotlib and huggingface_hub, Keras 3.x)."""
    out = subprocess.run([sys.executable, "-c", _TINY_RUN, str(tmp_path)], capture_output=True,
                         text=True, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    modules = json.loads(out.stdout.split("MODULES ", 1)[1])
    assert set(modules["keras"]) <= {"matplotlib", "huggingface_hub"}, modules
    assert set(modules["end"]) == set(modules["keras"]), modules
