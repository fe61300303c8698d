"""Topologies on CUDA against the CPU backend (skipped without a GPU or a
CUDA build): Viterbi outputs bit for bit, log Z / posteriors / gradients
within float32 rounding, ctc_log_z = -ctc_loss on the GPU, lazy item
errors."""

import numpy as np
import pytest

import libmas

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and libmas.has_cuda()),
    reason="needs a CUDA device and libmas built with CUDA")


def _ctc(rng, B, S, V, L):
    x = torch.tensor(rng.standard_normal((B, S, V)) * 3, dtype=torch.float32)
    lp = torch.log_softmax(x, -1)
    tg = torch.tensor(rng.integers(1, V, (B, L)))
    il = torch.tensor(rng.integers(max(2 * L, 1), S + 1, B))
    tl = torch.tensor(rng.integers(0, L + 1, B))
    return lp, tg, il, tl


def test_forced_align_cuda_equals_cpu(rng):
    lp, tg, il, tl = _ctc(rng, 6, 120, 9, 30)
    cpu = libmas.forced_align(lp, tg, il, tl)
    gpu = libmas.forced_align(lp.cuda(), tg.cuda(), il.cuda(), tl.cuda())
    libmas.check_errors()
    for name in ("frame_labels", "token_spans", "score", "token_scores", "state_ids"):
        a, b = getattr(cpu, name), getattr(gpu, name)
        assert b.device.type == "cuda"
        assert torch.equal(a, b.cpu()), name


@pytest.mark.parametrize("k", [1, 3])
def test_viterbi_and_posterior_cuda_equal_cpu(rng, k):
    B, P, S = 4, 12, 60
    em = torch.randn(B, k * P, S)
    topo = libmas.Topology(k, stay=[-0.2] * k, advance=[-1.0] * k)
    Ls = torch.tensor(rng.integers(1, P + 1, B))
    Ss = torch.tensor(rng.integers(k * P, S + 1, B))
    cpu = libmas.viterbi(em, Ls, Ss, topo)
    gpu = libmas.viterbi(em.cuda(), Ls.cuda(), Ss.cuda(), topo)
    assert torch.equal(cpu.state_ids, gpu.state_ids.cpu())
    assert torch.equal(cpu.score, gpu.score.cpu())
    pc = libmas.state_posterior(em, Ls, Ss, topo)
    pg = libmas.state_posterior(em.cuda(), Ls.cuda(), Ss.cuda(), topo)
    torch.testing.assert_close(pg.cpu(), pc, atol=2e-4, rtol=0)


def test_ctc_log_z_cuda_equals_ctc_loss_and_gradient(rng):
    lp, tg, il, tl = _ctc(rng, 5, 80, 7, 20)
    lp, tg, il, tl = lp.cuda(), tg.cuda(), il.cuda(), tl.cuda()
    y = lp.clone().requires_grad_(True)
    lz = libmas.ctc_log_z(y, tg, il, tl)
    ref = -torch.nn.functional.ctc_loss(lp.double().transpose(0, 1), tg, il, tl,
                                        reduction="none")
    torch.testing.assert_close(lz.double(), ref, rtol=1e-5, atol=1e-4)
    lz.sum().backward()
    yc = lp.cpu().clone().requires_grad_(True)
    libmas.ctc_log_z(yc, tg.cpu(), il.cpu(), tl.cpu()).sum().backward()
    torch.testing.assert_close(y.grad.cpu(), yc.grad, atol=2e-4, rtol=0)


def test_cuda_item_errors_are_lazy(rng):
    lp, tg, il, tl = _ctc(rng, 3, 40, 5, 10)
    il[1] = 3  # 10 labels cannot fit 3 frames
    r = libmas.forced_align(lp.cuda(), tg.cuda(), il.cuda(), tl.clamp(min=5).cuda())
    with pytest.raises(ValueError, match="item 1"):
        r.score.sum().item()
        libmas.check_errors()
    assert int(r.state_ids[1, 0]) == -1


def _gpu_minimum(fn):
    """The smallest workspace the GPU call accepts, read from the error of a
    one-byte budget."""
    import re
    with pytest.raises(ValueError, match="needs on the GPU") as info:
        fn(1)
    return int(re.search(r"needs on the GPU: (\d+) bytes", str(info.value)).group(1))


@pytest.mark.parametrize("L", [30, 700])
def test_forced_align_cuda_budgets_equal_unbounded(rng, L):
    """Long form on the GPU (61 and 1401 states: one block an item or
    several when unbounded): the smallest budget, one between and the unbounded size give the
    unbounded outputs bit for bit, and the CPU's."""
    B, S, V = 3, 2 * L + 300, 9
    lp, tg, il, tl = _ctc(rng, B, S, V, L)
    args = (lp.cuda(), tg.cuda(), il.cuda(), tl.cuda())
    base = libmas.forced_align(*args)
    cpu = libmas.forced_align(lp, tg, il, tl)
    minimum = _gpu_minimum(lambda n: libmas.forced_align(*args, max_workspace_bytes=n))
    with pytest.raises(ValueError, match=f"needs on the GPU: {minimum} bytes"):
        libmas.forced_align(*args, max_workspace_bytes=minimum - 1)
    for budget in (minimum, 3 * minimum):
        r = libmas.forced_align(*args, max_workspace_bytes=budget)
        for name in ("frame_labels", "token_spans", "score", "token_scores", "state_ids"):
            assert torch.equal(getattr(r, name), getattr(base, name)), (budget, name)
            assert torch.equal(getattr(r, name).cpu(), getattr(cpu, name)), (budget, name)
    libmas.check_errors()


def test_viterbi_cuda_long_chain_budget(rng):
    """A 3-state HMM of 3000 states (several blocks an item, more than the
    soft sweep's one block holds) within the smallest budget."""
    k, P, S = 3, 1000, 3500
    topo = libmas.Topology(k, stay=[-0.2] * k, advance=[-1.0] * k)
    em = torch.randn(1, k * P, S)
    Ls, Ss = torch.tensor([P]), torch.tensor([S])
    cpu = libmas.viterbi(em, Ls, Ss, topo)
    args = (em.cuda(), Ls.cuda(), Ss.cuda(), topo)
    minimum = _gpu_minimum(lambda n: libmas.viterbi(*args, max_workspace_bytes=n))
    for budget in (None, minimum):
        r = libmas.viterbi(*args, max_workspace_bytes=budget)
        assert torch.equal(r.state_ids.cpu(), cpu.state_ids)
        assert torch.equal(r.score.cpu(), cpu.score)
    libmas.check_errors()


@pytest.mark.parametrize("k, P, S", [(3, 40, 200),     # one block an item (hard_small)
                                     (3, 150, 800),    # several blocks (hard_forward)
                                     (8, 6, 81)])      # rows not 16-byte aligned: several
def test_hmm_viterbi_routes_equal_cpu(rng, k, P, S):
    """Every output of a plain k-state chain, labels and uneven lengths
    included, is the CPU's bit for bit on each CUDA route."""
    B = 5
    em = torch.tensor(rng.standard_normal((B, k * P, S)), dtype=torch.float32)
    stay = list(-rng.random(k))
    topo = libmas.Topology(k, stay=stay, advance=list(-rng.random(k)))
    labels = torch.tensor(rng.integers(0, 50, (B, P * k)))
    Ls = torch.tensor(rng.integers(1, P + 1, B))
    Ls[0] = P
    Ss = torch.tensor([int(rng.integers(k * int(L), S + 1)) for L in Ls])
    cpu = libmas.viterbi(em, Ls, Ss, topo, labels=labels, gathered=False)
    gpu = libmas.viterbi(em.cuda(), Ls.cuda(), Ss.cuda(), topo, labels=labels.cuda(),
                         gathered=False)
    libmas.check_errors()
    for name in ("state_ids", "frame_labels", "token_spans", "token_scores", "score"):
        assert torch.equal(getattr(cpu, name), getattr(gpu, name).cpu()), name
