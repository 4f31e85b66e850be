"""PyTorch integration: torchrun identity, a recorder for hand-written loops, torch.compile
time, distributed checkpoints, stragglers and profiles (extra `mlgoodput[torch]`).

    import mlgoodput.torch as mt
    gp = mt.TorchRecorder(job_name="my-job", store="sqlite:///goodput.db")   # rank from torchrun
    mt.init(job_name="my-job", recorder=gp)       # torch.compile time -> program startup, metrics
    with gp.job():
        for step, batch in gp.steps(loader):
            train_step(batch)

Callbacks: `mlgoodput.torch.lightning.GoodputCallback` (PyTorch Lightning) and
`mlgoodput.torch.hf.GoodputCallback` (Hugging Face Trainer). Checkpoints:
`mlgoodput.torch.checkpoint`. Nothing imports torch until it is needed.
"""

from mlgoodput.torch._compile import (
    NAMESPACE,
    CompileSession,
    CompileStats,
    compile_stats,
    current,
    init,
    shutdown,
)
from mlgoodput.torch._flops import flop_counter
from mlgoodput.torch._identity import TorchrunIdentity, torchrun_identity
from mlgoodput.torch._profiler import TorchProfiler, use_torch_profiler
from mlgoodput.torch._recorder import TorchRecorder
from mlgoodput.torch._stragglers import (
    MIN_LEAD_FRACTION,
    MIN_LEAD_S,
    RankStepStats,
    StragglerAnalysis,
    StragglerReport,
    StragglerVerdict,
    compare_step_starts,
    saved_stragglers,
    stragglers,
)
from mlgoodput.torch._stragglers import analyze as analyze_stragglers
from mlgoodput.torch._watch import CompletionWatcher

__all__ = [
    "MIN_LEAD_FRACTION",
    "MIN_LEAD_S",
    "NAMESPACE",
    "CompileSession",
    "CompileStats",
    "CompletionWatcher",
    "RankStepStats",
    "StragglerAnalysis",
    "StragglerReport",
    "StragglerVerdict",
    "TorchProfiler",
    "TorchRecorder",
    "TorchrunIdentity",
    "analyze_stragglers",
    "compare_step_starts",
    "compile_stats",
    "current",
    "flop_counter",
    "init",
    "saved_stragglers",
    "shutdown",
    "stragglers",
    "torchrun_identity",
    "use_torch_profiler",
]
