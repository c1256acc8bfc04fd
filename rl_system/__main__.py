import sys

from rl_system.cli import main

sys.exit(main())
