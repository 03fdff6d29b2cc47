"""Compile CUDA C++ at run time with NVRTC and launch it through the driver API (ctypes).

Compiling a few kernels this way takes about a second, against tens of seconds for a PyTorch
extension build, and needs no host compiler. Only used on machines with CUDA.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass, field
from functools import lru_cache

import torch


def _load(candidates: list[str], what: str) -> ctypes.CDLL:
    errors = []
    for name in candidates:
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise RuntimeError(f"cannot load {what}: " + "; ".join(errors))


@lru_cache(maxsize=1)
def _nvrtc() -> ctypes.CDLL:
    try:  # PyTorch knows where its own NVRTC lives
        from torch.cuda._utils import _get_nvrtc_library

        return _get_nvrtc_library()
    except Exception:  # noqa: BLE001 - fall back to the system search path
        major = (torch.version.cuda or "13").split(".")[0]
        return _load([f"libnvrtc.so.{major}", "libnvrtc.so", ctypes.util.find_library("nvrtc") or ""], "NVRTC")


@lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    return _load(["libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda") or ""], "the CUDA driver")


def _check_nvrtc(lib: ctypes.CDLL, code: int, what: str) -> None:
    if code != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(code).decode()}")


def _check_cu(lib: ctypes.CDLL, code: int, what: str) -> None:
    if code != 0:
        msg = ctypes.c_char_p()
        lib.cuGetErrorString(code, ctypes.byref(msg))
        raise RuntimeError(f"CUDA driver {what} failed ({code}): {(msg.value or b'?').decode()}")


@dataclass
class CompiledModule:
    """A loaded CUDA module: kernels by their C++ name expression."""

    functions: dict[str, ctypes.c_void_p] = field(default_factory=dict)
    module: ctypes.c_void_p | None = None


def _nvrtc_build(source: str, name_expressions: list[str], options: list[str], arch: str):
    """Compile; returns (program handle, lowered names). The caller destroys the program."""
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture={arch}", "--std=c++17", *options]
    prog = ctypes.c_void_p()
    code = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"repro.cu", 0, None, None)
    _check_nvrtc(nvrtc, code, "create")
    for expr in name_expressions:
        _check_nvrtc(nvrtc, nvrtc.nvrtcAddNameExpression(prog, expr.encode()), "add name")
    c_opts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    code = nvrtc.nvrtcCompileProgram(prog, len(opts), c_opts)
    if code != 0:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
        raise RuntimeError(f"NVRTC compilation failed:\n{log.value.decode(errors='replace')}")
    lowered = {}
    for expr in name_expressions:
        name = ctypes.c_char_p()
        _check_nvrtc(nvrtc, nvrtc.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(name)), "lowered name")
        lowered[expr] = name.value
    return prog, lowered


def _nvrtc_output(prog: ctypes.c_void_p, what: str) -> bytes:
    nvrtc = _nvrtc()
    size = ctypes.c_size_t()
    _check_nvrtc(nvrtc, getattr(nvrtc, f"nvrtcGet{what}Size")(prog, ctypes.byref(size)), f"{what} size")
    buf = ctypes.create_string_buffer(size.value)
    _check_nvrtc(nvrtc, getattr(nvrtc, f"nvrtcGet{what}")(prog, buf), f"get {what}")
    return buf.raw


def compile_ptx(source: str, name_expressions: list[str], options: list[str], arch_suffix: str = "") -> str:
    """The PTX NVRTC generates for the current device's virtual architecture (for audits);
    `arch_suffix` "a" for its architecture-specific features (sm_90a)."""
    major, minor = torch.cuda.get_device_capability()
    prog, _ = _nvrtc_build(source, name_expressions, options, f"compute_{major}{minor}{arch_suffix}")
    try:
        return _nvrtc_output(prog, "PTX").rstrip(b"\0").decode(errors="replace")
    finally:
        _nvrtc().nvrtcDestroyProgram(ctypes.byref(prog))


def compile_module(
    source: str, name_expressions: list[str], options: list[str], arch_suffix: str = ""
) -> CompiledModule:
    """Compile `source` to machine code for the current device and load it; `name_expressions`
    are the kernels (template instantiations allowed) to look up. `arch_suffix` "a" builds for
    the architecture-specific features of that exact device (sm_90a)."""
    major, minor = torch.cuda.get_device_capability()
    prog, lowered = _nvrtc_build(source, name_expressions, options, f"sm_{major}{minor}{arch_suffix}")
    try:
        cubin = _nvrtc_output(prog, "CUBIN")
    finally:
        _nvrtc().nvrtcDestroyProgram(ctypes.byref(prog))
    torch.cuda.synchronize()  # makes the device's primary context current on this thread
    cu = _driver()
    module = ctypes.c_void_p()
    _check_cu(cu, cu.cuModuleLoadData(ctypes.byref(module), cubin), "module load")
    out = CompiledModule(module=module)
    for expr, name in lowered.items():
        fn = ctypes.c_void_p()
        _check_cu(cu, cu.cuModuleGetFunction(ctypes.byref(fn), module, name), f"get function {expr}")
        out.functions[expr] = fn
    return out


def _attribute(fn: ctypes.c_void_p, attribute: int, what: str) -> int:
    cu = _driver()
    value = ctypes.c_int()
    _check_cu(cu, cu.cuFuncGetAttribute(ctypes.byref(value), attribute, fn), f"get {what}")
    return value.value


def static_smem(fn: ctypes.c_void_p) -> int:
    """Bytes of statically declared shared memory of a kernel."""
    return _attribute(fn, 1, "shared memory size")  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES


def registers(fn: ctypes.c_void_p) -> int:
    """Registers per thread a kernel is launched with."""
    return _attribute(fn, 4, "register count")  # CU_FUNC_ATTRIBUTE_NUM_REGS


def set_dynamic_smem(fn: ctypes.c_void_p, nbytes: int) -> None:
    cu = _driver()
    max_dynamic_shared_size = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    _check_cu(cu, cu.cuFuncSetAttribute(fn, max_dynamic_shared_size, nbytes), "set shared memory size")


@lru_cache(maxsize=1)
def _launch_fn():
    cu = _driver()
    fn = cu.cuLaunchKernel
    u = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: an id, then a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)), ("nattrs", ctypes.c_uint)]  # fmt: skip


# CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h): the kernel may start before the
# one ahead of it in the stream has finished, and waits for it itself (griddepcontrol.wait).
LAUNCH_ATTRIBUTE_PROGRAMMATIC = 6


@lru_cache(maxsize=1)
def _launch_ex_fn():
    fn = _driver().cuLaunchKernelEx
    fn.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


# cuTensorMapEncodeTiled's enums (cuda.h).
TENSOR_MAP_UINT16 = 1
TENSOR_MAP_FLOAT32 = 7
TENSOR_MAP_SWIZZLE_NONE = 0
TENSOR_MAP_SWIZZLE_32B = 1
TENSOR_MAP_SWIZZLE_128B = 3
TENSOR_MAP_L2_PROMOTION_256B = 3
TENSOR_MAP_BYTES = 128


def encode_tensor_map(
    address: int,
    dims: tuple[int, ...],
    strides_bytes: tuple[int, ...],
    box: tuple[int, ...],
    dtype: int = TENSOR_MAP_UINT16,
    swizzle: int = TENSOR_MAP_SWIZZLE_128B,
) -> bytes:
    """A CUtensorMap of `dtype` values (16-bit by default) at `address`: dims innermost first, the
    byte strides of every dim but the first (contiguous), copies in boxes of `box` values, laid
    out in shared memory with `swizzle` (128-byte by default); reads outside the dims return
    zeros."""
    cu = _driver()
    raw = (ctypes.c_uint8 * (2 * TENSOR_MAP_BYTES))()
    base = ctypes.addressof(raw)
    aligned = (base + TENSOR_MAP_BYTES - 1) // TENSOR_MAP_BYTES * TENSOR_MAP_BYTES  # the map is 128-byte aligned
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    fn = cu.cuTensorMapEncodeTiled
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64), ctypes.POINTER(u64),
                   ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    rank = len(dims)
    code = fn(aligned, dtype, rank, address, (u64 * rank)(*dims), (u64 * (rank - 1))(*strides_bytes),
              (u32 * rank)(*box), (u32 * rank)(*[1] * rank), 0, swizzle, TENSOR_MAP_L2_PROMOTION_256B,
              0)  # fmt: skip
    _check_cu(cu, code, "tensor map encoding")
    return ctypes.string_at(aligned, TENSOR_MAP_BYTES)


# The current stream's handle for a device index, without building a Stream object (that took a
# fifth of a decode call's host time); the public route where this torch lacks the raw accessor.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda device: torch.cuda.current_stream(device).cuda_stream
)


class Launcher:
    """Launches one kernel of CUDA device `device` with little host overhead: the parameter
    values live in a fixed buffer of 8-byte slots (the driver reads 4 bytes for an int, 8 for a
    pointer or int64, little-endian), and the pointer array to them is built once. Parameters
    passed by value as structs (a tensor map) get a buffer of their own and are given as bytes.
    Launches go to the device's current stream; a `programmatic` one may start while the kernel
    ahead of it in the stream finishes (sm_90 and newer; the kernel must wait for it itself)."""

    def __init__(
        self, fn: ctypes.c_void_p, nparams: int, struct_params: dict[int, int] | None = None, device: int = 0
    ) -> None:
        self.fn = fn
        self.device = device
        self.slots = (ctypes.c_uint64 * nparams)()
        self.structs = {i: (ctypes.c_uint64 * (size // 8))() for i, size in (struct_params or {}).items()}
        base = ctypes.addressof(self.slots)
        addresses = [ctypes.addressof(self.structs[i]) if i in self.structs else base + 8 * i for i in range(nparams)]
        self.params = (ctypes.c_void_p * nparams)(*addresses)
        self.nparams = nparams
        self.lock = threading.Lock()
        self.attr = _LaunchAttribute(id=LAUNCH_ATTRIBUTE_PROGRAMMATIC, value=1)
        self.config = _LaunchConfig(attrs=ctypes.pointer(self.attr), nattrs=1)

    def __call__(
        self, grid: tuple[int, int, int], block: int, smem: int, *values: int | bytes, programmatic: bool = False
    ) -> None:
        if len(values) != self.nparams:
            raise ValueError(f"kernel takes {self.nparams} parameters, got {len(values)}")
        stream = _raw_stream(self.device)
        with self.lock:
            slots = self.slots
            for i, v in enumerate(values):
                if i in self.structs:
                    ctypes.memmove(self.structs[i], v, ctypes.sizeof(self.structs[i]))
                else:
                    slots[i] = v & 0xFFFFFFFFFFFFFFFF
            if programmatic:
                cfg = self.config
                cfg.grid[:] = grid
                cfg.block[:] = (block, 1, 1)
                cfg.smem, cfg.stream = smem, stream
                code = _launch_ex_fn()(ctypes.byref(cfg), self.fn, self.params, None)
            else:
                code = _launch_fn()(self.fn, grid[0], grid[1], grid[2], block, 1, 1, smem, stream, self.params, None)
        if code != 0:
            _check_cu(_driver(), code, "launch")
