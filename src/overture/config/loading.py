"""TOML loading, `--set key.path=value` overrides, and saving a resolved run configuration.

Errors name the file and the dotted key at fault (and the override, when one set it).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from overture.config.schema import RunConfig


class ConfigError(ValueError):
    """A configuration that cannot be loaded: the message names the file and the key."""


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split `a.b.c=value` into its key path and value; the value is read as a TOML literal
    (`3`, `1e-3`, `true`, `[1, 2]`, `"x"`) and taken as a bare string when it is not one."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY.PATH=VALUE, e.g. training.lr=1e-3")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.split("."), value


def apply_override(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set `value` at the dotted `path` inside nested dicts, creating sections as needed."""
    node = data
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {'.'.join(path)}: {part!r} is a value, not a section")
        node = child
    node[path[-1]] = value


def _describe(error: dict[str, Any]) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key"
    got = error.get("input")
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{key}: {error['msg']}{shown}"


def validate_config(data: dict[str, Any], source: str, overridden: set[str] = frozenset()) -> RunConfig:
    """Validate raw config data; every problem is listed with its dotted key and `source`."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"])
            culprit = next(
                (
                    o
                    for o in sorted(overridden)
                    if o == key or o.startswith(key + ".") or key.startswith(o + ".")
                ),
                None,
            )
            origin = f"--set {culprit}" if culprit else source
            lines.append(f"{origin}: {_describe(error)}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Read a TOML run configuration (or the defaults when `path` is None) and apply overrides."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"{source}: no such config file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    overridden = set()
    for text in overrides:
        key_path, value = parse_override(text)
        apply_override(data, key_path, value)
        overridden.add(".".join(key_path))
    return validate_config(data, source, overridden)


def config_to_toml(config: RunConfig) -> str:
    """The resolved configuration as TOML (unset optional values are omitted; they default to unset)."""
    return tomli_w.dumps(config.model_dump(mode="json", exclude_none=True))


def save_config(config: RunConfig, path: str | Path) -> None:
    """Write the resolved configuration, so that a run can be reproduced from its directory."""
    Path(path).write_text(config_to_toml(config))
