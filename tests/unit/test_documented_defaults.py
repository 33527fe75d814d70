"""The defaults the docs state are the configs' defaults: a default changed in the code
alone (or in the docs alone) fails here."""

from pathlib import Path

import pytest

from distrl.alphazero.config import AlphaZeroConfig
from distrl.apex.config import ApexConfig
from distrl.appo.config import APPOConfig
from distrl.ppo.config import PPOConfig

DOCS = Path(__file__).resolve().parents[2] / "docs"

DOCUMENTED = [  # (doc, what it says, config, field, default)
    ("ppo.md", "`vf_clip_param` is off by default", PPOConfig, "vf_clip_param", None),
    ("appo.md", "APPO's defaults: `lr` 1e-3", APPOConfig, "lr", 1e-3),
    ("appo.md", "`lambda_` 1.0 (IMPALA's V-trace)", APPOConfig, "lambda_", 1.0),
    ("appo.md", "`num_epochs` 2", APPOConfig, "num_epochs", 2),
    ("apex.md", "`n_step` 3", ApexConfig, "n_step", 3),
    ("apex.md", "`prioritized_replay_alpha/beta/eps` 0.6/0.4/1e-6", ApexConfig,
     "prioritized_replay_alpha", 0.6),
    ("apex.md", "`prioritized_replay_alpha/beta/eps` 0.6/0.4/1e-6", ApexConfig,
     "prioritized_replay_beta", 0.4),
    ("apex.md", "`prioritized_replay_alpha/beta/eps` 0.6/0.4/1e-6", ApexConfig,
     "prioritized_replay_eps", 1e-6),
    ("alphazero.md", "`--dirichlet-fraction` 0.25", AlphaZeroConfig, "dirichlet_fraction",
     0.25),
    ("alphazero.md", "the first `--temperature-moves` 10 moves", AlphaZeroConfig,
     "temperature_moves", 10),
]


@pytest.mark.parametrize(("doc", "says", "config", "name", "default"), DOCUMENTED,
                         ids=[f"{c.__name__}.{n}" for _, _, c, n, _ in DOCUMENTED])
def test_the_documented_default_is_the_configs(doc, says, config, name, default):
    text = " ".join((DOCS / doc).read_text().split())  # lines wrap anywhere
    assert says in text, f"docs/{doc} no longer says {says!r}: update this table"
    assert getattr(config(), name) == default, (
        f"{config.__name__}.{name} defaults to {getattr(config(), name)!r}, but docs/{doc} "
        f"says {says!r}")


def test_every_ppo_knob_the_readme_lists_is_a_field_of_its_config():
    """README's list named `hiddens` as a PPO setting: PPOConfig(hiddens=...) was a
    TypeError. A plain name is PPOConfig's field, `model.x` ModelConfig's."""
    import dataclasses
    import re

    from distrl.models.config import ModelConfig

    readme = (DOCS.parent / "README.md").read_text()
    knobs = readme[readme.index("**PPO knobs**"):readme.index("## Your own env")]
    names = re.findall(r"`([a-z_.]+)`", knobs.split("Schedules are")[0])
    assert len(names) >= 20
    fields = {f.name for f in dataclasses.fields(PPOConfig)}
    fields |= {f"model.{f.name}" for f in dataclasses.fields(ModelConfig)}
    assert [n for n in names if n not in fields] == []
