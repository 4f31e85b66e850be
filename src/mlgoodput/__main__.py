"""`python -m mlgoodput` runs the command line."""

from mlgoodput.cli import main

raise SystemExit(main())
