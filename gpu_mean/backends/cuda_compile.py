"""Compiling the kernels for CUDA: NVRTC called directly through ctypes, with no CuPy involved.

CuPy's RawModule appends ``-ftz=true`` after the caller's options on every compile and NVRTC keeps
the last value given, so float32 subnormals would be flushed in every kernel. The backend therefore
compiles here, with the options below and nothing added, and hands the binary to CuPy only to load.
CI compiles every kernel variant through this same module (tests/test_cuda_nvrtc.py), so the path it
checks is the one a GPU runs.

NVRTC 13 has no built-in ``cuda_fp16.h``: the CUDA headers must be found on disk, from the
``nvidia-cuda-runtime`` wheel (what the ``cuda13``/``cuda12`` extras install), $CUDA_PATH or
/usr/local/cuda.
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
from dataclasses import dataclass
from functools import cache

from ..kernels.source import kernel_text
from . import diskcache

# What every kernel is compiled with. --fmad=false: x*scale+bias rounds twice, as the CPU reference
# does. --ftz=false, --prec-div, --prec-sqrt: IEEE float32 (NVRTC's defaults, stated so that a
# changed default or an appended option cannot pass unnoticed).
BASE_OPTIONS = ("--std=c++17", "--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true")


class NvrtcError(RuntimeError):
    """NVRTC is missing or a compile failed; the message holds the whole log."""


def _wheel_roots() -> list[str]:
    """site-packages folders where NVIDIA's wheels put ``nvidia/...``."""
    return [p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]


def _cuda_homes() -> list[str]:
    homes = [os.environ.get(v) for v in ("CUDA_PATH", "CUDA_HOME")]
    return [h for h in homes if h] + ["/usr/local/cuda"]


def nvrtc_candidates() -> list[str]:
    """libnvrtc files in the order they are tried: $GPU_MEAN_NVRTC, the wheels (CUDA 13 puts every
    library in nvidia/cu13/lib, CUDA 12 in nvidia/cuda_nvrtc/lib), then a toolkit installation."""
    found = [os.environ["GPU_MEAN_NVRTC"]] if os.environ.get("GPU_MEAN_NVRTC") else []
    pats = []
    for root in _wheel_roots():
        pats += [os.path.join(root, "nvidia", "cu1*", "lib", "libnvrtc.so.*"),
                 os.path.join(root, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.*")]
    for home in _cuda_homes():
        pats += [os.path.join(home, "lib64", "libnvrtc.so*"), os.path.join(home, "lib", "libnvrtc.so*")]
    for pat in pats:
        found += sorted((f for f in glob.glob(pat) if "builtins" not in f and ".alt." not in f), reverse=True)
    return list(dict.fromkeys(found))


def include_candidates() -> list[str]:
    """Folders holding cuda_fp16.h: the wheels first, then a toolkit installation."""
    dirs = []
    for root in _wheel_roots():
        dirs += sorted(glob.glob(os.path.join(root, "nvidia", "cu1*", "include")), reverse=True)
        dirs.append(os.path.join(root, "nvidia", "cuda_runtime", "include"))
    dirs += [os.path.join(h, "include") for h in _cuda_homes()]
    return [d for d in dict.fromkeys(dirs) if os.path.isfile(os.path.join(d, "cuda_fp16.h"))]


class Nvrtc:
    """libnvrtc through ctypes: compile a source with given options into PTX and, for a real
    architecture (sm_XX), a cubin."""

    def __init__(self, path: str):
        folder = os.path.dirname(path)
        # libnvrtc opens libnvrtc-builtins by name at compile time; a wheel's folder is not on the
        # loader's path, so load it first, globally, from beside the library
        for b in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so.*"))):
            if ".alt." not in b:
                ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
        self.path = path
        self.lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = (major.value, minor.value)
        n = ctypes.c_int()
        self._check(self.lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
        archs = (ctypes.c_int * n.value)()
        self._check(self.lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        self.archs = tuple(archs)

    def _check(self, status: int, what: str, log: str = "") -> None:
        if status:
            self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            name = self.lib.nvrtcGetErrorString(status).decode()
            raise NvrtcError(f"{what}: {name}" + (f"\n{log}" if log else ""))

    def target(self, cc: int) -> str:
        """sm_<cc> when this NVRTC knows the device (a cubin, nothing left to the driver); otherwise
        PTX for the newest architecture it knows below the device, which the driver compiles."""
        if cc in self.archs:
            return f"sm_{cc}"
        older = [a for a in self.archs if a <= cc]
        if not older:
            raise NvrtcError(f"NVRTC {self.version[0]}.{self.version[1]} cannot target compute capability "
                             f"{cc // 10}.{cc % 10} (it knows {', '.join(map(str, self.archs))})")
        return f"compute_{max(older)}"

    def compile(self, source: str, options, name: str = "gm_kernel.cu") -> CompiledKernel:
        lib, prog = self.lib, ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
                    "nvrtcCreateProgram")
        try:
            opts = [o.encode() for o in options]
            status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
            log = self._read(prog, "ProgramLog").decode(errors="replace").rstrip("\x00").strip()
            self._check(status, f"NVRTC compile of {name} with {' '.join(options)}", log)
            ptx = self._read(prog, "PTX").rstrip(b"\x00").decode()
            real = any(o.startswith("--gpu-architecture=sm_") for o in options)
            cubin = self._read(prog, "CUBIN") if real else b""
            return CompiledKernel(ptx, cubin, log)
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _read(self, prog, what: str) -> bytes:
        size = ctypes.c_size_t()
        self._check(getattr(self.lib, f"nvrtcGet{what}Size")(prog, ctypes.byref(size)), f"nvrtcGet{what}Size")
        buf = ctypes.create_string_buffer(size.value)
        self._check(getattr(self.lib, f"nvrtcGet{what}")(prog, buf), f"nvrtcGet{what}")
        return buf.raw[:size.value]


@dataclass(frozen=True)
class CompiledKernel:
    ptx: str
    cubin: bytes        # empty when compiled for a virtual architecture (compute_XX)
    log: str

    @property
    def image(self) -> bytes:
        """What the driver loads: the cubin, or the PTX (NUL-terminated) for it to compile."""
        return self.cubin or self.ptx.encode() + b"\x00"


@cache
def nvrtc(max_major: int | None = None) -> Nvrtc:
    """The first libnvrtc that loads and, when ``max_major`` is given (the driver's CUDA major
    version), is no newer than it: a newer NVRTC's kernels would not load. NvrtcError naming every
    place looked at when none does."""
    tried = []
    for path in nvrtc_candidates():
        try:
            rtc = Nvrtc(path)
        except (OSError, NvrtcError, AttributeError) as e:
            tried.append(f"{path} ({e})")
            continue
        if max_major is None or rtc.version[0] <= max_major:
            return rtc
        tried.append(f"{path} (NVRTC {rtc.version[0]}.{rtc.version[1]} is newer than the driver's CUDA {max_major})")
    raise NvrtcError("no usable libnvrtc" + (f": tried {'; '.join(tried)}" if tried else
                     " in the wheel folders (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib), $CUDA_PATH, $CUDA_HOME or "
                     "/usr/local/cuda") + "; pip install 'gpu_mean[cuda13]' (or [cuda12]) installs it")


def headers_beside(nvrtc_path: str) -> list[str]:
    """Where the headers of the installation that holds this libnvrtc are: nvidia/cu13/include beside
    nvidia/cu13/lib, nvidia/cuda_runtime/include beside nvidia/cuda_nvrtc/lib (CUDA 12's wheels),
    <toolkit>/include beside <toolkit>/lib64."""
    lib = os.path.dirname(os.path.abspath(nvrtc_path))
    dirs = [os.path.join(os.path.dirname(lib), "include"),
            os.path.join(os.path.dirname(os.path.dirname(lib)), "cuda_runtime", "include")]
    return [d for d in dirs if os.path.isfile(os.path.join(d, "cuda_fp16.h"))]


@cache
def include_dir(nvrtc_path: str | None = None) -> str:
    """The folder with cuda_fp16.h; given the libnvrtc a compile uses, that installation's own headers
    first, so that an NVRTC never compiles against another CUDA version's headers."""
    dirs = list(dict.fromkeys((headers_beside(nvrtc_path) if nvrtc_path else []) + include_candidates()))
    if not dirs:
        raise NvrtcError("cuda_fp16.h (which NVRTC 13 does not build in) is in none of the wheel folders "
                         "(nvidia/cu13/include, nvidia/cuda_runtime/include), $CUDA_PATH/include, $CUDA_HOME/include "
                         "or /usr/local/cuda/include; pip install 'gpu_mean[cuda13]' (or [cuda12]) installs them")
    return dirs[0]


def options(target: str, include: str) -> tuple:
    """The exact option list of every compile: the base options, the target, the header folder."""
    return BASE_OPTIONS + (f"--gpu-architecture={target}", f"--include-path={include}")


def variant_source(filename: str, macros: dict) -> str:
    """The source of one kernel variant of a portable kernel file (opencl_kernels/*.cl): its
    ``#define`` lines, cuda_kernels/dialect.h, then the file (kernels.kernel_text)."""
    return kernel_text("cuda", filename, macros)


def _compile_inputs(filename: str, macros: dict, cc: int, max_major: int | None):
    rtc = nvrtc(max_major)
    return rtc, variant_source(filename, macros), options(rtc.target(cc), include_dir(rtc.path))


def build(filename: str, macros: dict, cc: int, max_major: int | None = None) -> CompiledKernel:
    """Compile one variant for compute capability ``cc`` (e.g. 90) exactly as the backend does
    (``max_major``: the driver's CUDA major version, see ``nvrtc``)."""
    rtc, src, opts = _compile_inputs(filename, macros, cc, max_major)
    return rtc.compile(src, opts, filename)


def _file_identity(path: str) -> str:
    """A file as installed: a reinstalled NVRTC or header of the same major.minor version differs here."""
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def image(filename: str, macros: dict, cc: int, max_major: int | None = None, **device) -> bytes:
    """What the driver loads for one variant (``build(...).image``: the cubin, or the PTX): from the
    per-user disk cache when it holds the output of exactly this source and these options, from this
    NVRTC and its headers, for this device (``device``: its name, the driver version); else compiled,
    announced through diskcache.compiling, and stored for the next process."""
    rtc, src, opts = _compile_inputs(filename, macros, cc, max_major)
    cache = diskcache.open_cache()
    key = None
    if cache is not None:
        inc = os.path.join(include_dir(rtc.path), "cuda_fp16.h")
        key = diskcache.make_key("cuda", src, opts, nvrtc=f"{rtc.version[0]}.{rtc.version[1]}",
                                 nvrtc_file=_file_identity(rtc.path), header=_file_identity(inc), cc=cc, **device)
        found = cache.load(key)
        if found is not None:
            return found
    diskcache.compiling(filename)
    out = rtc.compile(src, opts, filename).image
    if cache is not None:
        cache.store(key, out)
    return out


# --- what a cubin says about its kernels (a diagnostic: tests/test_cuda_nvrtc.py's spill check) --------
# The CUDA ELF's ".nv.info" section holds attributes per function: EIATTR_REGCOUNT (registers per
# thread) and EIATTR_FRAME_SIZE (the per-thread stack frame: local arrays and spilled registers). They
# are what ptxas's -v report prints, read from the binary itself, so they work with an NVRTC whose
# program log stays empty under --ptxas-options=-v.
EIATTR_FRAME_SIZE, EIATTR_REGCOUNT = 0x11, 0x2F


def cubin_resources(cubin: bytes) -> dict:
    """{kernel: (registers, stack frame bytes)} of every kernel entry in a cubin (an ELF64 file);
    ValueError when it is not one."""
    import struct
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a little-endian ELF64 cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    # (name offset, type, flags, address, file offset, size, link, info, align, entry size)
    heads = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]

    def cstr(table: tuple, off: int) -> str:
        start = table[4] + off
        return cubin[start:cubin.index(b"\0", start)].decode()
    secs = [(cstr(heads[shstrndx], h[0]), h) for h in heads]
    symtab = next(h for name, h in secs if name == ".symtab")
    symbols = [cstr(heads[symtab[6]], struct.unpack_from("<I", cubin, symtab[4] + k * 24)[0])
               for k in range(symtab[5] // 24)]
    kernels = {name[len(".text."):] for name, _ in secs if name.startswith(".text.")}
    found: dict = {}
    for name, h in secs:
        if name != ".nv.info":
            continue
        data, i = cubin[h[4]:h[4] + h[5]], 0
        while i + 4 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt == 4:                 # EIFMT_SVAL: a 16-bit size, then that many bytes
                size, = struct.unpack_from("<H", data, i + 2)
                value = data[i + 4:i + 4 + size]
                i += 4 + size
            else:                        # EIFMT_NVAL, BVAL, HVAL: four bytes in all
                value, i = b"", i + 4
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and len(value) == 8:
                sym, v = struct.unpack("<II", value)
                found.setdefault(symbols[sym], {})[attr] = v
    return {k: (found.get(k, {}).get(EIATTR_REGCOUNT, 0), found.get(k, {}).get(EIATTR_FRAME_SIZE, 0))
            for k in sorted(kernels)}


def cubin_shared(cubin: bytes) -> dict:
    """{kernel: static shared memory bytes} of the kernels with any (their ``.nv.shared.<kernel>``
    sections; the access model's occupancy, gpu_mean/checks/access_model.py); ValueError when the
    bytes are not an ELF64 cubin."""
    import struct
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a little-endian ELF64 cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    found = {}
    for h in heads:
        name = cubin[names + h[0]:cubin.index(b"\0", names + h[0])].decode()
        if name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved"):
            found[name[len(".nv.shared."):]] = h[5]
    return found
