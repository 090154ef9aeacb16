"""``python -m memory_pipeline.cli``: the console script, for the capture worker to start."""

import sys

from memory_pipeline.cli import main

sys.exit(main())
