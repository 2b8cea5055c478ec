"""LDS-buffer annotations travel from the builder to the .s (comment) and the .co (section). The
checker does not trust them: it separates LDS accesses by the ranges it proves, and a tag that
contradicts those ranges is a finding, the same on all three forms."""
from flyasm import Kernel, m0, s, v
from flyasm.check import check_program
from flyasm.report.program import as_program


def double_buffered(tag: bool, read_at: int | None = 0) -> Kernel:
    """DMA into buffer 'b1' while reading buffer 'b0' that an earlier, waited DMA filled. The read
    address is lane*4 + read_at (read_at None: v3 is never set, so the address is unknown)."""
    k = Kernel("lds_tags", block=64, lds=8192)
    if read_at is not None:
        k.v_lshlrev_b32(v[3], 2, k.workitem_id)
    k.s_mov_b32(m0, 0)
    k.s_nop(0)
    first = k.buffer_load_dword(v[1], s[8:11], 0, offen=True, lds=True)
    k.s_waitcnt(vmcnt=0)
    k.s_mov_b32(m0, 4096)
    k.s_nop(0)
    second = k.buffer_load_dword(v[1], s[8:11], 0, offen=True, lds=True)
    read = k.ds_read_b32(v[2], v[3], offset=read_at or 0)          # reads b0 while the b1 DMA flies
    k.s_waitcnt(vmcnt=0, lgkmcnt=0)
    k.v_mov_b32(v[4], v[2])
    k.s_endpgm()
    if tag:
        first.lds_buffer, second.lds_buffer, read.lds_buffer = "b0", "b1", "b0"
    return k


def rules(findings):
    return sorted(f.rule for f in findings)


def test_ranges_separate_buffers_and_tags_are_checked_not_trusted(tmp_path):
    # b0 is [0, 256), b1 is [4096, 4352): the read of b0 while the b1 DMA flies is proven fine
    assert check_program(as_program(double_buffered(False)).items(), block=64) == []
    # the same read at 4096 + lane*4 meets the in-flight DMA: an error, tags or not
    for tag in (False, True):
        found = check_program(as_program(double_buffered(tag, read_at=4096)).items(), block=64)
        errors = sorted(f.rule for f in found if f.severity == "error")
        assert errors == (["lds_buffer_tag", "lds_dma_read"] if tag else ["lds_dma_read"])
    # an address the analysis cannot compute is "unproven", even when the tags claim separate buffers
    for tag in (False, True):
        found = check_program(as_program(double_buffered(tag, read_at=None)).items(), block=64)
        assert [(f.rule, f.severity) for f in found] == [("lds_dma_read", "unproven")]
        assert "cannot prove these LDS ranges disjoint" in found[0].message
    # without the workgroup shape the lane ids are unknown: nothing is proven
    found = check_program(as_program(double_buffered(False)).items())
    assert [(f.rule, f.severity) for f in found] == [("lds_dma_read", "unproven")]


def test_tags_travel_through_asm_and_code_object(tmp_path):
    k = double_buffered(True)
    assert check_program(as_program(k).items(), block=64) == []
    res = k.build(tmp_path)                              # the build's own check passes too
    assert "; lds:b1" in res.asm and "; lds:b0" in res.asm
    for path in (res.asm_path, res.co_path):             # the .s comment and the .co section
        prog = as_program(str(path))
        assert [i.lds_buffer for i in prog.items() if getattr(i, "lds_buffer", None)] == ["b0", "b1", "b0"]
        assert check_program(prog.items(), block=prog.threads) == []


def dump_slot(scratch: bool, read_at: int = 0) -> Kernel:
    """Two differently tagged DMAs: wave 0 loads chunk 0 of 'k' to [0, 256) and 'v' to
    [4096, 4352); wave 1 has no chunk and sends both to its dump slot [8192, 8448)."""
    k = Kernel("lds_dump", block=128, lds=16384)
    if scratch:
        k.lds_scratch(8192, 16384)
    k.v_readfirstlane_b32(s[5], k.workitem_id)
    k.s_lshr_b32(s[5], s[5], 6)
    k.v_lshlrev_b32(v[3], 2, k.workitem_id)
    k.s_mov_b32(s[6], 8192)
    for tag, base in (("k", 0), ("v", 4096)):
        k.s_cmp_eq_u32(s[5], 0)
        k.s_cselect_b32(m0, base, s[6])
        k.s_nop(0)
        k.buffer_load_dword(v[1], s[8:11], 0, offen=True, lds=True).lds_buffer = tag
    k.s_waitcnt(vmcnt=0)
    k.s_barrier()
    k.ds_read_b32(v[2], v[3], offset=read_at)
    k.s_waitcnt(lgkmcnt=0)
    k.v_mov_b32(v[4], v[2])
    k.s_endpgm()
    return k


def test_declared_scratch_may_be_shared_but_not_read(tmp_path):
    # without the declaration the shared dump slot contradicts the tags
    found = check_program(as_program(dump_slot(False)).items(), block=128)
    assert rules(found) == ["lds_buffer_tag"]
    assert "0x2100)" in found[0].message              # both ranges reach into the dump slot
    k = dump_slot(True)
    res = k.build(tmp_path)                            # declared: the build's own check passes
    for src in (k, res.asm_path, res.co_path):         # the declaration travels in the .s and the .co
        prog = as_program(src if isinstance(src, Kernel) else str(src))
        assert prog.lds_scratch == [(8192, 16384)]
        assert check_program(prog.items(), block=prog.threads, lds_scratch=prog.lds_scratch) == []
    # a DS read into the scratch bytes (threads 64.. read 8192 + 4 * tid) is an error
    found = check_program(as_program(dump_slot(True, read_at=8192 - 256)).items(), block=128,
                          lds_scratch=[(8192, 16384)])
    assert [(f.rule, f.severity) for f in found] == [("lds_scratch_access", "error")]
    assert "declared scratch" in found[0].message
    # a tagged pair that meets outside the scratch is still a finding
    found = check_program(as_program(dump_slot(True)).items(), block=128, lds_scratch=[(12288, 16384)])
    assert rules(found) == ["lds_buffer_tag"]
