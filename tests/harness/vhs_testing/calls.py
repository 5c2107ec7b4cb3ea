"""Counting how often our real functions run, without replacing them."""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest


def count_calls(monkeypatch: pytest.MonkeyPatch, *functions: Callable[..., Any]) -> Counter[str]:
    """A Counter of calls by function name, kept while `monkeypatch` lasts. Each function is
    wrapped wherever a loaded module of ours holds it: every module that imports a name holds a
    reference of its own, so patching the defining module alone would miss them."""
    calls: Counter[str] = Counter()
    for function in functions:

        @functools.wraps(function)
        def spy(*args: Any, _function: Callable[..., Any] = function, **kwargs: Any) -> Any:
            calls[_function.__name__] += 1
            return _function(*args, **kwargs)

        for name, module in list(sys.modules.items()):
            ours = name.split(".")[0] in {"vhs", "handlers"}
            if ours and getattr(module, function.__name__, None) is function:
                monkeypatch.setattr(module, function.__name__, spy)
    return calls
