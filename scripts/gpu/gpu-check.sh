#!/usr/bin/env bash
# Every GPU figure headlab claims, in one run of a few minutes, on a machine with no Rust
# toolchain and no network: what scripts/gpu/gpu-pack.sh packed, run from a checkout.
#
#   scripts/gpu/gpu-check.sh --out DIR            # on the GPU machine (needs gpu-pack/ beside)
#   scripts/gpu/gpu-check.sh --local --out DIR    # here: the same steps on lavapipe (software
#                                             # Vulkan) and CPU PyTorch, from target/release
#   scripts/gpu/gpu-check.sh --local --quick ...  # the short form .ci/run runs
#
# Steps, most wanted first (each under a time limit; a failed or timed-out step is reported
# and the others go on; once --budget seconds have passed, the rest are skipped):
#   train-wgpu    configs/reverse.toml on wgpu to its target (and the adapter and
#                 kernel compiler, as train names them: a software adapter is reported as
#                 such, never as a GPU)
#   bench-small   the small model: headlab and Burn's encoder on the GPU and flex, train and
#                 forward; the PyTorch reference on CUDA (on the CPU with --local)
#   seeds-small   bench --seeds 1,4,16,64: headlab's seed stack on the GPU against separate
#                 runs (S = 1) and PyTorch's vmap stack on CUDA
#   profile       bench --profile: where a step's time goes on the GPU, phase by phase (draw,
#                 upload, forward, backward, optimizer, loss read), one model and the stack
#   again-wgpu    a second process training 10 steps: what of the start-up is kept on disk
#   first-step    scripts/bench/first-step.sh: a process's first step with CubeCL's kernel
#                 cache cold (a new environment) and warm (the same one again)
#   to-accuracy   headlab on the GPU against PyTorch on CUDA, time to 99% on reverse
#   train-flex    configs/reverse.toml on flex, for comparison
#   inspect       the GPU run (inspect computes on the CPU)
#   groups-CONFIG the shipped configs the README's seed-group table uses, trained alone and
#                 as `train --seeds` groups of 16 on the GPU: steady-state seed-steps per second
#   bench-large, seeds-large   the same as bench-small and seeds-small at the large size
# Writes DIR/gpu-check.md (the tables), DIR/gpu-check.json (every figure) and
# DIR/gpu-check.log (every step's output). Exit status: 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")/../.."

out=gpu-check-out
local_mode=0
quick=0
pack=gpu-pack
budget_s=420
# The GPU backend every GPU step runs on (the report and the step names say it).
gpu=wgpu
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --local) local_mode=1; shift ;;
        --quick) quick=1; shift ;;
        --pack) pack="$2"; shift 2 ;;
        --budget) budget_s="$2"; shift 2 ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "gpu-check: unknown argument $1 (expected --out DIR, --local, --quick, --pack DIR, --budget SECONDS)" >&2
           exit 2 ;;
    esac
done
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/headlab-gpu-check.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
log="$out/gpu-check.log"
steps="$work/steps.tsv"
: >"$log"
: >"$steps"
started=$(date +%s)

say() { echo "gpu-check: $*" | tee -a "$log" >&2; }

# --- the binaries ------------------------------------------------------------------------
if [ "$local_mode" -eq 1 ]; then
    bin="${CARGO_TARGET_DIR:-$PWD/target}/release"
    say "local mode: binaries from $bin (software Vulkan, CPU PyTorch)"
    torch_device=cpu
    if [ ! -x "$bin/headlab" ]; then
        say "building the release binaries"
        cargo build --release --workspace --bins --quiet || exit 1
    fi
else
    if [ ! -f "$pack/bin.tar.xz" ]; then
        echo "gpu-check: no $pack/bin.tar.xz; run scripts/gpu/gpu-pack.sh on a machine with Rust first" >&2
        exit 2
    fi
    mkdir -p "$work/pack" && tar -C "$work/pack" -xJf "$pack/bin.tar.xz" || exit 1
    bin="$work/pack/bin"
    say "binaries from $pack (commit $(head -1 "$pack/COMMIT"))"
    torch_device=cuda
    # The Vulkan loader, where the machine has none (as root: it unpacks into /).
    if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
        say "no Vulkan loader here: unpacking $pack/debs"
        for deb in "$pack"/debs/*.deb; do dpkg -x "$deb" /; done
        ldconfig
    fi
    # NVIDIA's driver mounted under /usr/local/nvidia, where the loader does not look.
    nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then
        export VK_DRIVER_FILES="$nvidia_icd"
    fi
fi
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
export HEADLAB_PYTHON="${HEADLAB_PYTHON:-python3}"

# The budgets: --quick is the short form for CI on a software driver.
if [ "$quick" -eq 1 ]; then
    train_set=(--set train.steps=20 --set train.eval_every=10 --set train.snapshot_every=10)
    sizes=(small)
    budget=(--seconds 0.2 --min-steps 2 --warmup 1 --shards 1)
    seeds=1,2
    accuracy_args=(--to-accuracy 0.5 --max-steps 10 --shards 1)
    group_configs=(configs/experiments/symmetry-random.toml)
    group_size=2
    group_steps=20
    limit=300
else
    train_set=()
    sizes=(small large)
    # One shard: on a GPU, splitting the batch only doubles the kernel launches.
    budget=(--seconds 2 --min-steps 5 --warmup 3 --shards 1)
    seeds=1,4,16,64
    accuracy_args=(--to-accuracy 0.99 --max-steps 3000 --shards 1)
    group_configs=(configs/experiments/symmetry-random.toml
                   configs/experiments/specialise-difference.toml configs/recall.toml)
    group_size=16
    group_steps=600
    limit=150
fi

# step NAME SECONDS COMMAND...: runs COMMAND under a time limit, its output into the log,
# and records NAME, exit status and seconds.
step() {
    local name="$1" seconds="$2"
    shift 2
    if [ $(($(date +%s) - started)) -ge "$budget_s" ]; then
        say "== $name: skipped, the --budget of $budget_s s is spent"
        printf '%s\t%s\t%s\n' "$name" skipped 0 >>"$steps"
        return 0
    fi
    say "== $name: $*"
    local begin end rc
    begin=$(date +%s.%N)
    timeout --kill-after=10 "$seconds" "$@" >>"$log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    local took
    took=$(awk -v a="$begin" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\n' "$name" "$rc" "$took" >>"$steps"
    if [ "$rc" -eq 0 ]; then say "   ok in ${took} s"; else say "   FAILED (exit $rc) after ${took} s"; fi
    return 0
}

# Facts about the machine, for the report.
{
    echo "date=$(date -u +%Y-%m-%d)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "cores=$(nproc)"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    fi
    echo "torch=$("$HEADLAB_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
    # The binaries' commit: the pack's on a GPU machine (the checkout there may be another).
    if [ "$local_mode" -eq 0 ] && [ -f "$pack/COMMIT" ]; then
        echo "commit=$(head -c 12 "$pack/COMMIT")"
    else
        echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    fi
} >"$work/machine.env"
cat "$work/machine.env" >>"$log"

# The implementations of each bench step: PyTorch's reference where torch can be imported.
if "$HEADLAB_PYTHON" -c 'import torch' 2>/dev/null; then
    speed_impl=(--impl headlab,burn,pytorch --torch-device "$torch_device")
    stack_impl=(--impl headlab,pytorch --torch-device "$torch_device")
else
    say "$HEADLAB_PYTHON cannot import torch: the PyTorch columns are left out"
    speed_impl=(--impl headlab,burn)
    stack_impl=(--impl headlab)
fi
# The seed stack beside PyTorch's vmap only where PyTorch is on the GPU too: `bench` refuses
# CPU PyTorch beside a GPU backend (a local run on a machine that has torch).
seeds_impl=("${stack_impl[@]}")
if [ "$torch_device" != cuda ]; then
    seeds_impl=(--impl headlab)
fi
if [ "$quick" -eq 1 ]; then
    # The short form only proves that every step still runs: Burn's encoder adds nothing.
    speed_impl=("${speed_impl[@]/,burn/}")
fi

speed() { # speed SIZE: headlab, Burn and PyTorch side by side at SIZE
    step "bench-$1" "$limit" "$bin/headlab" bench --backends "$gpu",flex --sizes "$1" "${budget[@]}" \
        "${speed_impl[@]}" --json "$work/bench-$1.json" --out "$work/bench-$1.md"
}
stack() { # stack SIZE: the seed stack at SIZE
    step "seeds-$1" "$limit" "$bin/headlab" bench --seeds "$seeds" --backends "$gpu" --sizes "$1" \
        "${budget[@]}" "${seeds_impl[@]}" --json "$work/seeds-$1.json" --out "$work/seeds-$1.md"
}
step "train-$gpu" "$limit" "$bin/headlab" train configs/reverse.toml --backend "$gpu" \
    --out "$work/reverse-gpu" "${train_set[@]}"
# A second process on the same machine: how much of the first one's start-up (compiling and
# autotuning kernels) is kept on disk between processes.
step "again-$gpu" "$limit" "$bin/headlab" train configs/reverse.toml --backend "$gpu" \
    --out "$work/reverse-again" --set train.steps=10 --set train.eval_every=10 \
    --set train.snapshot_every=0 --set train.log_every=1 --quiet
# The same, cold against warm, in environments of its own (one repeat in the short form).
first_step_repeats=2
if [ "$quick" -eq 1 ]; then first_step_repeats=1; fi
step first-step "$limit" bash -c 'HEADLAB="$1" scripts/bench/first-step.sh "$2" "$3" >"$4"' _ \
    "$bin/headlab" "$gpu" "$first_step_repeats" "$work/first-step.md"
speed "${sizes[0]}"
stack "${sizes[0]}"
# Where a step's time goes, one model and the stack (issue 68's per-step account).
step profile "$limit" "$bin/headlab" bench --profile --backends "$gpu" --sizes "${sizes[0]}" \
    --seeds "$seeds" "${budget[@]}" --json "$work/profile.json" --out "$work/profile.md"
step to-accuracy "$limit" "$bin/headlab" bench --backends "$gpu" "${accuracy_args[@]}" "${stack_impl[@]}" \
    --json "$work/accuracy.json" --out "$work/accuracy.md"
step train-flex "$limit" "$bin/headlab" train configs/reverse.toml --backend flex \
    --out "$work/reverse-flex" "${train_set[@]}"
step inspect "$limit" "$bin/headlab" inspect "$work/reverse-gpu"
# Training only, as scripts/bench/bench_seed_groups.sh: no snapshots, one evaluation at the end,
# every step counted (the target is out of reach); a metrics line every 10 steps.
group_set=(--set "train.steps=$group_steps" --set train.snapshot_every=0
           --set "train.eval_every=$group_steps" --set "train.checkpoint_every=$group_steps"
           --set train.target_accuracy=1.0 --set train.log_every=10 --quiet --backend "$gpu")
for config in "${group_configs[@]}"; do
    name=$(basename "$config" .toml)
    step "groups-$name-alone" "$limit" "$bin/headlab" train "$config" --out "$work/groups/$name-alone" \
        "${group_set[@]}"
    step "groups-$name-$group_size" "$limit" "$bin/headlab" train "$config" \
        --seeds "0-$((group_size - 1))" --out "$work/groups/$name-s{seed}" "${group_set[@]}"
done

# The large size last: measured on an H200 twice (2026-11-26 and -27, docs/gpu/).
for size in "${sizes[@]:1}"; do
    speed "$size"
    stack "$size"
done
finished=$(date +%s)
say "all steps in $((finished - started)) s"

# The report: one markdown file, one JSON file.
GPU_BACKEND="$gpu" python3 - "$work" "$out" "$local_mode" "$((finished - started))" <<'EOF'
import json, os, re, sys

work, out, local_mode, total = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
machine = dict(
    line.rstrip("\n").split("=", 1)
    for line in open(os.path.join(work, "machine.env"))
    if "=" in line
)
steps = []
for line in open(os.path.join(work, "steps.tsv")):
    name, rc, seconds = line.rstrip("\n").split("\t")
    skipped = rc == "skipped"
    steps.append(
        {
            "step": name,
            "exit": None if skipped else int(rc),
            "skipped": skipped,
            "seconds": float(seconds),
        }
    )
log = open(os.path.join(out, "gpu-check.log"), errors="replace").read()
gpu = os.environ["GPU_BACKEND"]
adapter = re.findall(rf"^{gpu} adapter: (.*)$", log, re.M)
adapter = adapter[0] if adapter else None


def load(name):
    path = os.path.join(work, name)
    return json.load(open(path)) if os.path.exists(path) else None


def text(name):
    path = os.path.join(work, name)
    return open(path).read().strip() if os.path.exists(path) else None


def run_summary(directory):
    """The last evaluation of a run's metrics.jsonl: step, accuracy, seconds."""
    path = os.path.join(work, directory, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    last = None
    for line in open(path):
        record = json.loads(line)
        if "eval_token_acc" in record:
            last = record
    if last is None:
        return None
    return {
        "steps": last["step"],
        "eval_token_acc": last["eval_token_acc"],
        "eval_seq_acc": last.get("eval_seq_acc"),
        "training_seconds": last.get("elapsed_s"),
    }


seconds = {s["step"]: s for s in steps}


def steady_tokens_per_s(directory):
    """The median of a run's tokens_per_s, its first three lines left out (kernels compile
    and autotune there; fewer in a short run, never the last); None when the run left no
    metrics."""
    path = os.path.join(work, "groups", directory, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    rates = [json.loads(line).get("tokens_per_s") for line in open(path)]
    rates = rates[min(3, len(rates) - 1):]
    rates = sorted(r for r in rates if r)
    return rates[len(rates) // 2] if rates else None


groups = []
for step in steps:
    match = re.fullmatch(r"groups-(.+)-alone", step["step"])
    if not match:
        continue
    name = match.group(1)
    size = next(
        (
            int(s["step"].rsplit("-", 1)[1])
            for s in steps
            if s["step"].startswith(f"groups-{name}-") and s["step"].rsplit("-", 1)[1].isdigit()
        ),
        None,
    )
    alone = steady_tokens_per_s(f"{name}-alone")
    # A grouped seed's tokens_per_s is its own tokens over the group's time: S of them
    # make the group's rate.
    seed = steady_tokens_per_s(f"{name}-s0")
    group = seed * size if seed is not None and size else None
    groups.append(
        {
            "config": name,
            "seeds": size,
            "alone_tokens_per_s": alone,
            "group_tokens_per_s": group,
            "speedup": group / alone if alone and group else None,
        }
    )
report = {
    "date": machine.get("date"),
    "local": local_mode,
    "machine": machine,
    "gpu_backend": gpu,
    "wgpu_adapter": adapter,
    "software_adapter": bool(adapter and "software" in adapter),
    "steps": steps,
    "total_seconds": total,
    "reverse": {
        gpu: run_summary("reverse-gpu"),
        "flex": run_summary("reverse-flex"),
    },
    "bench": {size: load(f"bench-{size}.json") for size in ("small", "large")},
    "seeds": {size: load(f"seeds-{size}.json") for size in ("small", "large")},
    "profile": load("profile.json"),
    "to_accuracy": load("accuracy.json"),
    "groups": groups,
}
json.dump(report, open(os.path.join(out, "gpu-check.json"), "w"), indent=2)

lines = []
where = machine.get("gpu") or "no NVIDIA GPU"
lines.append(
    f"GPU check of {machine.get('date')} (commit {machine.get('commit')}): {where}; "
    f"{machine.get('cpu')} ({machine.get('cores')} cores); PyTorch {machine.get('torch')}."
)
lines.append("")
if adapter is None:
    lines.append(f"{gpu} adapter: none (train on {gpu} failed; see gpu-check.log).")
elif report["software_adapter"]:
    lines.append(f"{gpu} adapter: {adapter}. These are not GPU figures.")
else:
    lines.append(f"{gpu} adapter: {adapter}.")
lines.append("")
lines.append("| step | exit | seconds |")
lines.append("| --- | ---: | ---: |")
for s in steps:
    status = "skipped (out of time)" if s["skipped"] else s["exit"]
    lines.append(f"| {s['step']} | {status} | {s['seconds']:.1f} |")
lines.append("")
lines.append("configs/reverse.toml trained to its target:")
lines.append("")
lines.append("| backend | steps | eval token acc | eval seq acc | training s | whole command s |")
lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
for backend in (gpu, "flex"):
    summary = report["reverse"][backend]
    whole = seconds.get(f"train-{backend}", {}).get("seconds")
    if summary is None:
        lines.append(f"| {backend} | - | - | - | - | {whole if whole is not None else '-'} |")
    else:
        lines.append(
            f"| {backend} | {summary['steps']} | {100 * summary['eval_token_acc']:.2f}% | "
            f"{100 * (summary['eval_seq_acc'] or 0):.2f}% | {summary['training_seconds']:.1f} | "
            f"{whole:.1f} |"
        )
again = seconds.get(f"again-{gpu}")
if again:
    path = os.path.join(work, "reverse-again", "metrics.jsonl")
    first = None
    if os.path.exists(path):
        lines_again = [json.loads(line) for line in open(path) if line.strip()]
        first = lines_again[0].get("elapsed_s") if lines_again else None
    first_text = f"; its first step done {first:.2f} s into training" if first is not None else ""
    lines.append("")
    lines.append(
        f"A second process (10 steps of reverse on {gpu}, after the first run): "
        f"{again['seconds']:.1f} s for the whole command{first_text}, exit {again['exit']}."
    )
inspect = seconds.get("inspect")
if inspect:
    lines.append("")
    lines.append(
        f"inspect of the {gpu} run (inspect computes on the CPU): {inspect['seconds']:.1f} s, "
        f"exit {inspect['exit']}."
    )
for title, step_name in (
    ("Speed, small (bench)", "bench-small"),
    ("Speed, large (bench)", "bench-large"),
    ("Seed stack, small (bench --seeds)", "seeds-small"),
    ("Seed stack, large (bench --seeds)", "seeds-large"),
    ("Where a step's time goes (bench --profile)", "profile"),
    ("A process's first step, the kernel cache cold and warm (scripts/bench/first-step.sh)", "first-step"),
    ("Time to accuracy (bench --to-accuracy)", "to-accuracy"),
):
    if step_name not in seconds:
        continue  # not a step of this mode
    name = "accuracy.md" if step_name == "to-accuracy" else f"{step_name}.md"
    body = text(name)
    lines.append("")
    lines.append(f"{title}:")
    lines.append("")
    lines.append(body if body else "(no table: the step failed; see gpu-check.log)")
if groups:
    lines.append("")
    lines.append(
        "Seed groups on the shipped configs (`train --seeds`, training only, steady state: the "
        "median tokens/s of each run's metrics after its first three lines):"
    )
    lines.append("")
    lines.append("| config | S | alone tokens/s | group tokens/s (all seeds) | group / alone |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for g in groups:
        cell = lambda v, f: "-" if v is None else f.format(v)
        lines.append(
            f"| {g['config']} | {cell(g['seeds'], '{}')} | {cell(g['alone_tokens_per_s'], '{:.0f}')} | "
            f"{cell(g['group_tokens_per_s'], '{:.0f}')} | {cell(g['speedup'], '{:.2f}x')} |"
        )
open(os.path.join(out, "gpu-check.md"), "w").write("\n".join(lines) + "\n")
EOF
report_rc=$?
say "wrote $out/gpu-check.md, $out/gpu-check.json and $out/gpu-check.log"
failed=$(awk -F'\t' '$2 != 0 && $2 != "skipped"' "$steps" | wc -l)
if [ "$failed" -gt 0 ] || [ "$report_rc" -ne 0 ]; then
    say "$failed step(s) failed"
    exit 1
fi
exit 0
