"""triton is imported before TensorFlow in every process that may hold both: the kernel compiler
of PyTorch's CUDA builds (the registry's only builds for Python 3.12 and 3.13), loaded by
torch._dynamo, as transformers' models load it. It and TensorFlow each carry LLVM; triton's
loaded second killed the process: a segmentation fault in triton/knobs.py on 3.12 (issue 62),
and with triton 3.9 beside the CPU build on 3.11, `import tensorflow; import torch; import
torch._dynamo` (and `import torch; import tensorflow; import torch._dynamo`) exits 134 with
"LLVM ERROR: inconsistency in registered CommandLine options", where `import triton; import
tensorflow; import torch; import torch._dynamo` works, XLA and transformers' models included.
triton is in no extra here (PyTorch's CPU build does not use it), so this is checked by reading
the files, and in this process."""

import ast
import importlib.util
import pathlib
import subprocess
import sys

import tensorflow  # noqa: F401  (the order in this process is what the first test checks)

from conftest import peers

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIRST = {"triton", "triton_first"}  # bench/triton_first.py imports triton where installed
PEERS = {"torch", "transformers"}  # transformers' models import torch
# What loads TensorFlow: it, what is built on it, and bench/'s tools (which import it).
TENSORFLOW = ({"tensorflow", "keras", "albert_tf", "keras_hub", "tensorflow_text",
               "tensorflow_hub", "tf_keras", "ai_edge_litert"}
              | {path.stem for path in (ROOT / "bench").glob("*.py")}) - FIRST


def _names(node):
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return {node.module.split(".")[0]}
    return set()


def _anywhere(path):
    return set().union(*map(_names, ast.walk(ast.parse(path.read_text()))))


def _late(path):
    """None, or what is wrong with the order of `path`, a file that uses PyTorch: the line that
    imports TensorFlow (or a module that does) before triton at the top of the file."""
    for statement in ast.parse(path.read_text()).body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # their imports run later, when called
        names = set().union(*map(_names, ast.walk(statement)))  # in a try or an if too
        if names & FIRST:
            return None
        if names & TENSORFLOW:
            return f"{path.relative_to(ROOT)}:{statement.lineno} imports {sorted(names)} first"
    return f"{path.relative_to(ROOT)}: no triton import at the top"


def test_this_process_imported_triton_before_tensorflow():
    """conftest.py imports triton where it is installed, before any test module loads
    TensorFlow."""
    order = list(sys.modules)
    assert "tensorflow" in order
    if importlib.util.find_spec("triton") is None:
        assert "triton" not in order
    else:
        assert order.index("triton") < order.index("tensorflow"), order


def test_every_tool_that_runs_pytorch_imports_triton_before_tensorflow():
    """The test processes (conftest.py) and bench/'s tools; bench/gpu/ runs where there is no
    TensorFlow, and the package itself only reads pytorch_model.bin (the next test)."""
    paths = [ROOT / "tests" / "conftest.py", *(ROOT / "bench").glob("*.py"),
             *(ROOT / "scripts").glob("*.py")]
    users = [path for path in paths if _anywhere(path) & PEERS]
    assert {path.name for path in users} >= {
        "conftest.py", "bench_pretraining.py", "bench_inference.py", "bench_lite.py",
        "bench_finetune_stability.py"}, users
    late = [problem for problem in map(_late, users) if problem]
    assert not late, late


def test_reading_a_pytorch_bin_after_tensorflow_loads_no_torch_dynamo(tmp_path):
    """albert_tf/formats/hf.py imports torch after TensorFlow, to torch.load a pytorch_model.bin:
    torch itself and torch.load (of the CPU build here) load neither torch._dynamo nor triton."""
    torch, _ = peers()
    torch.save({"w": torch.ones(2)}, tmp_path / "pytorch_model.bin")
    code = ("import sys\n"
            "from albert_tf.formats.hf import read_hf_state\n"
            "print(list(read_hf_state(sys.argv[1])), list(sys.modules).index('tensorflow') < "
            "list(sys.modules).index('torch'), [m for m in sys.modules "
            "if m.startswith(('torch._dynamo', 'triton'))])")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "pytorch_model.bin")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.stdout == "['w'] True []\n", done.stderr[-3000:]
