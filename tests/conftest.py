import os

import pytest
import torch

# Two cores are shared by Ray, envs and torch: one intra-op thread per process.
torch.set_num_threads(1)
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


@pytest.fixture
def tmp_logdir(tmp_path):
    return str(tmp_path / "run")
