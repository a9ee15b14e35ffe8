"""The MXFP8 GEMMs and model on CUDA: the emulated GEMMs (quantize on the device, dequantize, float32
GEMM) give what they give on the CPU. Every test here is marked `gpu` and needs CUDA; CI never runs
them (`benchmarks/gpu_check.sh` does, on a machine with a GPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model_config

from overture.model import Transformer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def grouped_on(device: str, x, w, dy, counts):
    from overture.mx import grouped_linear

    x = x.to(device).requires_grad_()
    w = w.to(device).requires_grad_()
    y = grouped_linear(x, w, torch.tensor(counts, device=device), "mxfp8")
    y.backward(dy.to(device))
    return [t.detach().cpu() for t in (y, x.grad, w.grad)]


def test_the_grouped_gemm_on_cuda_matches_the_cpu():
    counts = [5, 0, 37, 22, 64]  # uneven groups, an empty one, one of whole blocks
    x, w, dy = torch.randn(sum(counts), 128), torch.randn(5, 96, 128), torch.randn(sum(counts), 96)
    on_cuda, on_cpu = grouped_on("cuda", x, w, dy, counts), grouped_on("cpu", x, w, dy, counts)
    for got, want in zip(on_cuda, on_cpu, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def loss_and_gradients(model: Transformer, tokens: torch.Tensor, device: str):
    model = model.to(device)
    model.zero_grad(set_to_none=True)
    tokens = tokens.to(device)
    logits = model(tokens[:, :-1]).logits
    loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
    loss.backward()
    gradients = torch.cat([p.grad.flatten().cpu() for p in model.parameters()])
    return loss.item(), gradients


def test_an_mxfp8_model_step_on_cuda_matches_the_cpu():
    """Loss and gradients of one MXFP8 training step agree across devices far more closely than
    MXFP8 agrees with float32 (activations summed in another order may round to a neighbouring
    FP8 value, so the devices are compared against the size of quantization's own effect)."""
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(precision="mxfp8", initializer_range=0.2))
    tokens = torch.randint(0, 96, (4, 33))
    cpu_loss, cpu_grads = loss_and_gradients(model, tokens, "cpu")
    cuda_loss, cuda_grads = loss_and_gradients(model, tokens, "cuda")
    model.set_precision("fp32")
    fp32_loss, fp32_grads = loss_and_gradients(model, tokens, "cuda")
    assert cuda_loss == pytest.approx(cpu_loss, rel=1e-4)
    device_gap = (cuda_grads - cpu_grads).norm()
    precision_gap = (cpu_grads - fp32_grads).norm()
    assert precision_gap > 0
    assert device_gap < 0.1 * precision_gap, (device_gap.item(), precision_gap.item())
    assert cuda_loss != fp32_loss
