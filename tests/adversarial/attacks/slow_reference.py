"""Make the reference slow instead of the solution fast: swap the code of every other `solution`
function this process can find for one that sleeps SLEEP_S first.

Problem: allreduce; the solution itself is honest (the reference's own code).

VARIANT "sys_modules": on the first call, every module in `sys.modules` (other than this one) with
a `solution` function, such as `tasks.allreduce.reference`.
VARIANT "gc": on the first call, every function named `solution` that `gc.get_objects()` finds
(a reference kept only as a bound attribute somewhere is found too).
VARIANT "import_time": when this file is imported: what is loaded already, plus an import hook
(`sys.meta_path`) that patches any `tasks.*` reference imported later, plus an `os.register_at_fork`
hook that patches again in any process forked from this one, plus an `atexit` hook (a last chance in
a process that imports the reference while shutting down).

The replacement keeps the function object (whoever holds it calls the new code) and calls a copy
of the original after sleeping, so the reference stays right, only slower.

The judge must report a speedup within 1.5x of the honest one (the reference against itself).
"""

import atexit
import gc
import importlib.abc
import os
import sys
import types

import torch
import torch.distributed as dist

VARIANT = "sys_modules"
SLEEP_S = 0.02

_patched = []


def _slow_template(*args, **kwargs):
    __import__("time").sleep(_pkb_attack_sleep_s)  # noqa: F821 - placed in the victim's globals
    return _pkb_attack_original(*args, **kwargs)  # noqa: F821


def _innermost(fn):
    while isinstance(getattr(fn, "__wrapped__", None), types.FunctionType):
        fn = fn.__wrapped__
    return fn


def _patch(fn) -> bool:
    fn = _innermost(fn)
    if not isinstance(fn, types.FunctionType) or fn.__globals__ is globals() or fn.__closure__:
        return False
    if fn.__code__ is _slow_template.__code__:
        return False
    original = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    original.__kwdefaults__ = fn.__kwdefaults__
    fn.__globals__["_pkb_attack_original"] = original
    fn.__globals__["_pkb_attack_sleep_s"] = SLEEP_S
    fn.__code__ = _slow_template.__code__
    fn.__defaults__ = None
    fn.__kwdefaults__ = None
    _patched.append(f"{fn.__module__}.{fn.__qualname__}")
    return True


def _patch_module(module) -> None:
    if module is None or module is sys.modules.get(__name__):
        return
    try:
        fn = vars(module).get("solution")
    except TypeError:
        return
    if isinstance(fn, types.FunctionType):
        _patch(fn)


def _patch_sys_modules() -> None:
    for module in list(sys.modules.values()):
        _patch_module(module)


def _patch_gc() -> None:
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__name__ == "solution" and obj.__module__ != __name__:
            _patch(obj)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Lets the normal finders load a module, then patches its `solution` once it has run."""

    def find_spec(self, fullname, path, target=None):
        if not (fullname.startswith("tasks.") or "reference" in fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                run = loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    _patch_module(module)

                try:
                    loader.exec_module = exec_module
                except AttributeError:
                    return spec
                return spec
        return None


if VARIANT == "import_time":
    _patch_sys_modules()
    _patch_gc()
    sys.meta_path.insert(0, _PatchOnImport())
    os.register_at_fork(after_in_child=_patch_sys_modules)
    atexit.register(_patch_sys_modules)

_first = [True]


@torch.no_grad()
def solution(tensor):
    if _first[0]:
        _first[0] = False
        if VARIANT == "sys_modules":
            _patch_sys_modules()
        elif VARIANT == "gc":
            _patch_gc()
        print(f"slow_reference: patched {_patched}", flush=True)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
