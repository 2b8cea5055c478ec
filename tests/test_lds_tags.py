"""LDS-buffer annotations travel from the builder to the .s (comment) and the .co (section), and
the wait-counter checker uses them the same way on all three."""
from flyasm import Kernel, m0, s, v
from flyasm.check import check_program
from flyasm.report.program import as_program


def double_buffered(tag: bool) -> Kernel:
    """DMA into buffer 'b1' while reading buffer 'b0' that an earlier, waited DMA filled."""
    k = Kernel("lds_tags", block=64, lds=8192)
    k.s_mov_b32(m0, 0)
    k.s_nop(0)
    first = k.buffer_load_dword(v[1], s[8:11], 0, offen=True, lds=True)
    k.s_waitcnt(vmcnt=0)
    k.s_mov_b32(m0, 4096)
    k.s_nop(0)
    second = k.buffer_load_dword(v[1], s[8:11], 0, offen=True, lds=True)
    read = k.ds_read_b32(v[2], v[3])          # reads b0 while the b1 DMA flies
    k.s_waitcnt(vmcnt=0, lgkmcnt=0)
    k.v_mov_b32(v[4], v[2])
    k.s_endpgm()
    if tag:
        first.lds_buffer, second.lds_buffer, read.lds_buffer = "b0", "b1", "b0"
    return k


def rules(findings):
    return sorted(f.rule for f in findings)


def test_tags_order_dma_and_reads_per_buffer(tmp_path):
    untagged = check_program(as_program(double_buffered(False)).items())
    assert rules(untagged) == ["lds_dma_read"]          # without tags LDS is one location
    k = double_buffered(True)
    assert check_program(as_program(k).items()) == []
    res = k.build(tmp_path)                              # the build's own check passes too
    assert "; lds:b1" in res.asm and "; lds:b0" in res.asm
    for path in (res.asm_path, res.co_path):             # the .s comment and the .co section
        prog = as_program(str(path))
        assert [i.lds_buffer for i in prog.items() if getattr(i, "lds_buffer", None)] == ["b0", "b1", "b0"]
        assert check_program(prog.items()) == []
