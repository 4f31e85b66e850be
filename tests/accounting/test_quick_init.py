"""The value types a query makes every time get `quick_init`'s faster `__init__`: the same
signature and the same objects as the dataclass's own, and still frozen."""

from __future__ import annotations

import dataclasses
import inspect
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from mlgoodput._quick_init import quick_init
from mlgoodput.accounting._facts import AttemptFacts, JobFacts
from mlgoodput.accounting._figures import AttemptQueue, DisruptionCost, Productivity
from mlgoodput.accounting._report import GoodputReport

CLASSES = [GoodputReport, Productivity, AttemptQueue, DisruptionCost, JobFacts, AttemptFacts]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_same_signature_and_objects_as_the_dataclass_init(cls: type[Any]) -> None:
    init = cls.__init__
    original = init.dataclass_init
    assert inspect.signature(init) == inspect.signature(original)
    assert init.__qualname__ == f"{cls.__qualname__}.__init__"
    rnd = random.Random(cls.__name__)
    fields = dataclasses.fields(cls)
    for _ in range(20):
        values = [rnd.choice([rnd.random(), rnd.randrange(100), None, "x", ()]) for _ in fields]
        a = cls(*values)
        b = object.__new__(cls)
        original(b, *values)
        assert a == b
        assert [getattr(a, f.name) for f in fields] == values
        kw = cls(**{f.name: v for f, v in zip(fields, values, strict=True)})
        assert kw == a
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(a, fields[0].name, 1)
    required = [f for f in fields if f.default is dataclasses.MISSING]
    with pytest.raises(TypeError):
        cls(*[0] * (len(required) - 1))  # one argument short
    with_defaults = cls(*[0] * len(required))
    for f in fields[len(required) :]:
        assert getattr(with_defaults, f.name) == f.default


def test_what_it_cannot_make_faster_is_refused() -> None:
    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    for cls in (NotFrozen, Factory, Post, NoSlots):
        with pytest.raises(TypeError, match="quick_init"):
            quick_init(cls)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_its_init_belongs_to_the_class_module(cls: type[Any]) -> None:
    init = cls.__init__
    assert init.__module__ == cls.__module__
    try:  # (names the module imports only for type checking cannot be evaluated, either way)
        want = inspect.signature(init.dataclass_init, eval_str=True)
    except NameError:
        with pytest.raises(NameError):
            inspect.signature(init, eval_str=True)
        return
    assert inspect.signature(init, eval_str=True) == want
