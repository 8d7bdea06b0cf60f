#!/usr/bin/env python3
"""Eager PyTorch peer of uoe, run side by side on the same machine.

train: the tiny and small presets (dense, moe, uoe) with the same shapes, optimiser and batch as `uoe train`,
training tokens/s (on a GPU: bf16 autocast over float32 weights, as `--dtype bf16`, attention through
scaled_dot_product_attention, FlashAttention's kernels).
    python3 bench/pytorch_peer.py train --arch uoe --threads 2 --steps 12 --data ../shared/data/tinyshakespeare.txt
    python3 bench/pytorch_peer.py train --preset small --device cuda --arch dense --batch 16 --steps 8
cpu: every tiny preset in PyTorch's CPU configurations (eager float32, eager with bf16 autocast, torch.compile of
each when it works), and torch.matmul float32 / bfloat16 GFLOP/s at 256..2048, the figures issue 20's bars compare
uoe with; run it on PyTorch 2.x from bench/peer_env.sh's virtual environment:
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ~/.cache/uoe-peer/bin/python bench/pytorch_peer.py cpu --threads 2
ops (GPU): bf16 GEMM and causal attention TFLOP/s at the shapes of uoe_bench's BM_GpuGemmBf16 and
BM_GpuAttention{Fwd,Bwd}Bf16, counted the same way (the same-card reference of bench/gpu_check.sh's bars).
    python3 bench/pytorch_peer.py ops --json peer-ops.json
probe (GPU): PyTorch's version, free GPU memory and a 2 GiB device-to-device copy's GB/s (gpu_check's preflight).
The CPU peer is current PyTorch 2.x (bench/peer_env.sh); the GPU paths need PyTorch 2.0 or later too.
"""
import argparse
import contextlib
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# nn/config.cpp's families: vocab, d_model, layers, heads, context, experts n, top-k K, expert width D, routing r
PRESETS = {"tiny": (256, 256, 4, 4, 256, 8, 2, 512, 64), "small": (50304, 768, 12, 12, 1024, 8, 2, 768, 96)}
VOCAB, D_MODEL, LAYERS, HEADS, CONTEXT, N_EXPERTS, TOP_K, WIDTH, ROUTING = PRESETS["tiny"]


def rope(x):  # x: [B, T, H, Dh], rotating pairs (i, i + Dh/2)
    B, T, H, Dh = x.shape
    half = Dh // 2
    freq = 10000.0 ** (-torch.arange(half, dtype=torch.float32, device=x.device) * 2 / Dh)
    ang = torch.arange(T, dtype=torch.float32, device=x.device)[:, None] * freq[None]  # [T, half]
    cos, sin = ang.cos()[None, :, None], ang.sin()[None, :, None]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(D_MODEL, D_MODEL, bias=False) for _ in range(4))

    def forward(self, x):
        B, T, d = x.shape
        q = rope(self.wq(x).view(B, T, HEADS, -1)).transpose(1, 2)
        k = rope(self.wk(x).view(B, T, HEADS, -1)).transpose(1, 2)
        v = self.wv(x).view(B, T, HEADS, -1).transpose(1, 2)
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2.x: fused kernels (FlashAttention's on a GPU)
            o = F.scaled_dot_product_attention(q.to(v.dtype), k.to(v.dtype), v, is_causal=True)
        else:  # PyTorch 1.x: composed
            s = q @ k.transpose(-1, -2) / math.sqrt(d // HEADS)
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            o = s.softmax(-1) @ v
        return self.wo(o.transpose(1, 2).reshape(B, T, d))


class SwiGLU(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.g, self.u = nn.Linear(D_MODEL, hidden, bias=False), nn.Linear(D_MODEL, hidden, bias=False)
        self.o = nn.Linear(hidden, D_MODEL, bias=False)

    def forward(self, x):
        return self.o(F.silu(self.g(x)) * self.u(x))


class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.wg = nn.Parameter(torch.randn(N_EXPERTS, D_MODEL, WIDTH) * 0.02)
        self.wp = nn.Parameter(torch.randn(N_EXPERTS, D_MODEL, WIDTH) * 0.02)
        self.wo = nn.Parameter(torch.randn(N_EXPERTS, WIDTH, D_MODEL) * 0.02)

    def run(self, x, idx, w, r0):  # dropless: loop over experts, gather their tokens
        y = torch.zeros_like(x)
        for e in range(N_EXPERTS):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            xe = x[tok]
            he = F.silu(xe @ self.wg[e][:, r0:]) * (xe @ self.wp[e][:, r0:])
            y = y.index_add(0, tok, ((he @ self.wo[e][r0:]) * w[tok, slot, None]).to(y.dtype))  # autocast: bf16
        return y


class MoE(Experts):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D_MODEL, N_EXPERTS, bias=False)
        self.shared = SwiGLU((N_EXPERTS - TOP_K) * ROUTING)  # the preset's shared width (n - K) r

    def forward(self, x):
        val, idx = self.router(x).float().topk(TOP_K, -1)
        return self.run(x, idx, val.softmax(-1), 0) + self.shared(x)


class UoE(Experts):
    def forward(self, x):
        n, d, r = N_EXPERTS, D_MODEL, ROUTING
        wg_r = self.wg[:, :, :r].permute(1, 0, 2).reshape(d, n * r)
        wp_r = self.wp[:, :, :r].permute(1, 0, 2).reshape(d, n * r)
        wo_r = self.wo[:, :r, :].reshape(n * r, d)
        h = F.silu(x @ wg_r) * (x @ wp_r)  # [T, n*r]
        val, idx = h.view(-1, n, r).norm(dim=-1).topk(TOP_K, -1)
        return h @ wo_r + self.run(x, idx, val.softmax(-1), r)


class Block(nn.Module):
    def __init__(self, arch):
        super().__init__()
        self.n1, self.n2 = RMSNorm(), RMSNorm()
        self.attn = Attention()
        dense_width = N_EXPERTS * ROUTING + TOP_K * (WIDTH - ROUTING)  # UoE's active neurons
        self.ffn = {"dense": lambda: SwiGLU(dense_width), "moe": MoE, "uoe": UoE}[arch]()

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        B, T, d = x.shape
        return x + self.ffn(self.n2(x).reshape(B * T, d)).view(B, T, d)


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D_MODEL))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class LM(nn.Module):
    def __init__(self, arch):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(arch) for _ in range(LAYERS))
        self.norm = RMSNorm()

    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        return self.norm(x) @ self.embed.weight.t()


def train(a):
    global VOCAB, D_MODEL, LAYERS, HEADS, CONTEXT, N_EXPERTS, TOP_K, WIDTH, ROUTING
    VOCAB, D_MODEL, LAYERS, HEADS, CONTEXT, N_EXPERTS, TOP_K, WIDTH, ROUTING = PRESETS[a.preset]
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dev = torch.device(a.device)
    if a.data:
        data = torch.frombuffer(bytearray(open(a.data, "rb").read()), dtype=torch.uint8).long()
    else:  # throughput only: random tokens of the preset's vocabulary
        data = torch.randint(0, VOCAB, (1 << 22,))
    model = LM(a.arch).to(dev)
    decay = [q for n, q in model.named_parameters() if q.dim() >= 2 and "embed" not in n]
    rest = [q for n, q in model.named_parameters() if not (q.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), **({"fused": True} if dev.type == "cuda" else {}))
    B, T = a.batch, CONTEXT
    bf16 = (a.dtype or ("bf16" if dev.type == "cuda" else "f32")) == "bf16"  # autocast over float32 weights
    forward = torch.compile(model) if a.compile else model
    times = []
    for step in range(a.steps):
        starts = torch.randint(0, len(data) - T - 1, (B,))
        x = torch.stack([data[s:s + T] for s in starts]).to(dev)
        y = torch.stack([data[s + 1:s + T + 1] for s in starts]).to(dev)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            logits = forward(x)
        loss = F.cross_entropy(logits.view(-1, VOCAB).float() if bf16 else logits.view(-1, VOCAB), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    steady = times[2:] if len(times) > 4 else times
    where = (f"{a.threads} threads" if dev.type == "cpu" else torch.cuda.get_device_name()) + \
        (" bf16 autocast" if bf16 else " f32") + (" compiled" if a.compile else " eager")
    tokens_per_s = B * T * len(steady) / sum(steady)
    print(f"pytorch {torch.__version__} {a.preset}-{a.arch}: {tokens_per_s:.0f} tokens/s "
          f"({where}, batch {B} x {T}, {len(steady)} timed steps, last loss {loss.item():.3f}, "
          f"{sum(q.numel() for q in model.parameters()) / 1e6:.2f}M parameters)", flush=True)
    return tokens_per_s


def mean_seconds(fn, min_seconds=1.0):
    """Mean time of one call over back-to-back calls for at least min_seconds, after a warm-up call: the statistic
    uoe_bench's Google Benchmark reports (real time), so that the GEMM rows compare like with like."""
    fn()
    calls, spent, t0 = 0, 0.0, time.perf_counter()
    while spent < min_seconds:
        fn()
        calls, spent = calls + 1, time.perf_counter() - t0
    return spent / calls


def cpu(a):
    """PyTorch's CPU configurations of each tiny preset (tokens/s; the best of them is the bar's peer), then
    torch.matmul GFLOP/s in float32 and bfloat16 (BM_Gemm_uoe / BM_GemmBf16_uoe's shapes)."""
    torch.set_num_threads(a.threads)
    print(f"PyTorch {torch.__version__}, {a.threads} threads, CPU capability {torch.backends.cpu.get_cpu_capability()}",
          flush=True)
    for arch in a.archs.split(","):
        best = {}
        for dtype, compiled in (("f32", False), ("bf16", False), ("f32", True), ("bf16", True)):
            run = argparse.Namespace(arch=arch, preset="tiny", device="cpu", dtype=dtype, threads=a.threads,
                                     batch=a.batch, steps=a.steps, data=a.data, compile=compiled)
            name = ("bf16 autocast" if dtype == "bf16" else "f32") + (" compiled" if compiled else " eager")
            try:
                best[name] = train(run)
            except Exception as e:  # torch.compile may not work on this machine or model
                print(f"pytorch tiny-{arch} {name}: failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})",
                      flush=True)
        if best:
            name = max(best, key=best.get)
            print(f"best PyTorch configuration of tiny-{arch}: {name}, {best[name]:.0f} tokens/s", flush=True)
    for dt in (torch.float32, torch.bfloat16):
        for n in (256, 512, 1024, 2048):
            x, w = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
            gflops = 2 * n ** 3 / mean_seconds(lambda: torch.matmul(x, w)) * 1e-9
            print(f"pytorch {torch.__version__} torch.matmul {str(dt).split('.')[-1]} {n}^3: {gflops:.1f} GFLOP/s",
                  flush=True)


def cuda_seconds(fn, reps):
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def ops(a):
    """bf16 GEMM and causal attention TFLOP/s, the shapes the bars read first (GEMM 8192, attention head dim 128
    at T 4096); with --json, the figures so far are written after each one (a timeout keeps what finished)."""
    torch.manual_seed(0)
    dev, bf = torch.device("cuda"), torch.bfloat16
    name = torch.cuda.get_device_name()
    found = {"torch": torch.__version__, "device": name, "gemm_bf16": [], "attention_bf16": []}

    def record(kind, entry, line):
        found[kind].append(entry)
        print(f"pytorch {torch.__version__} {name}: {line}", flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(found, f, indent=1)

    for n in (8192, 4096):
        x, w = torch.randn(n, n, device=dev, dtype=bf), torch.randn(n, n, device=dev, dtype=bf)
        tflops = 2 * n ** 3 / cuda_seconds(lambda: x @ w, 20) * 1e-12
        record("gemm_bf16", {"n": n, "tflops": tflops}, f"bf16 GEMM {n}^3: {tflops:.1f} TFLOP/s")
    shapes = [(128, 4096)] + [(dh, T) for dh in (64, 128) for T in (1024, 2048, 4096, 8192) if (dh, T) != (128, 4096)]
    for dh, T in shapes:
        H, B = 2048 // dh, max(16384 // T, 1)
        # [B, T, H, Dh] storage viewed as [B, H, T, Dh], as uoe_bench lays them out
        q, k, v, do = (torch.randn(B, T, H, dh, device=dev, dtype=bf).transpose(1, 2) for _ in range(4))
        q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
        flops = 4.0 * B * H * T * T * dh / 2
        fwd = flops / cuda_seconds(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), 10) * 1e-12
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        bwd = 2.5 * flops / cuda_seconds(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True), 10) \
            * 1e-12
        record("attention_bf16", {"dh": dh, "T": T, "B": B, "H": H, "causal": True, "fwd_tflops": fwd,
                                  "bwd_tflops": bwd},
               f"causal attention Dh {dh} T {T} (B {B}, H {H}): forward {fwd:.1f} TFLOP/s, backward {bwd:.1f} TFLOP/s")


def probe(a):
    """The GPU check's preflight: PyTorch's version, the card, its free memory and a 2 GiB device-to-device
    copy's rate (bytes read plus written, the memory-bound ceiling), on one line."""
    if not torch.cuda.is_available():
        sys.exit(f"pytorch_peer probe: PyTorch {torch.__version__} sees no CUDA device")
    free, total = torch.cuda.mem_get_info()
    src = torch.empty(1 << 31, dtype=torch.uint8, device="cuda").random_(0, 256)
    dst = torch.empty_like(src)
    seconds = cuda_seconds(lambda: dst.copy_(src), 10)
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}: {free / 2**20:.0f} of "
          f"{total / 2**20:.0f} MiB free; 2 GiB device-to-device copy {2 * src.numel() / seconds / 1e9:.0f} GB/s "
          f"(read + write)")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("train")
    t.add_argument("--arch", default="uoe", choices=["dense", "moe", "uoe"])
    t.add_argument("--preset", default="tiny", choices=list(PRESETS))
    t.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    t.add_argument("--dtype", default=None, choices=["bf16", "f32"],
                   help="bf16: autocast over float32 weights (default: bf16 on a GPU, f32 on the CPU)")
    t.add_argument("--compile", action="store_true", help="torch.compile the model")
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--steps", type=int, default=12)
    t.add_argument("--data", default="../shared/data/tinyshakespeare.txt", help="'' for random tokens")
    c = sub.add_parser("cpu")
    c.add_argument("--archs", default="dense,moe,uoe")
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--batch", type=int, default=16)
    c.add_argument("--steps", type=int, default=12)
    c.add_argument("--data", default="../shared/data/tinyshakespeare.txt", help="'' for random tokens")
    o = sub.add_parser("ops")
    o.add_argument("--json", default="", help="also write the figures to this file")
    sub.add_parser("probe")
    a = p.parse_args()
    on_gpu = a.mode in ("ops", "probe") or (a.mode == "train" and a.device == "cuda")
    if on_gpu and not hasattr(F, "scaled_dot_product_attention"):  # and AdamW(fused=True): PyTorch 2.0
        sys.exit(f"pytorch_peer: the GPU peer needs PyTorch 2.0 or later (scaled_dot_product_attention, fused "
                 f"AdamW); this python has {torch.__version__}")
    {"train": train, "cpu": cpu, "ops": ops, "probe": probe}[a.mode](a)


if __name__ == "__main__":
    main()
