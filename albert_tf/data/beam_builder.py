"""create_pretraining_data on Apache Beam: the same records as the local builder, built on a
runner's workers (DirectRunner here; Dataflow, Flink or Spark for a corpus past one machine).

Each input shard is one element: `Create(shards) | Reshuffle | ParDo(build one shard)`. A worker
runs build_records.build_shard on it, whose randomness is keyed by the shard's index, so every
output shard has the same bytes whichever runner, worker or retry builds it. An output is
written under a temporary name and renamed when complete, so a failed or retried bundle never
leaves a partial shard that a trainer would read. Paths may be local or any filesystem Beam
has (gs://, hdfs://, s3://): remote inputs and vocabularies are copied to the worker first.
"""

import dataclasses
import difflib
import logging as std_logging
import os
import shutil
import tempfile
import time
import types

import apache_beam as beam
from absl import logging
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options import pipeline_options as beam_options
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from albert_tf.data import build_records

COUNTERS = ("shards", "instances", "text_bytes")


class FilesystemFailure(RuntimeError):
    """A filesystem Beam reads or writes failed (permissions, a lost bucket): status 1."""
    exit_status = 1


def is_remote(path):
    return "://" in path


def match_inputs(patterns):
    """Files matching comma-separated globs (local or remote), sorted per pattern, without
    duplicates: the local builder's order, so shard indices (and records) agree."""
    if not any(is_remote(p) for p in patterns.split(",")):
        return build_records.expand_globs(patterns)
    files = []
    for pattern in (p.strip() for p in patterns.split(",") if p.strip()):
        found = sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
        if not found:
            raise build_records.InputError(f"No input file matches {pattern!r}")
        files.extend(f for f in found if f not in files)
    return files


# What the output checks ask of a remote path (an object store has no directories).
BEAM_FS = types.SimpleNamespace(exists=FileSystems.exists, isdir=lambda path: False,
                                open=FileSystems.open)


def _copy(source, target):
    with FileSystems.open(source) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


def _upload(local, final):
    """`local` to `final` through a temporary name: a reader never sees a partial file."""
    temporary = final + ".incomplete"
    with open(local, "rb") as src, FileSystems.create(temporary) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    if FileSystems.exists(final):  # a retry: the same bytes again (HDFS renames over no file)
        FileSystems.delete([final])
    FileSystems.rename([temporary], [final])


class BuildShard(beam.DoFn):
    """(shard index, input path, output paths) → the shard's records, written; emits
    (shard index, instances)."""

    def __init__(self, options):
        self.options = options

    def setup(self):
        self._staging = tempfile.mkdtemp(prefix="albert_tf_beam_")
        staged = {}
        for field in ("spm_model_file", "vocab_file"):
            path = getattr(self.options, field)
            if path and is_remote(path):
                staged[field] = os.path.join(self._staging, os.path.basename(path))
                _copy(path, staged[field])
        self._options = dataclasses.replace(self.options, **staged)
        self._counters = {name: Metrics.counter("albert_tf", name) for name in COUNTERS}

    def process(self, job):
        index, input_path, outputs = job
        work = tempfile.mkdtemp(dir=self._staging)
        try:
            local_input = input_path
            if is_remote(input_path):
                local_input = os.path.join(work, "input.txt")
                _copy(input_path, local_input)
            local_outputs = [os.path.join(work, f"output-{i}") if is_remote(o) else o
                             for i, o in enumerate(outputs)]
            instances, text_bytes, _ = build_records.build_shard(index, local_input,
                                                                 local_outputs, self._options)
            for local, final in zip(local_outputs, outputs):
                if local != final:
                    _upload(local, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self._counters["shards"].inc()
        self._counters["instances"].inc(instances)
        self._counters["text_bytes"].inc(text_bytes)
        yield index, instances

    def teardown(self):
        shutil.rmtree(self._staging, ignore_errors=True)


class _OptionsParser(beam_options._BeamArgumentParser):  # Beam's, with its value providers
    def error(self, message):  # argparse would print its usage and exit
        raise ValueError(f"Beam pipeline options: {message}")


def check_pipeline_args(args):
    """Beam's own parsing, as one line: a bad value always; an option Beam does not know (Beam
    only warns) with the DirectRunner, where no job server takes options of its own."""
    parser = _OptionsParser(allow_abbrev=False)
    for cls in {str(c): c for c in PipelineOptions.__subclasses__()}.values():
        cls._add_argparse_args(parser)
    known, unknown = parser.parse_known_args(args)
    unknown = [a for a in unknown if a.startswith("-")]
    if unknown and known.runner == "DirectRunner":
        names = [o for action in parser._actions for o in action.option_strings]
        hints = [difflib.get_close_matches(a.split("=", 1)[0], names, 1) for a in unknown]
        hint = "".join(f" (did you mean {h[0]}?)" for h in hints[:1] if h)
        raise ValueError(f"neither create_pretraining_data nor Beam knows "
                         f"{', '.join(unknown)}{hint}")


def _runner(options):
    """DirectRunner as Beam's in-process FnApiRunner, which honours direct_running_mode and
    direct_num_workers; Beam's own DirectRunner first tries to download its Prism runner."""
    if options.view_as(StandardOptions).runner != "DirectRunner":
        return None
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    direct = options.view_as(DirectOptions)
    logging.info("DirectRunner: Beam's in-process FnApiRunner, direct_running_mode=%s, "
                 "direct_num_workers=%d", direct.direct_running_mode, direct.direct_num_workers)
    return fn_runner.FnApiRunner()


def build(input_file, output_file, options, pipeline_args, overwrite=False):
    """The local builder's checks, then every shard built by the Beam pipeline that
    `pipeline_args` (--runner=… and Beam's own options) describe. Returns the output files."""
    try:
        return _build(input_file, output_file, options, pipeline_args, overwrite)
    except BeamIOError as e:
        raise FilesystemFailure(f"{' '.join(str(e).split())}; the shards already complete are "
                                f"whole, the others absent") from None


def _build(input_file, output_file, options, pipeline_args, overwrite):
    check_pipeline_args(pipeline_args)
    inputs, outputs = build_records.check_build(input_file, output_file, options, overwrite,
                                                match_inputs, BEAM_FS)
    build_records.remove_earlier_build(build_records.earlier_build(output_file, outputs))
    pipeline_options = PipelineOptions(pipeline_args)
    jobs = [(i, path, outs) for i, (path, outs) in enumerate(zip(inputs, outputs))]
    logging.info("Building %d shard(s) on Apache Beam (%s)", len(jobs), " ".join(pipeline_args))
    std_logging.getLogger("apache_beam").setLevel(std_logging.WARNING)
    # A shard's error reaches this process and ends the tool with its one line; in-process
    # workers would log it with a traceback first.
    std_logging.getLogger("apache_beam.runners.worker.bundle_processor").setLevel(
        std_logging.CRITICAL)
    start = time.time()
    pipeline = beam.Pipeline(runner=_runner(pipeline_options), options=pipeline_options)
    _ = (pipeline | "Shards" >> beam.Create(jobs) | "Spread" >> beam.Reshuffle()
         | "Build" >> beam.ParDo(BuildShard(options)))
    result = pipeline.run()
    result.wait_until_finish()
    seconds = time.time() - start
    totals = {name: 0 for name in COUNTERS}
    for counter in result.metrics().query(MetricsFilter().with_namespace("albert_tf"))[
            "counters"]:
        totals[counter.key.metric.name] += counter.committed or 0
    text_mb = totals["text_bytes"] / 1e6
    logging.info("Wrote %d instances from %.2f MB of text (x%d copies) in %d shards in %.2f s: "
                 "%.2f MB/s of text copies", totals["instances"], text_mb, options.dupe_factor,
                 totals["shards"], seconds, text_mb * options.dupe_factor / max(seconds, 1e-9))
    return [o for outs in outputs for o in outs]
