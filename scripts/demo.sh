#!/usr/bin/env bash
# The main job end to end on the bundled data, on CPU: SentencePiece vocabulary → pretraining
# records → pretraining of a tiny ALBERT (MLM + SOP, evaluated on a held-out novel).
# Everything lands in one folder (default demo_output/, or the first argument).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-demo_output}
STEPS=${DEMO_PRETRAIN_STEPS:-600}
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
PY=.venv/bin/python
mkdir -p "$OUT"
run() { echo; echo "+ $*"; "$@"; }

# Three novels train; Persuasion is held out for evaluation.
TRAIN_TEXT=data/corpus/pride_and_prejudice.txt,data/corpus/sense_and_sensibility.txt,data/corpus/emma.txt
run $PY -m albert_tf.train_vocab --input_file="$TRAIN_TEXT" --model_prefix="$OUT/spm" \
    --vocab_size=8000
run $PY -m albert_tf.create_pretraining_data --input_file="$TRAIN_TEXT" \
    --output_file="$OUT/pretrain/train.tfrecord" --spm_model_file="$OUT/spm.model" \
    --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=4
run $PY -m albert_tf.create_pretraining_data --input_file=data/corpus/persuasion.txt \
    --output_file="$OUT/pretrain/eval.tfrecord" --spm_model_file="$OUT/spm.model" \
    --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=1
run $PY -m albert_tf.run_pretraining --albert_config_file=configs/albert_demo.json \
    --input_file="$OUT/pretrain/train.tfrecord*" --eval_input_file="$OUT/pretrain/eval.tfrecord" \
    --output_dir="$OUT/pretrained" --max_seq_length=128 --max_predictions_per_seq=20 \
    --train_batch_size=64 --num_train_steps="$STEPS" --num_warmup_steps=60 \
    --learning_rate=4e-3 --save_checkpoints_steps=200 --log_steps=50 --do_eval \
    --eval_batch_size=64 --max_eval_steps=20

echo
echo "Last held-out evaluation ($OUT/pretrained/eval_results.txt):"
cat "$OUT/pretrained/eval_results.txt"
echo
echo "Everything is in $OUT/"
