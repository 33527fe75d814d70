"""ModelConfig: the network knobs every algorithm shares (RLlib's names); check_choices,
the check of Literal fields every config shares (here, on the lowest floor that has one)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from dataclasses import dataclass, replace
from typing import Any, Literal


def check_choices(config: Any) -> None:
    """Every Literal field of a config dataclass holds one of its values, as the CLI
    checks them: from Python, ``RunConfig(stop_on="evall")`` trained as if on "train"."""
    hints = _hints(type(config))
    for field in dataclasses.fields(config):
        choices, others = _choices(hints[field.name])
        value = getattr(config, field.name)
        if not choices or value in choices or isinstance(value, others):
            continue
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        raise ValueError(f"`{field.name}` ({value!r}) must be one of "
                         f"{', '.join(repr(c) for c in choices)}"
                         + (f" (did you mean {close[0]!r}?)." if close else "."))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # a fraction of a millisecond: once per class


def _choices(hint: Any) -> tuple[tuple[Any, ...], tuple[type, ...]]:
    """A type's Literal values, and the plain types a union allows beside them."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint), ()
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        parts = [_choices(arm) for arm in typing.get_args(hint)]
        choices = tuple(c for values, _ in parts for c in values)
        others = tuple(arm for arm in typing.get_args(hint) if isinstance(arm, type)
                       and typing.get_origin(arm) is None)
        return choices, others
    return (), ()


@dataclass(frozen=True)
class ModelConfig:
    """Networks; RLlib's names where RLlib has one. Image observations (see is_image) go
    through a conv stack first and the dense layers (hiddens) follow it: for Atari,
    ``ModelConfig(hiddens=(512,), activation="relu")`` is Nature DQN's network."""

    hiddens: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the policy (and value) MLP, after the conv stack for images.
    With use_lstm they come before the LSTM, and may be () (the LSTM reads the
    observation, or the conv features, itself)."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation between hidden layers."""
    vf_share_layers: bool = False
    """Share the hidden layers between policy and value function (then tune vf_loss_coeff)."""
    conv_filters: tuple[tuple[int, int, int], ...] | None = None
    """Conv layers for image observations as (out_channels, kernel, stride); None: Nature
    DQN's ((32, 8, 4), (64, 4, 2), (64, 3, 1)). Set, they also encode any other Box of 2
    or 3 dims laid out as an image is, e.g. a board's (6, 7, 2) planes (connect four:
    ((128, 4, 1),) sees every line of four in one kernel); other observations ignore it."""
    conv_activation: Literal["relu", "tanh"] = "relu"
    """Activation after each conv layer."""
    vf_hiddens: tuple[int, ...] | None = None
    """Hidden sizes of the value MLP (None: hiddens); ignored with vf_share_layers."""
    vf_activation: Literal["tanh", "relu"] | None = None
    """Activation of the value MLP (None: activation)."""
    free_log_std: bool = True
    """Box actions: a state-independent log-std parameter (PPO paper); False: the policy
    head outputs the log-std too."""
    log_std_init: float = 0.0
    """Initial log-std of Box actions (SB3's log_std_init; -0.5 .. -2 suit MuJoCo)."""
    sde_sample_freq: int = 0
    """Box actions, > 0: generalized state-dependent exploration (gSDE, Raffin et al.
    2022; SB3's use_sde): the action noise is a linear map of the policy's last hidden
    features, the map redrawn every sde_sample_freq steps, so exploration is smooth in
    time (rl-zoo uses 4 on Pendulum); log_std is then a matrix [features, actions] and
    needs free_log_std. 0: independent Gaussian noise each step."""
    action_scaling: bool = False
    """Box actions: the policy acts in [-1, 1] per dimension, its actions clipped there
    and mapped linearly onto the space's bounds (Tianshou's action_scaling), so that its
    noise and steps keep the same proportion to every bound (Humanoid's are +-0.4).
    Needs finite bounds; off: actions are in the env's units, clipped to the bounds."""
    ortho_init: bool = True
    """Orthogonal initialisation (gain sqrt(2), 0.01 for the policy head, 1 for the value
    head) as in SB3/CleanRL; False: torch's default."""
    observation_filter: Literal["NoFilter", "MeanStdFilter"] = "NoFilter"
    """MeanStdFilter: normalize flat observations by running mean/std (clipped to +-10);
    the statistics live in the network's buffers, so checkpoints and eval apply them."""

    use_lstm: bool = False
    """An LSTM core between the encoder (conv stack and hiddens) and the heads, for
    partially observed tasks (RLlib's use_lstm): PPO, DD-PPO and league learners (a
    state per game and seat). Without vf_share_layers the value function has its own
    hiddens and LSTM. Ape-X refuses it."""
    lstm_cell_size: int = 256
    """Hidden and cell size of the LSTM."""
    lstm_forget_bias: float | None = None
    """Initial bias of the LSTM's forget gate (None: torch's uniform init, about 0). 1.0
    keeps the cell's contents through long gaps from the start (Jozefowicz et al. 2015)."""
    lstm_head_hiddens: tuple[int, ...] = ()
    """Hidden layers between the LSTM and each linear head (): the heads read the LSTM's
    output, as RLlib's; SB3's RecurrentPPO puts its net_arch here, and hiddens=() with
    this (64,) is its layout."""
    lstm_use_prev_action: bool = False
    """Feed the previous action (one-hot if discrete) to the LSTM with the features."""
    lstm_use_prev_reward: bool = False
    """Feed the previous reward to the LSTM with the features."""
    lstm_next_obs_loss: float = 0.0
    """Weight of an auxiliary loss on the policy's LSTM (0: none): a linear head reads
    the LSTM's output and the action taken and predicts the change to the next
    observation (standardized per dimension over the minibatch), learned with the
    policy's loss. It teaches the memory what the observation leaves out (CartPole's
    velocities) from every step, not only through the returns: an auxiliary task in the
    sense of Jaderberg et al. 2017. Flat (1-D) observations."""
    max_seq_len: int = 20
    """Training sequences' length: backprop through time is truncated here (RLlib's 20);
    sequences also end where episodes do."""

    def feedforward(self) -> ModelConfig:
        """This network without its LSTM: the hidden layers before and after it in one
        MLP (a memory task's control, the same layers but no memory)."""
        return replace(self, use_lstm=False, hiddens=self.hiddens + self.lstm_head_hiddens,
                       lstm_head_hiddens=(), lstm_next_obs_loss=0.0)

    def __post_init__(self) -> None:
        check_choices(self)
        if (not self.hiddens and not self.use_lstm) or any(h <= 0 for h in self.hiddens):
            raise ValueError(
                f"`hiddens` {self.hiddens} must be non-empty positive sizes, e.g. (64, 64) "
                "(() only with use_lstm)."
            )
        if any(h <= 0 for h in self.lstm_head_hiddens) or (self.lstm_head_hiddens
                                                          and not self.use_lstm):
            raise ValueError(f"`lstm_head_hiddens` {self.lstm_head_hiddens} must be positive "
                             "sizes, and needs use_lstm (without it, add them to hiddens).")
        if self.conv_filters is not None and (
                not self.conv_filters or any(len(f) != 3 or min(f) <= 0
                                             for f in self.conv_filters)):
            raise ValueError(f"`conv_filters` {self.conv_filters} must be (out_channels, "
                             "kernel, stride) triples of positive ints, e.g. ((16, 8, 4),).")
        if self.sde_sample_freq < 0 or (self.sde_sample_freq and not self.free_log_std):
            raise ValueError(f"`sde_sample_freq` ({self.sde_sample_freq}) must be >= 0, and "
                             "gSDE (> 0) needs free_log_std=True.")
        if self.lstm_forget_bias is not None and not math.isfinite(self.lstm_forget_bias):
            raise ValueError(f"`lstm_forget_bias` ({self.lstm_forget_bias}) must be a finite "
                             "number (1.0 for long memory) or None (torch's init).")
        if not (math.isfinite(self.lstm_next_obs_loss) and self.lstm_next_obs_loss >= 0) or (
                self.lstm_next_obs_loss and not self.use_lstm):
            raise ValueError(f"`lstm_next_obs_loss` ({self.lstm_next_obs_loss}) must be a "
                             "finite weight >= 0, and > 0 needs use_lstm.")
        if self.lstm_cell_size <= 0 or self.max_seq_len <= 0:
            raise ValueError(f"`lstm_cell_size` ({self.lstm_cell_size}) and `max_seq_len` "
                             f"({self.max_seq_len}) must be > 0.")
