#!/usr/bin/env bash
# A demo-scale pretrained checkpoint whose vocabulary has a release's size, for the Adam ε
# measurement in docs/finetuning.md: the three training novels of data/corpus plus GCIDE text
# (bench/gcide_text.py; the novels alone give at most ~10,000 pieces), a vocabulary of
# MODEL_TYPE (unigram: SentencePiece, as the English releases; wordpiece: as the Chinese ones)
# and VOCAB_SIZE pieces, then the demo's pretraining (configs/albert_demo.json with that
# vocab_size, seq 32, LAMB 5e-3) for STEPS steps. Downloads dict-gcide with `apt-get download`
# (a Debian package source); PY: the Python with albert_tf (default python).
#   bash bench/pretrain_release_vocab.sh OUT unigram 30000 [STEPS]
#   bash bench/pretrain_release_vocab.sh OUT wordpiece 21128 [STEPS]
set -euo pipefail
if [ $# -lt 3 ] || { [ "$2" != unigram ] && [ "$2" != wordpiece ]; }; then
    echo "usage: $0 OUT unigram|wordpiece VOCAB_SIZE [STEPS]" >&2
    exit 2
fi
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
cd "$(dirname "$0")/.."
OUT=$1 MODEL_TYPE=$2 VOCAB_SIZE=$3 STEPS=${4:-4000}
PY=${PY:-python}
mkdir -p "$OUT"
if [ ! -e "$OUT/gcide.txt" ]; then
    (cd "$OUT" && apt-get download dict-gcide && dpkg-deb -x dict-gcide_*.deb gcide)
    $PY bench/gcide_text.py "$OUT/gcide/usr/share/dictd/gcide.dict.dz" "$OUT/gcide.txt" \
        --max_bytes=6000000
fi
TEXT=data/corpus/pride_and_prejudice.txt,data/corpus/sense_and_sensibility.txt
TEXT=$TEXT,data/corpus/emma.txt,$OUT/gcide.txt
if [ "$MODEL_TYPE" = unigram ]; then
    [ -e "$OUT/spm.model" ] || $PY -m albert_tf.train_vocab --input_file="$TEXT" \
        --model_prefix="$OUT/spm" --vocab_size="$VOCAB_SIZE"
    VOCAB=(--spm_model_file="$OUT/spm.model")
    ENTRIES=$VOCAB_SIZE
else
    [ -e "$OUT/vocab.txt" ] || $PY -m albert_tf.train_vocab --model_type=wordpiece \
        --input_file="$TEXT" --model_prefix="$OUT/vocab" --vocab_size="$VOCAB_SIZE"
    VOCAB=(--vocab_file="$OUT/vocab.txt")
    ENTRIES=$(wc -l < "$OUT/vocab.txt")
fi
[ -e "$OUT/albert_config.json" ] || $PY - "$ENTRIES" "$OUT/albert_config.json" <<'PYEOF'
import json, sys
config = json.load(open("configs/albert_demo.json"))
config["vocab_size"] = int(sys.argv[1])
json.dump(config, open(sys.argv[2], "x"), indent=2)
PYEOF
$PY -m albert_tf.create_pretraining_data --input_file="$TEXT" "${VOCAB[@]}" \
    --output_file="$OUT/pretrain/train.tfrecord" --max_seq_length=32 \
    --max_predictions_per_seq=5 --dupe_factor=2 --overwrite
$PY -m albert_tf.create_pretraining_data --input_file=data/corpus/persuasion.txt "${VOCAB[@]}" \
    --output_file="$OUT/pretrain/eval.tfrecord" --max_seq_length=32 \
    --max_predictions_per_seq=5 --dupe_factor=1 --overwrite
$PY -m albert_tf.run_pretraining --albert_config_file="$OUT/albert_config.json" \
    --input_file="$OUT/pretrain/train.tfrecord*" --eval_input_file="$OUT/pretrain/eval.tfrecord" \
    --output_dir="$OUT/pretrained" --max_seq_length=32 --max_predictions_per_seq=5 \
    --train_batch_size=32 --num_train_steps="$STEPS" --num_warmup_steps=$((STEPS / 10)) \
    --learning_rate=5e-3 --dynamic_masking --ngram=1 --save_checkpoints_steps=$((STEPS / 8)) \
    --log_steps=$((STEPS / 10)) --do_eval --eval_batch_size=64 --max_eval_steps=10 \
    --random_seed=12345
