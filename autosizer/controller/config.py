"""The daemon's configuration: a TOML file, then `AUTOSIZER_<SECTION>_<KEY>` environment overrides.

Everything is checked at start, before the daemon touches Redis or Prometheus, so a typo is one
line naming the file, the key and the fix rather than a stack trace at the first tick. Policy and
actuator settings are passed through to the named plug-in, which validates its own.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from autosizer.checks import duration, finite, whole
from autosizer.controller.backoff import BACKOFF_MAX_S, BACKOFF_S
from autosizer.controller.queries import DEFAULT_QUERIES
from autosizer.elasticity.store import StoreError, check_redis_url
from autosizer.policies.guards import Guards
from autosizer.policies.history import time_zone

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


class ConfigError(ValueError):
    """The configuration is unusable; the message names the key and what to write instead."""


@dataclass(frozen=True)
class JobSection:
    name: str = ""
    redis_url: str = DEFAULT_REDIS
    # where the job's traffic keeps its hours: the input history's days begin at this zone's
    # midnight, so a daily ramp stays at its hour across a daylight-saving change
    timezone: str = "UTC"


@dataclass(frozen=True)
class DaemonSection:
    interval_s: float = 15.0
    lease_ttl_s: float = 30.0  # a standby takes over within two of these after the leader dies
    listen: str = "127.0.0.1:9109"  # /metrics and /healthz; "" turns the endpoint off
    log_level: str = "info"
    journal_length: int = 10_000  # decisions kept in the Redis stream
    backoff_s: float = BACKOFF_S  # after a failed actuation, wait this long; doubles per failure
    backoff_max_s: float = BACKOFF_MAX_S  # the longest wait between failed actuations
    # A topic's multiplied partition count is adopted at once, and its new partitions are read
    # only behind their parents until the broker has had it this long: producers refresh their
    # metadata every 5 minutes by default, and until then they may write a moved key to its old
    # partition, whose records must come first.
    adopt_after_s: float = 300.0


@dataclass(frozen=True)
class PrometheusSection:
    url: str = "http://127.0.0.1:9090"
    timeout_s: float = 5.0
    window: str = "30s"  # the rate() window ($window in the queries): about two ticks
    selector: str = ""  # label matchers substituted for $selector, e.g. job="orders"
    queries: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_QUERIES))

    @property
    def window_s(self) -> float:
        """The window in seconds; ValueError naming the fix."""
        return duration(self.window, "[prometheus] window", "a duration such as 30s or 2m")


@dataclass(frozen=True)
class PluginSection:
    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    job: JobSection
    daemon: DaemonSection
    prometheus: PrometheusSection
    guards: Guards
    policy: PluginSection
    actuator: PluginSection
    source: str = "(defaults)"


SECTIONS: dict[str, type] = {
    "job": JobSection, "daemon": DaemonSection, "prometheus": PrometheusSection, "guards": Guards,
}
ENV_ALIASES = {"AUTOSIZER_JOB": ("job", "name"), "AUTOSIZER_REDIS_URL": ("job", "redis_url")}


def load_config(path: str | Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """Read `path` (None: defaults only), apply the environment, validate."""
    environ = os.environ if environ is None else environ
    source = str(path) if path else "(defaults)"
    raw: dict[str, Any] = {}
    if path:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} not found: pass --config PATH to an existing "
                              "file (see the README's config reference)") from None
        except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path} cannot be read ({type(exc).__name__}): pass "
                              "--config PATH to a readable TOML file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML ({exc}): fix the syntax") from None
    unknown = set(raw) - {*SECTIONS, "policy", "actuator"}
    if unknown:
        raise ConfigError(f"{source}: unknown section [{sorted(unknown)[0]}]: sections are "
                          f"{', '.join(sorted({*SECTIONS, 'policy', 'actuator'}))}")
    _apply_environment(raw, environ)
    sections = {name: read_section(source, name, cls, raw.get(name, {})) for name, cls in SECTIONS.items()}
    config = Config(
        **sections,
        policy=_plugin(source, "policy", raw.get("policy", {}), "autosizer"),
        actuator=_plugin(source, "actuator", raw.get("actuator", {}), "restart-in-driver"),
        source=source,
    )
    _check(config)
    return config


# AUTOSIZER_* variables read by other parts (the CLI, the pipeline, tests), not config keys.
OTHER_VARIABLES = frozenset({"AUTOSIZER_CONFIG", "AUTOSIZER_BOOTSTRAP", "AUTOSIZER_HOLD_AT_STEP",
                             "AUTOSIZER_PROPERTY_EXAMPLES", "AUTOSIZER_CHAOS_S", "AUTOSIZER_CHAOS_SEED"})


def _apply_environment(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    for var, (section, key) in ENV_ALIASES.items():
        if environ.get(var):
            raw.setdefault(section, {})[key] = environ[var]
    for var, value in environ.items():
        if not var.startswith("AUTOSIZER_") or var in ENV_ALIASES or var in OTHER_VARIABLES:
            continue
        _check_variable(var, raw)
        rest = var.removeprefix("AUTOSIZER_").lower()
        for section in (*SECTIONS, "policy", "actuator"):
            if rest.startswith(section + "_"):
                key = rest.removeprefix(section + "_")
                if section in ("policy", "actuator") and key != "name":
                    raw.setdefault(section, {}).setdefault("settings", {})[key] = _scalar(value)
                else:
                    raw.setdefault(section, {})[key] = value
                break


def _check_variable(var: str, raw: dict[str, Any]) -> None:
    """An AUTOSIZER_* variable must name a section and one of its keys: a typo
    (AUTOSIZER_GAURDS_MAX_FACTOR) would otherwise be ignored while the operator thinks it applies."""
    rest = var.removeprefix("AUTOSIZER_").lower()
    for section, cls in SECTIONS.items():
        if rest.startswith(section + "_"):
            key = rest.removeprefix(section + "_")
            if key in {f.name for f in fields(cls)}:
                return
            raise ConfigError(f"environment variable {var}: [{section}] has no setting {key!r}: "
                              f"known settings are {', '.join(sorted(f.name for f in fields(cls)))}")
    if rest.startswith(("policy_", "actuator_")):
        return  # checked by the plug-in against its own settings
    raise ConfigError(f"unknown environment variable {var}: use AUTOSIZER_<SECTION>_<KEY> with a "
                      f"section of {', '.join([*SECTIONS, 'policy', 'actuator'])}, or unset it")


def _scalar(text: str) -> Any:
    """An environment value as TOML would read it (number, bool), else the string itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def read_section(source: str, name: str, cls: type, values: Any) -> Any:
    """One section's settings, checked and typed as the config file's are (`source` names where
    they came from: a file, or a command-line flag such as the simulator's `--guard`)."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: [{name}] must be a table of settings")
    defaults = cls()
    known = {f.name for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{source}: unknown setting {key!r} in [{name}]: known settings are "
                              f"{', '.join(sorted(known))}")
        kwargs[key] = _coerce(source, name, key, value, getattr(defaults, key))
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ConfigError(f"{source}: [{name}] {exc}") from None


def _coerce(source: str, section: str, key: str, value: Any, default: Any) -> Any:
    """Environment strings become the type of the default; TOML values must already match it."""
    where = f"{source}: [{section}] {key} = {value!r}"
    if isinstance(default, Mapping):
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{where} must be a table of strings")
        return {**default, **value}
    if isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where} must be true or false")
    if isinstance(default, (int, float)):
        try:
            if isinstance(default, int) and not (isinstance(value, float) and value.is_integer()):
                return whole(value, where)
            return type(default)(finite(value, where))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string")
    return value


def _plugin(source: str, name: str, values: Any, default: str) -> PluginSection:
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    extra = set(values) - {"name", "settings"}
    if extra:
        raise ConfigError(f"{source}: unknown setting {sorted(extra)[0]!r} in [{name}]: use name "
                          f"and [{name}.settings]")
    settings = values.get("settings", {})
    if not isinstance(settings, dict):
        raise ConfigError(f"{source}: [{name}.settings] must be a table")
    chosen = values.get("name", default)
    if not isinstance(chosen, str) or not chosen:
        raise ConfigError(f"{source}: [{name}] name must be a registered {name} name")
    return PluginSection(chosen, settings)


def _check(config: Config) -> None:
    src, d, p = config.source, config.daemon, config.prometheus
    if not config.job.name:
        raise ConfigError(f"{src}: no job name: set [job] name or AUTOSIZER_JOB")
    if any(c in config.job.name for c in "{}: \t\n"):
        raise ConfigError(f"{src}: invalid [job] name {config.job.name!r}: use letters, digits, "
                          "'-', '_' or '.'")
    if not config.job.redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"{src}: [job] redis_url must start with redis:// or rediss://")
    try:
        time_zone(config.job.timezone, "[job] timezone")
    except ValueError as exc:
        raise ConfigError(f"{src}: {exc}") from None
    if not 0.1 <= d.interval_s <= 86400:
        raise ConfigError(f"{src}: [daemon] interval_s must be between 0.1 and 86400 seconds, "
                          f"not {d.interval_s}")
    if d.lease_ttl_s < 2 * d.interval_s:
        raise ConfigError(f"{src}: [daemon] lease_ttl_s {d.lease_ttl_s:g} must be at least twice "
                          f"interval_s ({2 * d.interval_s:g}), or the leader loses it between ticks")
    port = d.listen.rsplit(":", 1)[1] if ":" in d.listen else ""
    if d.listen and not (port.isascii() and port.isdigit() and 0 <= int(port) <= 65535):
        raise ConfigError(f"{src}: [daemon] listen {d.listen!r} must be HOST:PORT with a port "
                          "0-65535 (or \"\" for none)")
    if not 0 < d.backoff_s <= d.backoff_max_s:
        raise ConfigError(f"{src}: [daemon] backoff_s must be > 0 and at most backoff_max_s "
                          f"({d.backoff_max_s:g}), not {d.backoff_s:g}")
    if not 0 <= d.adopt_after_s <= 86400:
        raise ConfigError(f"{src}: [daemon] adopt_after_s must be between 0 and 86400 seconds, "
                          f"not {d.adopt_after_s:g}")
    if d.log_level not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"{src}: [daemon] log_level must be debug, info, warning or error")
    if not 1 <= d.journal_length <= 10_000_000:
        raise ConfigError(f"{src}: [daemon] journal_length must be between 1 and 10000000")
    if not p.url.startswith(("http://", "https://")):
        raise ConfigError(f"{src}: [prometheus] url {p.url!r} must start with http:// or https://")
    try:
        window = p.window_s
    except ValueError as exc:
        raise ConfigError(f"{src}: {exc}") from None
    if not 1 <= window <= 86400:
        raise ConfigError(f"{src}: [prometheus] window must be between 1s and 24h, not {p.window!r}")
    if not 0 < p.timeout_s <= 600:
        raise ConfigError(f"{src}: [prometheus] timeout_s must be > 0 and <= 600")
    if not config.job.redis_url.startswith("unix://"):
        try:
            check_redis_url(config.job.redis_url)
        except StoreError as exc:
            raise ConfigError(f"{src}: [job] redis_url: {exc}") from None
    extra = set(p.queries) - set(DEFAULT_QUERIES)
    if extra:
        raise ConfigError(f"{src}: [prometheus.queries] has unknown query {sorted(extra)[0]!r}: "
                          f"queries are {', '.join(DEFAULT_QUERIES)}")
