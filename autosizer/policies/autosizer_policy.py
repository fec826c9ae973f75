"""`autosizer`, the default policy: size for the input ahead, scale down rarely, learn ceilings.

What it adds to the utilization rule, and why:
- Forecast. The input rate is projected over the restart downtime plus `horizon_s` with the
  smaller of two slopes, over the last 75 s and over `trend_window_s`: a ramp rises in both, a
  step that already happened only in the long one, so a step is not mistaken for a ramp.
- One jump. The factor covers the forecast at `target_utilization` and drains the lag, plus the
  input that piles up during the measured restart, within `catch_up_seconds`; a step change is
  met by one rescale rather than a ladder.
- Hysteresis. It scales down only when the smaller factor would run at or below
  `scale_down_utilization` of the highest input over `trend_window_s`, and never while the
  job is catching up (FLINK-31318's vicious cycle: a scale-down during backlog slows catch-up).
- Ineffective scale-ups. After a scale-up settles it compares the job's capacity before and
  after. If capacity grew by less than a quarter of what the factor promised (CPU-bound work past
  the core count), it steps back and remembers that factor as a ceiling for `ceiling_memory_s`.
- Hot keys. When one virtual task holds most of the lag, its backlog is one key's or one
  bucket's; more buckets cannot split it, so that lag is left out of the sizing.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from autosizer.elasticity import MAX_FACTOR
from autosizer.policies.base import Decision, Observation, factor_for, fraction, positive


@dataclass(frozen=True)
class AutosizerState:
    times: tuple[float, ...] = ()  # input rate samples over the trend window: when
    rates: tuple[float, ...] = ()  # and how much, records/s
    factor: int | None = None  # the factor seen last tick
    capacity: float | None = None  # the job's capacity (records/s) seen last tick
    task_rate: float | None = None  # the last measured capacity of one virtual task
    trial: tuple[int, int, float] | None = None  # (old factor, new factor, capacity before)
    ceiling: int | None = None
    ceiling_until: float = -math.inf


class AutosizerPolicy:
    name = "autosizer"

    def __init__(self, target_utilization: float = 0.8, scale_down_utilization: float = 0.5,
                 catch_up_seconds: float = 300.0, horizon_s: float = 120.0,
                 settle_s: float = 60.0, ceiling_memory_s: float = 6 * 3600.0,
                 hot_lag_share: float = 0.5, trend_window_s: float = 600.0):
        self.target = fraction("target_utilization", target_utilization)
        self.down = fraction("scale_down_utilization", scale_down_utilization)
        if self.down >= self.target:
            raise ValueError(f"scale_down_utilization {scale_down_utilization!r} must be below "
                             f"target_utilization {target_utilization!r}, or the policy would flap")
        self.catch_up = positive("catch_up_seconds", catch_up_seconds)
        self.horizon = positive("horizon_s", horizon_s)
        self.settle = positive("settle_s", settle_s)
        self.memory = positive("ceiling_memory_s", ceiling_memory_s)
        self.hot_share = fraction("hot_lag_share", hot_lag_share)
        self.window = positive("trend_window_s", trend_window_s)

    def decide(self, observation: Observation, state: Any = None) -> tuple[Decision, Any]:
        obs, current = observation, observation.factor
        last = state if isinstance(state, AutosizerState) else AutosizerState()
        keep = bisect.bisect_right(last.times, obs.time - self.window)
        times, rates = (*last.times[keep:], obs.time), (*last.rates[keep:], obs.input_rate)
        task_rate = obs.task_capacity or last.task_rate
        capacity = (task_rate or 0.0) * obs.partition_count * current
        trial, ceiling, ceiling_until = last.trial, last.ceiling, last.ceiling_until
        if last.factor is not None and current != last.factor:
            # A scale-up since the last tick is on trial against the capacity seen before it.
            trial = (last.factor, current, last.capacity) if current > last.factor and last.capacity else None

        def answer(factor: int, reason: str, details: dict[str, Any]) -> tuple[Decision, Any]:
            return Decision(factor, reason, details), AutosizerState(
                times, rates, current, capacity or None, task_rate, trial, ceiling,
                ceiling_until)

        if task_rate is None:
            return answer(current, "hold: no virtual task busy enough to measure capacity", {})
        if trial and obs.since_rescale_s < self.settle:
            return answer(current, f"hold: scale-up {trial[0]} -> {trial[1]} settling, judged after "
                                   f"{self.settle:.0f}s", {"task_rate": task_rate})
        if trial:
            old, new, before = trial
            gained, promised = capacity / before - 1, new / old - 1
            trial = None
            if gained < 0.25 * promised:
                ceiling, ceiling_until = old, obs.time + self.memory
                return answer(old, f"scale-up {old} -> {new} raised capacity {gained:+.0%} of the "
                                   f"{promised:.0%} promised: back to {old}, ceiling for "
                                   f"{self.memory / 3600:g}h",
                              {"capacity_before": before, "capacity_after": capacity})

        forecast = obs.input_rate + _trend(times, rates) * (obs.restart_downtime_s + self.horizon)
        lag, hot = obs.lag_records, None
        task_lag = obs.tasks.lag_records
        # Only under factor > 1: at factor 1 a task is a whole partition, and splitting it helps.
        if current > 1 and len(task_lag) > 1 and lag > obs.input_rate:  # a backlog of > 1 s
            top = int(task_lag.argmax())
            if task_lag[top] >= self.hot_share * lag:
                hot = obs.tasks.names[top]
                lag -= float(task_lag[top])
        details: dict[str, Any] = {"forecast": forecast, "task_rate": task_rate, "lag": lag,
                                   "utilization": forecast / capacity}
        if hot is not None:
            details["hot_task"] = hot

        wish = self._cover(forecast, lag, obs, task_rate)
        if wish > current:
            reason = f"forecast {forecast:.0f}/s and lag {lag:.0f} need {wish} at {task_rate:.1f}/s per task"
        elif lag > 0 and float(obs.partitions.lag_seconds.max()) > max(10.0, 2 * obs.restart_downtime_s):
            wish, reason = current, "hold: catching up, never scale down during backlog"
        else:
            peak = max(forecast, max(rates))
            wish = min(current, factor_for(peak / (task_rate * self.down), obs.partition_count))
            reason = (f"input {peak:.0f}/s fits {wish} at <= {self.down:.0%} utilization" if wish < current
                      else f"hold: utilization {forecast / capacity:.0%} in band")
        if hot is not None:
            reason += f"; hot key in {hot} left out (more buckets do not split one key)"
        if ceiling is not None and obs.time < ceiling_until and wish > ceiling:
            wish = ceiling
            reason = (f"hold at {wish}" if wish == current else f"back to {wish}") + (
                f": {ceiling} is a learned ceiling (a scale-up past it did not help)")
        return answer(wish, reason, details)

    def _cover(self, forecast: float, lag: float, obs: Observation, task_rate: float) -> int:
        """The smallest factor that runs the forecast at target and drains the lag in time."""
        backlog = lag + forecast * obs.restart_downtime_s
        factor = factor_for(forecast / (task_rate * self.target), obs.partition_count)
        while factor < MAX_FACTOR:
            spare = task_rate * obs.partition_count * factor - forecast
            if spare > 0 and backlog / spare <= self.catch_up:
                break
            factor *= 2
        return factor


def _trend(times: tuple[float, ...], rates: tuple[float, ...]) -> float:
    """Records/s per second the input is rising at: the smaller of the short and long slopes, >= 0."""
    if len(rates) < 8:
        return 0.0
    now_t, now_r = sum(times[-3:]), sum(rates[-3:])  # sums of three: the 3s cancel in the slopes
    short = (now_r - sum(rates[-8:-5])) / max(1e-9, now_t - sum(times[-8:-5]))
    long = (now_r - sum(rates[:3])) / max(1e-9, now_t - sum(times[:3]))
    return max(0.0, min(short, long))
