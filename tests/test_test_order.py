"""The suite's own order (support/ordering.py, applied by conftest.py): modules with a `slow`
test go first, each whole, so pytest-xdist never starts a long test last."""

from __future__ import annotations

from dataclasses import dataclass, field

from support.ordering import slow_modules_first


@dataclass
class FakeItem:
    name: str
    module: str
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_modules_with_a_slow_test_run_first_and_each_module_stays_whole_and_in_order():
    items = [
        FakeItem("a1", "a"),
        FakeItem("b1", "b"),
        FakeItem("b2", "b", {"slow"}),
        FakeItem("b3", "b"),
        FakeItem("c1", "c"),
        FakeItem("d1", "d", {"slow"}),
        FakeItem("e1", "e"),
    ]
    slow_modules_first(items)  # type: ignore[arg-type]
    assert [item.name for item in items] == ["b1", "b2", "b3", "d1", "a1", "c1", "e1"]


def test_an_item_without_a_module_keeps_its_place_among_the_others():
    class Bare:
        def __init__(self, name: str) -> None:
            self.name = name

        def get_closest_marker(self, name: str) -> None:
            return None

    items = [Bare("x"), FakeItem("s", "m", {"slow"}), Bare("y")]
    slow_modules_first(items)  # type: ignore[arg-type]
    assert [item.name for item in items] == ["s", "x", "y"]
