"""A small training step through flyasm.attention: forward and backward on our gfx950 kernels.

    python3 examples/attention_training_step.py [--backend emu|hip] [--steps N]

A one-layer causal self-attention block (bf16 weights, 2 query heads sharing 1 key/value head of
dimension 128) learns to reproduce a fixed random target. Its attention is flyasm.attention: the
forward runs kernels/fa_fwd_set.py's kernel, and loss.backward() runs the attention-backward
pipeline of kernels/fa_bwd_set.py (D = rowsum(dO∘O), then dQ/dK/dV, then dQ's conversion), in the
CPU emulator by default (the first run builds both kernel sets into ~/.cache/flyasm). Each step
prints the loss and how far the weight gradients are from the same block with torch's
scaled_dot_product_attention in float64.
"""
from __future__ import annotations

import argparse

import torch

import flyasm

B, S, E, HQ, HKV, D = 1, 64, 128, 2, 1, 128


class Block(torch.nn.Module):
    def __init__(self, attention):
        super().__init__()
        self.q = torch.nn.Linear(E, HQ * D, bias=False)
        self.kv = torch.nn.Linear(E, 2 * HKV * D, bias=False)
        self.out = torch.nn.Linear(HQ * D, E, bias=False)
        self.attention = attention

    def forward(self, x):
        q = self.q(x).view(B, S, HQ, D).transpose(1, 2)                  # [B, H, S, D]
        k, v = self.kv(x).view(B, S, 2, HKV, D).permute(2, 0, 3, 1, 4)
        o = self.attention(q, k, v)
        return self.out(o.transpose(1, 2).reshape(B, S, HQ * D))


def torch_attention(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def main(steps: int = 2, backend: str = "emu", kernels=None, bwd_kernels=None, lr: float = 0.5) -> list[float]:
    torch.manual_seed(0)
    ours = Block(lambda q, k, v: flyasm.attention(q, k, v, causal=True, backend=backend, kernels=kernels,
                                                  bwd_kernels=bwd_kernels)).bfloat16()
    ref = Block(torch_attention).double()
    x, target = torch.randn(B, S, E).bfloat16(), torch.randn(B, S, E).bfloat16()
    losses = []
    for step in range(steps):
        ref.load_state_dict({n: p.double() for n, p in ours.state_dict().items()})
        loss = torch.nn.functional.mse_loss(ours(x).float(), target.float())
        loss.backward()
        torch.nn.functional.mse_loss(ref(x.double()), target.double()).backward()
        diffs = {n: float((p.grad.double() - r.grad).abs().max() / r.grad.abs().max())
                 for (n, p), r in zip(ours.named_parameters(), ref.parameters())}
        print(f"step {step}: loss {loss.item():.5f}; weight gradients vs float64 SDPA, max |diff| / max |grad|: "
              + ", ".join(f"{n} {d:.1e}" for n, d in diffs.items()))
        losses.append(loss.item())
        with torch.no_grad():
            for p, r in zip(ours.parameters(), ref.parameters()):
                p -= lr * p.grad
                p.grad = None
                r.grad = None
    return losses


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="emu", choices=["emu", "hip"])
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    main(a.steps, a.backend)
