#!/usr/bin/env bash
# The main job end to end on the bundled data, on CPU: SentencePiece vocabulary → pretraining
# records → pretraining of a tiny ALBERT (MLM + SOP, evaluated on a held-out novel) →
# fine-tuning on the bundled SST-2-format task → TF-Hub / serving exports → a fill-mask and a
# classification prediction from the exported models.
# Everything lands in one folder (default demo_output/, or the first argument).
set -euo pipefail
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
cd "$(dirname "$0")/.."
OUT=${1:-demo_output}
STEPS=${DEMO_PRETRAIN_STEPS:-500}
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
echo "Pretraining, last held-out evaluation ($OUT/pretrained/eval_results.txt):"
cat "$OUT/pretrained/eval_results.txt"

# Which of two held-out novels a sentence comes from (data/glue/SST-2, see data/README.md).
run $PY -m albert_tf.run_classifier --task_name=sst-2 --data_dir=data/glue \
    --init_checkpoint="$OUT/pretrained" --spm_model_file="$OUT/spm.model" \
    --output_dir="$OUT/finetuned" --do_train --do_eval --do_predict \
    --export_dir="$OUT/export/classifier" --max_seq_length=64 --train_batch_size=32 \
    --eval_batch_size=64 --predict_batch_size=64 --learning_rate=1e-4 --optimizer=adamw \
    --num_train_epochs=3 --warmup_proportion=0.1 --save_checkpoints_steps=140 --log_steps=50
echo
echo "Fine-tuning, best dev checkpoint ($OUT/finetuned/eval_results.txt; majority baseline 0.5):"
cat "$OUT/finetuned/eval_results.txt"

run $PY -m albert_tf.export_hub --export_type=pretrainer --init_checkpoint="$OUT/pretrained" \
    --spm_model_file="$OUT/spm.model" --export_path="$OUT/export/pretrainer"
run $PY -m albert_tf.export_hub --export_type=preprocessor --spm_model_file="$OUT/spm.model" \
    --export_path="$OUT/export/preprocessor"
run $PY -m albert_tf.predict --task=fill_mask --model="$OUT/export/pretrainer" --format=text \
    --text="She could not help [MASK] that he was the most agreeable man she had ever seen."
run $PY -m albert_tf.predict --task=classify --model="$OUT/export/classifier" --format=text \
    --labels="northanger_abbey,mansfield_park" \
    --text="Catherine was delighted with the Tilneys and their house."

echo
echo "Everything is in $OUT/"
