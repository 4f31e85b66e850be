"""A faster `__init__` for the frozen value types a query makes every time (the report and its
figures): the same signature and the same objects, each field set through its slot.

A frozen dataclass's own `__init__` sets each field with `object.__setattr__`, which looks the
field up on the type each time; through the slot's descriptor, bound once, making the object
costs about half as much (a report with its productivity figures: about 60 fields a query).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, TypeVar

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Give `cls` (a frozen dataclass with slots whose fields are all plain `__init__`
    arguments with no default factory, and no `__post_init__`) an `__init__` that sets its
    slots directly. Its signature is the dataclass's (names, order, defaults, annotations);
    the dataclass's own is kept as `__init__.dataclass_init` (tests compare the two).
    Anything else is a TypeError."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"quick_init: {cls.__name__} is not a frozen dataclass with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init: {cls.__name__} has a __post_init__")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    ns: dict[str, Any] = {}
    args: list[str] = []
    body: list[str] = []
    for k, f in enumerate(fields):
        if not f.init or f.kw_only:
            raise TypeError(f"quick_init: {cls.__name__}.{f.name} is not a plain positional field")
        ns[f"_set{k}"] = getattr(cls, f.name).__set__
        if f.default is not dataclasses.MISSING:
            ns[f"_d{k}"] = f.default
            args.append(f"{f.name}=_d{k}")
        elif f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"quick_init: {cls.__name__}.{f.name} has a default factory")
        else:
            args.append(f.name)
        body.append(f"    _set{k}(self, {f.name})")
    # made inside a function of the setters and defaults, run in the class's module: the
    # `__init__` reads them from its closure and sees the module's names, as the dataclass's does
    inner = f"  def __init__(self, {', '.join(args)}):\n" + "\n".join("  " + b for b in body or ["    pass"])
    src = f"def _make({', '.join(ns)}):\n{inner}\n  return __init__\n"
    local: dict[str, Any] = {}
    exec(src, sys.modules[cls.__module__].__dict__, local)  # our own text, made of the field names above
    init = local["_make"](**ns)
    original = cls.__init__
    init.__module__ = cls.__module__
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(getattr(original, "__annotations__", {}))
    init.__doc__ = original.__doc__
    init.dataclass_init = original
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
