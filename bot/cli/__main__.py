"""`python -m bot.cli`, the same as the console script `decode`."""

import sys

from bot.cli import main

sys.exit(main())
