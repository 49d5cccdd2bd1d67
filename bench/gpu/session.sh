#!/bin/bash
# Issue 60's device work in three parts, each one `run` call of under ten minutes, with every
# module written here first (bench/gpu/README.md):
#
#   bash bench/gpu/session.sh dump OUT [PYTHON]   # here, ~5 minutes: OUT is what `run` carries
#   bash bench/gpu/session.sh run OUT 1|2|3       # there; each part's log and profiles go to the
#                                                 # run tool's $OUT (partN.log, dumpN/, new only)
#
# dump writes the nine steps (four pretraining, five fine-tuning shapes) as the XLA step on a GPU
# traces them now (NAME_after_auto) and without kernels.XLA_GPU_REWRITES (NAME_before_auto); the
# v1 base step (attention dropout 0.1) fused and plain; the attention probes; and our
# pretraining step at seq 512 at the largest batch compile_offline.py `largest` found for each
# GPU (lb_GPU_CONFIG_auto; bench/results/2026-11-28T0155-offline-largest-batch-seq512.txt).
# Parts: 1 the pretraining pairs (ceilings and floors first, one step of each pair from the same
# state, profiles by kind, torch.compile peers last); 2 the fine-tuning pairs, the same way;
# 3 the dropout probe with cuDNN kept out of XLA's command buffers, the v1 step fused against
# plain under that setting, and the largest batch, ours and the eager peer's.
set -euo pipefail
usage() {
    echo "usage: bash bench/gpu/session.sh dump OUT [PYTHON]  (here) | run OUT 1|2|3  (there)" >&2
    exit 2
}
[ $# -ge 2 ] || usage
what=$1
out=$2
here=$(dirname "$0")
steps="base128=albert_base_v2:256:128:20 base512=albert_base_v2:64:512:20
       large512=albert_large_v2:32:512:20 xxlarge512=albert_xxlarge_v2:16:512:20"
finetuning="ft_cls32=classifier:albert_base_v2:32:128 ft_cls256=classifier:albert_base_v2:256:128
            ft_squad32=squad:albert_base_v2:32:384 ft_squad96=squad:albert_base_v2:96:384
            ft_race8=race:albert_base_v2:8:512:4"
largest="h100_base=albert_base_v2:536:512:20 h100_large=albert_large_v2:192:512:20
         h100_xxlarge=albert_xxlarge_v2:96:512:20 h200_base=albert_base_v2:936:512:20
         h200_large=albert_large_v2:344:512:20 h200_xxlarge=albert_xxlarge_v2:176:512:20"
# Without cuDNN: jaxlib's XLA aborts recording attention dropout into a command buffer.
no_cudnn_buffers=--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL

named() {  # "name=spec ..." VARIANT -> "name_VARIANT=spec ..."
    for s in $1; do echo "${s%%=*}_$2=${s#*=}"; done
}
pairs() {  # "name=spec ..." -> "name_before_auto,name_after_auto,..."
    local only=""
    for s in $1; do only="$only${only:+,}${s%%=*}_before_auto,${s%%=*}_after_auto"; done
    echo "$only"
}

if [ "$what" = dump ]; then
    python=${3:-python}
    dump="$here/dump_hlo.py"
    XLA_GPU_REWRITES=none "$python" "$dump" "$out" steps --attention=auto $(named "$steps" before)
    XLA_GPU_REWRITES=none "$python" "$dump" "$out" finetuning --attention=auto \
        $(named "$finetuning" before)
    "$python" "$dump" "$out" steps --attention=auto $(named "$steps" after)
    "$python" "$dump" "$out" finetuning --attention=auto $(named "$finetuning" after)
    "$python" "$dump" "$out" steps --attention=fused v1base512=albert_base_v1:64:512:20
    "$python" "$dump" "$out" steps --attention=plain v1base512=albert_base_v1:64:512:20
    "$python" "$dump" "$out" attention
    "$python" "$dump" "$out" steps --attention=auto $(for s in $largest; do echo "lb_$s"; done)
    exit 0
fi
[ "$what" = run ] || { echo "session.sh: dump or run, not $what" >&2; usage; }
part=${3:-}
case $part in 1|2|3) ;; *) echo "session.sh: part 1, 2 or 3, not '$part'" >&2; usage ;; esac
# Before any device time goes to the ceilings: every module this part runs is there.
case $part in
    1) names=$(pairs "$steps") ;;
    2) names=$(pairs "$finetuning") ;;
    3) names="v1base512_plain,v1base512_fused,att_dropout_fused"
       for s in $largest; do names="$names,lb_${s%%=*}_auto"; done ;;
esac
missing=""
for n in ${names//,/ }; do
    [ -f "$out/$n.hlo.pb.gz" ] || missing="$missing $n"
done
if [ -n "$missing" ]; then
    echo "session.sh: not in $out:$missing (write them here with: session.sh dump $out)" >&2
    exit 2
fi
[ -n "${OUT:-}" ] || { echo "session.sh: set OUT to a folder for the logs (the run tool sets it)" >&2; exit 2; }
log=$OUT/part$part.log
dumps=$OUT/dump$part
if [ -e "$log" ] || [ -e "$dumps" ]; then
    echo "session.sh: $OUT already holds part$part.log or dump$part; give OUT a new folder" >&2
    exit 2
fi
mkdir -p "$dumps"
case $part in
    1|2)
        if [ "$part" = 1 ]; then only=$(pairs "$steps"); else only=$(pairs "$finetuning"); fi
        python3 "$here/run_gpu.py" variants "$out" --ceilings --peers --only "$only" \
            --profile "$only" --dump "$dumps" 2>&1 | tee "$log" ;;
    3)
        gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
        case $gpu in *H200*) kind=h200 ;; *) kind=h100 ;; esac
        {
            echo "== $gpu: the dropout probe, cuDNN out of command buffers ($no_cudnn_buffers)"
            XLA_FLAGS=$no_cudnn_buffers timeout 120 python3 "$here/run_gpu.py" dropout "$out" || true
            echo "== the v1 base step, plain then fused attention, the same setting"
            XLA_FLAGS=$no_cudnn_buffers timeout 240 python3 "$here/run_gpu.py" variants "$out" \
                --only v1base512_plain,v1base512_fused || true
            echo "== the largest batch at seq 512 ($kind): ours, then the eager peer's"
            python3 "$here/run_gpu.py" largest "$out" --peers \
                --only "lb_${kind}_base_auto,lb_${kind}_large_auto,lb_${kind}_xxlarge_auto"
        } 2>&1 | tee "$log" ;;
esac
