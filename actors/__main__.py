import sys

from actors.cli import main

sys.exit(main())
