"""What configures an engine: `EngineConfig`, the settings every engine shares (``--model``,
``--no-fork``, ``--max-tokens``...), and the typed engine options, what ``--engine-option
KEY=VALUE`` (or ``engine_options=`` in the Python API) may set, one dataclass per engine
(``engines/<name>/options.py``).

Fields are declared with `hpdparse.settings.setting()`: a one-line help, for engine options an
example for ``--help``, and bounds. Engine options' values are checked when the dataclass is
made and converted only where nothing is lost (an int where a number is wanted becomes a float;
an int where text is wanted becomes its digits, since JSON reads ``api_key=123`` as a number),
so a wrong type is a one-line EngineError naming the engine and the option, before any model is
loaded. `EngineOptions.from_mapping` also rejects the keys an engine does not know; an engine
that passes unknown keys on to a library (vllm's ``EngineArgs``) names the field that collects
them in ``PASSTHROUGH``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeVar

from hpdparse.errors import EngineError
from hpdparse.hpd.protocol import DEFAULT_MAX_MODEL_LEN, DEFAULT_MAX_TOKENS, DEFAULT_MODEL
from hpdparse.settings import Declaration, choices, declaration, field_types, setting

_MISSING = dataclasses.MISSING
Options = TypeVar("Options", bound="EngineOptions")


@dataclasses.dataclass
class EngineConfig:
    """The settings every engine shares; each engine's own are its options class
    (`Engine.options_class`, set with ``--engine-option``)."""

    model: str = setting(
        DEFAULT_MODEL,
        "Model: a hub id or a local folder (for openai: the served model name).",
        flag="--model",
    )
    revision: str | None = None
    fork: bool = setting(
        True, "Plain decoding, without hierarchical forks.", flag="--no-fork", negate=True
    )
    mtp: bool = setting(
        True, "No P-MTP speculative decoding (vllm, torch).", flag="--no-mtp", negate=True
    )
    speculative_tokens: int = setting(
        6, "Draft tokens per P-MTP step.", flag="--speculative-tokens", low=1, high=32
    )
    max_tokens: int = setting(
        DEFAULT_MAX_TOKENS, "Most tokens decoded for one page.", flag="--max-tokens", low=1
    )
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    device: str | None = setting(
        None, "torch device (cpu, cuda, cuda:1, mps); default: the best one.", flag="--device"
    )
    dtype: str | None = setting(
        None, "Model dtype (bfloat16, float16, float32); default: per device.", flag="--dtype"
    )


@dataclasses.dataclass
class EngineOptions:
    """The options of one engine. The base class has none."""

    engine: ClassVar[str] = "base"
    # The field (a dict) that collects keys this class does not declare, and how to name them in
    # an error; None: unknown keys are an error here.
    PASSTHROUGH: ClassVar[str | None] = None
    PASSTHROUGH_TAKES: ClassVar[str] = ""
    PASSTHROUGH_HELP: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = field_types(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            setattr(self, f.name, _convert(self.engine, f, hints[f.name], value))

    @classmethod
    def settable(cls) -> tuple[str, ...]:
        """The keys ``--engine-option`` takes (passthrough keys aside), sorted."""
        return tuple(sorted(f.name for f in dataclasses.fields(cls) if declaration(f).settable))

    @classmethod
    def takes(cls) -> str:
        """What an engine with a `PASSTHROUGH` field takes, as its unknown-option error says."""
        *first, last = [cls.PASSTHROUGH_TAKES, *cls.settable()]
        return f"{', '.join(first)} and {last}"

    @classmethod
    def from_mapping(
        cls: type[Options], values: Mapping[str, Any] | None, **settings: Any
    ) -> Options:
        """Options from ``--engine-option`` pairs (`values`, checked against `settable()`) and
        from flags (`settings`, given only where this class has such a field: `--server` for
        openai). Raise a one-line EngineError for an unknown key or a wrong value."""
        values = dict(values or {})
        names = {f.name for f in dataclasses.fields(cls)}
        known = set(cls.settable())
        kwargs = {k: v for k, v in settings.items() if k in names}
        if cls.PASSTHROUGH is None:
            check_engine_options(cls.engine, values, known)
        else:
            kwargs[cls.PASSTHROUGH] = {k: v for k, v in values.items() if k not in known}
            values = {k: v for k, v in values.items() if k in known}
        return cls(**{**kwargs, **values})

    @classmethod
    def coerce(cls: type[Options], options: EngineOptions | Mapping[str, Any] | None) -> Options:
        """`options` as an instance of this class: None gives the defaults, a mapping goes
        through `from_mapping`."""
        if options is None:
            return cls()
        if isinstance(options, cls):
            return options
        if isinstance(options, EngineOptions):
            raise EngineError(
                f"{cls.engine} engine: options of the {options.engine} engine given "
                f"({type(options).__name__}, not {cls.__name__})"
            )
        return cls.from_mapping(options)

    @classmethod
    def help(cls) -> str:
        """A one-line summary for ``--help``: the examples with their help texts."""
        declared = [declaration(f) for f in dataclasses.fields(cls)]
        parts = [f"{d.example} ({d.help})" for d in declared if d.settable and d.example]
        return ", ".join([cls.PASSTHROUGH_HELP, *parts] if cls.PASSTHROUGH_HELP else parts)


def check_engine_options(
    engine: str, options: Mapping[str, Any], known: Iterable[str], takes: str | None = None
) -> None:
    """Raise a one-line EngineError naming the options `engine` does not know, so a misspelt
    ``--engine-option`` is not silently ignored. `takes` describes the known ones when listing
    them would be too long."""
    known = set(known)
    unknown = sorted(set(options) - known)
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise EngineError(
            f"{engine} engine: unknown engine option{plural} {', '.join(unknown)}; "
            f"it takes {takes or ', '.join(sorted(known)) or 'none'}"
        )


def _convert(engine: str, f: dataclasses.Field, hint: Any, value: Any) -> Any:
    """`value` checked against the field's type (and bound), converted where that loses
    nothing; a one-line EngineError otherwise."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    allowed = list(typing.get_args(hint)) if union else [hint]
    if value is None and type(None) in allowed:
        return None
    for kind in allowed:
        converted = _as(kind, value)
        if converted is not _MISSING and _within(converted, declaration(f)):
            return converted
    raise EngineError(
        f"{engine} engine: {f.name} must be {_describe(allowed, declaration(f))}, got {value!r:.80}"
    )


# What each plain kind accepts (never a bool but for bool: True is an int in Python) and how
# it is converted; ``--engine-option api_key=123`` arrives as the int 123: it means the text.
_ACCEPTS: dict[type, tuple[tuple[type, ...], type]] = {
    bool: ((bool,), bool),
    int: ((int,), int),
    float: ((int, float), float),
    str: ((str, int), str),
}


def _as(kind: Any, value: Any) -> Any:
    """`value` as `kind`, or _MISSING."""
    if kind is Any:
        return value
    if typing.get_origin(kind) is Literal:
        return value if value in typing.get_args(kind) else _MISSING
    if typing.get_origin(kind) is dict or kind is dict:
        return dict(value) if isinstance(value, dict) else _MISSING
    if kind not in _ACCEPTS or (isinstance(value, bool) and kind is not bool):
        return _MISSING
    accepted, convert = _ACCEPTS[kind]
    return convert(value) if isinstance(value, accepted) else _MISSING


def _within(value: Any, declared: Declaration) -> bool:
    """Whether a number is inside its field's bounds (anything else is)."""
    if not isinstance(value, (int, float)):
        return True
    low, high = declared.low, declared.high
    if low is not None and (value <= low if declared.low_open else value < low):
        return False
    return high is None or value <= high


_KIND_WORDS = {bool: "true or false", str: "text", dict: "a JSON object", type(None): "None"}


def _describe(allowed: list[Any], declared: Declaration) -> str:
    words = []
    for kind in sorted(allowed, key=lambda kind: kind is type(None)):  # None last
        if typing.get_origin(kind) is Literal:
            words.append("one of " + ", ".join(choices(kind)))
        elif kind is int or kind is float:
            noun = "integer" if kind is int else "number"
            adjective = ""
            if declared.low == 0:
                adjective = "positive " if declared.low_open else "non-negative "
            words.append(f"{'an' if not adjective and kind is int else 'a'} {adjective}{noun}")
        else:
            words.append(_KIND_WORDS.get(typing.get_origin(kind) or kind, str(kind)))
    return " or ".join(words)
