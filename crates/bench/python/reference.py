#!/usr/bin/env python3
"""PyTorch reference of headlab's encoder, for `bench` (crates/bench).

The same model as headlab's `model::Encoder` at bench's sizes, trained the way bench trains
it: token embedding (N(0, 1) init) plus Burn's fixed sinusoidal positions (sine and cosine
interleaved, timescale 10000), pre-norm blocks (layer norm, eps 1e-5) with headlab's
attention (one fused q|k|v projection with bias, heads laid out [q heads | k heads | v heads],
scores scaled by 1/sqrt(d_head), softmax, output projection with bias) and a feed-forward
network with exact (erf) GELU, a final layer norm and a per-position output layer. Linear
layers start as Burn's do (uniform in +-1/sqrt(fan_in), which is also PyTorch's default).
Loss: mean cross-entropy over the reverse task's positions (all of them are scored).
Optimizer: AdamW with Burn's defaults as headlab sets them (lr 1e-3 constant, betas 0.9 and
0.999, eps 1e-5, weight decay 0.01 applied to every parameter) and Burn's gradient clipping
(`GradientClipping::Norm(1.0)`, which clips each parameter's gradient to norm 1 on its own).
Batches are drawn fresh each step; dropout is 0.

With --seeds S (S > 1), S models of the size (seeds seed .. seed + S - 1) train as one, by
PyTorch's model-ensembling recipe: `torch.func.stack_module_state` stacks their parameters
on a leading seed axis and `torch.func.vmap` over `functional_call` runs them in one batched
pass; AdamW steps the stacked parameters, and clipping is per seed and tensor. Each model
gets its own batch. A step is one step of every seed.

With --device cuda the model, its optimizer and every batch live on the GPU (batches are
drawn on the CPU from the same generator, then copied, as headlab's are); reading the loss
waits for the GPU, so a timed step is a finished step.

Modes:
  reference.py --size small --threads 2 --seconds 5     # a bench case: one JSON line
  reference.py --size large --device cuda                # the same on the GPU
  reference.py --size small --seeds 16                   # the same, 16 seeds with vmap
  reference.py --to-accuracy 0.99 --threads 2           # time to 99% on reverse

Only PyTorch (and the standard library) is needed, and torch is imported after the arguments
are parsed, so `--help` works without it. Prints exactly one JSON object on stdout.
"""

import argparse
import json
import math
import platform
import resource
import sys
import time

SIZES = {
    # d_model, n_heads, n_layers, d_ff, seq_len, batch_size: crates/bench/src/case.rs
    "small": (64, 4, 2, 256, 32, 64),
    "large": (256, 8, 4, 1024, 64, 32),
}
# bench's speed cases: the reverse task over 10 tokens.
BENCH_VOCAB = 10
# The time-to-accuracy run: reverse at seq 32 over 32 tokens, small model.
ACCURACY_SEQ = 32
ACCURACY_VOCAB = 32

LR = 1e-3
BETAS = (0.9, 0.999)
EPS = 1e-5
WEIGHT_DECAY = 0.01
GRAD_CLIP = 1.0
# Burn adds the smallest positive f32 to the norm before dividing.
CLIP_TINY = 1.1754944e-38
MAX_TIMESCALE = 10_000


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="PyTorch reference of headlab's encoder for bench: times training "
        "steps and forward passes (default), or trains to a token accuracy "
        "(--to-accuracy). Prints one JSON object."
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)"
    )
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="seconds to time training, and again forward passes"
    )
    parser.add_argument("--min-steps", type=int, default=5, help="timed steps at least")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (and passes) first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the model trains (cuda: the first GPU torch sees)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="models trained together with torch.func.vmap (default 1: one plain model)",
    )
    parser.add_argument(
        "--attention",
        choices=["math", "sdpa"],
        default="math",
        help="math: matmul, softmax, matmul as headlab does (default); "
        "sdpa: torch's scaled_dot_product_attention",
    )
    parser.add_argument(
        "--to-accuracy",
        type=float,
        default=None,
        metavar="TARGET",
        help="train the small model on reverse (seq 32, vocab 32) until the token accuracy "
        "on a fixed held-out batch reaches TARGET; print seconds and steps",
    )
    parser.add_argument("--eval-every", type=int, default=10, help="with --to-accuracy")
    parser.add_argument(
        "--eval-size", type=int, default=256, help="held-out sequences, with --to-accuracy"
    )
    parser.add_argument(
        "--max-steps", type=int, default=20_000, help="step cap, with --to-accuracy"
    )
    parser.add_argument(
        "--check",
        metavar="FILE",
        default=None,
        help="load headlab's initial weights, batches and numbers from FILE (JSON, written by "
        "bench's test reference_numbers.rs), run the same steps and print the largest "
        "differences",
    )
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if not (args.seconds >= 0):
        parser.error("--seconds must be 0 or more")
    if args.to_accuracy is not None and not (0 < args.to_accuracy <= 1):
        parser.error("--to-accuracy must be in (0, 1]")
    if args.eval_every < 1 or args.eval_size < 1 or args.max_steps < 1:
        parser.error("--eval-every, --eval-size and --max-steps must be at least 1")
    return args


def build(torch, d_model, n_heads, n_layers, d_ff, vocab, n_out, max_seq, attention):
    """headlab's encoder (split heads, pre-norm, sinusoidal positions, no dropout)."""
    return encoder_class(
        torch, d_model, n_heads, n_layers, d_ff, vocab, n_out, max_seq, attention
    )()


def encoder_class(torch, d_model, n_heads, n_layers, d_ff, vocab, n_out, max_seq, attention):
    """The class of `build`'s encoder: one class for every model of a vmapped stack."""
    nn = torch.nn
    F = torch.nn.functional
    d_head = d_model // n_heads

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            # Columns: [q of heads 0..n | k of heads 0..n | v of heads 0..n], as headlab's.
            self.qkv = nn.Linear(d_model, 3 * n_heads * d_head)
            self.output = nn.Linear(n_heads * d_head, d_model)

        def forward(self, x):
            batch, seq, _ = x.shape
            qkv = self.qkv(x).view(batch, seq, 3 * n_heads, d_head).transpose(1, 2)
            q = qkv[:, :n_heads]
            k = qkv[:, n_heads : 2 * n_heads]
            v = qkv[:, 2 * n_heads :]
            if attention == "sdpa":
                context = F.scaled_dot_product_attention(q, k, v)
            else:
                scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(d_head))
                context = torch.matmul(torch.softmax(scores, dim=3), v)
            context = context.transpose(1, 2).reshape(batch, seq, n_heads * d_head)
            return self.output(context)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.norm_attention = nn.LayerNorm(d_model, eps=1e-5)
            self.norm_ff = nn.LayerNorm(d_model, eps=1e-5)
            self.ff_in = nn.Linear(d_model, d_ff)
            self.ff_out = nn.Linear(d_ff, d_model)

        def forward(self, x):
            x = x + self.attention(self.norm_attention(x))
            hidden = F.gelu(self.ff_in(self.norm_ff(x)))  # exact erf GELU
            return x + self.ff_out(hidden)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, d_model)  # N(0, 1), as Burn's
            self.register_buffer("sinusoids", sinusoids(torch, max_seq, d_model))
            self.blocks = nn.ModuleList([Block() for _ in range(n_layers)])
            self.final_norm = nn.LayerNorm(d_model, eps=1e-5)
            self.output = nn.Linear(d_model, n_out)

        def forward(self, tokens):
            seq = tokens.shape[1]
            x = self.embedding(tokens) + self.sinusoids[:seq]
            for block in self.blocks:
                x = block(x)
            return self.output(self.final_norm(x))

    return Encoder


def sinusoids(torch, length, d_model):
    """Burn's `generate_sinusoids`: row i holds sin(i w_k), cos(i w_k) for k = 0, 2, 4, ...
    with w_k = exp(-k ln(10000) / d_model), computed in f32."""
    increment = torch.tensor(-math.log(MAX_TIMESCALE) / d_model, dtype=torch.float32)
    k = torch.arange(0, d_model, 2, dtype=torch.float32)
    div = torch.exp(k * increment)  # [d_model / 2]
    angles = torch.arange(length, dtype=torch.float32)[:, None] * div[None, :]
    table = torch.stack([torch.sin(angles), torch.cos(angles)], dim=2)  # [len, d/2, 2]
    return table.reshape(length, d_model)


def clip_each_gradient(torch, params):
    """Burn's `GradientClipping::Norm(1.0)`: every parameter's gradient scaled to norm <= 1
    on its own (not a global norm)."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch._foreach_norm(grads)
    for grad, norm in zip(grads, norms):
        grad.mul_(torch.clamp(GRAD_CLIP / (norm + CLIP_TINY), max=1.0))


class Trainer:
    """Model, AdamW and the reverse task's batches: one step is what bench times."""

    def __init__(self, torch, size, vocab, seq_len, seed, attention, device="cpu"):
        d_model, n_heads, n_layers, d_ff, _, batch_size = SIZES[size]
        self.torch = torch
        self.device = device
        self.vocab, self.seq_len, self.batch_size = vocab, seq_len, batch_size
        torch.manual_seed(seed)
        # Built on the CPU, so the initial weights are the CPU's for a seed, then moved.
        self.model = build(
            torch, d_model, n_heads, n_layers, d_ff, vocab, vocab, seq_len, attention
        ).to(device)
        self.params = list(self.model.parameters())
        self.optim = torch.optim.AdamW(
            self.params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY
        )
        self.batches = torch.Generator().manual_seed(seed)

    def parameters(self):
        return sum(p.numel() for p in self.params)

    def batch(self, generator=None, size=None):
        """A fresh batch: uniform random tokens; the target is the input reversed."""
        tokens = self.torch.randint(
            0,
            self.vocab,
            (size or self.batch_size, self.seq_len),
            generator=generator or self.batches,
        ).to(self.device)
        return tokens, tokens.flip(1)

    def step(self, tokens=None):
        torch = self.torch
        if tokens is None:
            tokens, targets = self.batch()
        else:
            tokens = tokens.to(self.device)
            targets = tokens.flip(1)
        logits = self.model(tokens)  # [batch, seq, classes]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        )
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        clip_each_gradient(torch, self.params)
        self.optim.step()
        return loss.item()  # waits for the step, as bench reads headlab's loss

    def forward(self, tokens):
        """Logits of `tokens` in evaluation mode, without autograd."""
        self.model.eval()
        with self.torch.inference_mode():
            return self.model(tokens)

    def accuracy(self, tokens, targets):
        with self.torch.inference_mode():
            predicted = self.model(tokens).argmax(dim=2)
        return (predicted == targets).float().mean().item()


class StackedTrainer:
    """`seeds` models of one size trained as one with torch.func (stack_module_state + vmap
    over functional_call), each on its own batch: what bench's `--seeds` compares with."""

    def __init__(self, torch, size, vocab, seq_len, seed, attention, seeds, device="cpu"):
        import copy

        from torch.func import functional_call, stack_module_state, vmap

        d_model, n_heads, n_layers, d_ff, _, batch_size = SIZES[size]
        self.torch = torch
        self.device = device
        self.vocab, self.seq_len, self.batch_size, self.seeds = vocab, seq_len, batch_size, seeds
        encoder = encoder_class(
            torch, d_model, n_heads, n_layers, d_ff, vocab, vocab, seq_len, attention
        )
        models = []
        for s in range(seeds):
            torch.manual_seed(seed + s)
            models.append(encoder().to(device))
        self.per_model = sum(p.numel() for p in models[0].parameters())
        self.params, self.buffers = stack_module_state(models)  # name -> [seeds, ...]
        base = copy.deepcopy(models[0]).to("meta")
        F = torch.nn.functional

        def logits(params, buffers, tokens):
            return functional_call(base, (params, buffers), (tokens,))

        def loss(params, buffers, tokens, targets):
            out = logits(params, buffers, tokens)
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1))

        self.logits = vmap(logits)
        self.loss = vmap(loss)
        self.param_list = list(self.params.values())
        self.optim = torch.optim.AdamW(
            self.param_list, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY
        )
        self.batches = torch.Generator().manual_seed(seed)

    def parameters(self):
        return self.per_model

    def batch(self, generator=None):
        """A fresh batch per seed, `[seeds, batch, seq]`; the target is the input reversed."""
        tokens = self.torch.randint(
            0,
            self.vocab,
            (self.seeds, self.batch_size, self.seq_len),
            generator=generator or self.batches,
        ).to(self.device)
        return tokens, tokens.flip(2)

    def step(self):
        torch = self.torch
        tokens, targets = self.batch()
        losses = self.loss(self.params, self.buffers, tokens, targets)  # [seeds]
        self.optim.zero_grad(set_to_none=True)
        losses.sum().backward()
        # Burn's clipping, per seed and tensor: each seed's slice scaled to norm <= 1.
        for param in self.param_list:
            grad = param.grad
            norms = grad.flatten(1).norm(dim=1)  # [seeds]
            scale = torch.clamp(GRAD_CLIP / (norms + CLIP_TINY), max=1.0)
            grad.mul_(scale.view(-1, *([1] * (grad.dim() - 1))))
        self.optim.step()
        return losses.mean().item()

    def forward(self, tokens):
        with self.torch.no_grad():
            return self.logits(self.params, self.buffers, tokens)


def device_name(torch, device):
    """`cpu`, or `cuda (NVIDIA H200)`: what the JSON and bench's tables call the device."""
    if device == "cuda":
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return device


def peak_rss_mib():
    # ru_maxrss is KiB on Linux (bytes on macOS).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def timed(args, work):
    """`args.warmup` untimed calls of `work`, then timed ones until both `--min-steps` and
    `--seconds` are met: (calls, seconds, the last call's value)."""
    for _ in range(args.warmup):
        work()
    calls, value = 0, float("nan")
    started = time.perf_counter()
    while calls < max(args.min_steps, 1) or time.perf_counter() - started < args.seconds:
        value = work()
        calls += 1
    return calls, time.perf_counter() - started, value


def run_case(torch, args):
    """Training steps, then forward passes, of one model, or with `--seeds` of that many
    trained together (a step is then a step of every seed)."""
    seq_len = SIZES[args.size][4]
    if args.seeds > 1:
        trainer = StackedTrainer(
            torch,
            args.size,
            BENCH_VOCAB,
            seq_len,
            args.seed,
            args.attention,
            args.seeds,
            args.device,
        )
    else:
        trainer = Trainer(
            torch, args.size, BENCH_VOCAB, seq_len, args.seed, args.attention, args.device
        )
        trainer.model.train()
    steps, train_seconds, loss = timed(args, trainer.step)
    tokens, _ = trainer.batch(torch.Generator().manual_seed(args.seed))
    # Reading the logits back to the host waits for the device.
    passes, forward_seconds, _ = timed(args, lambda: trainer.forward(tokens).cpu().numpy())
    tokens_per_step = args.seeds * trainer.batch_size * seq_len
    return {
        "mode": "case",
        "size": args.size,
        "seeds": args.seeds,
        "batch_size": trainer.batch_size,
        "seq_len": seq_len,
        "parameters": trainer.parameters(),
        "threads": torch.get_num_threads(),
        "train_steps": steps,
        "train_steps_per_s": steps / train_seconds,
        "train_tokens_per_s": steps * tokens_per_step / train_seconds,
        "forward_passes": passes,
        "forward_passes_per_s": passes / forward_seconds,
        "forward_tokens_per_s": passes * tokens_per_step / forward_seconds,
        "last_loss": loss,
        "peak_rss_mib": peak_rss_mib(),
        "peak_gpu_mib": peak_gpu_mib(torch, args.device),
    }


def run_to_accuracy(torch, args):
    trainer = Trainer(
        torch, "small", ACCURACY_VOCAB, ACCURACY_SEQ, args.seed, args.attention, args.device
    )
    # A fixed held-out batch from a stream of its own.
    eval_tokens, eval_targets = trainer.batch(
        torch.Generator().manual_seed(args.seed + 1_000_003), args.eval_size
    )
    steps, accuracy, seconds, reached = 0, 0.0, 0.0, False
    started = time.perf_counter()
    while steps < args.max_steps and not reached:
        trainer.model.train()
        trainer.step()
        steps += 1
        if steps % args.eval_every == 0 or steps == args.max_steps:
            # As headlab's trainer: the time of the record is taken before its evaluation.
            seconds = time.perf_counter() - started
            trainer.model.eval()
            accuracy = trainer.accuracy(eval_tokens, eval_targets)
            reached = accuracy >= args.to_accuracy
    return {
        "mode": "to_accuracy",
        "target": args.to_accuracy,
        "reached": reached,
        "steps": steps,
        "seconds": seconds,
        "token_accuracy": accuracy,
        "parameters": trainer.parameters(),
        "threads": torch.get_num_threads(),
        "eval_every": args.eval_every,
        "eval_size": args.eval_size,
        "peak_rss_mib": peak_rss_mib(),
    }


def peak_gpu_mib(torch, device):
    """The most GPU memory torch's allocator held, MiB; None on the CPU."""
    if device != "cuda":
        return None
    return torch.cuda.max_memory_allocated() / (1024.0 * 1024.0)


def run_check(torch, args):
    """headlab's numbers against this model's with the same weights: logits before training,
    the loss of each step, and the logits after the steps (AdamW and clipping included)."""
    with open(args.check) as file:
        data = json.load(file)
    trainer = Trainer(torch, args.size, data["vocab"], data["seq_len"], args.seed, args.attention)
    named = list(trainer.model.named_modules())
    linear_weights = {
        f"{name}.weight" for name, module in named if isinstance(module, torch.nn.Linear)
    }
    names = [name for name, _ in trainer.model.named_parameters()]
    if len(names) != len(data["parameters"]):
        raise SystemExit(
            f"error: headlab has {len(data['parameters'])} parameter tensors, "
            f"the reference {len(names)}"
        )
    with torch.no_grad():
        for (name, param), values in zip(trainer.model.named_parameters(), data["parameters"]):
            value = torch.tensor(values["values"], dtype=torch.float32).reshape(values["shape"])
            if name in linear_weights:
                value = value.t()  # Burn stores [in, out], torch [out, in]
            if tuple(value.shape) != tuple(param.shape):
                raise SystemExit(
                    f"error: {name}: headlab's shape {values['shape']}, torch's "
                    f"{list(param.shape)}"
                )
            param.copy_(value)

    def logits(tokens):
        trainer.model.eval()
        with torch.inference_mode():
            return trainer.model(tokens)

    steps = [torch.tensor(tokens, dtype=torch.int64) for tokens in data["steps"]]
    before = logits(steps[0])
    losses = []
    for tokens in steps:
        trainer.model.train()
        losses.append(trainer.step(tokens))
    after = logits(steps[0])
    expected_before = torch.tensor(data["logits_before"]).reshape(before.shape)
    expected_after = torch.tensor(data["logits_after"]).reshape(after.shape)
    return {
        "mode": "check",
        "parameter_tensors": len(names),
        "parameters": trainer.parameters(),
        "max_abs_logits_before": (before - expected_before).abs().max().item(),
        "max_abs_logits_after": (after - expected_after).abs().max().item(),
        "max_abs_loss": max(abs(a - b) for a, b in zip(losses, data["losses"])),
        "losses": losses,
    }


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch  # after parsing: --help works without torch
    except ImportError as error:
        print(
            f"error: {sys.executable} cannot import torch ({error}); install PyTorch for it, "
            "or point HEADLAB_PYTHON at an interpreter that has it",
            file=sys.stderr,
        )
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            f"error: --device cuda, but torch {torch.__version__} sees no CUDA GPU "
            "(torch.cuda.is_available() is False)",
            file=sys.stderr,
        )
        return 2
    if args.check is not None and args.device != "cpu":
        print("error: --check compares on the CPU; leave --device out", file=sys.stderr)
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.check is not None:
        result = run_check(torch, args)
    elif args.to_accuracy is not None:
        result = run_to_accuracy(torch, args)
    else:
        result = run_case(torch, args)
    result["implementation"] = "pytorch"
    result["torch_version"] = torch.__version__
    result["python_version"] = platform.python_version()
    result["attention"] = args.attention
    result["device"] = device_name(torch, args.device)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
