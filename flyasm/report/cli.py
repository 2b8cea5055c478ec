"""`flyasm stats`, `flyasm diff`, `flyasm plan`: the report commands, registered on the main group.

Kept out of flyasm/cli.py so the report code stays in one folder; imports are lazy so
`flyasm --help` does not load the tables.

Bound: each command's is its module's (stats.py, diff.py, model.py, regmap.py).
"""
from __future__ import annotations

from pathlib import Path

import click


def _load(path: str, kernel: str | None):
    from .program import as_program
    return as_program(path, kernel)


def _side(path: str, params: dict, kernel: str | None):
    """One side of a diff: a .py builder called with its parameters, or a .s/.co file."""
    from ..errors import FlyasmError
    from .program import as_program, from_kernel, from_python
    if Path(path).suffix.lower() == ".py":
        try:
            return from_kernel(from_python(path, **params))
        except TypeError as e:
            raise FlyasmError(f"calling build() of {path} with {params}: {e}", find_loc=False) from None
    if params:
        raise FlyasmError(f"-p parameters go to .py builders; {path} is already built", find_loc=False)
    return as_program(path, kernel)


def register(main: click.Group) -> None:
    from ..cli import handles_errors

    @main.command()
    @click.argument("src", type=click.Path(dir_okay=False, exists=True))
    @click.option("--kernel", help="Kernel name inside a .co/.s holding several.")
    @click.option("--json", "as_json", is_flag=True, help="Print the statistics (and model) as JSON.")
    @click.option("--model", "with_model", is_flag=True, help="Add the static cycle model per loop body.")
    @handles_errors
    def stats(src, kernel, as_json, with_model):
        """Registers, occupancy and instruction mix of FILE.{s,co,py}."""
        import json

        from .model import format_model, model
        from .stats import format_stats
        from .stats import stats as _stats
        p = _load(src, kernel)
        d = _stats(p)
        m = model(p) if with_model else None
        if as_json:
            click.echo(json.dumps({**d, **({"model": m} if m else {})}, indent=2, default=str))
            return
        click.echo(format_stats(d))
        if m:
            click.echo("\n" + format_model(m))

    @main.command()
    @click.argument("a", type=click.Path(dir_okay=False, exists=True))
    @click.argument("b", type=click.Path(dir_okay=False, exists=True))
    @click.option("-p", "--param", "params", multiple=True, metavar="[A:|B:]KEY=VAL",
                  help="Builder parameter for a .py side: A:KEY=VAL or B:KEY=VAL for one side, KEY=VAL for "
                       "both (value read as JSON when it parses). Repeatable.")
    @click.option("-pa", "params_a", multiple=True, metavar="KEY=VAL", help="Builder parameter of A only.")
    @click.option("-pb", "params_b", multiple=True, metavar="KEY=VAL", help="Builder parameter of B only.")
    @click.option("-v", "--verbose", is_flag=True, help="List every changed instruction.")
    @click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
    @click.option("--kernel", help="Kernel name in both A and B when they hold several.")
    @click.option("--kernel-b", help="Kernel name in B, when it differs from --kernel.")
    @handles_errors
    def diff(a, b, params, params_a, params_b, verbose, as_json, kernel, kernel_b):
        """Register plan (or register use), instruction mix per region, the instruction stream
        (changed instructions paired), descriptor and metadata, from A to B.

        \b
        A and B are .py builders (with -p), .s or .co files; our .s and .co carry the plan and
        region names, so a .co diff names them as the builder did. Examples:
          flyasm diff kernels/gemm_bf16.py kernels/gemm_bf16.py -pb out_dtype=bf16
          flyasm diff fa.py fa.py -p A:causal=false -p B:causal=true
          flyasm diff old/k.co new/k.co -v"""
        from ..cli import _parse_params
        from .diff import diff as _diff
        from .diff import format_diff, to_json
        side = {"a": list(params_a), "b": list(params_b)}
        for it in params:
            head, sep, rest = it.partition(":")
            if sep and head.upper() in ("A", "B") and "=" in rest and "=" not in head:
                side[head.lower()].append(rest)
            else:
                side["a"].append(it)
                side["b"].append(it)
        progs = [_side(path, _parse_params(tuple(side[x])), kern)
                 for path, x, kern in ((a, "a", kernel), (b, "b", kernel_b or kernel))]
        d = _diff(*progs)
        click.echo(to_json(d) if as_json else format_diff(d, verbose))

    @main.command()
    @click.argument("src", type=click.Path(dir_okay=False, exists=True))
    @click.option("--kernel", help="Kernel name inside a .co/.s holding several.")
    @click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Write the register map as HTML.")
    @click.option("--svg", "svg_out", type=click.Path(dir_okay=False), help="Write the register map as SVG.")
    @click.option("--no-check", is_flag=True, help="Do not overlay the hazard checker's findings.")
    @handles_errors
    def plan(src, kernel, html_out, svg_out, no_check):
        """The register plan (or register use) of FILE.{s,co,py}, as text and as a picture."""
        from .regmap import to_html, to_svg
        p = _load(src, kernel)
        findings = None
        if not no_check:
            from ..check.hazards import check_hazards
            findings = check_hazards(p.items())
        if p.plan is not None:
            click.echo(str(p.plan))
        else:
            from .diff import ranges, region_registers
            for name, regs in region_registers(p).items():
                click.echo(f"{name}: {ranges(regs)}")
        if findings:
            click.echo(f"{len(findings)} checker finding(s)")
        for out, fn in ((html_out, to_html), (svg_out, to_svg)):
            if out:
                Path(out).write_text(fn(p, findings))
                click.echo(out)
