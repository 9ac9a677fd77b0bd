"""`python -m regokite` is the `regokite` command."""

import sys

from regokite.cli import main

sys.exit(main())
