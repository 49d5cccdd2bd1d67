"""bench/gpu/compile_offline.py and dump_hlo.py: a user's mistake is one line, and --dump
never replaces a file (the compiling itself needs jaxlib's CUDA plugin: bench/gpu/README.md);
hlo_costs.py's floor, and the GPU harness's batch bisection and peer step."""

import gzip
import os
import subprocess
import sys

import pytest

from albert_tf.modeling import kernels
from conftest import peers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "bench", "gpu", "compile_offline.py")
sys.path.insert(0, os.path.dirname(TOOL))
import gpu_step_bench  # noqa: E402
import hlo_costs  # noqa: E402


def _run(*args):
    done = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                          timeout=120, check=False)
    return done.returncode, done.stderr.strip().splitlines()


def test_mistakes_are_one_line_and_dump_replaces_nothing(tmp_path):
    hlo, dump = tmp_path / "hlo", tmp_path / "dump"
    hlo.mkdir()
    dump.mkdir()
    assert _run("modules", str(tmp_path / "none")) == (
        1, [f"modules: no folder {tmp_path / 'none'} (write one with dump_hlo.py)"])
    assert _run("modules", str(hlo))[1] == [
        f"modules: {hlo} holds no .hlo.pb.gz module (write them with dump_hlo.py)"]
    with gzip.open(hlo / "a.hlo.pb.gz", "wb") as f:
        f.write(b"not compiled here")
    assert _run("modules", str(hlo), "--only", "a,b")[1] == [f"modules: not in {hlo}: b"]
    (dump / "a.opt.hlo.gz").write_bytes(b"the user's")
    assert _run("modules", str(hlo), "--dump", str(dump))[1] == [
        f"--dump: {dump} already holds a.opt.hlo.gz; move them or dump elsewhere"]
    assert (dump / "a.opt.hlo.gz").read_bytes() == b"the user's"
    assert _run("largest", "albert_base_v2", "--tf_python", sys.executable)[1] == [
        "largest: 'albert_base_v2': write config:seq, e.g. albert_base_v2:512"]
    assert _run("largest", "albert_base_v2:512")[1] == [
        "largest: --tf_python is required: the path of a Python with TensorFlow and albert_tf "
        "(got '')"]


def test_unknown_rewrites_are_named():
    with pytest.raises(ValueError, match="unknown rewrites nonsense: use none or some of "
                                         "key_bias,value_bias"):
        kernels.check_rewrites(["gelu", "nonsense"])
    assert kernels.check_rewrites(["gelu"]) == ["gelu"]


# One Triton GEMM fusion, one cuBLAS GEMM, cuDNN attention's forward and backward and one
# elementwise fusion, as XLA's optimized HLO prints them.
_HLO = """HloModule m

%gemm_fusion_dot.1_computation (parameter_0.1: bf16[64,32], parameter_1.1: bf16[32,16]) -> bf16[64,16] {
  %parameter_0.1 = bf16[64,32]{1,0} parameter(0)
  %parameter_1.1 = bf16[32,16]{1,0} parameter(1)
  ROOT %dot.1 = bf16[64,16]{1,0} dot(%parameter_0.1, %parameter_1.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_add (param_0: bf16[64,16], param_1: bf16[64,16]) -> bf16[64,16] {
  %param_0 = bf16[64,16]{1,0} parameter(0)
  %param_1 = bf16[64,16]{1,0} parameter(1)
  ROOT %add.1 = bf16[64,16]{1,0} add(%param_0, %param_1)
}

ENTRY %main (p0: bf16[64,32], p1: bf16[32,16], q: bf16[2,8,4,16]) -> bf16[64,16] {
  %p0 = bf16[64,32]{1,0} parameter(0)
  %p1 = bf16[32,16]{1,0} parameter(1)
  %q = bf16[2,8,4,16]{3,2,1,0} parameter(2)
  %gemm_fusion_dot.1 = bf16[64,16]{1,0} fusion(%p0, %p1), kind=kCustom, calls=%gemm_fusion_dot.1_computation, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  %custom-call.1 = (bf16[64,16]{1,0}, s8[1024]{0}) custom-call(%p0, %p1), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}
  %custom-call.2 = (bf16[2,4,8,16]{3,2,1,0}, f32[2,4,8]{2,1,0}) custom-call(%q, %q, %q), custom_call_target="__cudnn$fmhaSoftmax", backend_config={"cudnn_fmha_backend_config": {"intermediate_tensor_shape": {"element_type": "BF16", "dimensions": ["2", "4", "8", "8"]}}}
  %custom-call.3 = (bf16[2,8,4,16]{3,2,1,0}, bf16[2,8,4,16]{3,2,1,0}, bf16[2,8,4,16]{3,2,1,0}) custom-call(%q, %q, %q), custom_call_target="__cudnn$fmhaSoftmaxBackward", backend_config={"cudnn_fmha_backend_config": {"intermediate_tensor_shape": {"element_type": "BF16", "dimensions": ["2", "4", "8", "8"]}}}
  %get-tuple-element.1 = bf16[64,16]{1,0} get-tuple-element(%custom-call.1), index=0
  ROOT %loop_add_fusion = bf16[64,16]{1,0} fusion(%gemm_fusion_dot.1, %get-tuple-element.1), kind=kLoop, calls=%fused_add
}
"""  # noqa: E501


def test_floor_counts_gemm_and_attention_flops_and_memory_bound_bytes():
    table = hlo_costs.kernels(_HLO)
    flops = {name: (hlo_costs.category(name, info), info["flops"]) for name, info in table.items()}
    assert flops == {"gemm_fusion_dot_1": ("matmul", 2 * 64 * 16 * 32),
                     "custom_call_1": ("matmul", 2 * 64 * 16 * 32),
                     # forward: Q.K and P.V over [2 batch, 4 heads, 8 x 8], head size 16
                     "custom_call_2": ("attention (cuDNN)", 2 * 2 * 2 * 4 * 8 * 8 * 16),
                     # backward: Q.K again, dV, dP, dQ, dK
                     "custom_call_3": ("attention (cuDNN)", 2 * 5 * 2 * 4 * 8 * 8 * 16),
                     "loop_add_fusion": ("elementwise fusions", 0)}
    # 1e-6 TFLOP/s is 1e6 FLOP/s: 131072 FLOPs of GEMMs take 131.072 ms, 114688 of attention
    # 114.688 ms; the elementwise fusion reads two and writes one 64 x 16 bf16 array (6144
    # bytes) at 1e-6 GB/s.
    assert hlo_costs.floor(_HLO, 1e-6, 1e-6) == dict(
        matmul_ms=131.072, attention_ms=114.688, memory_ms=6144.0, floor_ms=6389.76)


def test_largest_batch_doubles_then_bisects_to_a_multiple_of_eight():
    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= 203

    assert gpu_step_bench.bisect_batch(fits) == (200, 208)
    assert tried == [8, 16, 32, 64, 128, 256, 192, 224, 208, 200]
    assert gpu_step_bench.bisect_batch(lambda batch: False) == (0, 8)


def test_the_peer_step_of_the_gpu_harness_trains():
    peers()  # skips where PyTorch is not installed (Python 3.12/3.13: setup.py)
    meta = dict(vocab=64, emb=8, hidden=16, layers=2, inter=32, batch=2, seq=16, preds=3)
    _, step = gpu_step_bench.torch_pretraining(meta, batch=4, device="cpu")
    losses = [float(step().detach()) for _ in range(5)]
    assert losses[-1] < losses[0]


def test_the_session_script_says_how_to_call_it(tmp_path):
    script = os.path.join(ROOT, "bench", "gpu", "session.sh")
    usage = "usage: bash bench/gpu/session.sh dump OUT [PYTHON]  (here) | run OUT 1|2|3  (there)"
    for args, first in (([], None), (["frob", "x"], "session.sh: dump or run, not frob"),
                        (["run", "x", "4"], "session.sh: part 1, 2 or 3, not '4'")):
        done = subprocess.run(["bash", script, *args], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 2
        assert done.stderr.splitlines() == ([first] if first else []) + [usage]
    done = subprocess.run(["bash", script, "run", "/nowhere", "3"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (2, (
        "session.sh: not in /nowhere: v1base512_plain v1base512_fused att_dropout_fused "
        + " ".join(f"lb_{gpu}_{size}_auto" for gpu in ("h100", "h200")
                   for size in ("base", "large", "xxlarge"))
        + " (write them here with: session.sh dump /nowhere)\n"))
    modules = tmp_path / "hlo"
    modules.mkdir()
    for name in ("base128", "base512", "large512", "xxlarge512"):
        for when in ("before", "after"):
            (modules / f"{name}_{when}_auto.hlo.pb.gz").write_bytes(b"")
    (tmp_path / "part1.log").write_text("the user's")
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    for out, message in ((None, "session.sh: set OUT to a folder for the logs (the run tool "
                                "sets it)"),
                         (tmp_path, f"session.sh: {tmp_path} already holds part1.log or dump1; "
                                    f"give OUT a new folder")):
        done = subprocess.run(["bash", script, "run", str(modules), "1"], capture_output=True,
                              text=True, timeout=60, check=False,
                              env=dict(env, OUT=str(out)) if out else env)
        assert (done.returncode, done.stderr) == (2, message + "\n")
    assert (tmp_path / "part1.log").read_text() == "the user's"
