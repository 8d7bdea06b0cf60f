#!/usr/bin/env python3
"""Eager PyTorch implementation of the tiny presets (dense, moe, uoe), same shapes, optimiser and
batch as `uoe train`, to measure training tokens/s side by side with uoe on the same machine.

    python3 bench/pytorch_tiny.py --arch uoe --threads 2 --steps 12 --data ../shared/data/tinyshakespeare.txt
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

D_MODEL, LAYERS, HEADS, CONTEXT, VOCAB = 256, 4, 4, 256, 256
N_EXPERTS, TOP_K, WIDTH, ROUTING = 8, 2, 512, 64


def rope(x):  # x: [B, T, H, Dh], rotating pairs (i, i + Dh/2)
    B, T, H, Dh = x.shape
    half = Dh // 2
    freq = 10000.0 ** (-torch.arange(half, dtype=torch.float32) * 2 / Dh)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * freq[None]  # [T, half]
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
        s = q @ k.transpose(-1, -2) / math.sqrt(d // HEADS)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return self.wo((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d))


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
            y = y.index_add(0, tok, (he @ self.wo[e][r0:]) * w[tok, slot, None])
        return y


class MoE(Experts):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D_MODEL, N_EXPERTS, bias=False)
        self.shared = SwiGLU(N_EXPERTS * ROUTING)

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
        self.ffn = {"dense": lambda: SwiGLU(8 * 64 + 2 * (512 - 64)), "moe": MoE, "uoe": UoE}[arch]()

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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="uoe", choices=["dense", "moe", "uoe"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--data", default="../shared/data/tinyshakespeare.txt")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    data = torch.frombuffer(bytearray(open(a.data, "rb").read()), dtype=torch.uint8).long()
    model = LM(a.arch)
    decay = [q for n, q in model.named_parameters() if q.dim() >= 2 and "embed" not in n]
    rest = [q for n, q in model.named_parameters() if not (q.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    B, T = 16, CONTEXT
    times = []
    for step in range(a.steps):
        starts = torch.randint(0, len(data) - T - 1, (B,))
        x = torch.stack([data[s:s + T] for s in starts])
        y = torch.stack([data[s + 1:s + T + 1] for s in starts])
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    steady = times[2:] if len(times) > 4 else times
    print(f"pytorch {torch.__version__} tiny-{a.arch}: {B * T * len(steady) / sum(steady):.0f} tokens/s "
          f"({a.threads} threads, {len(steady)} timed steps, last loss {loss.item():.3f})")


if __name__ == "__main__":
    main()
