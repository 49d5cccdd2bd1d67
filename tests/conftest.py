import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# XLA's CPU backend compiles without LLVM's optimisation passes: the same programs and results,
# compiled faster (the tests' models are tiny; their compile time is what the suite waits for).
# Subprocesses of the tests inherit it.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
# Under pytest-xdist each worker (and the tools it starts) gets its share of the cores for
# TensorFlow's op threads, instead of every worker spreading over all of them.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(max(
        1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

import gc  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tool_runner import own_flags  # noqa: E402

# triton before TensorFlow, in every test process (pytest imports this file before any test
# module), where it is installed: the kernel compiler of PyTorch's CUDA builds, loaded by
# torch._dynamo (as transformers' models load it). It and TensorFlow each carry LLVM, and
# triton's loaded after TensorFlow's killed the process (issue 62; tests/test_import_order.py).
try:
    import triton  # noqa: E402,F401
except ModuleNotFoundError:
    pass
NO_TORCH = ("torch is not installed (the test extra has it on Python 3.11 only: setup.py), so "
            "the parity with transformers' PyTorch models is not checked here")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: end-to-end runs of the tools (the full suite); `pytest -m 'not slow'` "
                   "is the fast tier for the edit-test loop")


# The files that take longest (measured with --durations), in that order. `--dist
# loadfile` hands each worker the next file in collection order when it is free: the longest
# first, so that the suite does not end on one worker running a long file while the others idle.
LONGEST_FILES = ("test_training.py", "test_resume.py", "test_run_squad.py", "test_own_data.py",
                 "test_keras_fit.py", "test_chinese_release.py", "test_excursions.py",
                 "test_export.py", "test_attention.py", "test_run_classifier.py",
                 "test_data_service.py", "test_resume_multi_worker.py", "test_predict.py",
                 "test_run_race.py", "test_export_finetuned.py", "test_user_mistakes.py",
                 "test_lite.py", "test_finetuning_update.py", "test_run_ner.py",
                 "test_classifier.py", "test_demo.py", "test_clue.py", "test_original_commands.py",
                 "test_brightmart.py", "test_notebook.py", "test_run_lock.py",
                 "test_interrupts.py", "test_disk_full.py")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """With ALBERT_TF_TEST_RUSAGE=<file>, appends each test's wall time, this process's CPU time,
    its waited-for children's CPU time, major page faults and involuntary context switches: a
    test far slower in the suite than alone either waited or computed, and this tells which.
    With ALBERT_TF_TEST_STACKS_AFTER=<seconds> too, every thread's stack goes to <file>.stacks
    when a test runs longer: where it waits."""
    path = os.environ.get("ALBERT_TF_TEST_RUSAGE")
    if not path:
        return (yield)
    import faulthandler
    import resource
    import time
    after = float(os.environ.get("ALBERT_TF_TEST_STACKS_AFTER", 0))
    stacks = open(f"{path}.stacks", "a") if after else None
    if stacks:
        stacks.write(f"\n== {item.nodeid} {os.environ.get('PYTEST_XDIST_WORKER', '-')}\n")
        stacks.flush()
        faulthandler.dump_traceback_later(after, file=stacks)
    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                    resource.RUSAGE_CHILDREN)]
    start = time.monotonic()
    try:
        return (yield)
    finally:
        wall = time.monotonic() - start
        if stacks:
            faulthandler.cancel_dump_traceback_later()
            stacks.close()
        own, kids = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN)]
        cpu = [a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime
               for a, b in zip((own, kids), before)]
        with open(path, "a") as f:
            f.write(f"{item.nodeid}\t{os.environ.get('PYTEST_XDIST_WORKER', '-')}\t"
                    f"{wall:.2f}\t{cpu[0]:.2f}\t{cpu[1]:.2f}\t"
                    f"{own.ru_majflt - before[0].ru_majflt}\t"
                    f"{own.ru_nivcsw - before[0].ru_nivcsw}\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Frees what a test left in reference cycles right after it, then freezes what survives
    (gc.freeze: later collections skip it). Left to Python's own full collections, the garbage
    of earlier tests was collected inside later ones: each full pass walked every object the
    process had built (1.3 s on average) and each dropped tf.data iterator waited up to a minute
    for its autotuning thread to end."""
    start = time.monotonic()
    try:
        return (yield)
    finally:
        if time.monotonic() - start > 1:
            took = time.monotonic()
            gc.collect()
            gc.freeze()
            path = os.environ.get("ALBERT_TF_TEST_RUSAGE")
            if path:
                with open(f"{path}.gc", "a") as f:
                    f.write(f"{item.nodeid}\t{time.monotonic() - took:.2f}\n")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept


# A tiny ALBERT with every structural feature: E != H, 2 groups of 2 inner blocks, 4 layers.
TINY = dict(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=4,
            num_hidden_groups=2, inner_group_num=2, num_attention_heads=2, intermediate_size=24,
            max_position_embeddings=32, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
# One shared block run twice: for tests of training and its precisions, resumes and compiled
# steps, where the grouping does not matter and half the layers trace and compile in half
# the time.
SMALL = dict(TINY, num_hidden_layers=2, num_hidden_groups=1, inner_group_num=1)


@pytest.fixture
def tiny_config():
    from albert_tf import AlbertConfig
    return AlbertConfig(**TINY)


@pytest.fixture
def batch():
    """Two sequences with padding and two segments, plus masked positions."""
    ids = np.array([[2, 5, 6, 7, 3, 9, 10, 3, 0, 0], [2, 11, 12, 3, 13, 14, 15, 16, 17, 3]],
                   np.int32)
    types = np.array([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]], np.int32)
    return {"input_word_ids": ids, "input_mask": (ids != 0).astype(np.int32),
            "input_type_ids": types,
            "masked_lm_positions": np.array([[1, 2, 5], [3, 4, 6]], np.int32)}


def peers():
    """(torch, transformers) for a parity check against transformers' PyTorch models; skips the
    calling test, saying why, where PyTorch is not installed."""
    # Here, not at the top: 5 s of imports that most test processes never need.
    try:
        import torch
    except ModuleNotFoundError:
        pytest.skip(NO_TORCH)
    import transformers
    return torch, transformers


@pytest.fixture(scope="session")
def hf_albert(tmp_path_factory):
    """A transformers AlbertForPreTraining with random non-trivial weights, saved to disk."""
    torch, transformers = peers()
    torch.manual_seed(0)
    config = transformers.AlbertConfig(**TINY)
    model = transformers.AlbertForPreTraining(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    path = tmp_path_factory.mktemp("hf_albert")
    model.save_pretrained(str(path))
    return model, str(path)


def torch_outputs(model, batch):
    """Reference outputs of a transformers AlbertForPreTraining on `batch`."""
    torch, _ = peers()
    ids = torch.tensor(batch["input_word_ids"], dtype=torch.long)
    kwargs = dict(attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                  token_type_ids=torch.tensor(batch["input_type_ids"], dtype=torch.long))
    with torch.no_grad():
        full = model(input_ids=ids, **kwargs)
        base = model.albert(input_ids=ids, **kwargs)
    positions = batch["masked_lm_positions"]
    mlm = np.take_along_axis(full.prediction_logits.numpy(), positions[:, :, None], axis=1)
    return {"sequence_output": base.last_hidden_state.numpy(),
            "pooled_output": base.pooler_output.numpy(), "mlm_logits": mlm,
            "sop_logits": full.sop_logits.numpy()}


def write_pretraining_records(path, num, seq=16, preds=4, vocab=60, seed=0):
    """Random records in the original pretraining schema (int64 lists, float weights)."""
    import tensorflow as tf
    rng = np.random.default_rng(seed)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(num):
            length = int(rng.integers(seq // 2, seq + 1))
            ids = np.zeros(seq, np.int64)
            ids[:length] = rng.integers(5, vocab, length)
            ids[0], ids[length - 1] = 2, 3
            mask = (np.arange(seq) < length).astype(np.int64)
            segment = ((np.arange(seq) >= length // 2) & (mask == 1)).astype(np.int64)
            n = int(rng.integers(1, preds + 1))
            positions = np.zeros(preds, np.int64)
            positions[:n] = np.sort(rng.choice(np.arange(1, length - 1), n, replace=False))
            labels = np.where(np.arange(preds) < n, ids[positions], 0)
            weights = (np.arange(preds) < n).astype(np.float32)
            feature = {"input_ids": ints(ids), "input_mask": ints(mask),
                       "segment_ids": ints(segment), "token_boundary": ints(mask),
                       "masked_lm_positions": ints(positions), "masked_lm_ids": ints(labels),
                       "masked_lm_weights": tf.train.Feature(
                           float_list=tf.train.FloatList(value=weights)),
                       "next_sentence_labels": ints([rng.integers(0, 2)])}
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=feature)).SerializeToString())
    return str(path)


def run_main(module, defaults, overrides):
    """Parses absl flags from keyword arguments (bools as --x/--nox) and runs `module.main` in
    this process, logging INFO as the scripts do; returns what main returns. The module's own
    flags only (tool_runner.own_flags): a flag another tool defines too (run_pretraining's
    --do_train, on by default) keeps this tool's default whichever was imported first."""
    from absl import flags
    args = {"verbosity": 0, **defaults, **overrides}
    argv = [module.__name__]
    for key, value in args.items():
        if isinstance(value, bool):
            argv.append(f"--{key}" if value else f"--no{key}")
        elif value is not None:
            argv.append(f"--{key}={value}")
    with own_flags():
        module.define_flags()
        flags.FLAGS(argv)
        try:
            return module.main(None)
        finally:
            flags.FLAGS.unparse_flags()


# The accelerator paths pretraining is tested under: (--mixed_precision, --jit_compile).
PRECISION_MATRIX = [(p, x) for p in ("none", "bfloat16", "float16") for x in ("false", "true")]
# The fine-tuning scripts' matrix: each precision op by op, and XLA as a TPU (and a GPU from
# Ampere on) runs it, in bfloat16. The other XLA cells run the same trainer step with another
# head; pretraining's matrix and resume tests compile them.
SCRIPT_MATRIX = [("none", "false"), ("bfloat16", "false"), ("float16", "false"),
                 ("bfloat16", "true")]
# A short run's metric under bfloat16/float16 (or XLA) stays this close to float32's with the
# same seed: |value - float32 value| <= MATRIX_ABS + MATRIX_REL * |float32 value|.
MATRIX_ABS, MATRIX_REL = 0.05, 0.05


def memoized_runs(root, run_one):
    """`get(*key)` → the output directory of `run_one(out, *key)`, each key run once (the
    matrix tests share one run per cell with the other tests of their module); the run's
    log lines (run_main logs INFO) are in its log.txt."""
    import logging
    runs = {}

    def get(*key):
        if key not in runs:
            runs[key] = root / "-".join(key)
            lines, handler = [], logging.Handler()
            handler.emit = lambda record: lines.append(record.getMessage())
            logging.getLogger("absl").addHandler(handler)
            try:
                run_one(runs[key], *key)
            finally:
                logging.getLogger("absl").removeHandler(handler)
            (runs[key] / "log.txt").write_text("\n".join(lines))
        return runs[key]
    return get


def assert_step_compiled(out, jit):
    """The run in `out` trained its one-device step as one XLA computation (forward, backward,
    update) with --jit_compile=true, and without XLA otherwise."""
    expected = ("forward, backward and update compiled as one XLA computation" if jit == "true"
                else "TensorFlow ops, XLA only in each variable's optimizer update")
    lines = [line for line in (out / "log.txt").read_text().splitlines() if "Training steps" in line]
    assert lines and all(line.endswith(f": {expected}") for line in lines), lines


def assert_near_float32(results, reference, keys, scale=1.0):
    """`scale`: the metrics' unit (100 for SQuAD's percentages)."""
    import math
    for key in keys:
        value, expected = float(results[key]) / scale, float(reference[key]) / scale
        assert math.isfinite(value), (key, results)
        assert abs(value - expected) <= MATRIX_ABS + MATRIX_REL * abs(expected), (
            key, value, expected)


@pytest.fixture(autouse=True)
def absl_logging_level_after_each_test():
    """A TFLite conversion leaves absl's logger at WARNING (TensorFlow's converter sets it): a
    later test of the same process would see none of the tools' INFO lines in caplog."""
    logger = logging.getLogger("absl")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture(autouse=True)
def float32_policy_after_each_test():
    """A script run under a mixed precision leaves its global Keras policy behind."""
    yield
    import keras
    keras.mixed_precision.set_global_policy("float32")


def free_ports(count):
    """`count` TCP ports free on 127.0.0.1 (the usual race: another process may take one)."""
    import socket
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def start_local_workers(argv, cwd, count=2, stdout=None):
    """`count` processes of `argv` forming one multi-worker job on 127.0.0.1 (TF_CONFIG), with
    stderr captured as text."""
    import json
    import subprocess
    workers = [f"127.0.0.1:{port}" for port in free_ports(count)]
    procs = []
    for index in range(count):
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout or subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    return procs


def saved_graph(saved_model_dir):
    """(op types of the saved graph and its functions, names of the functions marked for XLA)."""
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    graph = proto.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node} | {n.op for fn in graph.library.function
                                         for n in fn.node_def}
    return ops, [fn.signature.name for fn in graph.library.function
                 if fn.attr["_XlaMustCompile"].b]
