"""NVRTC and the CUDA driver API through ctypes, for tools/torch-check.py.

The few calls torch-check needs to compile a candidate and launch its kernels on torch's
stream, without cupy or any other package: the GPU machine has torch, the driver
(libcuda.so.1) and NVRTC, and no network to install more.

NVRTC is looked for where ksearch's engine takes it ($CUDA_PATH, else /usr/local/cuda),
then in the wheels torch depends on (site-packages/nvidia/cuda_nvrtc/lib, nvidia/cu13/lib),
then on the loader's path; the headers (<cuda_bf16.h>, CCCL) come from beside that NVRTC,
so that compiler and headers are one release.  The driver is libcuda.so.1; its calls use
the context current on this thread (torch's primary context once torch has put something
on the GPU), retaining the device's primary context only when there is none.

Every failure raises CudaError naming the call and its result (CUDA_ERROR_... or
NVRTC_ERROR_..., with the driver's description); a library that cannot be found or
loaded raises LibraryError (an OSError).

Self-check without a GPU, NVRTC only:
    python3 tools/cuda_ctypes.py FILE.cu --arch sm_90a [-DNAME=VALUE ...] [--kernel NAME ...]
compiles FILE.cu to a cubin and says which NVRTC and headers it used, its size, and
whether each --kernel name is in the cubin.
"""
import ctypes
import ctypes.util
import glob
import os
import sys

# cuda.h's enums, the few used here
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
FUNC_ATTRIBUTES = {"shared_size_bytes": 1, "const_size_bytes": 2, "local_size_bytes": 3,
                   "num_regs": 4, "ptx_version": 5, "binary_version": 6,
                   "max_dynamic_shared_size_bytes": 8, "required_cluster_width": 11, "required_cluster_height": 12,
                   "required_cluster_depth": 13}
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = FUNC_ATTRIBUTES["max_dynamic_shared_size_bytes"]
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14

_vp, _int, _uint, _size = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
_P = ctypes.POINTER


class CudaError(RuntimeError):
    """A CUDA driver or NVRTC call failed; the message names the call and its result."""


class LibraryError(OSError):
    """libcuda or libnvrtc cannot be found or loaded."""


# ---------------------------------------------------------------- NVRTC
def _nvrtc_candidates():
    """Paths of libnvrtc to try, in order; each a toolkit's or a wheel's."""
    out = []
    for root in [os.environ.get("CUDA_PATH"), "/usr/local/cuda"]:
        if not root:
            continue
        for lib in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            d = os.path.join(root, lib)
            out += [os.path.join(d, "libnvrtc.so")] + sorted(glob.glob(os.path.join(d, "libnvrtc.so.[0-9]*")),
                                                             reverse=True)
    for p in sys.path:  # the wheels torch installs: nvidia-cuda-nvrtc-cu12, or CUDA 13's nvidia/cu13
        for d in (os.path.join(p, "nvidia", "cuda_nvrtc", "lib"), os.path.join(p, "nvidia", "cu13", "lib")):
            out += sorted(glob.glob(os.path.join(d, "libnvrtc.so*")), reverse=True)
        out += sorted(glob.glob(os.path.join(p, "torch", "lib", "libnvrtc-[0-9a-f]*.so*")))  # older bundled wheels
    seen, paths = set(), []
    for p in out:
        if os.path.isfile(p) and "builtins" not in os.path.basename(p) and os.path.realpath(p) not in seen:
            seen.add(os.path.realpath(p))
            paths.append(p)
    found = ctypes.util.find_library("nvrtc")
    return paths + ([found] if found else [])


def _include_dirs(lib_path):
    """The headers of the release that NVRTC at lib_path belongs to: a toolkit's include (and
    include/cccl, where CUDA 13 keeps <cuda/std/...> and CUB), or the include folders of the
    wheels beside the nvrtc wheel."""
    if not os.path.isabs(lib_path):
        return []
    lib_dir = os.path.dirname(os.path.realpath(lib_path))
    root = os.path.dirname(lib_dir)
    if os.path.basename(root) in ("x86_64-linux", "sbsa-linux"):  # targets/<arch>/lib
        root = os.path.dirname(os.path.dirname(root))
    dirs = [os.path.join(root, "include"), os.path.join(root, "include", "cccl")]
    if os.path.basename(os.path.dirname(root)) == "nvidia":  # site-packages/nvidia/cuda_nvrtc
        nv = os.path.dirname(root)
        dirs += [os.path.join(nv, w, "include") for w in ("cuda_runtime", "cuda_cccl")]
        dirs += [os.path.join(nv, "cuda_cccl", "include", "cccl")]
    return [d for d in dirs if os.path.isdir(d)]


class Nvrtc:
    """libnvrtc: compile CUDA C++ to a cubin (or PTX for a compute_XX target)."""

    def __init__(self, path=None):
        errors = []
        for p in [path] if path else _nvrtc_candidates():
            try:
                self._preload_builtins(p)
                self.lib = ctypes.CDLL(p)
                self.path = p
                break
            except OSError as e:
                errors.append(f"{p}: {e}")
        else:
            raise LibraryError("cannot load NVRTC (libnvrtc.so): " + ("; ".join(errors) or
                               "none in $CUDA_PATH, /usr/local/cuda, the nvidia-cuda-nvrtc wheel or the loader's path"))
        self.include_dirs = _include_dirs(self.path)
        L = self.lib
        for name, args in (("nvrtcVersion", [_P(_int), _P(_int)]),
                           ("nvrtcCreateProgram", [_P(_vp), ctypes.c_char_p, ctypes.c_char_p, _int, _vp, _vp]),
                           ("nvrtcCompileProgram", [_vp, _int, _P(ctypes.c_char_p)]),
                           ("nvrtcGetProgramLogSize", [_vp, _P(_size)]),
                           ("nvrtcGetProgramLog", [_vp, ctypes.c_char_p]),
                           ("nvrtcGetCUBINSize", [_vp, _P(_size)]),
                           ("nvrtcGetCUBIN", [_vp, ctypes.c_char_p]),
                           ("nvrtcGetPTXSize", [_vp, _P(_size)]),
                           ("nvrtcGetPTX", [_vp, ctypes.c_char_p]),
                           ("nvrtcDestroyProgram", [_P(_vp)])):
            f = getattr(L, name)
            f.argtypes, f.restype = args, _int
        L.nvrtcGetErrorString.argtypes, L.nvrtcGetErrorString.restype = [_int], ctypes.c_char_p
        major, minor = _int(), _int()
        self._check("nvrtcVersion", L.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)))
        self.version = (major.value, minor.value)

    @staticmethod
    def _preload_builtins(path):
        """libnvrtc dlopens libnvrtc-builtins by name; load the one beside it first, so that a
        folder not on the loader's path (a wheel's) works."""
        if not os.path.isabs(path):
            return
        for b in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*"))):
            if ".alt." not in b:
                try:
                    ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass

    def _check(self, call, rc, log=""):
        if rc != 0:
            name = self.lib.nvrtcGetErrorString(rc)
            raise CudaError(f"{call} failed: {name.decode() if name else 'nvrtcResult %d' % rc}"
                            + (f"\n{log.rstrip()}" if log.strip() else ""))

    def _read(self, prog, what):
        n = _size()
        self._check(f"nvrtcGet{what}Size", getattr(self.lib, f"nvrtcGet{what}Size")(prog, ctypes.byref(n)))
        buf = ctypes.create_string_buffer(n.value)
        if n.value:
            self._check(f"nvrtcGet{what}", getattr(self.lib, f"nvrtcGet{what}")(prog, buf))
        return buf.raw

    def compile(self, src, options, name="candidate.cu"):
        """Compile src with options (strings; the toolkit's -I folders are added).  Returns
        (image, log): a cubin for an sm_XX target, else the PTX (NUL-terminated), either of
        which cuModuleLoadData takes.  A compile error raises CudaError with NVRTC's log."""
        opts = list(options) + [f"-I{d}" for d in self.include_dirs]
        prog = _vp()
        self._check("nvrtcCreateProgram", self.lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(),
                                                                      name.encode(), 0, None, None))
        try:
            argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            rc = self.lib.nvrtcCompileProgram(prog, len(opts), argv)
            log = self._read(prog, "ProgramLog").rstrip(b"\0").decode(errors="replace")
            self._check("nvrtcCompileProgram", rc, log)
            image = self._read(prog, "CUBIN")
            if not image:  # a virtual architecture (compute_XX): the driver JIT-compiles the PTX
                image = self._read(prog, "PTX")
            return image, log
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


# ---------------------------------------------------------------- the driver
class Kernel:
    """One __global__ function of a loaded module: its handle, its attributes as ptxas left
    them (num_regs, shared_size_bytes, local_size_bytes, ...), and a launch."""

    def __init__(self, driver, module, handle, name):
        self.driver, self.module, self.handle, self.name = driver, module, handle, name
        self.attributes = {k: driver.func_attribute(handle, a, name) for k, a in FUNC_ATTRIBUTES.items()}
        cluster = 1
        for d in ("width", "height", "depth"):
            cluster *= max(1, self.attributes["required_cluster_" + d])
        if cluster > 8:  # a __cluster_dims__ of more than 8 CTAs is not portable: allowed, as the engine does
            driver.call("cuFuncSetAttribute", handle, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, what=name)

    def launch(self, grid, block, args, smem=0, stream=None):
        """grid and block: 3 ints each; args: a KernelArgs; stream: a CUstream handle (int)."""
        if smem > 48 * 1024 and self.attributes["max_dynamic_shared_size_bytes"] < smem:
            # above 48 KiB a kernel must opt in, as the engine does before its launches
            self.driver.call("cuFuncSetAttribute", self.handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             smem, what=self.name)
            self.attributes["max_dynamic_shared_size_bytes"] = smem
        self.driver.call("cuLaunchKernel", self.handle, *grid, *block, smem, _vp(stream or None),
                         args.pointers, None, what=self.name)


class Module:
    """A loaded cubin or PTX; unloaded when the last reference goes."""

    def __init__(self, driver, image):
        self.driver, self.handle = driver, _vp()
        driver.call("cuModuleLoadData", ctypes.byref(self.handle), image)

    def function(self, name):
        f = _vp()
        self.driver.call("cuModuleGetFunction", ctypes.byref(f), self.handle, name.encode(), what=name)
        return Kernel(self.driver, self, f, name)

    def __del__(self):
        try:
            if self.handle:
                self.driver.lib.cuModuleUnload(self.handle)
        except Exception:  # at interpreter exit the library may be gone already
            pass


class KernelArgs:
    """A kernel's arguments as cuLaunchKernel wants them: an array of pointers to the values.
    values: ctypes scalars (c_uint64 for a device pointer, c_int32, c_int64, c_float,
    c_uint16 for 16-bit float bits), kept alive here as long as the pointers are."""

    def __init__(self, values):
        self.values = list(values)
        self.pointers = (_vp * len(self.values))(*[ctypes.cast(ctypes.pointer(v), _vp) for v in self.values]) \
            if self.values else None

    def __len__(self):
        return len(self.values)


class Driver:
    """libcuda.so.1 on the context current on this thread (torch's, once torch has initialised
    the device), or the device's primary context made current."""

    _SIGS = {"cuInit": [_uint], "cuDeviceGet": [_P(_int), _int],
             "cuDeviceGetAttribute": [_P(_int), _int, _int],
             "cuCtxGetCurrent": [_P(_vp)], "cuCtxSetCurrent": [_vp],
             "cuDevicePrimaryCtxRetain": [_P(_vp), _int],
             "cuModuleLoadData": [_P(_vp), ctypes.c_char_p], "cuModuleUnload": [_vp],
             "cuModuleGetFunction": [_P(_vp), _vp, ctypes.c_char_p],
             "cuFuncGetAttribute": [_P(_int), _int, _vp], "cuFuncSetAttribute": [_vp, _int, _int],
             "cuLaunchKernel": [_vp, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _vp, _P(_vp), _P(_vp)],
             "cuGetErrorName": [_int, _P(ctypes.c_char_p)], "cuGetErrorString": [_int, _P(ctypes.c_char_p)]}

    def __init__(self, device=0):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise LibraryError(f"cannot load the NVIDIA driver (libcuda.so.1): {e}")
        for name, args in self._SIGS.items():
            f = getattr(self.lib, name)
            f.argtypes, f.restype = args, _int
        self.call("cuInit", 0)
        self.device = _int()
        self.call("cuDeviceGet", ctypes.byref(self.device), device)
        ctx = _vp()
        self.call("cuCtxGetCurrent", ctypes.byref(ctx))
        if not ctx.value:  # nobody made one current on this thread: the primary context, as the runtime would
            self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), self.device)
            self.call("cuCtxSetCurrent", ctx)
        self.context = ctx

    def error_text(self, rc):
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(rc, ctypes.byref(name))
        self.lib.cuGetErrorString(rc, ctypes.byref(text))
        return f"{name.value.decode() if name.value else 'CUresult %d' % rc}" + \
            (f" ({text.value.decode()})" if text.value else "")

    def call(self, name, *args, what=None):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise CudaError(f"{name}{f' ({what})' if what else ''} failed: {self.error_text(rc)}")

    def func_attribute(self, handle, attribute, what):
        v = _int()
        self.call("cuFuncGetAttribute", ctypes.byref(v), attribute, handle, what=what)
        return v.value

    def compute_capability(self):
        major, minor = _int(), _int()
        self.call("cuDeviceGetAttribute", ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                  self.device)
        self.call("cuDeviceGetAttribute", ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                  self.device)
        return major.value, minor.value

    def load(self, image):
        return Module(self, image)


def _self_check(argv):
    import argparse
    ap = argparse.ArgumentParser(description="compile a CUDA file to a cubin through NVRTC (ctypes), no GPU needed")
    ap.add_argument("source")
    ap.add_argument("--arch", required=True, help="e.g. sm_90a")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--kernel", action="append", default=[], help="a kernel name the cubin must hold")
    args = ap.parse_args(argv)
    nv = Nvrtc()
    print(f"NVRTC {nv.version[0]}.{nv.version[1]} from {nv.path}; headers {' '.join(nv.include_dirs) or '(none)'}")
    with open(args.source) as f:
        src = f.read()
    try:
        image, _ = nv.compile(src, ["-std=c++17", "--gpu-architecture=" + args.arch] +
                              [f"-D{d}" for d in args.defines])
    except CudaError as e:
        print(e)
        return 1
    kind = "cubin" if image.startswith(b"\x7fELF") else "PTX"
    print(f"{args.source}: {len(image)} bytes of {kind} for {args.arch}")
    missing = [k for k in args.kernel if k.encode() + b"\0" not in image]
    for k in args.kernel:
        print(f"  kernel {k}: {'missing' if k in missing else 'present'}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(_self_check(sys.argv[1:]))
