import sys

from eagerc.coverage.command import main

sys.exit(main())
