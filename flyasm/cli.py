"""The `flyasm` command.

Each command is a small function registered on `main`; heavy modules are imported inside it so
`flyasm --help` stays fast. To add a command from another module, add a function here:

    @main.command()
    @click.argument(...)
    def stats(...):
        from .report import stats as _s
        ...

A FlyasmError becomes one red line on stderr and exit code 2 (no traceback).
"""
from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import click

from .errors import FlyasmError


def _fail(msg: str) -> None:
    click.secho(f"error: {msg}", fg="red", err=True)
    sys.exit(2)


def handles_errors(fn):
    """Turn FlyasmError (and unreadable files) into one red line and exit code 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FlyasmError as e:
            _fail(str(e))
        except BrokenPipeError:
            sys.exit(0)
        except OSError as e:
            _fail(f"{e.filename or ''}: {e.strerror or e}")
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="flyasm")
def main():
    """flyasm: ISA-level kernel assembler for AMD gfx950 (CDNA4).

    Build kernels from Python, assemble and disassemble .s and .co files, inspect code objects.
    """


def _parse_params(items: tuple[str, ...]) -> dict:
    out = {}
    for it in items:
        if "=" not in it:
            raise FlyasmError(f"-p takes key=value, not '{it}'", find_loc=False)
        k, v = it.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v   # plain strings need no quotes: -p dtype=bf16
    return out


def _load_builder(spec: str):
    path, _, fn = spec.partition(":")
    fn = fn or "build"
    p = Path(path)
    if not p.is_file():
        raise FlyasmError(f"kernel file {path} does not exist", find_loc=False)
    modname = f"flyasm_user_{p.stem}"
    s = importlib.util.spec_from_file_location(modname, p)
    mod = importlib.util.module_from_spec(s)
    sys.modules[modname] = mod
    s.loader.exec_module(mod)
    if not hasattr(mod, fn):
        raise FlyasmError(f"{path} has no function '{fn}' (use FILE.py:FUNCTION)", find_loc=False)
    return getattr(mod, fn)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    if isinstance(x, bytes):
        return x.hex()
    return str(x)


@main.command()
@click.argument("kernel", metavar="KERNEL.py[:FN]")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VAL",
              help="Parameter passed to FN (value read as JSON when it parses, else a string). Repeatable.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Directory for NAME.s, NAME.co and NAME.json.")
@handles_errors
def build(kernel, params, out_dir):
    """Build a kernel: import KERNEL.py, call FN(**params) (default `build`), which returns a Kernel;
    write NAME.s, NAME.co and NAME.json (descriptor, args, plan)."""
    from .asm.driver import atomic_write
    from .kernel import Kernel

    fn = _load_builder(kernel)
    kw = _parse_params(params)
    try:
        k = fn(**kw)
    except (TypeError, ValueError) as e:     # a parameter the builder does not take, or a value it refuses
        raise FlyasmError(f"calling {kernel} with {kw}: {e}", find_loc=False) from None
    if not isinstance(k, Kernel):
        raise FlyasmError(f"{kernel} returned {type(k).__name__}, not a Kernel", find_loc=False)
    res = k.build(out_dir)
    info = {"name": k.name, "descriptor": k.descriptor(),
            "args": [{"name": a.name, "type": a.type, "offset": a.offset, "size": a.size,
                      "value_kind": a.value_kind} for a in k.args],
            "block": list(k.block), "lds": k.lds, "code_object": k.code_object}
    if k.plan is not None and hasattr(k.plan, "to_dict"):
        info["plan"] = k.plan.to_dict()
    atomic_write(Path(out_dir) / f"{k.name}.json", json.dumps(_jsonable(info), indent=2, sort_keys=True) + "\n")
    click.echo(f"{res.asm_path}\n{res.co_path}\n{Path(out_dir) / (k.name + '.json')}")


@main.command()
@click.argument("src", type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), help="Output .co (default: SRC with .co).")
@click.option("--code-object", type=click.Choice(["5", "6"]), default="5", show_default=True,
              help="HSA code object version.")
@handles_errors
def asm(src, out, code_object):
    """Assemble and link a .s file into a code object with llvm-mc and ld.lld."""
    from .asm.driver import assemble, atomic_write
    from .asm.parser import read_asm
    text = read_asm(src)
    data = assemble(text, int(code_object), name=Path(src).name)
    out = out or str(Path(src).with_suffix(".co"))
    atomic_write(Path(out), data)
    click.echo(out)


@main.command()
@click.argument("src", type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False),
              help="Output .s (default: print to stdout).")
@click.option("--no-verify", is_flag=True, help="Skip re-encoding each instruction with llvm-mc.")
@click.option("--kernel", default=None, help="Only this kernel (its code, descriptor and metadata entry).")
@handles_errors
def disasm(src, out, no_verify, kernel):
    """Disassemble a code object into a .s that assembles back to the same bytes
    (.text, kernel descriptors, metadata); with --kernel, one kernel's .s."""
    from .asm.driver import atomic_write
    from .codeobj.disasm import disasm as _disasm
    text = _disasm(src, verify=not no_verify, kernel=kernel)
    if out:
        atomic_write(Path(out), text)
        click.echo(out)
    else:
        click.echo(text, nl=False)


@main.command()
@click.argument("src", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
@click.option("--kernel", default=None, help="Only this kernel when the code object holds several.")
@handles_errors
def info(src, as_json, kernel):
    """Kernel descriptor and metadata summary of a code object."""
    from .codeobj.reader import read_code_object
    co = read_code_object(src)
    summ = co.summary()
    if kernel is not None:
        co.kernel(kernel)   # one sentence naming the kernels there are, when it is not one of them
        summ["kernels"] = [k for k in summ["kernels"] if k["name"] == kernel]
    if as_json:
        click.echo(json.dumps(_jsonable(summ), indent=2, sort_keys=True))
        return
    click.echo(f"{src}: {summ['target']}, code object v{summ['code_object_version']} "
               f"(ABI {summ['abi_version']}, e_flags {summ['e_flags']}), .text {summ['text_bytes']} bytes")
    for k in summ["kernels"]:
        d = k["descriptor"]
        md = k["metadata"]
        click.echo(f"  kernel {k['name']} @ {k['addr']} ({k['size']} bytes)")
        click.echo(f"    LDS {d['group_segment_fixed_size']} B, scratch {d['private_segment_fixed_size']} B, "
                   f"kernarg {d['kernarg_size']} B, VGPR alloc {d['vgpr_alloc']} (accum_offset {d['accum_offset']}), "
                   f"SGPR alloc {d['sgpr_alloc']}, user SGPRs {d['user_sgpr_count']}")
        click.echo(f"    rsrc1 {d['compute_pgm_rsrc1']} rsrc2 {d['compute_pgm_rsrc2']} rsrc3 {d['compute_pgm_rsrc3']} "
                   f"kcp {d['kernel_code_properties']}; wg id x/y/z {d['enable_sgpr_workgroup_id_x']}"
                   f"{d['enable_sgpr_workgroup_id_y']}{d['enable_sgpr_workgroup_id_z']}, "
                   f"workitem id {d['enable_vgpr_workitem_id']}, ieee {d['enable_ieee_mode']}, "
                   f"dx10_clamp {d['enable_dx10_clamp']}")
        if md:
            click.echo(f"    metadata: vgpr {md.get('vgpr_count')}, agpr {md.get('agpr_count')}, sgpr {md.get('sgpr_count')}, "
                       f"max workgroup {md.get('max_flat_workgroup_size')}")
        for a in k["args"]:
            click.echo(f"    arg {a.get('name', '?'):<12} offset {a.get('offset'):>4} size {a.get('size'):>3} "
                       f"{a.get('value_kind')}")


@main.command()
@handles_errors
def doctor():
    """Toolchain versions and paths, and the Python packages flyasm uses."""
    from importlib import metadata as md

    from .asm.toolchain import describe
    d = describe()
    click.echo(f"LLVM {d['llvm']} in {d['bin']}")
    for t, p in d.items():
        if t not in ("llvm", "bin"):
            click.echo(f"  {t:<15} {p or 'MISSING'}")
    click.echo(f"python {sys.version.split()[0]}")
    for pkg in ("numpy", "pyelftools", "msgpack", "click", "rich", "tqdm", "torch", "pytest", "hypothesis"):
        try:
            ver = md.version(pkg)
        except md.PackageNotFoundError:
            ver = "not installed"
        click.echo(f"  {pkg:<15} {ver}")


_CHECK_HELP = """Static checks (wait counters, gfx950 hazards) of a .s, .co or .py kernel.

\b
Findings are grouped under the one s_waitcnt or s_nop that fixes them, with the instruction
to put it before; -v lists every finding of a group. Modes:
\b
  verify  (default) report; wait states counted as LLVM's hazard recognizer counts them
          (every instruction is one, s_nop N is N+1). Exit 1 when there are findings.
  isa     report; only s_nop and VALU instructions count as wait states, as the ISA guide
          words it, and the ISA-only rows apply. Exit 1 when there are findings.
  insert  print the waits and s_nops it would insert; with -o FILE.s write the fixed
          assembly. Exit 1 when it had to fix anything (or something is left), 0 when
          the kernel needed nothing.
"""


def _s_text(src: str, kernel: str | None) -> str:
    """The assembly text the fixes go into: the .s itself, our rendering of a .py, a .co's disassembly."""
    suf = Path(src).suffix.lower()
    if suf == ".s":
        from .asm.parser import read_asm
        return read_asm(src)
    if suf == ".py":
        from .asm.writer import render
        from .report.program import from_python
        return render(from_python(src))[0]
    from .codeobj.disasm import disasm
    return disasm(src)


@main.command(help=_CHECK_HELP)
@click.argument("src", type=click.Path(dir_okay=False))
@click.option("--kernel", default=None, help="Kernel name when the file has several.")
@click.option("--mode", type=click.Choice(["verify", "isa", "insert"]), default="verify", show_default=True,
              help="verify: report (LLVM counting); isa: report (ISA counting); insert: fix (see above).")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="With --mode insert: write the fixed assembly here.")
@click.option("-v", "--verbose", is_flag=True, help="List every finding of each group.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--strict", is_flag=True, help="Also fail on 'unproven' findings (LDS ranges not proven disjoint).")
@handles_errors
def check(src, kernel, mode, out, verbose, as_json, strict):
    from .check import has_errors
    from .check.fixes import group_fixes, insertions
    from .check.report import findings_json, format_findings, summary
    from .report.program import as_program
    if out and mode != "insert":
        raise FlyasmError("-o writes the fixed assembly of --mode insert; add --mode insert", find_loc=False)
    prog = as_program(src, kernel)
    items = prog.items()
    counting = {"verify": "verify", "insert": "verify", "isa": "strict"}[mode]   # the checker's name for ISA counting
    findings = prog.check(counting, items)
    fixes = group_fixes(items, findings) if findings and (mode == "insert" or not as_json) else []
    if as_json:
        click.echo(findings_json(findings))
    elif mode != "insert":
        click.echo(f"{summary(findings, items, fixes)}:\n{format_findings(findings, items, verbose, fixes)}"
                   if findings else "no findings")
    if mode != "insert":
        sys.exit(1 if has_errors(findings, strict) else 0)
    add = insertions(items, fixes)
    if not add:
        click.echo("nothing to insert: no findings")
        return
    fixed = [x for i, it in enumerate(items) for x in (*add.get(i, ()), it)]
    left = prog.check("verify", fixed)
    if not as_json:
        n = sum(len(v) for v in add.values())
        click.echo(f"would insert {n} instruction{'s' if n != 1 else ''} for {summary(findings, items, fixes)}:")
        from .check.findings import Site
        for i, new in sorted(add.items()):
            click.echo(f"  {'; '.join(x.text() for x in new)}  before {Site(i, items[i]).describe()}")
        if verbose:
            click.echo(format_findings(findings, items, True, fixes))
        if left:
            click.echo(f"still {summary(left, fixed)} after inserting:\n{format_findings(left, fixed, verbose)}")
    if out:
        from .asm.driver import atomic_write
        from .asm.patch import insert_before
        from .check.cfg import is_label
        ordinal = {}
        for i, it in enumerate(items):
            if not is_label(it):
                ordinal[i] = len(ordinal)
        text = insert_before(_s_text(src, kernel), prog.name, len(ordinal),
                             {ordinal[i]: [x.text() for x in new] for i, new in add.items()})
        atomic_write(Path(out), text)
        click.echo(f"wrote {out}")
    else:
        click.echo("(give -o FIXED.s to write the fixed assembly)")
    sys.exit(1)


@main.command()
@click.argument("mnemonics", nargs=-1, required=True, metavar="MNEMONIC...")
@handles_errors
def doc(mnemonics):
    """The reference of gfx950 instructions: operands in order with kinds and widths, modifiers
    with ranges and their Python spelling, encodings, one line of semantics, an example."""
    from .isa.doc import doc as _doc
    click.echo("\n\n".join(_doc(m) for m in mnemonics))


@main.command("build-set")
@click.argument("kernel", metavar="KERNEL.py[:GRID]")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Directory for the .co files and the CSV manifest.")
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: CPU count).")
@click.option("--manifest", default=None, help="Manifest file name (default: the module's MANIFEST, else KERNEL "
              "stem + .csv) for rows that do not name their own.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--no-check", is_flag=True, help="Skip the static checker (kernels still in development).")
@handles_errors
def build_set(kernel, out_dir, jobs, manifest, no_progress, no_check):
    """Build every variant of a grid (VARIANTS, or GRID) into DIR: one .co per variant and an
    aiter-style CSV manifest (knl_name,co_name,dtype,hdim_q,hdim_v,mask,mode,ts_qo,ts_kv,...), or one per
    stage when the kernel file routes its rows (kernels/fa_bwd_set.py: aiter's four backward manifests)."""
    from .dispatch import build_set as _build_set
    if jobs is not None and jobs < 1:
        raise FlyasmError(f"-j takes a positive number of workers, not {jobs}", find_loc=False)
    res = _build_set(kernel, out_dir, jobs=jobs, manifest=manifest, progress=not no_progress, check=not no_check)
    emit = sum(b.emit_s for b in res.builds)
    asm = sum(b.asm_s for b in res.builds)
    click.echo(f"{len(res.builds)} kernels in {res.out_dir} ({res.wall_s:.2f} s wall; builders {emit:.2f} s, "
               f"check+assemble {asm:.2f} s summed over workers)")
    for m in res.manifests:
        click.echo(str(m))


@main.command()
@click.argument("kernel", metavar="BUILDER.py[:GRID]")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the table (sweep_NAME_GRID.csv; NAME_GRID.csv when NAME starts with sweep) and every variant's .co.")
@click.option("--top", type=int, default=3, show_default=True,
              help="Verify this many of the best clean variants in the strict emulator (the grid's verify()).")
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: CPU count).")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Run build-and-model tasks on a Ray cluster (an address, 'auto', or 'local').")
@click.option("--model", type=click.Choice(["static", "perf"]), default="static", show_default=True,
              help="Timing model that ranks the variants.")
@click.option("--cache", type=click.Path(file_okay=False), default=None,
              help="Result cache directory (default: flyasm's cache dir /sweep).")
@click.option("--seed", type=int, default=None, help="Seed of the verification inputs (default: fresh).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@handles_errors
def sweep(kernel, out_dir, top, jobs, ray_address, model, cache, seed, no_progress):
    """Build every variant of a grid in parallel, check each, rank by a timing model, verify the best
    TOP in the emulator against the builder's reference, and print the table (CSV with -o)."""
    from .sweep import format_table, run_sweep
    if jobs is not None and jobs < 1:
        raise FlyasmError(f"-j takes a positive number of workers, not {jobs}", find_loc=False)
    if top < 0:
        raise FlyasmError(f"--top takes a number ≥ 0, not {top}", find_loc=False)
    res = run_sweep(kernel, out_dir, top=top, jobs=jobs, ray_address=ray_address, model=model, cache=cache,
                    progress=not no_progress, seed=seed)
    click.echo(format_table(res.rows))
    click.echo(f"{len(res.rows)} variants ({res.built} built, {len(res.rows) - res.built} from the cache; "
               f"{res.verified_runs} emulator verifications run) in {res.wall_s:.1f} s. Ranked by the "
               f"{res.model} model, a prediction, not a measurement:")
    for a in res.assumptions:
        click.echo(f"  - {a}")
    if res.csv_path:
        click.echo(str(res.csv_path))


@main.command()
@click.argument("src", type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False),
              help="Output kernel file (default: NAME_kernel.py in the current directory).")
@click.option("--no-verify", is_flag=True, help="Do not build the lifted file and compare it with SRC.")
@click.option("--kernel", default=None, help="Kernel name when the file holds several.")
@handles_errors
def lift(src, out, no_verify, kernel):
    """Lift a gfx950 .co (or .s) into an editable flyasm kernel file whose build() gives back
    the same .text, kernel descriptor and metadata; big kernels get a NAME_parts/ folder."""
    import time

    from .lift import lift as _lift
    t0 = time.perf_counter()
    stem = Path(out).stem if out else None
    res = _lift(src, stem=stem, kernel=kernel)
    out = out or f"{res.name}_kernel.py"
    paths = res.write(out)
    took = time.perf_counter() - t0
    if not no_verify:
        from .lift.verify import verify
        verify(out, res.source.co, res.name)
    click.echo(f"{out}: kernel {res.name}, {res.instructions} instructions ({res.raw} raw), {res.functions} "
               f"functions in {len(paths)} file(s), {len(res.plan)} named register regions; lifted in {took:.2f} s"
               + ("" if no_verify else "; build() gives back the same bytes"))


@main.command()
@click.argument("co", type=click.Path(dir_okay=False))
@click.option("--grid", default="1", show_default=True, help="WORKGROUPS per dimension: X[,Y[,Z]] (HIP gridDim).")
@click.option("--block", default=None, help="Work-items per workgroup: X[,Y[,Z]] (default: the metadata's "
              ".max_flat_workgroup_size).")
@click.option("--arg", "args", multiple=True, metavar="[NAME=]VALUE",
              help="A kernel argument, by metadata name, by index (2=...) or in order: @file.npy, "
                   "zeros:4096xf32 or a number.")
@click.option("--out", "outs", multiple=True, metavar="NAME=FILE.npy",
              help="Save a pointer argument (with --kernarg: a --buffer ADDRESS) after the run.")
@click.option("--kernarg", default=None, metavar="@FILE.bin|HEX",
              help="Raw kernarg bytes (e.g. from aiter's host code) instead of --arg; pointers in them "
                   "that fall in a --buffer are rebased onto the emulator's copy.")
@click.option("--buffer", "buffers", multiple=True, metavar="ADDRESS=VALUE",
              help="With --kernarg: the buffer a pointer value in the bytes stands for (@file.npy or "
                   "zeros:SHAPExDTYPE).")
@click.option("--hazards", "hazards", default=None, type=click.Choice(["verify", "strict", "report", "off"]),
              help="Hazard check: stop at the first (verify, the default; strict counts ISA-style), "
                   "report every distinct one and finish (report), or off.")
@click.option("--races", "races", default=None, type=click.Choice(["on", "report", "off"]),
              help="LDS race check: stop at the first (on, the default), report and finish, or off.")
@click.option("--waive", "waive", multiple=True, metavar="RULE[@PC]",
              help="Accept a known hazard/race rule (everywhere, or at one pc like salu_m0@0x788).")
@click.option("--kernel", default=None, help="Kernel name when the code object holds several.")
@click.option("--lds", type=int, default=0, help="Dynamic LDS bytes on top of the kernel's static LDS.")
@click.option("--trace", type=int, default=None, metavar="WAVE",
              help="Print every instruction WAVE executes with its register deltas.")
@click.option("--seed", type=int, default=None, help="Interleave waves randomly (seeded) instead of in lock step.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@handles_errors
def emu(co, grid, block, args, outs, kernarg, buffers, hazards, races, waive, kernel, lds, trace, seed, no_progress):
    """Run a code object in the CPU emulator: pointer arguments get device buffers filled from
    .npy files (or zeros:SHAPExDTYPE), by-value arguments take numbers; --out saves buffers."""
    from .run import emu_cli
    g = emu_cli.parse_dims(grid, "grid")
    if block is None:
        from .codeobj.reader import read_code_object
        obj = read_code_object(co)
        ks = [k for k in obj.kernels if kernel in (None, k.name)]
        mb = (ks[0].metadata or {}).get(".max_flat_workgroup_size") if len(ks) == 1 else None
        if not mb:
            raise FlyasmError("give --block (the metadata has no .max_flat_workgroup_size)", find_loc=False)
        b = (int(mb),)
    else:
        b = emu_cli.parse_dims(block, "block")
    fidelity = emu_cli.fidelity(hazards, races, waive)
    if kernarg is not None:
        emu_cli.run_raw(co, g, b, kernarg, buffers, args, outs, kernel=kernel, lds=lds, trace=trace,
                        progress=not no_progress, seed=seed, echo=click.echo, **fidelity)
        return
    if buffers:
        raise FlyasmError("--buffer names what the pointers inside --kernarg bytes stand for; give --kernarg",
                          find_loc=False)
    emu_cli.run(co, g, b, args, outs, kernel=kernel, lds=lds, trace=trace, progress=not no_progress, seed=seed,
                echo=click.echo, **fidelity)


@main.command()
@click.argument("co", type=click.Path(dir_okay=False))
@click.option("--grid", required=True, metavar="X[,Y[,Z]]", help="Workgroups per dimension (HIP's gridDim).")
@click.option("--block", required=True, metavar="X[,Y[,Z]]", help="Work-items per workgroup.")
@click.option("--arg", "args", multiple=True, metavar="[NAME=]VALUE",
              help="A kernel argument as for `flyasm emu` (@file.npy, zeros:SHAPExDTYPE, a number).")
@click.option("--kernarg", default=None, metavar="HEX|@FILE", help="Raw kernarg bytes instead of --arg.")
@click.option("--buffer", "buffers", multiple=True, metavar="OFFSET=NBYTES",
              help="With --kernarg: a device buffer of NBYTES whose address goes at byte OFFSET.")
@click.option("--kernel", default=None, help="Kernel name when the code object holds several.")
@click.option("--flops", type=float, default=None, help="FLOPs of the launch, for TFLOPS.")
@click.option("--top", type=int, default=15, help="Rows of the stall table.")
@handles_errors
def perf(co, grid, block, args, kernarg, buffers, kernel, flops, top):
    """Predict a launch's time on MI355X: sampled workgroups run in the emulator, their executed
    streams drive a cycle-level CU model, the grid is dispatched over 256 CUs (flyasm/perf)."""
    from .perf import cli as perf_cli
    perf_cli.run(co, grid, block, args, kernarg, buffers, kernel=kernel, flops=flops, top=top, echo=click.echo)


# stats, diff, plan live with the reports (flyasm/report/cli.py).
from .report.cli import register as _register_reports  # noqa: E402

_register_reports(main)


if __name__ == "__main__":  # pragma: no cover
    main()
