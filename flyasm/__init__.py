"""flyasm: a pure-Python ISA-level kernel assembler for AMD gfx950 (CDNA4)."""
from .errors import FlyasmError
from .isa.operands import Imm, Label, a, exec_, m0, off, s, scc, sext, v, vcc
from .kernel import Kernel

__all__ = ["FlyasmError", "Kernel", "v", "a", "s", "m0", "vcc", "exec_", "scc", "off", "sext", "Imm", "Label"]
__version__ = "0.1.0"


def __getattr__(name):
    # flyasm.attention imports torch and the kernel sets lazily: `import flyasm` stays light
    if name in ("attention", "attention_backward"):
        from . import dispatch
        return getattr(dispatch, name)
    raise AttributeError(f"module 'flyasm' has no attribute {name!r}")
