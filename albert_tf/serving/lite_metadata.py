"""The ids-in LiteRT files that the TFLite Task Library runs as they are (`BertNLClassifier`,
`BertQuestionAnswerer`): TFLite model metadata (tflite-support's `metadata_schema.fbs`, file
identifier "M001") written with `flatbuffers`, with the tokenizer and labels packed in."""

import io
import os
import zipfile

import flatbuffers
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema

from albert_tf.tokenization.vocabulary import SENTENCEPIECE, vocabulary_kind

# The Task Library finds the encoder inputs by these metadata names.
INPUT_NAMES = {"input_word_ids": "ids", "input_mask": "mask", "input_type_ids": "segment_ids"}
# The highest schema version our fields need (input process units, tokenizer options).
MIN_PARSER_VERSION = "1.1.0"
METADATA_NAME = "TFLITE_METADATA"
LABELS_FILE = "labels.txt"

# metadata_schema.fbs: AssociatedFileType and the ProcessUnitOptions union's type ids.
_TENSOR_AXIS_LABELS, _VOCABULARY = 2, 5
_BERT_TOKENIZER, _SENTENCEPIECE_TOKENIZER = 4, 5


class _Table:
    """A flatbuffer table: its fields by slot (None: absent); a field is a str, a list of
    tables, a table, or an int (a byte or a union's type)."""

    def __init__(self, *fields):
        self.fields = fields


def _build(builder, value):
    if isinstance(value, str):
        return builder.CreateString(value)
    if isinstance(value, list):
        offsets = [_build(builder, v) for v in value]
        builder.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            builder.PrependUOffsetTRelative(offset)
        return builder.EndVector()
    children = {slot: _build(builder, v) for slot, v in enumerate(value.fields)
                if v is not None and not isinstance(v, int)}
    builder.StartObject(len(value.fields))
    for slot, v in enumerate(value.fields):
        if isinstance(v, int):
            builder.PrependUint8Slot(slot, v, 0)
        elif slot in children:
            builder.PrependUOffsetTRelativeSlot(slot, children[slot], 0)
    return builder.EndObject()


def _file(name, description, file_type=None):
    """AssociatedFile {name, description, type, locale, version}."""
    return _Table(name, description, file_type, None, None)


def _tensor(name, description, files=None):
    """TensorMetadata {name, description, dimension_names, content, process_units, stats,
    associated_files}."""
    return _Table(name, description, None, None, None, None, files)


def _tokenizer(vocabulary_name, sentencepiece):
    """ProcessUnit {options_type, options}: SentencePieceTokenizerOptions {sentencePiece_model,
    vocab_file} or BertTokenizerOptions {vocab_file}."""
    if sentencepiece:
        return _Table(_SENTENCEPIECE_TOKENIZER, _Table(
            [_file(vocabulary_name, "The SentencePiece model.")], None))
    return _Table(_BERT_TOKENIZER, _Table(
        [_file(vocabulary_name, "The WordPiece vocabulary.", _VOCABULARY)]))


def metadata(input_names, outputs, vocabulary_name, sentencepiece, name, description):
    """ModelMetadata bytes: `input_names` (the encoder inputs, in the subgraph's order),
    `outputs` ([(metadata name, description, associated files)], in the subgraph's order), the
    tokenizer as the first input process unit."""
    subgraph = _Table(None, None,                                    # name, description
                      [_tensor(INPUT_NAMES[k], f"{k} (int32 [1, seq_length])")
                       for k in input_names],                        # input_tensor_metadata
                      [_tensor(*o) for o in outputs],                # output_tensor_metadata
                      None,                                          # associated_files
                      [_tokenizer(vocabulary_name, sentencepiece)])  # input_process_units
    model = _Table(name, description, None, [subgraph], None, None, None, MIN_PARSER_VERSION)
    builder = flatbuffers.Builder(1024)
    builder.Finish(_build(builder, model), file_identifier=b"M001")
    return bytes(builder.Output())


def task_library_model(flatbuffer, vocabulary, outputs, labels=None, name="", description=""):
    """An ids-in flatbuffer (`model_to_tflite`'s, any quantization) as the Task Library runs it:
    only the signature outputs named in `outputs` ({signature output: Task Library name}, e.g.
    {"probabilities": "probability"}), the three inputs named ids / mask / segment_ids, the
    vocabulary (SentencePiece model or WordPiece vocab.txt) and `labels` (class names, the
    first output's labels.txt) packed into the file."""
    model = schema.ModelT.InitFromPackedBuf(bytearray(flatbuffer), 0)
    signature, subgraph = model.signatureDefs[0], model.subgraphs[0]
    by_index = {t.tensorIndex: t.name.decode() for t in signature.inputs}
    input_names = [by_index[i] for i in subgraph.inputs]
    outputs_by_name = {t.name.decode(): t for t in signature.outputs}
    missing = [k for k in outputs if k not in outputs_by_name]
    if missing or sorted(by_index.values()) != sorted(INPUT_NAMES):
        raise ValueError(f"the Task Library's file needs the encoder inputs {sorted(INPUT_NAMES)}"
                         f" and the outputs {list(outputs)}; this .tflite has the inputs "
                         f"{sorted(by_index.values())} and the outputs {sorted(outputs_by_name)}")
    kept = [outputs_by_name[k] for k in outputs]
    subgraph.outputs = [t.tensorIndex for t in kept]
    signature.outputs = kept
    vocabulary_name = os.path.basename(os.fspath(vocabulary))
    with tf.io.gfile.GFile(os.fspath(vocabulary), "rb") as f:
        files = {vocabulary_name: f.read()}
    described = []
    for key, t in zip(outputs, kept):
        label_file = None
        if labels and not described:
            label_file = [_file(LABELS_FILE, "The class names.", _TENSOR_AXIS_LABELS)]
            files[LABELS_FILE] = "".join(f"{label}\n" for label in labels).encode()
        described.append((outputs[key], key, label_file))
    buffer = schema.BufferT()
    buffer.data = list(metadata(input_names, described, vocabulary_name,
                                vocabulary_kind(vocabulary) == SENTENCEPIECE,
                                name, description))
    entry = schema.MetadataT()
    entry.name, entry.buffer = METADATA_NAME, len(model.buffers)
    model.buffers.append(buffer)
    model.metadata = (model.metadata or []) + [entry]
    builder = flatbuffers.Builder(len(flatbuffer) + 4096)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    # The associated files: a zip archive after the flatbuffer, as tflite-support packs them.
    out = io.BytesIO(bytes(builder.Output()))
    out.seek(0, io.SEEK_END)
    with zipfile.ZipFile(out, "a") as archive:
        for file_name, data in files.items():
            archive.writestr(file_name, data)
    return out.getvalue()

