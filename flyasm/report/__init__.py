"""Reports: stats and occupancy, static cycle model, kernel diffs, register-map picture."""
from .diff import diff, format_diff
from .model import format_model, model
from .program import Program, as_program
from .regmap import to_html, to_svg
from .stats import format_stats, stats

__all__ = ["Program", "as_program", "stats", "format_stats", "model", "format_model", "diff", "format_diff",
           "to_html", "to_svg"]
