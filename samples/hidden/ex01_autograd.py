# ruff: noqa: F821  (the names come from the exercise's given cells)
# Hidden checks for ex01_autograd: learners never see this file. Each `# %% check` cell runs
# right after the named task's own checks, in the learner's kernel, with the exercise's
# given names (torch, F64, torch_grads, ...). Seeded, so grading twice gives one report.

# %% check t2 points=1
gen = torch.Generator().manual_seed(18)
for _ in range(6):
    full = [int(s) for s in torch.randint(1, 5, (3,), generator=gen)]
    keep = int(torch.randint(0, 4, (1,), generator=gen))
    shape = [1 if bool(torch.rand(1, generator=gen) < 0.5) else s for s in full[keep:]]
    g = torch.randn(full, dtype=F64, generator=gen)
    b = torch.randn(shape, dtype=F64, generator=gen)
    (expected,) = torch_grads(lambda b, full=full: b.expand(*full), [b], g)
    assert torch.allclose(sum_to_shape(g, shape), expected), f"for {shape} from {full}"
