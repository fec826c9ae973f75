"""The input ahead of a tick: what it reads now, whether it is a ramp, a jump or noise, and how far
a ramp is projected. Pure functions of the tick series, shared by the default policy's scale-up
sizing and its waits (`AutosizerPolicy`), so the simulator and the daemon forecast alike; the
reasons for each rule, with the runs that taught them, are in the functions' docstrings."""

from __future__ import annotations

import math

from autosizer.policies.base import Observation, Watermarks

JUMP = 1.25  # a tick this far above the four before it may be a jump's first, partly seen: projected
EDGE = 0.25  # a jump's tick that rose less than this share of the next one's rise saw only its edge


def input_now(obs: Observation, earlier: Watermarks | None) -> float:
    """The input now: the rate window's, or what the high watermarks grew by since the last tick
    when that is more. A rate window still averages in the time before a step for a window's
    length; the last tick has the whole step in it already."""
    if obs.watermarks is None or earlier is None:
        return obs.input_rate
    recent = obs.watermarks.rate_since(earlier)
    return obs.input_rate if recent is None else max(obs.input_rate, recent)


def forecast_input(times: tuple[float, ...], rates: tuple[float, ...], arrivals: tuple[float, ...],
             waited: bool, restart_downtime_s: float, horizon_s: float) -> float:
    """The input (records/s) over the restart and `horizon_s` after the last tick: the last
    tick's input (`arrivals[-1]`, `input_now`) plus the rise `trend` sees in both the rate
    window's series and the watermarks' (a rate window still taking in a step is not a ramp: the
    watermarks' series is flat by then). None is projected on the tick after a wait or after a
    jump's first (the watermarks' series decides for both: a mid-tick step reads as two rises in
    a row there, which the ramp rule would project; a ramp shows in the tick after this one). A
    ramp is projected no further than it has lasted (`ramp_age`), at least over the restart."""
    if waited or first_of_a_jump(arrivals[:-1]):
        return arrivals[-1]
    rising = trend(times, rates)
    if rising > 0:  # the smaller of the two: the second is not needed when the first is none
        rising = min(rising, trend(times, arrivals))
    ahead = restart_downtime_s + horizon_s
    if rising > 0 and not first_of_a_jump(arrivals):
        ahead = min(ahead, max(restart_downtime_s, ramp_age(times, arrivals)))
    return arrivals[-1] + rising * ahead


def trend(times: tuple[float, ...], rates: tuple[float, ...]) -> float:
    """Records/s per second the input is rising at, >= 0: on a ramp (three of the last four
    ticks rose) the smallest of the short (eight-tick) and long slopes, the last tick's, and the
    last five ticks' least-squares slope less two standard errors; on a jump's first tick the
    smallest of the first three; else none.
    A step rises in the short and long slopes for as long as the short one reaches back before
    it (40 s at a 5 s tick); the last tick's is flat once the rate window has held the step in
    full, so a step is not projected as a ramp (the demo's 100 -> 1,200/s step was forecast at
    4,031/s that way, and 16 -> 32 bought nothing it needed). One tick's slope is as noisy as two
    readings, and the horizon multiplies it (a tick a tenth above the one before forecast
    3,340/s for the same 1,200/s, and 8 -> 16 followed); a level's noise also rises in three of
    four ticks now and then, most often just after a rescale, when the rate window climbs back
    from the restart: run 56 read 482, 838, 1,214, 1,330, 1,130 and 1,617/s for 1,200/s, projected
    it to 3,580/s with the step still in the short slope, and went 8 -> 16 for nothing. A ramp
    rises beyond twice its scatter about the line (a clean one keeps its whole slope); five noisy
    ticks of a level seldom do (that tick's 82/s a tick, less two errors, is none).
    A jump's first tick (`_jumped`) still projects, since it may have caught only part of the jump
    (the demo's step read 840/s for 1,200/s there, and not projecting it went 1 -> 4 -> 8 in two
    of five replays); its second does not, the jump seen in full by then (`noise-spikes`' bursts
    were forecast at 16,784/s for 16,034/s there and went 8 -> 32 where 16 absorbs them). A rise
    by noise before a jump does not make the jump a second tick: the demo's step in session 21
    came after a tick that read 102/s for 91/s, was not projected, and went 1 -> 4 -> 8; nor a
    ramp, whose five ticks a jump scatters (run 58: 94, 93, 97, 100, then 602/s). From six ticks
    on (a daemon's first half-minute at a 5 s tick; the Kinesis demo's step lands on its sixth and
    read 281/s of 400/s there, unprojected, 1 -> 2 -> 4 -> 8), with fewer than eight the short
    slope is the long one."""
    if len(rates) < 6:
        return 0.0
    jump = first_of_a_jump(rates)  # it may be part seen
    if not jump and not _ramping(rates):  # a ramp rises in nearly every tick
        return 0.0  # a jump's second tick, seen in full by now, or noise
    now_t, now_r = sum(times[-3:]), sum(rates[-3:])  # sums of three: the 3s cancel in the slopes
    back = slice(-8, -5) if len(rates) >= 8 else slice(0, 3)  # a daemon's first ticks: from the first three
    short = (now_r - sum(rates[back])) / max(1e-9, now_t - sum(times[back]))
    long = (now_r - sum(rates[:3])) / max(1e-9, now_t - sum(times[:3]))
    latest = (rates[-1] - rates[-2]) / max(1e-9, times[-1] - times[-2])
    if jump:
        return max(0.0, min(short, long, latest))
    return max(0.0, min(short, long, latest, _sure_slope(times[-5:], rates[-5:])))  # beyond the scatter


def seen_in_part(arrivals: tuple[float, ...], band: float) -> str:
    """How the last tick's input rose, if it may have seen only part of a rise ("" if not): a
    jump's first tick, or the first to read past the scale-up band (`band`, records/s) after four
    within it. A step a second before a tick reads as a rise of a few percent: `cpu-bound`'s read
    647/s for 500 -> 2,700/s, under a quarter above the ticks before, past the band all the same,
    went 1 -> 2, and the next tick's 2,727/s waited out the overload cooldown for 4."""
    if first_of_a_jump(arrivals):
        return "jumped to"
    if (len(arrivals) >= 6 and arrivals[-1] > band >= max(arrivals[-5:-1])
            and not _jumped(arrivals[:-1]) and not _ramp_before(arrivals)):
        return "rose past the scale-up band to"
    return ""


def ramp_age(times: tuple[float, ...], arrivals: tuple[float, ...]) -> float:
    """Seconds the input has been rising: since the last tick that read within a tenth of its rise
    above the lowest input of the trend window (inf when a reading is unknown). A ramp is as
    likely to stop within as long again as to go on, so it is projected no further than this:
    run 63's 60 s demo ramp (100 -> 1,200/s, a daemon started 30 s before it) was projected
    121 s past its end at its slope, forecast 2,777/s for the 1,200/s it levelled at, and went
    8 -> 16, back to 8 fifty seconds later."""
    if not all(math.isfinite(a) for a in arrivals):
        return math.inf
    low = min(arrivals)
    near = low + 0.1 * (arrivals[-1] - low)
    last = max(k for k, a in enumerate(arrivals) if a <= near)
    return times[-1] - times[last]


def _ramp_before(arrivals: tuple[float, ...]) -> bool:
    """Was the input rising before the last tick, beyond its scatter (three of the last four ticks
    rose, and the five before the last on a line, `_sure_slope`)? A ramp that reaches the band shows on
    the ticks before it, and is projected, not waited for; a step's edge does not. Rises in three
    of four ticks alone are noise half the time: `step-up` with the step 2 s before a tick read
    1,993, 2,011, 2,060, then 2,534/s (past the band), was taken for a ramp, sized 4 -> 8 on it,
    and waited out the overload cooldown for 16 (`bench_trace_phase.py` at every second)."""
    before = arrivals[-6:-1]  # ticks are evenly spaced: their index serves as their time
    return _ramping(arrivals) and _sure_slope(tuple(map(float, range(len(before)))), before) > 0


def _ramping(rates: tuple[float, ...]) -> bool:
    """Did three of the last four ticks rise? A ramp does; a level's noise seldom does."""
    return sum(b > a for a, b in zip(rates[-5:-1], rates[-4:], strict=True)) >= 3


def first_of_a_jump(arrivals: tuple[float, ...]) -> bool:
    """Is the last tick a jump's first? Its watermarks may have caught only the jump's start: with
    metrics 8 s old (a 15 s scrape) `step-up`'s first tick read 3,867/s of 6,000/s, went 4 -> 8,
    and the next tick, which read the 6,000/s, had to wait out the cooldown for 16. A tick before
    it that jumped too is the jump's first only if it took in a fair share of it (`_edge_of`): a
    step landing a second before a tick reads as a rise of a quarter there, and the jump itself
    on the tick after (run 113's replay read 100, 127, then 942/s of a step to 1,200/s, took the
    127 for the jump's first and the 942 for its whole, and went 1 -> 4 where the real daemon,
    whose tick had read 88/s, waited and went 1 -> 8)."""
    return len(arrivals) >= 6 and _jumped(arrivals) and not (_jumped(arrivals[:-1]) and not _edge_of(arrivals))


def _edge_of(arrivals: tuple[float, ...]) -> bool:
    """Did the tick before the last rise by less than `EDGE` of what the last rose, both over the
    four ticks before that one? Then it saw the jump's edge, not the jump."""
    base = max(arrivals[-6:-2])
    return arrivals[-2] - base < EDGE * (arrivals[-1] - base)


def _jumped(rates: tuple[float, ...]) -> bool:
    """Did the last tick jump: read a quarter more than the highest of the four before it? A
    level's noise seldom does (the demo's 1,200/s read 1,000-1,620/s at a 5 s tick before the
    input was read over the watermarks' read times, where a tick a quarter above the one before
    was noise; runs 160 and 164 read 1,199-1,201/s over the last tick); a step's or a burst's
    first tick does (the demo's read 1,010/s after 91-107/s). Input staying at zero is no jump."""
    return rates[-1] > 0 and rates[-1] >= JUMP * max(rates[-5:-1])


def _sure_slope(times: tuple[float, ...], rates: tuple[float, ...]) -> float:
    """The least-squares slope less two standard errors: what the points rise by beyond their
    scatter about the line (a clean ramp keeps its slope; noise about a level keeps none)."""
    n = len(times)
    if n < 3:
        return 0.0
    mean_t, mean_r = sum(times) / n, sum(rates) / n
    spread = sum((t - mean_t) ** 2 for t in times)
    if spread <= 0:
        return 0.0
    slope = sum((t - mean_t) * (r - mean_r) for t, r in zip(times, rates, strict=True)) / spread
    scatter = sum((r - mean_r - slope * (t - mean_t)) ** 2 for t, r in zip(times, rates, strict=True))
    return slope - 2 * math.sqrt(scatter / (n - 2) / spread)
