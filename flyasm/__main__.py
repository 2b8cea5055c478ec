"""`python -m flyasm ...` runs the same command line as `flyasm ...`."""
from .cli import main

main()
