"""`make setup` compiles the simulator's kernels once, so no test worker compiles them again."""

from autosizer.simulator import engine
from autosizer.simulator.warm import compile_kernels


def test_warming_compiles_the_continuous_and_the_batch_kernels_with_and_without_limits():
    compile_kernels()
    # each kernel is compiled without a layout change's limits (None) and with them
    assert "none" in {str(s[-1]) for s in engine._fluid.signatures}
    assert any(str(s[-1]).startswith("_Limits(") for s in engine._fluid.signatures)
    assert "none" in {str(s[15]) for s in engine._batches.signatures}
    assert any(str(s[15]).startswith("_Limits(") for s in engine._batches.signatures)
