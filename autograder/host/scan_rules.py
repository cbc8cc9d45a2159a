"""What the tamper scan flags: the vocabulary of reflective reach into the grader and torch's internals.

Each table maps a name to the words a finding says. The scan (`autograder.host.scan_ast`) applies
them; keeping them here lets a reader audit the list in one place. None of these is needed by an
inference package the course asks for: the references and the given packages use none of them
(tests/test_tamper_scan.py sweeps them all).
"""

from __future__ import annotations

import functools
import re

# Modules whose import (statement, `from` import, or a dotted use through an alias) is a finding.
# A prefix matches itself and its submodules.
FLAGGED_MODULES = {
    "autograder": "imports the grader",
    "_pytest": "imports pytest's internals",
    "pytest": "imports the test framework",
    "pluggy": "imports pytest's plugin system",
    "ctypes": "uses ctypes (raw memory, foreign calls)",
    "_ctypes": "uses ctypes (raw memory, foreign calls)",
    "cffi": "uses cffi (raw memory, foreign calls)",
    "gc": "walks the garbage collector",
    "builtins": "reaches the builtins module",
    "inspect": "inspects live frames and objects",
    "importlib": "resolves a module from a string",
    "imp": "resolves a module from a string",
    "zipimport": "resolves a module from a string",
    "pkgutil": "resolves an object from a string",
    "pydoc": "resolves an object from a string",
    "runpy": "runs a module from a string",
    "code": "runs code from a string",
    "codeop": "runs code from a string",
    "timeit": "runs code from a string",
    "doctest": "runs code from a string",
    "pdb": "starts a debugger (frames, code from strings)",
    "bdb": "starts a debugger (frames, code from strings)",
    "trace": "installs a trace function",
    "cProfile": "installs a profile function",
    "profile": "installs a profile function",
    "logging.config": "resolves objects from strings",
    "unittest.mock": "patches objects by dotted name",
    "mock": "patches objects by dotted name",
    "pickle": "unpickles (calls any object a byte string names)",
    "_pickle": "unpickles (calls any object a byte string names)",
    "cPickle": "unpickles (calls any object a byte string names)",
    "marshal": "loads code objects",
    "copyreg": "reaches the pickling registry",
    "shelve": "unpickles (calls any object a byte string names)",
    "dill": "unpickles (calls any object a byte string names)",
    "cloudpickle": "unpickles (calls any object a byte string names)",
    "joblib": "unpickles and runs work in other processes",
    "multiprocessing": "runs code in another process (outside the op accounting)",
    "subprocess": "runs code in another process (outside the op accounting)",
    "concurrent.futures": "runs code in another thread or process (outside the op accounting)",
    "_thread": "runs code in another thread (outside the op accounting)",
    # torch's profiler, dispatcher and extension machinery: what the op accounting runs on
    "torch._C": "reaches torch's C internals (profiler and dispatcher state)",
    "torch.autograd.profiler": "uses the profiler the op accounting runs on",
    "torch.autograd.profiler_util": "uses the profiler the op accounting runs on",
    "torch.autograd.profiler_legacy": "uses the profiler the op accounting runs on",
    "torch.profiler": "uses the profiler the op accounting runs on",
    "torch._dispatch": "reaches torch's dispatcher internals",
    "torch.utils._python_dispatch": "reaches torch's dispatcher modes",
    "torch.utils._mode_utils": "reaches torch's dispatcher modes",
    "torch.overrides": "reaches torch's function-override machinery",
    "torch._ops": "reaches torch's operator registry",
    "torch.library": "registers or replaces operator kernels",
    "torch._library": "registers or replaces operator kernels",
    "torch._subclasses": "reaches torch's fake and functional tensor modes",
    "torch.utils.cpp_extension": "compiles native code",
    "torch.utils.benchmark": "runs code from strings",
    "torch.hub": "loads code from elsewhere",
    "torch.package": "loads code from an archive",
    "torch.multiprocessing": "runs code in another process (outside the op accounting)",
    "triton.runtime": "reaches Triton's launcher (where kernel launches are accounted)",
    "triton.compiler": "reaches Triton's launcher (where kernel launches are accounted)",
    "triton.knobs": "reaches Triton's launch hooks",
}
# Private members of torch.autograd (`_disable_profiler`, `_profiler_enabled`, ...) are profiler state.
PRIVATE_UNDER = {"torch.autograd": "reaches torch.autograd's private profiler state"}

# `sys` is reached only for these harmless members; anything else (modules, _getframe, settrace,
# setprofile, monitoring, path, meta_path, the module object itself) is a finding.
SYS_ALLOWED = frozenset({
    "version_info", "version", "hexversion", "platform", "maxsize", "float_info", "int_info", "byteorder",
    "argv", "exit", "stdout", "stderr", "stdin", "getsizeof", "executable", "getrecursionlimit",
    "setrecursionlimit", "implementation", "flags", "float_repr_style", "getdefaultencoding",
})
# Dotted names (through any alias) that run code beside the accounting or resolve strings.
FLAGGED_DOTTED = {
    "os.fork": "forks the process (outside the op accounting)",
    "os.forkpty": "forks the process (outside the op accounting)",
    "os.system": "runs a command in another process",
    "os.popen": "runs a command in another process",
    "os.getppid": "looks for the judge process",
    "threading.Thread": "runs code in another thread (outside the op accounting)",
    "threading.Timer": "runs code in another thread (outside the op accounting)",
    "torch.jit.fork": "runs code in another thread (outside the op accounting)",
    "torch.utils.data.DataLoader": "runs code in worker processes (outside the op accounting)",
}
FLAGGED_DOTTED_PREFIXES = {"os.exec": "replaces the process", "os.spawn": "runs another process",
                           "os.posix_spawn": "runs another process"}

# Builtin names that run, resolve or reflect by string, wherever they appear (called or not).
FLAGGED_NAMES = {
    "exec": "runs code from a string (exec)", "eval": "runs code from a string (eval)",
    "compile": "compiles code from a string (compile)", "__import__": "imports by a computed name (__import__)",
    "globals": "reaches a namespace as a dict (globals)", "locals": "reaches a namespace as a dict (locals)",
    "vars": "reaches a namespace as a dict (vars)", "breakpoint": "starts a debugger (breakpoint)",
    "__builtins__": "reaches the builtins (__builtins__)", "__loader__": "reaches the import machinery (__loader__)",
    "__spec__": "reaches the import machinery (__spec__)",
}
# The attribute accessors: a literal name is checked like `obj.name`; any other name is a finding.
ACCESSORS = frozenset({"getattr", "setattr", "delattr"})
DUNDER_ACCESSORS = frozenset({"__getattribute__", "__getattr__", "__setattr__", "__delattr__"})
NAME_RESOLVERS = frozenset({"attrgetter", "methodcaller"})

# Attribute names that are a finding on any object (the object's type is unknown to a static scan).
FLAGGED_ATTRIBUTES = {
    # frames and tracebacks: another function's locals, globals and callers
    "_getframe": "walks the call stack", "_current_frames": "walks the call stack",
    "currentframe": "walks the call stack", "walk_stack": "walks the call stack", "walk_tb": "walks the call stack",
    "getouterframes": "walks the call stack", "getinnerframes": "walks the call stack",
    "f_back": "walks the call stack", "f_globals": "reads a frame's globals", "f_locals": "reads a frame's locals",
    "f_builtins": "reads a frame's builtins", "f_trace": "installs a trace function on a frame",
    "tb_frame": "reaches a frame from a traceback", "gi_frame": "reaches a generator's frame",
    "cr_frame": "reaches a coroutine's frame", "ag_frame": "reaches an async generator's frame",
    "settrace": "installs a trace function", "setprofile": "installs a profile function",
    "settrace_all_threads": "installs a trace function", "setprofile_all_threads": "installs a profile function",
    # the garbage collector: every live object, the grader's included
    "get_objects": "walks the garbage collector", "get_referrers": "walks the garbage collector",
    "get_referents": "walks the garbage collector",
    # function internals: code, globals and captured values of functions it did not write
    "__code__": "rewrites or reads a function's code", "__globals__": "reaches a function's globals",
    "__closure__": "reaches a function's captured values", "cell_contents": "reaches a function's captured values",
    "__defaults__": "reaches a function's default values", "__kwdefaults__": "reaches a function's default values",
    "__wrapped__": "unwraps a patched or wrapped function", "__func__": "reaches the function behind a method", "__self__": "reaches the object behind a builtin or method",
    "__subclasses__": "walks every subclass of a class", "__dict__": "reaches a namespace as a dict (__dict__)",
    "__builtins__": "reaches the builtins (__builtins__)", "__import__": "imports by a computed name (__import__)",
    "__loader__": "reaches the import machinery (__loader__)", "__spec__": "reaches the import machinery (__spec__)",
    "__reduce__": "reaches the pickling protocol", "__reduce_ex__": "reaches the pickling protocol",
    "FunctionType": "builds a function from a code object", "LambdaType": "builds a function from a code object",
    "CodeType": "builds a code object", "ModuleType": "builds a module object",
    # string -> object resolvers that hide an eval
    "get_type_hints": "evaluates strings as code (annotations)", "get_annotations": "evaluates strings as code",
    "ForwardRef": "evaluates strings as code", "_eval_type": "evaluates strings as code",
    # modules that other modules expose as attributes (`os.sys`, `collections._sys`)
    "sys": "reaches sys through another module", "_sys": "reaches sys through another module",
    "builtins": "reaches the builtins module", "_builtins": "reaches the builtins module",
    "gc": "walks the garbage collector", "ctypes": "uses ctypes (raw memory, foreign calls)",
    "importlib": "resolves a module from a string", "inspect": "inspects live frames and objects",
    "pickle": "unpickles (calls any object a byte string names)", "marshal": "loads code objects",
    # torch and Triton internals the accounting and the timing rest on
    "_C": "reaches torch's C internals (profiler and dispatcher state)",
    "_python_dispatch": "reaches torch's dispatcher modes", "overrides": "reaches torch's function-override machinery",
    "profiler": "uses the profiler the op accounting runs on", "cpp_extension": "compiles native code",
    "load_inline": "compiles native code", "load_library": "loads a native library",
    "JITFunction": "reaches Triton's launcher (where kernel launches are accounted)",
    "InterpretedFunction": "reaches Triton's launcher (where kernel launches are accounted)",
    "CompiledKernel": "reaches Triton's launcher (where kernel launches are accounted)",
    "launch_enter_hook": "reaches Triton's launch hooks", "launch_exit_hook": "reaches Triton's launch hooks",
    "is_current_stream_capturing": "notices CUDA-graph capture (the course's timing captures graphs)",
    # raw memory without ctypes: views at any address
    "__array_interface__": "reaches raw memory addresses", "stride_tricks": "builds views past a buffer's end",
    "ctypeslib": "uses ctypes (raw memory, foreign calls)", "from_address": "reads or writes memory at an address",
}
# A private attribute with one of these words is profiler or dispatcher state, whatever its owner.
PRIVATE_STATE = re.compile(r"^_.*(profiler|kineto|dispatch|torch_function|record_function|recordfunction)", re.IGNORECASE)

# Keyword arguments that switch a loader to unpickling (any value but the safe constant).
UNSAFE_KEYWORDS = {"weights_only": True, "allow_pickle": False}
# Text that names another process's memory or the machine's (within a string, or the whole string).
FLAGGED_TEXT = {"/proc/": "names a /proc path (process memory and state)", "/dev/mem": "names /dev/mem",
                "self/mem": "names a process's memory file"}
EXACT_TEXT = {"proc": "names /proc (a path built in pieces)", "/proc": "names /proc (a path built in pieces)"}
# Attribute names that, as strings, are a finding though they do not start with "_" (getattr fodder).
ACCESSED_NAMES = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame",
                            "get_objects", "get_referrers", "settrace", "setprofile", "cell_contents", "profiler"})
# Source encodings a file may declare; another one can hide code from a reader that assumes UTF-8.
PLAIN_ENCODINGS = frozenset({"utf-8", "utf-8-sig", "ascii", "us-ascii", "latin-1", "iso-8859-1"})


@functools.cache
def module_finding(dotted: str) -> str:
    """What importing or reaching the module or object `dotted` means ("" when nothing)."""
    parts = dotted.split(".")
    for cut in range(1, len(parts) + 1):  # the shortest flagged prefix, as the table is read
        if (why := FLAGGED_MODULES.get(".".join(parts[:cut]))) is not None:
            return why
    for owner, why in PRIVATE_UNDER.items():
        rest = dotted.removeprefix(owner + ".")
        if rest != dotted and rest.startswith("_") and not rest.startswith("__"):
            return why
    if dotted.startswith("sys.") and dotted.split(".")[1] not in SYS_ALLOWED:
        return f"uses {'.'.join(dotted.split('.')[:2])}"
    if dotted in FLAGGED_DOTTED:
        return FLAGGED_DOTTED[dotted]
    for prefix, why in FLAGGED_DOTTED_PREFIXES.items():
        if dotted.startswith(prefix):
            return why
    return ""


@functools.cache
def attribute_finding(name: str) -> str:
    """What reaching the attribute `name` of any object means ("" when nothing)."""
    if name in FLAGGED_ATTRIBUTES:
        return FLAGGED_ATTRIBUTES[name]
    if PRIVATE_STATE.match(name):
        return "reaches torch's private profiler or dispatcher state"
    return ""
