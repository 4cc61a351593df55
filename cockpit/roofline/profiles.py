"""Hardware and model profiles: the packaged `profiles.yaml`, looked up by id or alias.
Ids are matched case-insensitively, with spaces and underscores read as hyphens."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml

from cockpit.roofline.model import DTYPES, Hardware, ModelProfile

T = TypeVar("T")

PROFILES_RESOURCE = "profiles.yaml"


class ProfileFieldError(ValueError):
    """A profile field with a bad value; `field` names it so config can point at its line."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field}: {problem}")
        self.field = field


def normalize_id(profile_id: str) -> str:
    """The form ids are compared in: lower case, hyphens for spaces and underscores."""
    return "-".join(profile_id.strip().lower().replace("_", " ").split())


class ProfileTable(Mapping[str, T], Generic[T]):
    """Profiles by canonical id (all iteration yields); a lookup also takes an alias, any case."""

    def __init__(self, kind: str, profiles: Mapping[str, T], aliases: Mapping[str, str]) -> None:
        self._kind = kind
        self._profiles = dict(profiles)
        self._index = {normalize_id(k): k for k in profiles}
        for alias, target in aliases.items():
            self._index.setdefault(normalize_id(alias), target)

    def __getitem__(self, profile_id: str) -> T:
        canonical = self._index.get(normalize_id(profile_id))
        if canonical is None:
            known = ", ".join(self._profiles)
            raise KeyError(f"unknown {self._kind} {profile_id!r}; known: {known}")
        return self._profiles[canonical]

    def __iter__(self) -> Iterator[str]:
        return iter(self._profiles)

    def __len__(self) -> int:
        return len(self._profiles)

    def aliases_of(self, canonical: str) -> list[str]:
        return [a for a, t in self._index.items() if t == canonical and a != canonical]


def _positive_number(mapping: Mapping[str, Any], field: str) -> float:
    raw = mapping.get(field)
    if raw is None:
        raise ProfileFieldError(field, "missing (expected a positive number)")
    try:
        value = math.nan if isinstance(raw, bool) else float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ProfileFieldError(field, "expected a positive number")
    return value


def _positive_int(mapping: Mapping[str, Any], field: str) -> int:
    value = _positive_number(mapping, field)
    if not value.is_integer():
        raise ProfileFieldError(field, "expected a positive whole number")
    return int(value)


def _optional(
    mapping: Mapping[str, Any], field: str, read: Callable[[Mapping[str, Any], str], T]
) -> T | None:
    return read(mapping, field) if mapping.get(field) is not None else None


def _name(profile_id: str, mapping: Mapping[str, Any], known: set[str]) -> str:
    """The profile's name (its id by default), once every field is one of `known`."""
    for key in mapping:
        if key not in known:
            raise ProfileFieldError(str(key), f"unknown field (known: {', '.join(sorted(known))})")
    name = mapping.get("name", profile_id)
    if not isinstance(name, str) or not name.strip():
        raise ProfileFieldError("name", "expected a non-empty string")
    return name


_OTHER_PEAK_FIELDS = {f"peak_flops_{dtype}": dtype for dtype in DTYPES if dtype != "bf16"}
"""`peak_flops` is the dense BF16 peak; `peak_flops_fp8` and the like the other formats'."""
_HARDWARE_FIELDS = {"name", "peak_flops", "bandwidth", "memory_bytes", *_OTHER_PEAK_FIELDS}
_MODEL_FIELDS = {field.name for field in fields(ModelProfile)} - {"id"}


def hardware_from_mapping(profile_id: str, mapping: Mapping[str, Any]) -> Hardware:
    """A Hardware from config-style fields; ProfileFieldError (a ValueError) names a bad one."""
    return Hardware(
        id=normalize_id(profile_id),
        name=_name(profile_id, mapping, _HARDWARE_FIELDS),
        peak_flops=_positive_number(mapping, "peak_flops"),
        bandwidth=_positive_number(mapping, "bandwidth"),
        memory_bytes=_positive_number(mapping, "memory_bytes"),
        other_peaks=tuple(
            (dtype, _positive_number(mapping, field))
            for field, dtype in _OTHER_PEAK_FIELDS.items()
            if mapping.get(field) is not None
        ),
    )


def _dtype(mapping: Mapping[str, Any], field: str) -> str:
    value = mapping[field]
    if not isinstance(value, str) or value.strip().lower() not in DTYPES:
        raise ProfileFieldError(field, f"expected one of {', '.join(DTYPES)}")
    return value.strip().lower()


def _expert_counts(mapping: Mapping[str, Any], is_moe: bool) -> tuple[int | None, int | None]:
    """(experts, experts_per_token): both or neither, k < E, and only for a MoE."""
    experts = _optional(mapping, "experts", _positive_int)
    chosen = _optional(mapping, "experts_per_token", _positive_int)
    if (experts is None) != (chosen is None):
        missing = "experts" if experts is None else "experts_per_token"
        raise ProfileFieldError(missing, "missing (experts and experts_per_token go together)")
    if experts is not None and chosen is not None:
        if chosen >= experts:
            raise ProfileFieldError("experts_per_token", "expected fewer than experts")
        if not is_moe:
            raise ProfileFieldError("experts", "a MoE needs active_params below params")
    return experts, chosen


def model_from_mapping(profile_id: str, mapping: Mapping[str, Any]) -> ModelProfile:
    """A ModelProfile from config-style fields; `active_params` defaults to `params`,
    `compute_dtype` to bf16."""
    name = _name(profile_id, mapping, _MODEL_FIELDS)
    params = _positive_number(mapping, "params")
    active = _optional(mapping, "active_params", _positive_number)
    if active is not None and active > params:
        raise ProfileFieldError("active_params", "expected at most params")
    active = active if active is not None else params
    experts, chosen = _expert_counts(mapping, active < params)
    model = ModelProfile(
        id=normalize_id(profile_id),
        name=name,
        params=params,
        active_params=active,
        bytes_per_param=_positive_number(mapping, "bytes_per_param"),
        layers=_positive_int(mapping, "layers"),
        hidden=_positive_int(mapping, "hidden"),
        kv_bytes_per_token=_positive_number(mapping, "kv_bytes_per_token"),
        attention_width=_optional(mapping, "attention_width", _positive_int),
        compute_dtype=_optional(mapping, "compute_dtype", _dtype) or "bf16",
        experts=experts,
        experts_per_token=chosen,
    )
    if model.shared_params < 0:
        raise ProfileFieldError(
            "experts_per_token", "more routed experts per token than active_params holds"
        )
    return model


def _section(
    section: str, kind: str, build: Callable[[str, Mapping[str, Any]], T]
) -> ProfileTable[T]:
    profiles: dict[str, T] = {}
    aliases: dict[str, str] = {}
    for profile_id, entry in _document()[section].items():
        mapping = dict(entry)
        aliases.update((str(alias), profile_id) for alias in mapping.pop("aliases", []))
        try:
            profiles[profile_id] = build(profile_id, mapping)
        except ValueError as error:
            raise ValueError(f"{PROFILES_RESOURCE}: {section}.{profile_id}: {error}") from None
    return ProfileTable(kind, profiles, aliases)


@cache
def _document() -> Mapping[str, Any]:
    text = Path(__file__).with_name(PROFILES_RESOURCE).read_text(encoding="utf-8")
    # libyaml's loader when installed: the same safe subset, about 3× faster at start-up.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document: Mapping[str, Any] = yaml.load(text, Loader=loader)
    return document


@cache
def hardware_profiles() -> ProfileTable[Hardware]:
    """The packaged hardware profiles by id (lookups accept aliases, any case)."""
    return _section("hardware", "hardware", hardware_from_mapping)


@cache
def model_profiles() -> ProfileTable[ModelProfile]:
    """The packaged model profiles by id (lookups accept aliases, any case)."""
    return _section("models", "model", model_from_mapping)


def find_hardware(profile_id: str) -> Hardware:
    """The hardware profile for an id or alias; KeyError lists the known ids."""
    return hardware_profiles()[profile_id]


def find_model(profile_id: str) -> ModelProfile:
    """The model profile for an id or alias; KeyError lists the known ids."""
    return model_profiles()[profile_id]
