#!/bin/bash
# Writes issue 60's nine steps (four pretraining, five fine-tuning shapes) twice into OUT: as the
# XLA step on a GPU traces them now (NAME_after_auto) and without kernels.XLA_GPU_REWRITES
# (NAME_before_auto), then prints the run_gpu.py call that checks one step of each pair and
# times both (bench/gpu/README.md). Usage: bash bench/gpu/dump_before_after.sh OUT [PYTHON]
set -euo pipefail
out=${1:?usage: dump_before_after.sh OUT [PYTHON]}
python=${2:-python}
dump="$(dirname "$0")/dump_hlo.py"
steps="base128=albert_base_v2:256:128:20 base512=albert_base_v2:64:512:20
       large512=albert_large_v2:32:512:20 xxlarge512=albert_xxlarge_v2:16:512:20"
finetuning="ft_cls32=classifier:albert_base_v2:32:128 ft_cls256=classifier:albert_base_v2:256:128
            ft_squad32=squad:albert_base_v2:32:384 ft_squad96=squad:albert_base_v2:96:384
            ft_race8=race:albert_base_v2:8:512:4"
named() {  # "name=spec ..." VARIANT -> "name_VARIANT=spec ..."
    for s in $1; do echo "${s%%=*}_$2=${s#*=}"; done
}
XLA_GPU_REWRITES=none "$python" "$dump" "$out" steps --attention=auto $(named "$steps" before)
XLA_GPU_REWRITES=none "$python" "$dump" "$out" finetuning --attention=auto \
    $(named "$finetuning" before)
"$python" "$dump" "$out" steps --attention=auto $(named "$steps" after)
"$python" "$dump" "$out" finetuning --attention=auto $(named "$finetuning" after)
only=""
for s in $steps $finetuning; do
    only="$only${only:+,}${s%%=*}_before_auto,${s%%=*}_after_auto"
done
echo "there: python3 bench/gpu/run_gpu.py variants $out --ceilings --peers --only $only"
