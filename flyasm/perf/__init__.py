"""Timing model of gfx950: emulator-recorded wave streams drive a cycle-level CU model.

trace.py     record each wave's executed stream in the emulator (opt-in Machine recorder)
"""
