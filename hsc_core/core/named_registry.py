"""One keyed registry of specs, shared by the calibrators and the confidence scores (each a frozen
spec with a ``key``): registration refuses a second spec under a key, lookups of an unknown name
are one ValueError naming the choices, in registration order."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from .validation import quote


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


S = TypeVar("S", bound=_Keyed)


class NamedRegistry(Generic[S]):
    """Specs by key; ``what`` names the kind in messages ("calibrator", "confidence score").

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Spec:
    ...     key: str
    >>> reg = NamedRegistry[Spec]("widget")
    >>> reg.register(Spec("a")).key, reg.names()
    ('a', ('a',))
    >>> reg.get("b")
    Traceback (most recent call last):
    ...
    ValueError: unknown widget 'b'; choose one of a
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._specs: dict[str, S] = {}

    def register(self, spec: S) -> S:
        if spec.key in self._specs:
            raise ValueError(f"{self.what} {quote(spec.key)} is already registered")
        self._specs[spec.key] = spec
        return spec

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def get(self, name: str) -> S:
        spec = self._specs.get(name) if isinstance(name, str) else None
        if spec is None:
            raise ValueError(f"unknown {self.what} {quote(name)}; choose one of {', '.join(self.names())}")
        return spec
